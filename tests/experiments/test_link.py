"""`patterncnn link`: the join per head, the permutation test on planted effects, the command's outputs."""

import json

import numpy as np
import pytest

from patterncnn.core.labels import LABELS
from patterncnn.experiments.link import group_test, rank_test


def _write(tmp_path, drops, majority):
    layers, heads = drops.shape
    cell = lambda m: {"shares": {k: (0.9 if k == m else 0.025) for k in LABELS}, "majority": m, "majority_share": 0.9}
    census = {"encoder": {"model": "/abs/minilm-rte"}, "tasks": {"rte": {"heads": [[cell(majority[l][h])
                                                                                   for h in range(heads)]
                                                                                  for l in range(layers)]}}}
    disable = {"task": "rte", "tag": "minilm-rte-1234", "examples": 277, "metric": "accuracy",
               "heads": [[{"change": -float(drops[l, h]), "ci95": [-0.05, 0.05], "outside": False}
                          for h in range(heads)] for l in range(layers)]}
    drift = {"tag_a": "a", "tag_b": "b", "tasks": {"rte": {"cosine": (1 - drops).tolist()}}}
    for name, obj in (("census", census), ("disable", disable), ("drift", drift)):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}.json").write_text(json.dumps(obj))


def test_group_test_finds_a_planted_difference_and_not_a_null_one():
    rng = np.random.default_rng(0)
    drop = np.concatenate([rng.normal(0.05, 0.01, 10), rng.normal(0.0, 0.01, 30)])
    a, b = np.arange(40) < 10, np.arange(40) >= 10
    t = group_test(drop, a, b, perms=2000)
    assert t["difference"] == pytest.approx(drop[:10].mean() - drop[10:].mean()) and t["p_value"] < 0.01
    v = rng.normal(0, 0.01, 10)
    t = group_test(np.concatenate([v, v, v, v]), a, b, perms=2000)  # the same values in both groups: no difference
    assert t["difference"] == pytest.approx(0, abs=1e-12) and t["p_value"] > 0.5
    assert group_test(drop, np.arange(40) < 1, b)["p_value"] is None  # one head: no test
    assert rank_test(np.arange(20.0), np.arange(20.0) ** 2, perms=500)["spearman"] == pytest.approx(1.0)


def test_link_command(tmp_path, capsys):
    from patterncnn.cli import main

    majority = [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]]
    drops = np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]])
    _write(tmp_path, drops, majority)
    out = tmp_path / "link"
    assert main(["link", "--task", "rte", "--census", str(tmp_path / "census"), "--disable",
                 str(tmp_path / "disable"), "--drift", str(tmp_path / "drift"), "--out", str(out),
                 "--permutations", "500"]) == 0
    res = json.loads((out / "link.json").read_text())
    assert res["test"]["n_a"] == 2 and res["test"]["n_b"] == 3
    assert res["test"]["difference"] == pytest.approx(0.045 - 0.02 / 3)
    assert res["by_majority"]["diagonal"] == {"heads": 1, "mean_drop": 0.0}
    assert res["census_encoder"] == "minilm-rte"
    rows = (out / "link.csv").read_text().splitlines()
    assert len(rows) == 7 and rows[0].startswith("layer,head,vertical")
    assert (out / "link.png").stat().st_size > 1000
    assert "heterogeneous - vertical" in capsys.readouterr().out
    assert main(["link", "--task", "sst2", "--census", str(tmp_path / "census"), "--disable",
                 str(tmp_path / "disable"), "--out", str(out)]) == 2
