"""The classifier shipped in models/: complete, trained on the shipped annotations, ONNX == torch on real maps."""

import json

import numpy as np

from conftest import REPO
from patterncnn.encoder import load_encoder
from patterncnn.glue import load_split
from patterncnn.infer import OnnxClassifier, parity_check
from patterncnn.labels import LABELS
from patterncnn.model import load_checkpoint
from patterncnn.labelled import load_labelled

MODELS = REPO / "models"


def test_artifacts_are_complete_and_consistent():
    for name in ("patterncnn.pt", "patterncnn.onnx", "metrics.json", "README.md"):
        assert (MODELS / name).is_file(), name
    model, ckpt = load_checkpoint(MODELS / "patterncnn.pt")
    clf = OnnxClassifier(MODELS / "patterncnn.onnx")
    assert ckpt["labels"] == list(LABELS) == list(clf.labels)
    assert clf.cfg == model.cfg
    metrics = json.loads((MODELS / "metrics.json").read_text())
    assert metrics["conv_layers"] == 8
    # Trained on exactly the labelled set that ships in annotations/.
    data = load_labelled(REPO / "annotations")
    assert ckpt["data_hash"] == metrics["data"]["data_hash"] == data.data_hash
    assert metrics["data"]["maps"] == len(data.y) >= 500
    assert metrics["onnx_parity_max_abs_diff"] <= 1e-4


def test_onnx_matches_torch_on_real_minilm_maps(glue_dir):
    model, _ = load_checkpoint(MODELS / "patterncnn.pt")
    enc = load_encoder("minilm")
    maps, seps = [], []
    for ea in enc.iter_attentions(load_split("rte", "dev", glue_dir, limit=3, seed=0).examples):
        for layer in range(enc.num_layers):
            maps.append(ea.maps[layer, layer % enc.num_heads])
            seps.append(ea.seps)
    assert parity_check(model, MODELS / "patterncnn.onnx", maps, seps) <= 1e-4
    probs = OnnxClassifier(MODELS / "patterncnn.onnx").predict(maps, seps)
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
