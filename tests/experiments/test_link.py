"""`patterncnn link`: the join per head, the permutation test on planted effects, the command's outputs."""

import json

import numpy as np
import pytest

from patterncnn.core.labels import LABELS
from patterncnn.experiments.link import group_test, rank_test

FT, BASE = "12345678" + "0" * 56, "abcdef01" + "0" * 56  # the fine-tuned (disabled) model's weights, the pretrained


def _write(tmp_path, drops, majority, census_sha=FT, drift_shas=(BASE, FT), examples=(277, 277, 277), cosine=None):
    layers, heads = drops.shape
    cell = lambda m: {"shares": {k: (0.9 if k == m else 0.025) for k in LABELS}, "majority": m, "majority_share": 0.9}
    census = {"encoder": {"model": "/abs/minilm-rte", "sha256": census_sha},
              "tasks": {"rte": {"examples": examples[0], "heads": [[cell(majority[l][h]) for h in range(heads)]
                                                                   for l in range(layers)]}}}
    disable = {"task": "rte", "tag": "minilm-rte-12345678", "examples": examples[1], "metric": "accuracy",
               "model": {"model": "models-ft/minilm-rte", "path": "models-ft/minilm-rte", "sha256": FT},
               "heads": [[{"change": -float(drops[l, h]), "ci95": [-0.05, 0.05], "outside": False}
                          for h in range(heads)] for l in range(layers)]}
    drift = {"tag_a": "a", "tag_b": "b", "model_a": {"sha256": drift_shas[0]}, "model_b": {"sha256": drift_shas[1]},
             "tasks": {"rte": {"examples": examples[2], "cosine": (1 - drops if cosine is None else cosine).tolist()}}}
    for name, obj in (("census", census), ("disable", disable), ("drift", drift)):
        (tmp_path / name).mkdir(exist_ok=True)
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
    assert "None" not in "".join(rows)  # an untied head's `tied` is an empty cell, as in census's heads.csv
    assert (out / "link.png").stat().st_size > 1000
    assert "heterogeneous - vertical" in capsys.readouterr().out
    assert main(["link", "--task", "sst2", "--census", str(tmp_path / "census"), "--disable",
                 str(tmp_path / "disable"), "--out", str(out)]) == 2


def test_link_refuses_results_of_other_models_and_says_when_the_examples_differ(tmp_path, capsys):
    from patterncnn.cli import main

    majority = [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]]
    drops = np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]])
    args = ["link", "--task", "rte", "--census", str(tmp_path / "census"), "--disable", str(tmp_path / "disable"),
            "--drift", str(tmp_path / "drift"), "--permutations", "200"]
    _write(tmp_path, drops, majority, census_sha=BASE)  # a census of the pretrained model, not the disabled one
    assert main(args + ["--out", str(tmp_path / "l1")]) == 2
    assert "run the census on the model that was disabled (`patterncnn census --model models-ft/minilm-rte" in \
        capsys.readouterr().err
    _write(tmp_path, drops, majority, drift_shas=(FT, FT))  # a drift of the model against itself
    assert main(args + ["--out", str(tmp_path / "l2")]) == 2
    assert "compares a with itself" in capsys.readouterr().err
    _write(tmp_path, drops, majority, drift_shas=(BASE, "f" * 64))  # a drift of two other models
    assert main(args + ["--out", str(tmp_path / "l3")]) == 2
    assert "neither of which is the disabled model" in capsys.readouterr().err
    assert not any((tmp_path / f"l{k}" / "link.json").exists() for k in (1, 2, 3))
    _write(tmp_path, drops, majority, examples=(300, 277, 40))
    assert main(args + ["--out", str(tmp_path / "l4")]) == 0
    assert "different numbers of dev examples (census 300, disable 277, drift 40)" in capsys.readouterr().out
    assert json.loads((tmp_path / "l4" / "link.json").read_text())["notes"]


def test_link_refuses_a_folder_of_several_censuses_naming_them(tmp_path, capsys):
    """`--census DIR` where `census --model A --model B --out DIR` wrote one census per encoder: the error names them
    (it said there was no census.json); one census in a subfolder is found, as `report` finds it."""
    from patterncnn.cli import main

    majority = [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]]
    _write(tmp_path, np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]]), majority)
    two = tmp_path / "census"
    for name in ("minilm-53aa5117", "ft-0123abcd"):
        (two / name).mkdir()
        (two / name / "census.json").write_text((two / "census.json").read_text())
    (two / "census.json").unlink()
    args = ["link", "--task", "rte", "--census", str(two), "--disable", str(tmp_path / "disable"), "--permutations",
            "200"]
    assert main(args + ["--out", str(tmp_path / "l1")]) == 2
    assert capsys.readouterr().err == (f"patterncnn link: error: {two} holds 2 censuses in its subfolders: "
                                       f"{two / 'ft-0123abcd'}, {two / 'minilm-53aa5117'}; give one of them\n")
    (two / "minilm-53aa5117" / "census.json").unlink()
    assert main(args + ["--out", str(tmp_path / "l2")]) == 0


def test_link_checks_hub_models_by_id_and_commit_and_notes_what_it_cannot_check():
    from patterncnn.core.work import RunError
    from patterncnn.experiments.link import check_inputs

    def fp(model, revision=None, sha=None):  # a hub id's fingerprint records its commit, not a file hash
        return {"model": model, "path": model, "revision": revision, "sha256": sha}

    base, ft = fp("bert-base-uncased", "c1"), fp("textattack/bert-base-uncased-RTE", "c2")
    disable = {"model": ft, "tag": "bert-base-uncased-RTE-c2", "examples": 277, "baseline": {"at_chance": False}}
    drift = {"model_a": base, "model_b": ft, "tag_a": "base", "tag_b": "ft", "tasks": {"rte": {"examples": 277}}}
    census = {"encoder": ft, "tasks": {"rte": {"examples": 277}}}
    assert check_inputs(census, drift, disable, "rte") == []  # two different hub models: the usual workflow
    with pytest.raises(RunError, match="run the census on the model that was disabled"):
        check_inputs({**census, "encoder": base}, drift, disable, "rte")
    with pytest.raises(RunError, match="compares base with itself"):
        check_inputs(census, {**drift, "model_b": base}, disable, "rte")
    unknown = fp("some-model")  # neither a hash nor a commit: nothing to compare, and it is said
    notes = check_inputs({**census, "encoder": unknown}, {**drift, "model_a": unknown}, disable, "rte")
    assert len(notes) == 2 and all("could not be checked" in n for n in notes)


def test_the_suggested_command_names_a_folder_given_by_its_absolute_path_usably():
    """A result keeps only an absolute folder's last part: the fix says where it goes, not `--model my-ft-sst2`."""
    from patterncnn.core.fileio import public_fingerprint
    from patterncnn.core.work import RunError
    from patterncnn.experiments.link import check_inputs

    disabled = public_fingerprint({"model": "/data/my-ft-sst2", "path": "/data/my-ft-sst2", "sha256": FT})
    disable = {"model": disabled, "tag": "minilm-sst2-12345678", "examples": 20, "baseline": {"at_chance": False}}
    census = {"encoder": {"model": "minilm", "path": "model", "sha256": BASE}, "tasks": {"sst2": {"examples": 20}}}
    with pytest.raises(RunError, match=r"`patterncnn census --model /path/to/my-ft-sst2 --task sst2`, /path/to "
                                       r"being the folder that holds it"):
        check_inputs(census, None, disable, "sst2")
    # an embedded encoder is named as it was given, not by the last part of its folder in site-packages ("model")
    embedded = {"model": {"model": "minilm", "path": "model", "sha256": BASE}, "tag": "minilm-abcdef01",
                "examples": 20}
    with pytest.raises(RunError, match=r"\(`patterncnn census --model minilm --task sst2`\)"):
        check_inputs({**census, "encoder": disabled}, None, embedded, "sst2")


def test_a_disable_run_at_chance_is_a_note_of_link(tmp_path):
    from patterncnn.experiments.link import check_inputs

    disable = {"model": {"model": "ft", "sha256": FT}, "tag": "ft", "examples": 20, "task": "rte", "metric": "accuracy",
               "baseline": {"metric": 0.5, "ci95": [0.3, 0.7], "chance": 0.55, "at_chance": True}}
    census = {"encoder": {"model": "ft", "sha256": FT}, "tasks": {"rte": {"examples": 20}}}
    assert check_inputs(census, None, disable, "rte") == [
        "in the disable run, the undisabled model's accuracy is within its 95% interval of chance (0.5500, always "
        "predicting one label): disabling a head cannot show what it does. Check that the model was fine-tuned on "
        "rte (`patterncnn finetune --task rte`), or score more examples (--limit N)"]
    disable["baseline"]["at_chance"] = False
    assert check_inputs(census, None, disable, "rte") == []
    # the same count of examples drawn with different seeds: different examples (helper 91's RISK 2)
    sampled_census = {**census, "seed": 1, "tasks": {"rte": {"examples": 20, "of": 277}}}
    sampled = {**disable, "seed": 0, "of": 277}
    assert check_inputs(sampled_census, None, sampled, "rte") == [
        "the results drew their dev examples with different seeds (census 1, disable 0): each head's pattern, drift "
        "and drop are estimated on different inputs; run census, drift and disable with the same --seed (seed= from "
        "Python) to compare them on the same examples"]
    assert check_inputs({**sampled_census, "seed": 0}, None, sampled, "rte") == []
    assert check_inputs({**sampled_census, "tasks": {"rte": {"examples": 277, "of": 277}}}, None,
                        {**sampled, "examples": 277}, "rte") == []  # the whole split: the seed chose nothing
    del disable["baseline"]["at_chance"]  # a run from before the check: unknown, said (helper 91's RISK 10)
    assert check_inputs(census, None, disable, "rte") == [
        "in the disable run, this run predates the check of whether the undisabled model is above chance "
        "(2026-11-27), so whether disabling a head can show anything on it is unchecked; run it again"]


def test_a_constant_drift_gives_no_correlation_not_a_significant_one(tmp_path, capsys):
    from patterncnn.cli import main

    majority = [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]]
    drops = np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]])
    _write(tmp_path, drops, majority, cosine=np.ones_like(drops))  # every head unchanged by fine-tuning
    assert main(["link", "--task", "rte", "--census", str(tmp_path / "census"), "--disable", str(tmp_path / "disable"),
                 "--drift", str(tmp_path / "drift"), "--out", str(tmp_path / "l"), "--permutations", "200"]) == 0
    r = json.loads((tmp_path / "l" / "link.json").read_text())["rank_drift_vs_drop"]
    assert r["spearman"] is None and r["p_value"] is None and "x constant" in r["note"]
    assert "Spearman(1 - drift cosine, drop) = none: x constant over the heads" in capsys.readouterr().out
    assert rank_test(np.ones(20), np.arange(20.0), perms=50)["p_value"] is None


def test_a_head_whose_majority_is_tied_joins_neither_group(tmp_path):
    from patterncnn.experiments.link import run_link

    majority = [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]]
    drops = np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]])
    _write(tmp_path, drops, majority)
    path = tmp_path / "census" / "census.json"
    census = json.loads(path.read_text())
    census["tasks"]["rte"]["heads"][0][1]["tied"] = ["vertical", "heterogeneous"]  # 0:1 reads "vertical", first
    path.write_text(json.dumps(census))
    res = run_link(tmp_path / "census", tmp_path / "drift", tmp_path / "disable", "rte", tmp_path / "link", perms=200)
    assert res["test"]["n_a"] == 2 and res["test"]["n_b"] == 2  # 0:1 left out of the vertical group
    assert res["test"]["difference"] == pytest.approx(0.045 - (0.01 + 0.01) / 2)  # 0:2 and 1:1
    assert any("1 head(s) whose majority pattern is tied (0:1)" in n for n in res["notes"])
    assert res["heads"][1]["tied"] == "vertical|heterogeneous" and res["heads"][0]["tied"] is None


def test_a_disable_run_flagged_by_its_interval_alone_is_named_so(tmp_path):
    # From helper 93's review: a disable.json from before 2026-11-29 flagged by the interval alone was called "told
    # from noise" by link and the report.
    from patterncnn.experiments.disable import OLD_RULE, TOLD_FROM_NOISE, outside_rule
    from patterncnn.experiments.link import check_inputs

    cell = {"change": 0.02, "ci95": [0.005, 0.03], "outside": True}
    old = {"model": {"model": "ft", "sha256": FT}, "tag": "ft", "examples": 20, "task": "rte", "metric": "accuracy",
           "baseline": {"at_chance": False}, "heads": [[cell]]}
    census = {"encoder": {"model": "ft", "sha256": FT}, "tasks": {"rte": {"examples": 20}}}
    assert outside_rule(old) == OLD_RULE
    assert check_inputs(census, None, old, "rte") == [f"the disable run's `outside` (each head's column here) is "
                                                       f"{OLD_RULE}"]
    new = {**old, "heads": [[{**cell, "gains": 4, "losses": 0, "paired_p": 0.125}]]}
    assert outside_rule(new) == TOLD_FROM_NOISE and check_inputs(census, None, new, "rte") == []
    assert outside_rule({**old, "task": "stsb"}) == TOLD_FROM_NOISE  # a regression task has no paired test


def test_the_link_figure_names_its_number_of_examples(tmp_path):
    # From helper 91's review (NIT 9): link.png gave no sample size.
    from patterncnn.core.plots import link_plot
    from patterncnn.experiments.link import run_link

    _write(tmp_path, np.array([[0.04, 0.0, 0.01], [0.05, 0.01, 0.0]]),
           [["heterogeneous", "vertical", "vertical"], ["heterogeneous", "vertical", "diagonal"]])
    res = run_link(tmp_path / "census", tmp_path / "drift", tmp_path / "disable", "rte", tmp_path / "link", perms=100)
    assert "minilm-rte-12345678, 277 dev examples:" in link_plot(res)._suptitle.get_text()
    del res["disable_examples"]
    assert "dev examples" not in link_plot(res)._suptitle.get_text()  # a result without it still draws
