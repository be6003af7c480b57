"""patterncnn adapt (patterncnn.training.adapt): a classifier fine-tuned on a new family's uniformly drawn maps, with
a validated band of its own for that family, and the warning of an unvalidated family gone."""

import csv
import json

import numpy as np
import pytest
from repo import REPO
from synthetic import family_set

from patterncnn.classifier.onnx import OnnxClassifier
from patterncnn.cli import main
from patterncnn.core.errors import ClassifierError
from patterncnn.shares.calibrate import stored_rows
from patterncnn.shares.estimate import plan_for
from patterncnn.training.adapt import AdaptConfig, _train_index, adapt, merge_validation
from patterncnn.training.fit import shifted

E5 = "e5-cd1caf18"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small classifier trained with `patterncnn train` on MiniLM and MPNet maps only, and an E5 set beside it."""
    root = tmp_path_factory.mktemp("adapt")
    base = family_set(root / "base", per_class=6, only=("minilm", "mpnet"))
    new = family_set(root / "e5", per_class=6, only=("e5",))
    models = root / "models"
    assert main(["train", "--annotations", str(base), "--out", str(models), "--folds", "3", "--max-epochs", "3",
                 "--loeo-seeds", "1", "--loeo-max-epochs", "2"]) == 0
    return base, new, models


def test_adapt_validates_the_new_family_and_the_warning_goes(trained, tmp_path):
    base, new, models = trained
    before = OnnxClassifier(models / "patterncnn.onnx").metadata
    unadapted = plan_for(before, None, None, E5)
    assert "warning" in unadapted.validated and "e5" in unadapted.validated["warning"]

    res = adapt(models / "patterncnn.pt", [base], new, tmp_path / "adapted", AdaptConfig(epochs=2, folds=3))
    assert res["encoders"] == [E5] and res["families"] == ["e5"] and res["folds"] == 3
    assert res["new"]["maps"] == res["before"]["maps"] == 30  # 6 per class, 5 classes, every E5 map scored once
    assert 0 <= res["new"]["accuracy"] <= 1 and res["onnx_parity_max_abs_diff"] < 1e-4
    assert E5 in res["validation_on_new"]
    written = json.loads((tmp_path / "adapted" / "adapt.json").read_text())
    assert written["new"] == res["new"] and written["classifier_version"] == res["classifier_version"]
    # the version names the joined maps, then the recipe: which classifier it started from and how it was adapted
    assert res["classifier_version"].endswith(f"-r{res['recipe'][:6]}")

    meta = OnnxClassifier(tmp_path / "adapted" / "patterncnn.onnx").metadata
    assert meta["adapted_to"] == [E5]
    validated = meta["validation"]["best_per_encoder"]
    assert E5 in validated and set(before["validation"]["best_per_encoder"]) <= set(validated)
    plan = plan_for(meta, None, None, E5)  # the census of an E5 encoder: its own band, no warning
    assert "warning" not in plan.validated and E5 in plan.validated["encoder"]
    # The base encoders keep the base classifier's figures.
    for enc, v in before["validation"]["best_per_encoder"].items():
        assert validated[enc] == v


def test_adapt_scores_both_classifiers_on_a_held_out_set_of_the_other_encoders(trained, tmp_path, caplog):
    # The other encoders keep the starting classifier's validation: adapt measures what adapting did to them.
    base, new, models = trained
    held = family_set(tmp_path / "held", per_class=3, only=("minilm", "mpnet"), first=50_000)
    res = adapt(models / "patterncnn.pt", [base], new, tmp_path / "adapted", AdaptConfig(epochs=2, folds=3),
                heldout=held)
    check = res["heldout"]
    assert check["set"].endswith("held") and set(check["families"]) == {"minilm", "mpnet"}
    from patterncnn.labelling.sets import load_labelled

    data = load_labelled(held)
    fam = np.array([i.split("-")[0] for i in data.ids])
    for k, onnx in (("before", models / "patterncnn.onnx"), ("after", tmp_path / "adapted" / "patterncnn.onnx")):
        pred = OnnxClassifier(onnx).predict(data.maps, data.seps).argmax(1)
        for f in ("minilm", "mpnet"):
            s = check["families"][f][k]
            assert s["maps"] == 15 and s["accuracy"] == pytest.approx((pred == data.y)[fam == f].mean())
    assert json.loads((tmp_path / "adapted" / "adapt.json").read_text())["heldout"] == check
    # a set holding maps it was fitted on is not held out: not scored, and said
    again = adapt(models / "patterncnn.pt", [base], new, tmp_path / "again", AdaptConfig(epochs=1, folds=2),
                  heldout=base)
    assert "heldout" not in again and "not scored as held out" in caplog.text


def test_adapt_finish_says_what_adapting_did_to_the_other_encoders_and_warns_of_a_real_fall():
    from patterncnn.cli.adapt import heldout_lines

    def fam(before, after, maps=120):
        return {"before": {"maps": maps, "accuracy": before}, "after": {"maps": maps, "accuracy": after}}

    text = heldout_lines({"set": "annotations/round5-heldout-uniform",
                          "families": {"minilm": fam(0.90, 0.88), "mpnet": fam(0.825, 0.70)}})
    assert "on annotations/round5-heldout-uniform (maps neither classifier saw):" in text
    assert "  minilm: accuracy 0.900 before adapting, 0.880 after (120 maps)" in text
    # two standard errors of 0.9 on 120 maps are 5.5 points: 2 points is noise; 12.5 points of 0.825's 6.9 are not
    assert "cost minilm" not in text and "warning: adapting cost mpnet 12.5 points" in text


def test_adapt_refuses_maps_that_were_not_drawn_uniformly(trained, tmp_path):
    base, new, models = trained
    meta_lines = []
    for part in sorted((new / "maps").glob("*.jsonl")):
        lines = [json.loads(line) for line in part.read_text().splitlines() if line.strip()]
        meta_lines += lines
        part.write_text("".join(json.dumps({**m, "sampling": "stratified"}) + "\n" for m in lines))
    try:
        with pytest.raises(ClassifierError, match="uniformly"):
            adapt(models / "patterncnn.pt", [base], new, tmp_path / "out", AdaptConfig(epochs=1, folds=2))
    finally:
        for part in sorted((new / "maps").glob("*.jsonl")):
            ids = {json.loads(line)["id"] for line in part.read_text().splitlines() if line.strip()}
            part.write_text("".join(json.dumps(m) + "\n" for m in meta_lines if m["id"] in ids))


@pytest.mark.parametrize("epochs", [0, 1])
def test_adapt_refuses_new_maps_the_classifier_was_trained_on_before_any_fit(trained, tmp_path, monkeypatch, epochs):
    """Maps among its calibration rows (here its whole training set, with another set as the base) would be scored in
    sample yet called out of fold, and would set the encoder's band: refused in one line, before any fit."""
    import patterncnn.training.adapt as adapt_module

    base, new, models = trained
    monkeypatch.setattr(adapt_module, "_fit", lambda *a, **k: pytest.fail("fitted before refusing"))
    with pytest.raises(ValueError, match="trained or calibrated this classifier") as e:
        adapt(models / "patterncnn.pt", [new], base, tmp_path / "out", AdaptConfig(epochs=epochs, folds=3))
    assert "\n" not in str(e.value) and "adapt start" in str(e.value) and str(len(stored_rows(
        OnnxClassifier(models / "patterncnn.onnx").metadata))) in str(e.value)
    assert not (tmp_path / "out" / "patterncnn.pt").exists()


def test_validate_refuses_the_extra_base_maps_an_adapted_classifier_was_fine_tuned_on(trained, tmp_path):
    """An extra set given to adapt (--annotations) that the classifier was not trained on is fine-tuned on, but is
    not among the calibration rows: the adapted classifier records its maps, so that `validate --annotations` (and
    adapting it again on them) refuses them as maps it never saw; with no epochs its weights never saw them."""
    from synthetic import pattern_map, write_labelled_set

    from patterncnn.core.labels import LABELS
    from patterncnn.training.validate import run_validation

    base, new, models = trained
    recs, rows = [], []
    for k, kind in enumerate(LABELS):
        for i in range(3):
            mid = f"{E5}_rte_dev_{5000 + 10 * k + i:05d}_L00_H00"
            meta = {"id": mid, "task": "rte", "split": "dev", "example": 5000 + 10 * k + i, "layer": 0, "head": 0,
                    "T": 14, "seps": [6, 13], "sampling": "uniform"}
            recs.append((meta, pattern_map(kind, 14, 6, seed=k)))
            rows.append({"map_id": mid, "label": kind, "uncertain": "False"})
    extra = write_labelled_set(tmp_path / "extra", recs, rows)

    adapt(models / "patterncnn.pt", [base, extra], new, tmp_path / "a", AdaptConfig(epochs=1, folds=2))
    with pytest.raises(ValueError, match="trained or calibrated this classifier"):
        run_validation(OnnxClassifier(tmp_path / "a" / "patterncnn.onnx"), tmp_path / "v", extra)
    with pytest.raises(ValueError, match="trained or calibrated this classifier"):
        adapt(tmp_path / "a" / "patterncnn.pt", [base], extra, tmp_path / "again", AdaptConfig(epochs=0, folds=2))
    adapt(models / "patterncnn.pt", [base, extra], new, tmp_path / "kept", AdaptConfig(epochs=0, folds=2))
    v = run_validation(OnnxClassifier(tmp_path / "kept" / "patterncnn.onnx"), tmp_path / "v", extra)
    assert v["mode"] == "independent" and v["maps"] == 15


def test_adapt_fold_fits_leave_out_base_maps_of_the_input_examples_they_score(trained, tmp_path, monkeypatch):
    """A fold's fit trains on no base map whose input example (another encoder's map of the same sentence) is among
    the maps it scores, as train's leave one encoder out drops them; the other base maps it keeps; the final fit
    keeps them all. Here the first two examples of each class have MiniLM and MPNet maps in the base set."""
    import patterncnn.training.adapt as adapt_module

    base, new, models = trained
    fits, real = [], adapt_module._fit
    monkeypatch.setattr(adapt_module, "_fit", lambda data, train, *a, **k: fits.append((data, train)) or real(
        data, train, *a, **k))
    res = adapt(models / "patterncnn.pt", [base], new, tmp_path / "a", AdaptConfig(epochs=1, folds=3))
    data = fits[0][0]
    is_new = np.array([i.startswith(E5) for i in data.ids])
    base_idx, new_idx = np.flatnonzero(~is_new), np.flatnonzero(is_new)
    shared = np.isin(data.groups[base_idx], data.groups[new_idx])
    assert shared.sum() == 20  # 10 examples, each with a MiniLM and an MPNet map
    dropped = []
    for k, (_, train) in enumerate(fits):
        kept = np.intersect1d(train, base_idx)
        if k == len(fits) - 1:  # the final fit
            assert len(kept) == len(base_idx)
            continue
        scored = np.setdiff1d(new_idx, train)
        assert np.array_equal(kept, base_idx[~np.isin(data.groups[base_idx], data.groups[scored])])
        dropped.append(len(base_idx) - len(kept))
    assert res["dropped_shared_examples"] == dropped and sum(dropped) == 20


def test_the_new_maps_make_up_the_asked_share_of_each_epoch():
    rng = np.random.default_rng(0)
    base, new = np.arange(300), np.arange(300, 330)
    idx = _train_index(base, new, 0.25, rng)
    assert np.isin(base, idx).all() and (idx < 300).sum() == 300
    assert (idx >= 300).sum() == 100  # 100 of 400: a quarter, every new map at least three times
    assert np.bincount(idx[idx >= 300] - 300, minlength=30).min() >= 3
    assert _train_index(base, new[:0], 0.25, rng).tolist() == base.tolist()


def test_merge_validation_adds_the_new_encoder_and_keeps_the_rest():
    base = {"results": [{"estimator": "count", "scope": None, "encoders": {"a": {"mean_abs_error": 0.01}},
                         "worst_encoder_mean_abs_error": 0.01}],
            "best_per_encoder": {"a": {"estimator": "count"}}, "mode": "cross-validated"}
    new = {"results": [{"estimator": "count", "scope": None, "encoders": {"b": {"mean_abs_error": 0.04}}}],
           "best_per_encoder": {"b": {"estimator": "count"}}, "encoders": ["b"]}
    out = merge_validation(base, new)
    assert out["results"][0]["encoders"] == {"a": {"mean_abs_error": 0.01}, "b": {"mean_abs_error": 0.04}}
    assert out["results"][0]["worst_encoder_mean_abs_error"] == 0.04 and out["adapted_to"] == ["b"]
    assert set(out["best_per_encoder"]) == {"a", "b"} and out["mode"] == "cross-validated"
    assert base["results"][0]["encoders"] == {"a": {"mean_abs_error": 0.01}}  # the base is not changed


def test_merge_validation_replaces_an_encoder_s_cells_with_its_figures():
    # The base's validation cells of an encoder adapted again stayed beside its new figures, and the census then
    # gave the old cells' sizes (6-14 maps) for a validation on cells of 2-4 (helper 97's walk of the docs).
    cell = lambda maps: {"maps": maps}  # noqa: E731
    base = {"results": [{"estimator": "count", "scope": None, "encoders": {"a": {"mean_abs_error": 0.01},
                                                                          "b": {"mean_abs_error": 0.02}},
                         "cells": {"a": {"0": {"rte": cell(10)}}, "b": {"0": {"rte": cell(14)}}}}]}
    new = {"results": [{"estimator": "count", "scope": None, "encoders": {"b": {"mean_abs_error": 0.03}},
                        "cells": {"b": {"0": {"rte": cell(3)}}}}], "encoders": ["b"]}
    out = merge_validation(base, new)
    assert out["results"][0]["cells"] == {"a": {"0": {"rte": cell(10)}}, "b": {"0": {"rte": cell(3)}}}
    assert base["results"][0]["cells"]["b"] == {"0": {"rte": cell(14)}}  # the base is not changed
    del new["results"][0]["cells"]  # a validation without cells leaves none of the encoder's old ones
    assert "b" not in merge_validation(base, new)["results"][0]["cells"]


def test_merge_validation_warns_when_an_encoder_is_now_validated_on_fewer_maps(caplog):
    entry = lambda maps: {"mean_abs_error": 0.02, "maps": maps}  # noqa: E731
    base = {"results": [{"estimator": "count", "scope": None, "encoders": {"a": entry(120)},
                         "worst_encoder_mean_abs_error": 0.02}], "best_per_encoder": {"a": {"estimator": "count"}}}
    new = lambda maps: {"results": [{"estimator": "count", "scope": None, "encoders": {"a": entry(maps)}}],  # noqa
                        "best_per_encoder": {"a": {"estimator": "count"}}, "encoders": ["a"]}
    with caplog.at_level("WARNING"):
        out = merge_validation(base, new(12))
    assert out["results"][0]["encoders"]["a"]["maps"] == 12
    assert "a was validated on 120 hand-labelled maps" in caplog.text and "on the 12 new maps only" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        merge_validation(base, new(150))
    assert "validated on" not in caplog.text


def started(new, out, export):
    """What `adapt start` leaves in ``out`` (the sampled maps of the labelled set ``new``) and a Label Studio export of
    their labels in ``export``; returns the labels."""
    import shutil

    shutil.copytree(new / "maps", out / "maps")
    when = "2026-11-25T10:00:00Z"
    labels = list(csv.DictReader(open(new / "labels.csv", encoding="utf-8")))
    tasks = [{"id": 100 + t, "project": 7, "created_at": when, "predictions": [],
              "data": {"map_id": r["map_id"], "guide": "1.1"},
              "annotations": [{"id": 500 + t, "unique_id": f"u{t}", "was_cancelled": False, "created_at": when,
                               "updated_at": when, "lead_time": 2.0,
                               "completed_by": {"id": 3, "email": "me@example.com"},
                               "result": [{"from_name": "pattern", "to_name": "map", "type": "choices",
                                           "value": {"choices": [r["label"]]}}]}]}
             for t, r in enumerate(labels)]
    export.write_text(json.dumps(tasks))
    return labels


def test_adapt_finish_pulls_an_export_and_writes_the_adapted_classifier(trained, tmp_path, capsys):
    base, new, models = trained
    out = tmp_path / "adapt-e5"
    labels = started(new, out, tmp_path / "export.json")
    args = ["adapt", "finish", "--from-file", str(tmp_path / "export.json"), "--out", str(out), "--annotations",
            str(base), "--checkpoint", str(models / "patterncnn.pt"), "--epochs", "1", "--folds", "2", "--freeze-bn"]
    assert main(args) == 0
    said = capsys.readouterr().out
    assert f"pulled {len(labels)} labelled map(s)" in said and f"census of {E5}:" in said
    assert "keep the classifier's validation, unchecked: no held-out set" in said  # no round 5 beside its models/
    assert (out / "classifier" / "patterncnn.onnx").is_file() and (out / "labels" / "labels.csv").is_file()
    assert json.loads((out / "classifier" / "adapt.json").read_text())["config"]["freeze_bn"] is True
    assert main(["adapt", "finish", "--from-file", str(tmp_path / "export.json"), "--out", str(tmp_path / "none")]) == 2
    assert "adapt start" in capsys.readouterr().err


def test_adapt_finish_warns_of_unlabelled_maps_and_an_interruption_says_what_it_keeps(trained, tmp_path, capsys,
                                                                                      monkeypatch):
    # Found by walkthrough 8: half the maps labelled went on silently; Ctrl-C said only "interrupted".
    import patterncnn.training.adapt as adapting

    base, new, models = trained
    out = tmp_path / "adapt-e5"
    labels = started(new, out, tmp_path / "export.json")
    tasks = json.loads((tmp_path / "export.json").read_text())
    for t in tasks[:3]:
        t["annotations"] = []
    (tmp_path / "export.json").write_text(json.dumps(tasks))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(adapting, "adapt", interrupted)  # stopped during the fits
    assert main(["adapt", "finish", "--from-file", str(tmp_path / "export.json"), "--out", str(out), "--annotations",
                 str(base), "--checkpoint", str(models / "patterncnn.pt")]) == 130
    said = capsys.readouterr()
    assert f"warning: 3 of the project's {len(labels)} maps are not labelled yet" in said.out
    assert said.err.strip() == (f"patterncnn adapt: interrupted: the pulled labels are kept in {out / 'labels'}; no "
                                f"fit is kept (nothing was written to {out / 'classifier'}): the same command pulls "
                                f"again and fits from the start")
    assert len(list(csv.DictReader(open(out / "labels" / "labels.csv", encoding="utf-8")))) == len(labels) - 3


def test_adapt_starts_from_the_labelled_sets_the_classifier_was_trained_on(trained, tmp_path, caplog):
    """Without --annotations, the sets that `train` recorded in metrics.json beside the checkpoint (the shipped one:
    two sets; another classifier's metrics.json is not its record); other sets are used with a warning naming the
    ones it was trained on; no record is refused."""
    import logging
    import shutil

    from patterncnn.training.adapt import trained_on

    base, new, models = trained
    assert trained_on(models / "patterncnn.pt") == [str(base)]
    shipped = trained_on(REPO / "models" / "patterncnn.pt")  # relative to the clone, from wherever it runs
    assert [(REPO / x).resolve() for x in shipped] == [REPO / "annotations", REPO / "annotations" / "round8-e5-uniform"]
    res = adapt(models / "patterncnn.pt", None, new, tmp_path / "a", AdaptConfig(epochs=1, folds=2))
    assert res["new"]["maps"] == 30 and "trained on other labelled data" not in caplog.text

    other = family_set(tmp_path / "other", per_class=4, only=("minilm",))
    with caplog.at_level(logging.WARNING, logger="patterncnn.training.adapt"):
        adapt(models / "patterncnn.pt", [other], new, tmp_path / "b", AdaptConfig(epochs=1, folds=2))
    assert f"it was trained on {base}" in caplog.text

    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(models / "patterncnn.pt", bare / "patterncnn.pt")  # no metrics.json beside it
    with pytest.raises(ClassifierError, match="--annotations"):
        adapt(bare / "patterncnn.pt", None, new, tmp_path / "c", AdaptConfig(epochs=1, folds=2))
    own = json.loads((models / "metrics.json").read_text())
    mine = {"data_hash": own["data"]["data_hash"]}
    for record, sets in (({"data": {**mine, "annotations": str(base)}, "train_config": own["train_config"]}, [str(base)]),
                         ({"data": {**mine, "annotations": [""]}, "train_config": own["train_config"]}, None),
                         ({"data": mine, "train_config": own["train_config"]}, None), ([1, 2], None),
                         # another classifier's metrics.json beside it: other data, or another training config
                         ({"data": {"data_hash": "0" * 64, "annotations": str(base)},
                           "train_config": own["train_config"]}, None),
                         ({"data": {**mine, "annotations": str(base)}, "train_config": {**own["train_config"], "lr": 1}},
                          None)):
        (bare / "metrics.json").write_text(json.dumps(record))
        assert trained_on(bare / "patterncnn.pt") == sets
    adapted = trained_on(tmp_path / "a" / "patterncnn.pt")  # an adapted classifier: its own record
    assert adapted == [str(base), str(new)]


def test_adapt_keeps_the_batchnorm_statistics_when_asked(trained, tmp_path):
    """AdaptConfig.freeze_bn: the adapted CNN normalises with the statistics of the classifier it started from (as
    `train --freeze-bn` keeps the pretrained CNN's); without it they are re-estimated on the adapting batches."""
    import torch

    base, new, models = trained
    start = torch.load(models / "patterncnn.pt", weights_only=True)["state_dict"]
    stats = [k for k in start if k.endswith(("running_mean", "running_var"))]
    assert stats
    versions = set()
    for freeze in (True, False):
        out = tmp_path / str(freeze)
        res = adapt(models / "patterncnn.pt", [base], new, out, AdaptConfig(epochs=1, folds=2, freeze_bn=freeze))
        assert res["config"]["freeze_bn"] is freeze
        versions.add(res["classifier_version"])
        done = torch.load(out / "patterncnn.pt", weights_only=True)["state_dict"]
        kept = [torch.equal(done[k], start[k]) for k in stats]
        assert all(kept) if freeze else not any(kept)
        # the BatchNorm scales and shifts learn either way
        assert not torch.equal(done["features.1.weight"], start["features.1.weight"])
    assert len(versions) == 2  # the recipe, and so the version, says which


def _with_shift(models, out, shift):
    """The fixture's classifier with ``shift`` added to its head's bias and recorded, as `train --bias-correction`
    writes one: (its folder, the head bias's key)."""
    import torch

    from patterncnn.core.labels import LABELS

    ckpt = torch.load(models / "patterncnn.pt", weights_only=True)
    head = [k for k in ckpt["state_dict"] if k.startswith("head.") and k.endswith(".bias")][-1]
    ckpt["state_dict"][head] = ckpt["state_dict"][head] + torch.as_tensor(shift, dtype=torch.float32)
    ckpt["bias_correction"] = {"logit_shift": dict(zip(LABELS, shift.tolist()))}
    out.mkdir()
    torch.save(ckpt, out / "patterncnn.pt")
    return out, head


def test_adapt_takes_the_bias_shift_out_and_puts_it_back_into_every_fit(trained, tmp_path):
    """A classifier of `train --bias-correction` carries a logit shift in its head. Adapting fine-tunes the CNN without
    it and puts it back: the result is what adapting the same CNN without the shift gives, plus the shift, and the
    adapted classifier records it (adapting it again takes it out again). With reapply_shift off the shift stays in
    the head while it is fine-tuned, and the adapted classifier records none."""
    import torch

    base, new, models = trained
    shift = np.array([1.0, 0.25, -0.5, -1.5, 0.5])
    corrected, head = _with_shift(models, tmp_path / "shifted", shift)
    acfg = AdaptConfig(epochs=1, folds=2)
    plain = adapt(models / "patterncnn.pt", [base], new, tmp_path / "plain", acfg)
    again = adapt(corrected / "patterncnn.pt", [base], new, tmp_path / "again", acfg)
    assert plain["bias_shift"] is None and list(again["bias_shift"].values()) == pytest.approx(shift.tolist())
    p = torch.load(tmp_path / "plain" / "patterncnn.pt", weights_only=True)["state_dict"]
    a = torch.load(tmp_path / "again" / "patterncnn.pt", weights_only=True)
    for k in p:
        want = p[k] + torch.as_tensor(shift, dtype=p[k].dtype) if k == head else p[k]
        assert torch.allclose(a["state_dict"][k].float(), want.float(), atol=1e-4), k
    # the cross-fitted fits are shifted too: the new maps' out-of-fold posteriors are the plain ones, shifted
    n = plain["new"]["maps"]
    p_rows, a_rows = (stored_rows(torch.load(tmp_path / x / "patterncnn.pt", weights_only=True)).probs[-n:]
                      for x in ("plain", "again"))
    assert np.allclose(a_rows, shifted(p_rows.astype(np.float64), shift), atol=1e-3)
    assert not np.allclose(a_rows, p_rows, atol=1e-3)
    assert list(a["bias_correction"]["logit_shift"].values()) == pytest.approx(shift.tolist())

    kept = adapt(corrected / "patterncnn.pt", [base], new, tmp_path / "kept",
                 AdaptConfig(epochs=1, folds=2, reapply_shift=False))
    assert kept["bias_shift"] is None
    k_pt = torch.load(tmp_path / "kept" / "patterncnn.pt", weights_only=True)
    assert "bias_correction" not in k_pt
    # fine-tuned from the shifted head: neither the plain adaptation nor it plus the shift
    for other in (p, {k: v + torch.as_tensor(shift, dtype=v.dtype) if k == head else v for k, v in p.items()}):
        assert any(not torch.allclose(k_pt["state_dict"][k].float(), other[k].float(), atol=1e-6) for k in p)


def test_the_shift_of_a_classifier_that_records_it_beside_itself(trained, tmp_path):
    """Classifiers trained before the .pt recorded the shift (the shipped one) have it in the metrics.json train
    wrote beside them: taken only if that file is theirs (same labelled data and training config)."""
    import torch

    from patterncnn.core.labels import LABELS
    from patterncnn.training.adapt import carried_shift

    _, _, models = trained
    ckpt = torch.load(models / "patterncnn.pt", weights_only=True)
    assert carried_shift(models / "patterncnn.pt", ckpt) is None  # trained without the correction
    old = {k: v for k, v in ckpt.items() if k != "bias_correction"}
    old["train_config"] = {**ckpt["train_config"], "bias_correction": True}
    shift = [0.5, -0.25, 0.0, -1.0, 0.75]
    metrics = {"data": {"data_hash": ckpt["data_hash"]}, "train_config": old["train_config"],
               "bias_correction": {"logit_shift": dict(zip(LABELS, shift))}}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert carried_shift(tmp_path / "patterncnn.pt", old).tolist() == shift
    for other in ({**metrics, "data": {"data_hash": "another"}},
                  {**metrics, "train_config": {**metrics["train_config"], "seed": 7}}):
        (tmp_path / "metrics.json").write_text(json.dumps(other))
        with pytest.raises(ClassifierError, match="another classifier's.*--no-reapply-shift"):
            carried_shift(tmp_path / "patterncnn.pt", old)
    (tmp_path / "metrics.json").unlink()
    with pytest.raises(ClassifierError, match="put it back beside the checkpoint"):
        carried_shift(tmp_path / "patterncnn.pt", old)


def test_adapt_with_no_epochs_keeps_the_weights_and_validates_them_on_the_new_maps(trained, tmp_path):
    """epochs 0: the classifier never saw the new maps, so its own scores of them validate it; the weights stay
    byte for byte, the new family gets its band and the warning goes."""
    import torch

    base, new, models = trained
    shift = np.array([0.5, -0.25, 0.0, -1.0, 0.75])
    corrected, _ = _with_shift(models, tmp_path / "shifted", shift)  # a bias-corrected classifier keeps its shift
    res = adapt(corrected / "patterncnn.pt", [base], new, tmp_path / "kept", AdaptConfig(epochs=0, folds=3))
    assert res["new"] == res["before"] and res["folds"] == 3
    start = torch.load(corrected / "patterncnn.pt", weights_only=True)["state_dict"]
    done = torch.load(tmp_path / "kept" / "patterncnn.pt", weights_only=True)
    assert all(torch.equal(done["state_dict"][k], start[k]) for k in start)
    assert list(done["bias_correction"]["logit_shift"].values()) == pytest.approx(shift.tolist())
    assert list(res["bias_shift"].values()) == pytest.approx(shift.tolist())
    meta = OnnxClassifier(tmp_path / "kept" / "patterncnn.onnx").metadata
    plan = plan_for(meta, None, None, E5)
    assert "warning" not in plan.validated and E5 in plan.validated["encoder"]
    with pytest.raises(ClassifierError, match="give 0"):
        adapt(models / "patterncnn.pt", [base], new, tmp_path / "neg", AdaptConfig(epochs=-1))


def test_an_adapt_stopped_while_writing_leaves_no_part_of_its_classifier_and_names_what_it_started_from(
        trained, tmp_path, monkeypatch):
    """Its three files land together: stopped at the last one, the folder holds none of them and the rerun needs no
    overwrite; adapt.json names the checkpoint it started from with its SHA-256."""
    import hashlib

    import patterncnn.training.adapt as adapt_module

    base, new, models = trained
    out = tmp_path / "adapted"

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(adapt_module, "write_json", stopped)
        with pytest.raises(KeyboardInterrupt):
            adapt(models / "patterncnn.pt", [base], new, out, AdaptConfig(epochs=0, folds=3))
    assert not out.exists() or list(out.iterdir()) == []
    res = adapt(models / "patterncnn.pt", [base], new, out, AdaptConfig(epochs=0, folds=3))
    assert sorted(p.name for p in out.iterdir()) == ["adapt.json", "patterncnn.onnx", "patterncnn.pt"]
    started = json.loads((out / "adapt.json").read_text())["adapted_from"]
    assert started == res["adapted_from"] and started["checkpoint"] == "patterncnn.pt"  # absolute: its name only
    assert started["sha256"] == hashlib.sha256((models / "patterncnn.pt").read_bytes()).hexdigest()


def test_adapt_start_refuses_bad_options_before_it_samples_or_writes(tmp_path, capsys):
    out = tmp_path / "adapt"
    base = ["adapt", "start", "--model", "minilm", "--out", str(out), "--url", "http://localhost:1", "--api-key", "x"]
    assert main([*base, "--project", "p2"]) == 2  # Label Studio would refuse the title only after sampling
    assert "3 to 50 characters" in capsys.readouterr().err
    for option in ("--maps", "--annotators"):
        with pytest.raises(SystemExit) as e:
            main([*base, "--project", "my encoder", option, "0"])
        assert e.value.code == 2 and f"{option}: must be a whole number of at least 1" in capsys.readouterr().err
    assert not out.exists()  # nothing sampled


def test_adapt_start_on_an_out_with_maps_refuses_a_cut_off_sample_and_other_options(tmp_path, capsys):
    # found by the review of stop 54: `adapt start` on an OUT with maps pushes them again; a sample a killed run cut
    # off, or options that would have sampled other maps (a forgotten new --out), must not be pushed as if they were
    from synthetic import pattern_map

    from patterncnn.core.maps import MapStore

    def store(out, n):
        s = MapStore.create(out / "maps", info={"model": {"model": "e5"}, "max_length": 128, "seed": 0,
                                                "per_task": 2, "design": "uniform", "tasks": {"rte": {}, "mrpc": {}}})
        s.append([({"id": f"e5-cd1caf18_rte_dev_{i}_0_{i}", "task": "rte", "split": "dev", "example": i, "layer": 0,
                    "head": i, "T": 12, "sampling": "uniform"}, pattern_map("vertical", 12, 5, seed=i))
                  for i in range(n)])

    base = ["adapt", "start", "--project", "my encoder", "--url", "http://localhost:1", "--api-key", "x"]
    store(tmp_path / "cut", 3)
    assert main([*base, "--model", "e5", "--out", str(tmp_path / "cut")]) == 2
    assert f"the sampling into {tmp_path / 'cut' / 'maps'} was cut off (3 of 4 maps): remove " in \
        capsys.readouterr().err
    store(tmp_path / "whole", 4)
    for options, differ in [([], "--model e5"), (["--model", "e5", "--seed", "3"], "--seed 0"),
                            (["--model", "e5", "--task", "rte"], "--task rte --task mrpc"),
                            (["--model", "e5", "--maps", "40"],
                             "--maps 4 (2 per task over 2 tasks: any --maps from 3 to 4)")]:
        assert main([*base, *options, "--out", str(tmp_path / "whole")]) == 2
        said = capsys.readouterr().err
        assert f"{tmp_path / 'whole' / 'maps'} holds maps sampled with {differ}, not as this command asks: " in said
        assert (f"(`patterncnn adapt start --model e5 --task rte --task mrpc --out {tmp_path / 'whole'} --project "
                f"TITLE`)") in said
    for options in (["--model", "e5"], ["--model", "/elsewhere/e5", "--task", "rte", "--task", "RTE", "--task", "mrpc",
                                        "--maps", "4"]):  # as sampled (a path's folder name; a task twice): on
        assert main([*base, *options, "--out", str(tmp_path / "whole")]) == 2
        assert "Label Studio" in capsys.readouterr().err and not (tmp_path / "whole" / "project.json").exists()


@pytest.mark.parametrize("option, value, least", [("--epochs", "-1", 0), ("--folds", "1", 2), ("--folds", "0", 2)])
def test_adapt_finish_refuses_epochs_and_folds_it_cannot_run_by_themselves(option, value, least, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # argparse: before the pull, and not for a reason of the maps'
        main(["adapt", "finish", "--from-file", str(tmp_path / "export.json"), "--out", str(tmp_path), option, value])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: must be a whole number of at least {least} (got '{value}')" in err


def test_adapt_refuses_a_file_that_is_not_a_classifier_checkpoint_in_one_line(tmp_path):
    text = tmp_path / "afile.txt"
    text.write_text("a")
    for path in (REPO / "models" / "patterncnn.onnx", text, REPO / "models" / "pretrained-synthetic.pt"):
        with pytest.raises(ClassifierError) as e:  # not torch's UnpicklingError, nor a KeyError
            adapt(path, [tmp_path], tmp_path, tmp_path / "out", AdaptConfig(epochs=1, folds=2))
        said = str(e.value)
        assert f"{path.name} is" in said and "not a classifier checkpoint (patterncnn.pt from `patterncnn train`)" in said
        assert "\n" not in said and "models/patterncnn.pt" in said


def test_adapt_finish_names_the_push_again_for_a_project_the_server_no_longer_has(tmp_path, capsys, monkeypatch):
    # Found by walkthrough 8 (`adapt finish --project 99` said to push maps with `annotate push`) and the reviews
    # after it: the fix is `adapt start` on the same OUT, which pushes its maps again with the annotators per map it
    # recorded, and records the new project; a recorded id that is gone says it came from the record.
    from types import SimpleNamespace

    from label_studio_sdk.core.api_error import ApiError

    import patterncnn.cli.adapt as adapt_cli
    from patterncnn.labelling.labelstudio import Connection

    def missing(id):
        raise ApiError(status_code=404, body={"detail": "Not found."})

    ls = Connection(url="http://ls:8080", client=SimpleNamespace(projects=SimpleNamespace(
        get=missing, list=lambda title: [])))
    monkeypatch.setattr(adapt_cli, "connect", lambda args: ls)
    new = family_set(tmp_path / "e5", per_class=2, only=("e5",))
    out = tmp_path / "adapt-e5"
    started(new, out, tmp_path / "export.json")
    finish = ["adapt", "finish", "--out", str(out), "--annotations", str(new), "--checkpoint",
              str(REPO / "models" / "patterncnn.pt")]
    assert main([*finish, "--project", "99"]) == 2
    assert capsys.readouterr().err.rstrip().endswith(
        f"pass an existing project's id or title (or push maps to a new one with "
        f"`patterncnn adapt start --out {out} --project TITLE`)")
    assert main([*finish, "--project", "my encoder"]) == 2  # a title: `adapt start` printed the title and the id
    assert capsys.readouterr().err.rstrip().endswith(
        f"no Label Studio project titled 'my encoder'; check the title or pass its id "
        f"(`patterncnn adapt start --out {out} --project TITLE` printed both)")
    assert not (out / "labels").exists()
    # without --project: the project `adapt start` recorded, if it is of this server
    (out / "project.json").write_text(json.dumps({"url": "http://other:8080", "project": 7, "title": "t"}))
    assert main(finish) == 2
    assert capsys.readouterr().err.rstrip().endswith(
        f"{out / 'project.json'} names project 7 of Label Studio at http://other:8080, not of http://ls:8080: connect "
        f"to http://other:8080 (--url), or pass --project (title or id)")
    (out / "project.json").write_text(json.dumps({"url": "http://ls:8080/", "project": 99, "title": "t",
                                                  "annotators": 3}))
    assert main(finish) == 2  # the push again keeps the recorded annotators per map: no --annotators to pass
    assert capsys.readouterr().err.rstrip().endswith(
        f"{out / 'project.json'} names project 99 ('t') of http://ls:8080, which the server no longer has: push "
        f"{out / 'maps'} to a project again with `patterncnn adapt start --out {out} --project TITLE` (it records "
        f"the new one), or pass --project (title or id)")
    for record in ({"url": "http://other:8080", "project": 7, "title": "t"}, "{not json", {"url": 5, "project": 7}):
        (out / "project.json").write_text(record if isinstance(record, str) else json.dumps(record))
        assert main([*finish, "--project", "99"]) == 2  # --project given: the record does not matter
        assert "no Label Studio project with id 99 at http://ls:8080" in capsys.readouterr().err
    assert main(finish) == 2
    assert capsys.readouterr().err.rstrip().endswith(f"{out / 'project.json'} names no project; pass --project "
                                                     f"(title or id)")
    assert not (out / "labels").exists()


def test_adapt_finish_refuses_before_it_pulls(tmp_path, capsys):
    new = family_set(tmp_path / "e5", per_class=2, only=("e5",))
    out = tmp_path / "adapt-e5"
    started(new, out, tmp_path / "export.json")
    text = tmp_path / "afile.txt"
    text.write_text("a")
    finish = ["adapt", "finish", "--from-file", str(tmp_path / "export.json"), "--out", str(out), "--annotations",
              str(new)]
    assert main([*finish, "--checkpoint", str(text)]) == 2
    said = capsys.readouterr()
    assert "afile.txt is not a classifier checkpoint" in said.err and "pulled" not in said.out
    (out / "classifier").mkdir()
    (out / "classifier" / "patterncnn.onnx").write_bytes(b"an adapted classifier")
    assert main(finish) == 2
    said = capsys.readouterr()
    assert said.err.count("\n") == 1 and "pulled" not in said.out
    # --out is the folder `adapt start` wrote: the fix is --overwrite, or moving the classifier away, not another --out
    assert f"{out / 'classifier'} already holds patterncnn.onnx; pass --overwrite to replace it, or move it away" in said.err
    assert "another --out" not in said.err
    assert not (out / "labels").exists()  # nothing pulled
    (out / "classifier" / "patterncnn.onnx").unlink()
    assert main([*finish[:-1], str(tmp_path / "nowhere")]) == 2  # --annotations names a set that is not there
    said = capsys.readouterr()
    assert "nowhere/labels.csv not found" in said.err and "pulled" not in said.out
    assert not (out / "labels").exists()


def test_folds_over_few_new_maps_say_what_stratifying_cannot_do_in_our_words(caplog):
    import types
    import warnings

    from patterncnn.training.adapt import _folds

    y = np.array([0] * 4 + [1] * 4 + [2] * 2 + [3] * 2)  # 12 maps of 12 input examples; two classes of 2 maps
    data = types.SimpleNamespace(y=y, groups=np.arange(12))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn's "least populated class" UserWarning would raise here
        parts = _folds(data, np.arange(12), 3, 0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(12)) and len(parts) == 3
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and "the smallest class of the new maps, vertical+diagonal, has 2 map(s): fewer than the " \
                               "3 folds" in said[0]
