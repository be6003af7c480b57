"""`patterncnn finetune` on the tiny BERT: Trainer runs, metrics are GLUE's, the folder loads as --model."""

import json

import numpy as np
import pytest

from patterncnn.cli import main
from patterncnn.core.glue import get_task
from patterncnn.encoders.finetune import MANIFEST, glue_metrics
from patterncnn.encoders.load import load_encoder


@pytest.mark.parametrize("task,keys", [("rte", {"accuracy"}), ("stsb", {"pearson", "spearman"})])
def test_finetune_cli(tiny_bert, glue_dir, tmp_path, task, keys, capsys):
    out = tmp_path / f"ft-{task}"
    rc = main(["finetune", "--task", task, "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
               "--out", str(out), "--max-train-examples", "24", "--max-dev-examples", "16", "--epochs", "1",
               "--batch-size", "8", "--max-length", "32"])
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads((out / MANIFEST).read_text())
    assert set(manifest["dev"]) == keys
    assert manifest["train"]["examples"] == 24 and manifest["dev_data"]["examples"] == 16
    assert manifest["settings"]["batch_size"] == 8 and manifest["base_model"]["sha256"]
    enc = load_encoder(str(out))  # the fine-tuned folder is a valid --model
    assert enc.num_layers == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no work folder left
    assert main(["finetune", "--task", task, "--model", str(tiny_bert), "--glue-dir", str(glue_dir),
                 "--out", str(out)]) == 2


def test_glue_metrics():
    f1 = glue_metrics(get_task("mrpc"), np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]))
    assert f1 == {"accuracy": 0.75, "f1": pytest.approx(2 / 3)}
    mcc = glue_metrics(get_task("cola"), np.array([1, 0, 1, 0]), np.array([1, 0, 1, 0]))
    assert mcc["mcc"] == pytest.approx(1.0)
    corr = glue_metrics(get_task("stsb"), np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 4.0]))
    assert corr["pearson"] == pytest.approx(1.0) and corr["spearman"] == pytest.approx(1.0)
