"""Uniform-attention disabling on a tiny BERT and a tiny MPNet: exactly the chosen head changes, its rows are
1/L over the real tokens, the other heads are bit-identical; the layer cache replays the full pass; the
bootstrap metrics match sklearn; `patterncnn disable` runs end to end and resumes."""

import json

import numpy as np
import pytest
import torch
from synthetic import sequence_classifier

from patterncnn.core.glue import get_task
from patterncnn.encoders.uniform_heads import DisableError, UniformHeads
from patterncnn.experiments.disable import (
    CachedClassifier,
    change_interval,
    metric,
    parse_unit,
    resampled_metric,
    units,
)

PAIRS = [("a man is playing a guitar.", "someone plays music!"), ("short", "pair of texts, longer than that"),
         ("one", "two")]


def _classifier(folder, tmp_path, name):
    return sequence_classifier(folder, tmp_path / name)


@pytest.fixture(params=["bert", "mpnet"])
def clf(request, tiny_bert, tiny_mpnet, tmp_path):
    folder = tiny_bert if request.param == "bert" else tiny_mpnet
    return _classifier(folder, tmp_path, request.param)


def _attentions(model, tok, heads=None):
    batch = tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.inference_mode():
        if heads is None:
            out = model(**batch, output_attentions=True)
        else:
            with UniformHeads(model, heads):
                out = model(**batch, output_attentions=True)
    return torch.stack(out.attentions, 1), batch["attention_mask"], out.logits  # (B, L, H, T, T)


def test_only_the_chosen_head_changes_and_it_is_uniform_over_real_tokens(clf):
    model, tok, _ = clf
    base, mask, logits = _attentions(model, tok)
    layer, head = 1, 2
    off, _, logits_off = _attentions(model, tok, {layer: [head]})
    # Layers below and the other heads of the same layer: bit-identical.
    assert torch.equal(off[:, :layer], base[:, :layer])
    others = [h for h in range(base.shape[2]) if h != head]
    assert torch.equal(off[:, layer, others], base[:, layer, others])
    assert not torch.equal(off[:, layer, head], base[:, layer, head])
    for b in range(len(PAIRS)):
        n = int(mask[b].sum())
        rows = off[b, layer, head]  # (T, T)
        assert torch.allclose(rows.sum(-1), torch.ones(rows.shape[0]))
        assert torch.allclose(rows[:, :n], torch.full((rows.shape[0], n), 1.0 / n))
        assert torch.all(rows[:, n:] == 0)  # padding gets nothing
    assert not torch.allclose(logits_off, logits)  # the change reaches the output
    # The hooks are gone after the block.
    again, _, _ = _attentions(model, tok)
    assert torch.equal(again, base)


def test_not_head_mask_zeroing(clf):
    # HF's head_mask zeroes the head's output; uniform attention passes the mean of the values instead.
    model, tok, _ = clf
    batch = tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.inference_mode(), UniformHeads(model, {0: [0]}):
        uniform = model(**batch).logits
    with torch.inference_mode():
        base = model(**batch).logits
    assert not torch.allclose(uniform, base)


def test_layer_cache_replays_the_full_pass(clf):
    model, tok, _ = clf
    runner = CachedClassifier(model, tok, PAIRS, max_length=32, batch_size=2)
    for layer in range(model.config.num_hidden_layers):
        with UniformHeads(model, {layer: [1, 3]}) as off:
            cached = runner.run(layer, off)
            full = runner.full()
        assert torch.allclose(cached, full, atol=1e-5)
        assert not torch.allclose(cached, runner.baseline)


def test_bad_heads_are_refused(clf):
    model, _, _ = clf
    with pytest.raises(DisableError, match="count from 0"):
        UniformHeads(model, {0: [model.config.num_attention_heads]})


def test_resampled_metrics_match_sklearn():
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    assert metric(get_task("rte"), p, y) == pytest.approx(accuracy_score(y, p))
    assert metric(get_task("mrpc"), p, y) == pytest.approx(f1_score(y, p))
    assert metric(get_task("cola"), p, y) == pytest.approx(matthews_corrcoef(y, p))
    s, t = rng.normal(size=50), rng.normal(size=50)
    assert metric(get_task("stsb"), s, t) == pytest.approx(np.corrcoef(s, t)[0, 1])
    idx = rng.integers(0, 200, (7, 200))
    assert resampled_metric(get_task("mrpc"), p, y, idx)[3] == pytest.approx(f1_score(y[idx[3]], p[idx[3]]))


def test_bootstrap_interval_covers_a_null_change_and_excludes_a_big_one():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 277)
    base = np.where(rng.random(277) < 0.6, y, 1 - y)
    same = base.copy()
    right, wrong = np.flatnonzero(base == y)[:3], np.flatnonzero(base != y)[:3]
    same[right], same[wrong] = 1 - same[right], 1 - same[wrong]  # 3 fixed, 3 broken: no net change
    idx = rng.integers(0, 277, (1000, 277))
    lo, hi = change_interval(get_task("rte"), base, same, y, idx)
    assert lo < 0 < hi
    lo, hi = change_interval(get_task("rte"), base, 1 - y, y, idx)  # all wrong
    assert hi < 0


def test_units_and_names():
    names = units(2, 3)
    assert names == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2", "L0", "L1"]
    assert parse_unit("L1H2", 3) == (1, [2]) and parse_unit("L1", 3) == (1, [0, 1, 2])


def test_disable_cli_runs_and_resumes(tiny_bert, glue_dir, tmp_path, capsys):
    from patterncnn.cli import main

    _, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    out = tmp_path / "run"
    args = ["disable", "--model", str(folder), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "12",
            "--out", str(out), "--bootstrap", "200"]
    assert main(args) == 0
    res = json.loads((out / "disable.json").read_text())
    assert res["examples"] == 12 and res["metric"] == "accuracy" and len(res["heads"]) == 3
    assert len(res["heads"][0]) == 4 and len(res["layers"]) == 3
    rows = (out / "disable.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 * 4 + 3
    assert (out / "disable.png").stat().st_size > 1000 and not (out / ".work").exists()
    assert main(args) == 2  # a finished run is not overwritten silently
    assert "--overwrite" in capsys.readouterr().err
