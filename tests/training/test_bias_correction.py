"""The bias correction (`train --bias-correction`): BCTS's logit shift, fitted on maps a CNN did not train on, folded
into its head."""

import json
import types

import numpy as np
import pytest
import torch

from patterncnn.classifier.model import CNNConfig, PatternCNN, PatternEnsemble, load_checkpoint, preprocess
from patterncnn.cli import main
from patterncnn.core.labels import LABELS
from patterncnn.core.scores import macro_f1
from patterncnn.labelling.sets import load_labelled
from patterncnn.training.fit import (
    OutOfFold,
    TrainConfig,
    TrainError,
    Work,
    bias_shift,
    correct_on,
    corrected_out_of_fold,
    fit,
    fit_final,
    predict_proba,
    shift_head,
    shifted,
)


def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def tilted_posteriors(n, tilt, seed=0):
    """(posteriors tilted by ``tilt`` away from the calibrated ones the labels were drawn from, the labels)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(n, len(LABELS)))
    p = softmax(z)
    y = np.array([rng.choice(len(LABELS), p=row) for row in p])
    return softmax(z + tilt), y


def test_the_shift_undoes_a_known_tilt_and_raises_accuracy():
    tilt = np.array([-0.8, 0.0, 0.3, 1.2, -0.4])
    probs, y = tilted_posteriors(20000, tilt)
    shift = bias_shift(probs, y)
    assert np.allclose(shift - shift.mean(), -(tilt - tilt.mean()), atol=0.1)
    fixed = shifted(probs, shift)
    assert np.allclose(fixed.sum(1), 1) and (fixed.argmax(1) == y).mean() > (probs.argmax(1) == y).mean() + 0.01
    calibrated, y2 = tilted_posteriors(20000, np.zeros(5), seed=1)  # nothing to undo: a shift near zero
    assert np.abs(bias_shift(calibrated, y2)).max() < 0.1


def test_a_zero_probability_stays_zero():
    p = np.array([[0.5, 0.2, 0.1, 0.0, 0.2]])
    out = shifted(p, np.array([0.0, 0.0, 0.0, 3.0, 0.0]))
    assert out[0, 3] == 0 and np.isclose(out.sum(), 1)


def test_the_shift_goes_into_the_head_and_moves_every_logit_by_it():
    torch.manual_seed(0)
    model = PatternCNN(CNNConfig()).eval()
    x = preprocess(torch.softmax(torch.randn(3, 12, 12), -1), [[5, 11]] * 3, model.cfg)
    before = model(x).detach().numpy()
    shift = np.array([0.5, -0.25, 0.0, -1.0, 0.75])
    shift_head(model, shift)
    assert np.allclose(model(x).detach().numpy() - before, shift, atol=1e-5)
    with pytest.raises(TrainError, match="--members 1"):
        shift_head(PatternEnsemble(CNNConfig(members=2)), shift)


def test_out_of_fold_rows_are_corrected_by_shifts_fitted_on_the_other_folds_only():
    tilt = np.array([0.6, 0.0, 0.0, 0.0, -0.6])
    probs, y = tilted_posteriors(3000, tilt, seed=2)
    fold = np.arange(3000) % 3
    oof = OutOfFold(probs.astype(np.float32), fold, [0.0] * 3, [1] * 3, 0.0)
    data = types.SimpleNamespace(y=y, seps=[None] * 3000)
    fixed, final = corrected_out_of_fold(data, oof)
    assert np.allclose(final, bias_shift(probs.astype(np.float32).astype(np.float64), y))
    other = y.copy()
    other[fold == 0] = 0  # fold 0's labels change: its own rows' correction must not
    fixed2, _ = corrected_out_of_fold(types.SimpleNamespace(y=other, seps=[None] * 3000), oof)
    assert np.allclose(fixed2.probs[fold == 0], fixed.probs[fold == 0])
    assert not np.allclose(fixed2.probs[fold == 1], fixed.probs[fold == 1])
    assert (fixed.probs.argmax(1) == y).mean() > (probs.argmax(1) == y).mean()
    assert fixed.fold_macro_f1 == [macro_f1(y[fold == k], fixed.probs[fold == k].argmax(1)) for k in range(3)]


def test_a_held_out_fit_is_corrected_on_its_early_stopping_maps(labelled_set):
    data = load_labelled(labelled_set)
    idx = np.arange(len(data.y))
    tr, va = idx[idx % 4 != 0], idx[idx % 4 == 0]
    model, _, _ = fit(data, tr, va, CNNConfig(), TrainConfig(max_epochs=2), seed=0)
    before = predict_proba(model, data, va, CNNConfig())
    shift = correct_on(model, data, va, CNNConfig())
    assert np.allclose(predict_proba(model, data, va, CNNConfig()), shifted(before.astype(np.float64), shift),
                       atol=1e-5)


def test_train_with_bias_correction_ships_the_final_fit_shifted_by_the_out_of_fold_shift(labelled_set, tmp_path,
                                                                                            capsys):
    out = tmp_path / "models"
    rc = main(["train", "--annotations", str(labelled_set), "--out", str(out), "--folds", "3", "--max-epochs", "3",
               "--no-soft-labels", "--bias-correction"])
    assert rc == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["train_config"]["bias_correction"] is True and m["onnx_parity_max_abs_diff"] < 1e-4
    shift = np.array([m["bias_correction"]["logit_shift"][name] for name in LABELS])
    model, _ = load_checkpoint(out / "patterncnn.pt")
    data = load_labelled(labelled_set)
    tcfg = TrainConfig(folds=3, max_epochs=3, bias_correction=True)
    plain = fit_final(data, CNNConfig(), tcfg, m["final_fit_epochs"])  # the same fit, deterministic, unshifted
    assert np.allclose(model.head[-1].bias.detach().numpy() - plain.head[-1].bias.detach().numpy(), shift, atol=1e-6)
    assert np.abs(shift).max() > 0  # something was fitted
    import torch  # the .pt records the shift too (what `adapt` takes out and puts back)

    from patterncnn.training.adapt import carried_shift
    pt = torch.load(out / "patterncnn.pt", weights_only=True)
    assert np.allclose(carried_shift(out / "patterncnn.pt", pt), shift)
    (out / "metrics.json").rename(out / "elsewhere.json")  # read from the .pt, not from the file beside it
    assert np.allclose(carried_shift(out / "patterncnn.pt", pt), shift)
    (out / "elsewhere.json").rename(out / "metrics.json")
    assert "**Bias correction** (`--bias-correction`)" in (out / "README.md").read_text()

    rc = main(["train", "--annotations", str(labelled_set), "--out", str(tmp_path / "x2"), "--members", "2",
               "--bias-correction"])
    assert rc != 0 and "drop --members, or --bias-correction" in capsys.readouterr().err


def test_a_resumed_final_fit_is_shifted_once(labelled_set, tmp_path):
    data = load_labelled(labelled_set)
    tcfg = TrainConfig(max_epochs=2, bias_correction=True)
    shift = np.array([0.5, -0.5, 0.0, -1.0, 1.0])
    work = Work(tmp_path / "work")
    fresh = fit_final(data, CNNConfig(), tcfg, 2, work=work, shift=shift)  # fitted, kept unshifted, then shifted
    resumed = fit_final(data, CNNConfig(), tcfg, 2, work=work, shift=shift)  # read back, then shifted
    plain = fit_final(data, CNNConfig(), tcfg, 2)
    for model in (fresh, resumed):
        assert np.allclose(model.head[-1].bias.detach().numpy() - plain.head[-1].bias.detach().numpy(), shift,
                           atol=1e-6)
