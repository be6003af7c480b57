"""The classifier shipped in models/: complete, trained on the shipped annotations, ONNX == torch on real maps."""

import json

import numpy as np
from conftest import REPO

from patterncnn.classifier.model import load_checkpoint
from patterncnn.classifier.onnx import OnnxClassifier, parity_check
from patterncnn.core.glue import load_split
from patterncnn.core.labels import LABELS
from patterncnn.encoders.load import load_encoder
from patterncnn.labelling.sets import load_labelled

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


def test_readme_yardstick_is_the_shipped_models():
    """The README's one-annotator table quotes the shipped metrics (annotator and CNN on the same pairs)."""
    y = json.loads((MODELS / "metrics.json").read_text())["evaluation"]["annotator_yardstick"]
    readme = (REPO / "README.md").read_text()

    def cells(who, bold=""):
        return " | ".join(f"{bold}{s['macro_f1']:.3f} / {s['agree']:.3f}{bold}"
                          for s in ((r["annotator"] if who == "annotator" else r["methods"][who])
                                    for r in (y["minilm"], y["mpnet"], y["all"])))

    assert [y[f]["pairs"] for f in ("minilm", "mpnet", "all")] == [2317, 1688, 4005]
    assert f"| one blind annotator | {cells('annotator', '**')} |" in readme
    assert f"| the CNN (shipped), cross-validated | {cells('CNN')} |" in readme
    assert f"| features + gradient boosting, same folds | {cells('features+gboost')} |" in readme
    assert f"| the CNN with soft labels (vote shares), cross-validated | {cells('CNN (soft labels)')} |" in readme


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


def test_the_opt_in_ensemble_is_two_cnns_trained_on_the_shipped_annotations(tmp_path):
    from patterncnn.classifier.model import PatternEnsemble
    from patterncnn.cli import main

    ensemble = REPO / "research" / "ensemble-x2"
    model, ckpt = load_checkpoint(ensemble / "patterncnn.pt")
    clf = OnnxClassifier(ensemble / "patterncnn.onnx")
    metrics = json.loads((ensemble / "metrics.json").read_text())
    assert isinstance(model, PatternEnsemble) and len(model.members) == 2 and clf.cfg == model.cfg
    assert metrics["conv_layers"] == 8 and metrics["model_config"]["members"] == 2
    data = load_labelled(REPO / "annotations")
    assert ckpt["data_hash"] == metrics["data"]["data_hash"] == clf.metadata["data_hash"] == data.data_hash
    assert clf.model_version == OnnxClassifier(MODELS / "patterncnn.onnx").model_version + "-x2"
    assert parity_check(model, ensemble / "patterncnn.onnx", data.maps[:300], data.seps[:300]) <= 1e-4
    assert "the mean of 2 such CNNs' probabilities" in (ensemble / "README.md").read_text()
    # the figures the README publishes for it: cross-validated, and on the held-out round 5
    assert [round(metrics["cv"][k], 3) for k in ("macro_f1", "accuracy")] == [0.665, 0.805]
    held = REPO / "annotations" / "round5-heldout-uniform"
    assert main(["validate", "--classifier", str(ensemble / "patterncnn.onnx"), "--annotations", str(held),
                 "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert v["classifier"]["version"] == clf.model_version
    assert round(v["labels"]["groups"]["all"]["all"]["accuracy"], 3) == 0.846
    count = next(r for r in v["results"] if r["estimator"] == "count")["encoders"]
    assert [round(count[e]["mean_abs_error"], 3) for e in ("minilm-53aa5117", "mpnet-78c0197b")] == [0.007, 0.020]
