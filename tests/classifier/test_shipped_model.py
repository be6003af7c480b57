"""The classifier shipped in models/: complete, trained on the shipped annotations, ONNX == torch on real maps."""

import json

import numpy as np
from repo import REPO

from patterncnn.classifier.model import load_checkpoint
from patterncnn.classifier.onnx import OnnxClassifier, parity_check
from patterncnn.core.fileio import sha256_file
from patterncnn.core.glue import load_split
from patterncnn.core.labels import LABELS
from patterncnn.encoders.load import load_encoder
from patterncnn.labelling.sets import load_labelled

MODELS = REPO / "models"
PREVIOUS = REPO / "research" / "previous-classifier" / "222b7338"  # shipped until 2026-11-25; the docs quote it
MEASUREMENTS = REPO / "docs" / "pages" / "classifier.md"  # the published figures of the classifier


def table_row(text: str, first_cell: str) -> list[str]:
    """The cells after the first of the Markdown table row whose first cell is ``first_cell`` (bold marks dropped)."""
    for line in text.splitlines():
        cells = [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells[1:]
    raise AssertionError(f"{MEASUREMENTS} has no table row {first_cell!r}")


def test_artifacts_are_complete_and_consistent():
    for name in ("patterncnn.pt", "patterncnn.onnx", "metrics.json", "README.md"):
        assert (MODELS / name).is_file(), name
    model, ckpt = load_checkpoint(MODELS / "patterncnn.pt")
    clf = OnnxClassifier(MODELS / "patterncnn.onnx")
    assert ckpt["labels"] == list(LABELS) == list(clf.labels)
    assert clf.cfg == model.cfg
    metrics = json.loads((MODELS / "metrics.json").read_text())
    assert metrics["conv_layers"] == 8
    # Trained on exactly the labelled sets that ship in annotations/ (the main set and round 8's E5 maps).
    sets = metrics["data"]["annotations"]
    assert sets == ["annotations", "annotations/round8-e5-uniform"]
    data = load_labelled([REPO / s for s in sets])
    assert ckpt["data_hash"] == metrics["data"]["data_hash"] == data.data_hash
    assert metrics["data"]["maps"] == len(data.y) >= 500
    assert metrics["onnx_parity_max_abs_diff"] <= 1e-4
    # every fit started from the pretrained CNN that ships beside it
    assert metrics["init"]["path"] == "pretrained-synthetic.pt" and metrics["train_config"]["init"]
    assert metrics["init"]["sha256"] == sha256_file(MODELS / "pretrained-synthetic.pt")


def test_published_yardstick_is_the_classifiers_it_names():
    """The one-annotator table of docs/pages/classifier.md quotes the previous classifier's metrics (annotator and CNN
    on the same pairs), and the shipped classifier's section quotes the shipped metrics."""
    page = MEASUREMENTS.read_text(encoding="utf-8")
    shipped = json.loads((MODELS / "metrics.json").read_text())["evaluation"]["annotator_yardstick"]
    assert table_row(page, "cross-validated, against one annotator (MiniLM + MPNet pairs; one annotator 0.868 / "
                           "0.941)")[0] == ", ".join(
        f"{name} {shipped[f]['methods']['CNN']['macro_f1']:.3f} / {shipped[f]['methods']['CNN']['agree']:.3f}"
        for name, f in (("MiniLM", "minilm"), ("MPNet", "mpnet")))
    y = json.loads((PREVIOUS / "metrics.json").read_text())["evaluation"]["annotator_yardstick"]

    def cells(who, bold=""):
        return " | ".join(f"{bold}{s['macro_f1']:.3f} / {s['agree']:.3f}{bold}"
                          for s in ((r["annotator"] if who == "annotator" else r["methods"][who])
                                    for r in (y["minilm"], y["mpnet"], y["all"])))

    assert [y[f]["pairs"] for f in ("minilm", "mpnet", "all")] == [2317, 1688, 4005]
    assert f"| one blind annotator | {cells('annotator', '**')} |" in page
    assert f"| the CNN (`222b7338`), cross-validated | {cells('CNN')} |" in page
    assert f"| features + gradient boosting, same folds | {cells('features+gboost')} |" in page
    assert f"| the CNN with soft labels (vote shares), cross-validated | {cells('CNN (soft labels)')} |" in page


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
    assert clf.model_version == "patterncnn-0.1.0-222b7338-x2"  # the single CNN it is compared with
    assert parity_check(model, ensemble / "patterncnn.onnx", data.maps[:300], data.seps[:300]) <= 1e-4
    assert "the mean of 2 such CNNs' probabilities" in (ensemble / "README.md").read_text()
    # the figures docs/pages/classifier.md publishes for it, beside the single CNN's: cross-validated, against one
    # annotator, and on the held-out round 5
    page = MEASUREMENTS.read_text(encoding="utf-8")
    shipped = json.loads((PREVIOUS / "metrics.json").read_text())  # the single CNN of the comparison: same maps

    def pair(s, second="accuracy"):
        return f"{s['macro_f1']:.3f} / {s[second]:.3f}"

    def yardstick(m):
        return m["evaluation"]["annotator_yardstick"]["all"]["methods"]["CNN"]

    assert [round(metrics["cv"][k], 3) for k in ("macro_f1", "accuracy")] == [0.665, 0.805]
    assert table_row(page, "cross-validated macro-F1 / accuracy, all maps") == [pair(shipped["cv"]),
                                                                               pair(metrics["cv"])]
    assert table_row(page, "against one annotator (cross-validated, 4,005 pairs; one annotator 0.868 / 0.941)") == [
        pair(yardstick(shipped), "agree"), pair(yardstick(metrics), "agree")]
    held = REPO / "annotations" / "round5-heldout-uniform"
    assert main(["validate", "--classifier", str(ensemble / "patterncnn.onnx"), "--annotations", str(held),
                 "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    assert v["classifier"]["version"] == clf.model_version
    assert round(v["labels"]["groups"]["all"]["all"]["accuracy"], 3) == 0.846
    count = next(r for r in v["results"] if r["estimator"] == "count")["encoders"]
    assert [round(count[e]["mean_abs_error"], 3) for e in ("minilm-53aa5117", "mpnet-78c0197b")] == [0.007, 0.020]
    groups = v["labels"]["groups"]
    assert table_row(page, "held-out round 5: macro-F1 / accuracy / κ (240 maps)")[1].startswith(
        pair(groups["all"]["all"]) + " / ")
    assert table_row(page, "round 5 accuracy, MiniLM / MPNet")[1] == " / ".join(
        f"{groups[f'family {f}']['all']['accuracy']:.3f}" for f in ("minilm", "mpnet"))
    one = v["labels"]["against_one_annotator"]["all"]["methods"]["classifier"]
    assert table_row(page, "round 5 against one annotator, 666 pairs (one annotator 0.939 / 0.959)")[1] == pair(
        one, "agree")
    assert table_row(page, "round 5 census share error (`count`), MiniLM / MPNet, points")[1] == " / ".join(
        f"{100 * count[e]['mean_abs_error']:.1f}" for e in ("minilm-53aa5117", "mpnet-78c0197b"))


def test_published_round5_and_loeo_figures_are_the_shipped_classifiers(tmp_path):
    """The section of docs/pages/classifier.md on the shipped classifier quotes what `validate` measures on the held-out
    round 5 and what its own training measured by leaving each family out."""
    from patterncnn.cli import main

    page = MEASUREMENTS.read_text(encoding="utf-8")
    held = REPO / "annotations" / "round5-heldout-uniform"
    assert main(["validate", "--annotations", str(held), "--out", str(tmp_path / "v")]) == 0
    v = json.loads((tmp_path / "v" / "validation.json").read_text())
    groups = v["labels"]["groups"]
    assert table_row(page, "held-out round 5 (240 maps it never saw): accuracy MiniLM / MPNet")[0] == " / ".join(
        f"{groups[f'family {f}']['all']['accuracy']:.3f}" for f in ("minilm", "mpnet"))
    one = v["labels"]["against_one_annotator"]["all"]["methods"]["classifier"]
    assert table_row(page, "round 5, each against one annotator (666 pairs; one annotator 0.939 / 0.959)")[0] == (
        f"{one['macro_f1']:.3f} / {one['agree']:.3f}")
    count = next(r for r in v["results"] if r["estimator"] == "count")["encoders"]
    assert table_row(page, "round 5 census share error (`count`), MiniLM / MPNet, points; intervals holding the hand "
                           "share")[0].startswith(" / ".join(f"{100 * count[e]['mean_abs_error']:.1f}"
                                                             for e in ("minilm-53aa5117", "mpnet-78c0197b")) + ";")
    pairs = json.loads((MODELS / "metrics.json").read_text())["evaluation"]["leave_one_encoder_out"]["pairs"]
    over = {p["test"]: p["cnn_over_seeds"]["accuracy"] for p in pairs}
    assert table_row(page, "leave one family out, accuracy, mean ± sd over 5 seeds: E5 / MiniLM / MPNet held "
                           "out")[0] == " / ".join(f"{over[f]['mean']:.3f} ± {over[f]['sd']:.3f}"
                                                   for f in ("e5", "minilm", "mpnet"))
