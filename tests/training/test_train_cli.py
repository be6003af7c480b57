"""`patterncnn train` end to end on a tiny labelled set: artifacts, metrics, model card, ONNX == checkpoint."""

import json

import numpy as np
from synthetic import pattern_map

from patterncnn.classifier.model import load_checkpoint
from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.labels import LABELS


def test_train_writes_consistent_artifacts_and_card(labelled_set, tmp_path, capsys):
    out = tmp_path / "models"
    rc = main(["train", "--annotations", str(labelled_set), "--out", str(out), "--folds", "3", "--max-epochs", "4",
               "--members", "2", "--loeo-seeds", "1"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "60 maps, 3-fold grouped CV: macro-F1" in printed and "baseline features+logreg" in printed
    assert "share estimators not validated" in printed
    for name in ("patterncnn.pt", "patterncnn.onnx", "metrics.json", "README.md"):
        assert (out / name).is_file(), name
    m = json.loads((out / "metrics.json").read_text())
    assert m["data"]["maps"] == 60 and m["data"]["labels"] == {name: 12 for name in LABELS}
    assert m["conv_layers"] == 8 and m["train_config"]["folds"] == 3 and m["model_config"]["members"] == 2
    assert len(m["cv"]["best_epochs"]) == 3 * 2  # one per member per fold
    assert sum(sum(row) for row in m["cv"]["confusion_matrix"]) == 60  # every map scored out of fold once
    assert m["onnx_parity_max_abs_diff"] < 1e-4

    card = (out / "README.md").read_text()
    assert f"**Macro-F1 {m['cv']['macro_f1']:.3f}**" in card
    assert f"60 maps labelled by eye in Label Studio (`{labelled_set}`" in card
    assert "$" not in card.replace("$$", "")  # every template field was filled
    assert "the mean of 2 such CNNs' probabilities" in card
    assert m["validation"] is None and "**Not validated.**" in card  # no uniformly drawn maps in this set
    assert len(m["calibration"]["rows"]["ids"]) == 60 and f"T = {m['calibration']['temperature']:.2f}" in card

    model, ckpt = load_checkpoint(out / "patterncnn.pt")
    clf = OnnxClassifier(out / "patterncnn.onnx")
    assert ckpt["data_hash"] == m["data"]["data_hash"] == clf.metadata["data_hash"]
    maps = [pattern_map(kind, 14, 6, seed=900 + k) for k, kind in enumerate(LABELS)]
    probs = clf.predict(maps, [[6, 13]] * len(maps))
    assert probs.shape == (5, 5) and np.allclose(probs.sum(1), 1, atol=1e-5)


def test_train_refuses_a_folder_without_labels(tmp_path, capsys):
    assert main(["train", "--annotations", str(tmp_path), "--out", str(tmp_path / "m")]) == 2
    assert "labels.csv not found" in capsys.readouterr().err
