"""Uniform-attention disabling on tiny sequence classifiers of five families (BERT, RoBERTa and DistilBERT through
transformers' attention interface; MPNet and DeBERTa-v2 by a hook): exactly the chosen head changes, its rows are 1/L
over the real tokens, the other heads are bit-identical; the layer cache replays the full pass, and a model it cannot
replay is refused; the bootstrap metrics match sklearn; `patterncnn disable` runs end to end (and resumes) on BERT,
RoBERTa, DistilBERT and DeBERTa-v2. The attention function itself against an independent reference: tests/encoders/test_uniform_heads.py."""

import json
import logging

import numpy as np
import pytest
import torch
from synthetic import sequence_classifier

from patterncnn.core.glue import get_task, load_split
from patterncnn.encoders.uniform_heads import DisableError, UniformHeads
from patterncnn.experiments.disable import (
    CachedClassifier,
    _predictions,
    chance_level,
    change_interval,
    label_order,
    metric,
    paired_test,
    parse_unit,
    resampled_metric,
    told_from_noise,
    units,
)

PAIRS = [("a man is playing a guitar.", "someone plays music!"), ("short", "pair of texts, longer than that"),
         ("one", "two")]


def _classifier(folder, tmp_path, name, num_labels=2):
    return sequence_classifier(folder, tmp_path / name, num_labels)


FAMILIES = ["bert", "mpnet", "roberta", "distilbert", "deberta"]


@pytest.fixture(params=FAMILIES)
def clf(request, tmp_path):
    return _classifier(request.getfixturevalue(f"tiny_{request.param}"), tmp_path, request.param)


def _attentions(model, tok, heads=None):
    """(attentions (B, L, H, T, T), attention mask (B, T), the last layer's output (B, T, D)) of PAIRS."""
    batch = tok([a for a, _ in PAIRS], [b for _, b in PAIRS], padding=True, return_tensors="pt")
    with torch.inference_mode():
        if heads is None:
            out = model(**batch, output_attentions=True, output_hidden_states=True)
        else:
            with UniformHeads(model, heads):
                out = model(**batch, output_attentions=True, output_hidden_states=True)
    return torch.stack(out.attentions, 1), batch["attention_mask"], out.hidden_states[-1]


def test_only_the_chosen_head_changes_and_it_is_uniform_over_real_tokens(clf):
    model, tok, _ = clf
    base, mask, last = _attentions(model, tok)
    layer, head = 1, 2
    off, _, last_off = _attentions(model, tok, {layer: [head]})
    # Layers below and the other heads of the same layer: bit-identical.
    assert torch.equal(off[:, :layer], base[:, :layer])
    others = [h for h in range(base.shape[2]) if h != head]
    assert torch.equal(off[:, layer, others], base[:, layer, others])
    assert not torch.equal(off[:, layer, head], base[:, layer, head])
    for b in range(len(PAIRS)):
        n = int(mask[b].sum())
        rows = off[b, layer, head]  # (T, T)
        assert torch.allclose(rows.sum(-1), torch.ones(rows.shape[0]))
        # each real token's query (a padding query sees every key in DeBERTa, whose mask hides them all from it)
        assert torch.allclose(rows[:n, :n], torch.full((n, n), 1.0 / n))
        assert torch.all(rows[:n, n:] == 0)  # padding gets nothing
    assert (last_off - last).abs().max() > 1e-6  # the change reaches the output (random weights: ~1e-4)
    # The model is back to what it was after the block.
    again, _, _ = _attentions(model, tok)
    assert torch.equal(again, base) and model.config._attn_implementation == "eager"


def test_layer_cache_replays_the_full_pass(clf):
    model, tok, _ = clf
    runner = CachedClassifier(model, tok, PAIRS, max_length=32, batch_size=2)
    for layer in range(model.config.num_hidden_layers):
        with UniformHeads(model, {layer: [1, 3]}):
            cached = runner.run(layer)
            full = runner.full()
        assert torch.allclose(cached, full, atol=1e-5)
        assert not torch.allclose(cached, runner.baseline)


def test_a_cache_recorded_with_sdpa_replays_with_heads_disabled(tiny_bert, tmp_path):
    # sdpa hands the layers boolean masks (or none): the attention function reads the real tokens from those too.
    from transformers import AutoModelForSequenceClassification

    _, tok, folder = _classifier(tiny_bert, tmp_path, "bert")
    model = AutoModelForSequenceClassification.from_pretrained(str(folder), attn_implementation="sdpa").eval()
    runner = CachedClassifier(model, tok, PAIRS, max_length=32, batch_size=2)
    with UniformHeads(model, {1: [0, 2]}):
        cached = runner.run(1)
        full = runner.full()
    assert torch.allclose(cached, full, atol=1e-5) and model.config._attn_implementation == "sdpa"


def test_a_classifier_the_replay_cannot_reproduce_is_refused(tiny_bert):
    # ModernBERT goes through the attention interface, but normalises the last layer's output and pools it by the mask
    # before its head: replaying the layers and a standard head gives other logits, so it is refused, not mis-scored.
    import transformers
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_bert))
    cfg = transformers.ModernBertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=37, max_position_embeddings=64, pad_token_id=0,
                                        bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3, num_labels=2)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.ModernBertForSequenceClassification(cfg).eval()
    with pytest.raises(DisableError, match="does not reproduce the model's own logits"):
        CachedClassifier(model, tok, PAIRS, max_length=32, batch_size=2)


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


def test_a_head_that_changed_a_few_predictions_one_way_is_not_told_from_noise():
    # From helper 91's review: with 4 of 200 predictions changed, all gains, the bootstrap interval excludes 0 (the
    # resamples missing all four are 1.8%) while McNemar's exact test gives p = 0.125; 14 MPNet heads were flagged so.
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 200)
    base = np.where(rng.random(200) < 0.8, y, 1 - y)
    idx = rng.integers(0, 200, (1000, 200))
    task = get_task("sst2")
    for k, p, told in ((4, 0.125, False), (5, 0.0625, False), (6, 0.03125, True)):
        off = base.copy()
        wrong = np.flatnonzero(base != y)[:k]
        off[wrong] = y[wrong]  # k gains, no loss
        ci = change_interval(task, base, off, y, idx)
        test = paired_test(task, base, off, y)
        assert ci[0] > 0, k  # the bootstrap alone would flag each
        assert test == {"gains": k, "losses": 0, "paired_p": p}
        assert told_from_noise(ci, test) is told
    off = base.copy()
    right, wrong = np.flatnonzero(base == y)[:3], np.flatnonzero(base != y)[:5]
    off[right], off[wrong] = 1 - off[right], y[wrong]  # 5 gains, 3 losses: p = 2 * P(X <= 3 | 8, 1/2)
    assert paired_test(task, base, off, y) == {"gains": 5, "losses": 3, "paired_p": 0.7266}  # 2 * 93 / 256
    assert paired_test(get_task("stsb"), base * 1.0, off * 1.0, y * 1.0) == {}  # regression: the interval alone
    assert told_from_noise((0.01, 0.02), {}) and not told_from_noise((-0.01, 0.02), {})
    # F1 can fall while correct predictions rise (helper 93's review): the test and the interval must agree in side
    assert not told_from_noise((-0.25, -0.15), {"gains": 100, "losses": 40, "paired_p": 1e-7})
    assert told_from_noise((-0.25, -0.15), {"gains": 40, "losses": 100, "paired_p": 1e-7})


def test_a_run_flags_its_units_by_the_interval_and_the_exact_test(monkeypatch):
    # The wiring (helper 93's review): _summarize, which run_disable calls, flags by told_from_noise, not the interval
    from patterncnn.experiments.disable import _summarize

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, 200)
    base = np.where(rng.random(200) < 0.8, y, 1 - y)
    wrong = np.flatnonzero(base != y)
    four, twelve = base.copy(), base.copy()
    four[wrong[:4]] = y[wrong[:4]]
    twelve[wrong[:12]] = y[wrong[:12]]
    parts = {"L0H0": {"preds": four}, "L0H1": {"preds": twelve}, "L0": {"preds": twelve}}
    idx = rng.integers(0, 200, (1000, 200))
    heads, layers = _summarize(get_task("sst2"), parts, base, y, idx, 1, 2)
    assert heads[0][0]["ci95"][0] > 0 and not heads[0][0]["outside"] and heads[0][0]["paired_p"] == 0.125
    assert heads[0][1]["outside"] and layers[0]["outside"] and heads[0][1]["gains"] == 12


def test_a_head_whose_label_names_are_in_another_order_is_read_in_the_tasks():
    # From helper 91's review: disable read a head's outputs by position, so a hub NLI classifier that puts
    # contradiction first (roberta-large-mnli) was scored with entailment and contradiction swapped.
    from types import SimpleNamespace

    from patterncnn.encoders.load import EncoderError

    mnli = get_task("mnli")
    hub = SimpleNamespace(id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"})
    order, note = label_order(mnli, hub, "hub-model")
    assert order == [2, 1, 0] and note.startswith("by name")
    logits = torch.tensor([[5.0, 0.0, 1.0], [0.0, 1.0, 5.0]])  # the hub head says contradiction, then entailment
    assert _predictions(mnli, logits, order).tolist() == [2, 0]  # the task's indices: contradiction 2, entailment 0
    assert _predictions(mnli, logits).tolist() == [0, 2]  # by position: swapped
    assert label_order(mnli, SimpleNamespace(id2label={0: "entailment", 1: "neutral", 2: "contradiction"}), "m")[0] \
        is None
    generic = label_order(get_task("rte"), SimpleNamespace(id2label={0: "LABEL_0", 1: "LABEL_1"}), "m")
    assert generic[0] is None and generic[1].startswith("by position: the head's names (label_0, label_1)")
    with pytest.raises(EncoderError, match="which are not rte's labels entailment, not_entailment"):
        label_order(get_task("rte"), SimpleNamespace(id2label={0: "entailment", 1: "neutral"}), "m")
    assert label_order(get_task("stsb"), SimpleNamespace(id2label={0: "LABEL_0"}), "m") == (None, "regression")


def test_a_run_reads_a_heads_outputs_by_their_names(tiny_bert, glue_dir, tmp_path):
    # The wiring (helper 93's review): run_disable puts a head's outputs in the task's order by their names
    from patterncnn.cli import main

    _, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    config = json.loads((folder / "config.json").read_text())
    res = {}
    for name, names in (("same", ["entailment", "not_entailment"]), ("swapped", ["not_entailment", "entailment"])):
        config["id2label"], config["label2id"] = dict(enumerate(names)), {n: i for i, n in enumerate(names)}
        (folder / "config.json").write_text(json.dumps(config))
        assert main(["disable", "--model", str(folder), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "12",
                     "--bootstrap", "50", "--no-layers", "--out", str(tmp_path / name)]) == 0
        res[name] = json.loads((tmp_path / name / "disable.json").read_text())
    assert res["same"]["label_order"] == "by name, the task's order"
    assert res["swapped"]["label_order"].startswith("by name: the head's outputs not_entailment, entailment")
    # the same weights: each prediction read the other way round, so on two classes every right answer turns wrong
    assert res["swapped"]["baseline"]["metric"] == pytest.approx(1 - res["same"]["baseline"]["metric"], abs=1e-4)


def test_chance_is_the_best_constant_prediction():
    y = np.array([0] * 30 + [1] * 70)
    assert chance_level(get_task("rte"), y) == pytest.approx(0.7)  # always the commonest class
    assert chance_level(get_task("mrpc"), y) == pytest.approx(2 * 0.7 / 1.7)  # always positive: F1 = 2p / (1 + p)
    assert chance_level(get_task("cola"), y) == 0.0 and chance_level(get_task("stsb"), y.astype(float)) == 0.0


def test_units_and_names():
    names = units(2, 3)
    assert names == ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2", "L0", "L1"]
    assert parse_unit("L1H2", 3) == (1, [2]) and parse_unit("L1", 3) == (1, [0, 1, 2])


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "deberta"])
def test_disable_cli_runs_and_resumes(family, request, glue_dir, tmp_path, capsys, caplog):
    from patterncnn.cli import main

    model, tok, folder = _classifier(request.getfixturevalue(f"tiny_{family}"), tmp_path, "ft")
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    out = tmp_path / "run"
    args = ["disable", "--model", str(folder), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "12",
            "--out", str(out), "--bootstrap", "200"]
    assert main(args) == 0
    res = json.loads((out / "disable.json").read_text())
    assert res["examples"] == 12 and res["metric"] == "accuracy" and len(res["heads"]) == layers
    assert res["label_order"].startswith("by ")
    b = res["baseline"]  # a tiny random classifier has learned nothing: its baseline is at chance, and it is said
    assert b["at_chance"] is (b["ci95"][0] <= b["chance"]) and b["at_chance"]
    # said by the library (patterncnn.disable, which the command runs) in its log, so every caller sees it
    assert "within its 95% interval of chance" in caplog.text and "or score more examples (--limit N)" in caplog.text
    assert len(res["heads"][0]) == heads and len(res["layers"]) == layers
    # The cached replay's scores are a full pass's: re-score a head of the last layer and a whole layer without cache.
    split = load_split(get_task("rte"), "dev", glue_dir, limit=12, seed=0)
    labels = np.array([ex.label for ex in split.examples])
    runner = CachedClassifier(model, tok, [ex.texts for ex in split.examples], max_length=res["max_length"])
    for unit, cell in [(f"L{layers - 1}H1", res["heads"][layers - 1][1]), ("L0", res["layers"][0])]:
        with UniformHeads(model, dict([parse_unit(unit, heads)])):
            preds = runner.full().argmax(1).numpy()
        assert cell["metric"] == pytest.approx(metric(get_task("rte"), preds, labels), abs=1e-5)
        assert cell["changed_predictions"] == int((preds != runner.baseline.argmax(1).numpy()).sum())
        assert cell["gains"] - cell["losses"] == int((preds == labels).sum() - (runner.baseline.argmax(1).numpy()
                                                                                  == labels).sum())
        assert 0 < cell["paired_p"] <= 1
    rows = (out / "disable.csv").read_text().splitlines()
    assert len(rows) == 1 + layers * heads + layers
    assert (out / "disable.png").stat().st_size > 1000 and not (out / ".work").exists()
    assert main(args) == 2  # a finished run is not overwritten silently
    assert "--overwrite" in capsys.readouterr().err


def test_a_python_call_at_chance_warns_naming_its_keyword_not_the_flag(tiny_bert, glue_dir, tmp_path, caplog):
    """patterncnn.disable(...) on a model at chance warned "or score more examples (--limit)", the command's flag."""
    import patterncnn

    _, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    res = patterncnn.disable(str(folder), "rte", limit=12, glue_dir=glue_dir, out=tmp_path / "run", bootstrap=50)
    assert res.data["baseline"]["at_chance"]  # a tiny random task head has learned nothing
    assert "or score more examples (limit=N)" in caplog.text and "--limit" not in caplog.text, caplog.text


def test_disable_refuses_a_task_the_model_was_not_fine_tuned_on(tiny_bert, glue_dir, tmp_path, capsys):
    from patterncnn.cli import main
    from patterncnn.encoders.finetune import MANIFEST

    model, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    assert model.config.num_labels == 2
    args = ["disable", "--model", str(folder), "--glue-dir", str(glue_dir), "--limit", "12", "--bootstrap", "50"]
    # a head of two outputs cannot be scored on STS-B, a regression task
    assert main([*args, "--task", "stsb", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "head of 2 output(s)" in err and "stsb needs 1" in err and not (tmp_path / "a" / "disable.json").exists()
    # the task its patterncnn_finetune.json names decides, also between tasks of two classes
    (folder / MANIFEST).write_text(json.dumps({"task": "sst2"}))
    assert main([*args, "--task", "rte", "--out", str(tmp_path / "b")]) == 2
    assert "fine-tuned on sst2" in (err := capsys.readouterr().err) and "--task sst2" in err
    for broken in ("{not json", json.dumps({"task": 5}), json.dumps({"task": "foo"}), "[]"):
        (folder / MANIFEST).write_text(broken)
        assert main([*args, "--task", "rte", "--out", str(tmp_path / "c")]) == 2
        assert "is not the record `patterncnn finetune` writes" in capsys.readouterr().err


def test_disable_warns_when_it_cuts_inputs_at_another_length_than_the_fine_tune(tiny_bert, glue_dir, tmp_path,
                                                                               caplog):
    # From helper 91's review (NIT 13): a model fine-tuned with --max-length 256 was scored at 128, silently.
    from patterncnn.cli import main
    from patterncnn.encoders.finetune import MANIFEST

    _, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    (folder / MANIFEST).write_text(json.dumps({"task": "rte", "settings": {"max_length": 24}}))
    args = ["disable", "--model", str(folder), "--task", "rte", "--glue-dir", str(glue_dir), "--limit", "12",
            "--bootstrap", "50", "--no-layers"]
    with caplog.at_level(logging.WARNING, logger="patterncnn"):
        assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "was fine-tuned on inputs cut at 24 tokens" in caplog.text and "pass --max-length 24" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="patterncnn"):
        assert main([*args, "--max-length", "24", "--out", str(tmp_path / "b")]) == 0
    assert "fine-tuned on inputs cut" not in caplog.text
    # a fine-tune recorded above the model's own limit was cut to it too: scoring at that limit is the same cut
    limit = json.loads((folder / "config.json").read_text())["max_position_embeddings"]
    (folder / MANIFEST).write_text(json.dumps({"task": "rte", "settings": {"max_length": limit + 100}}))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="patterncnn"):
        assert main([*args, "--max-length", str(limit), "--out", str(tmp_path / "c")]) == 0
    assert "fine-tuned on inputs cut" not in caplog.text


def test_a_model_fine_tuned_on_mnli_is_scored_on_mnli_mismatched_too(tiny_bert, tmp_path):
    from patterncnn.core.glue import get_task
    from patterncnn.encoders.finetune import MANIFEST
    from patterncnn.experiments.disable import load_task_model

    _, _, folder = _classifier(tiny_bert, tmp_path, "mnli", num_labels=3)
    (folder / MANIFEST).write_text(json.dumps({"task": "mnli"}))
    for task in ("mnli", "mnli-mm"):
        assert load_task_model(str(folder), task=get_task(task))[1].config.num_labels == 3


def test_a_deberta_v2_with_a_convolution_after_its_first_layer_replays_the_full_pass(tiny_deberta):
    # DeBERTa-v2 xlarge and xxlarge run a convolution after layer 0, outside the layers: the replay from layer 0
    # applies it as the encoder does (without it, the start-up check finds other logits and refuses the model).
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(tiny_deberta))
    cfg = transformers.AutoConfig.from_pretrained(str(tiny_deberta), num_labels=2)
    cfg.conv_kernel_size = 3
    torch.manual_seed(0)
    model = transformers.DebertaV2ForSequenceClassification(cfg).eval()  # as deberta-v2-xlarge is laid out
    assert model.deberta.encoder.conv is not None
    runner = CachedClassifier(model, tok, PAIRS, max_length=32, batch_size=2)
    for layer in range(cfg.num_hidden_layers):
        with UniformHeads(model, {layer: [0, 2]}):
            cached = runner.run(layer)
            full = runner.full()
        # the tiny model's logits are ~1e-3: tight enough that a wrong residual into the convolution (1.5e-5) fails
        assert torch.allclose(cached, full, rtol=1e-5, atol=1e-8)
        assert not torch.allclose(cached, runner.baseline)


def test_a_regression_task_counts_no_changed_predictions_and_its_chance_is_no_correlation(tiny_bert, glue_dir, tmp_path,
                                                                                          capsys):
    # From helper 91's review (NIT 4): on STS-B every disabled head moves every score a little, so changed_predictions
    # was the number of examples for every unit; and the at-chance warning spoke of "always predicting one label".
    from patterncnn.cli import main
    from patterncnn.experiments.disable import chance_warning, rows

    _, _, folder = _classifier(tiny_bert, tmp_path, "ft", num_labels=1)
    out = tmp_path / "run"
    assert main(["disable", "--model", str(folder), "--task", "stsb", "--glue-dir", str(glue_dir), "--limit", "12",
                 "--bootstrap", "50", "--out", str(out)]) == 0
    res = json.loads((out / "disable.json").read_text())
    cells = [c for row in res["heads"] for c in row] + res["layers"]
    assert res["metric"] == "pearson" and not any({"changed_predictions", "gains", "losses", "paired_p"} & set(c)
                                                   for c in cells)
    header, table = rows(res)
    assert all(r[header.index("changed_predictions")] == "" and r[header.index("paired_p")] == "" for r in table)
    warning = chance_warning({"task": "stsb", "metric": "pearson", "baseline": {"at_chance": True, "chance": 0.0}})
    assert "(0.0000, no correlation with the gold scores)" in warning and "one label" not in warning
    warning = chance_warning({"task": "rte", "metric": "accuracy", "baseline": {"at_chance": True, "chance": 0.5}})
    assert "(0.5000, always predicting one label)" in warning


def test_glues_second_metric_is_recorded_beside_the_primary_one(tiny_bert, glue_dir, tmp_path, capsys):
    # From helper 91's review (NIT 5): MRPC/QQP were scored by F1 only and STS-B by Pearson only, while GLUE reports
    # F1 and accuracy, Pearson and Spearman. The primary metric still decides everything else.
    from scipy.stats import spearmanr

    from patterncnn.cli import main
    from patterncnn.core.plots import disable_plot
    from patterncnn.experiments.disable import rows, second_metric, second_value

    rng = np.random.default_rng(3)
    s, t = rng.normal(size=40), rng.normal(size=40)
    s[:5] = s[0]  # ties
    assert second_value(get_task("stsb"), s, t) == pytest.approx(spearmanr(s, t)[0])
    y, p = rng.integers(0, 2, 40), rng.integers(0, 2, 40)
    assert second_value(get_task("mrpc"), p, y) == pytest.approx((p == y).mean())
    assert [second_metric(get_task(k)) for k in ("mrpc", "qqp", "stsb", "rte", "cola", "sst2")] == \
        ["accuracy", "accuracy", "spearman", None, None, None]
    _, _, folder = _classifier(tiny_bert, tmp_path, "ft")
    out = tmp_path / "run"
    assert main(["disable", "--model", str(folder), "--task", "mrpc", "--glue-dir", str(glue_dir), "--limit", "12",
                 "--bootstrap", "50", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    res = json.loads((out / "disable.json").read_text())
    assert res["metric"] == "f1" and res["second_metric"] == "accuracy" and 0 <= res["baseline"]["second"] <= 1
    for c in [c for row in res["heads"] for c in row] + res["layers"]:
        assert c["second_change"] == pytest.approx(c["second"] - res["baseline"]["second"], abs=2e-5)
        # accuracy moves by the paired test's gains less its losses, over the examples
        assert c["second_change"] == pytest.approx((c["gains"] - c["losses"]) / 12, abs=2e-5)
    assert f"; accuracy {res['baseline']['second']:.4f}" in printed and "layer 0 off: f1 " in printed
    header, table = rows(res)
    assert table[0][header.index("second_metric")] == "accuracy" and table[0][header.index("second")] != ""
    # a result written before the second metric (or of a task with one) still reads: those columns are empty
    old = json.loads((out / "disable.json").read_text())
    for c in [c for row in old["heads"] for c in row] + old["layers"]:
        del c["second"], c["second_change"]
    del old["second_metric"], old["baseline"]["second"]
    header, table = rows(old)
    assert table[0][header.index("second")] == "" and table[0][header.index("second_metric")] == ""
    disable_plot(old)


def test_another_task_into_an_unfinished_disable_run_names_what_can_be_done(tmp_path):
    # The refusal asked for both tasks (--task: rte, sst2), which disable cannot take: giving both kept the last
    # and dropped the unfinished run without a word (helper 97's walk of the docs).
    from patterncnn.core.work import WORK, RunError, refuse_left_out

    work = tmp_path / WORK / "rte"
    work.mkdir(parents=True)
    (work / "run.json").write_text(json.dumps({"key": "k", "params": {}, "command": "disable", "kept": []}))
    (work / "L0H0.npz").write_bytes(b"a finished unit")
    with pytest.raises(RunError) as e:
        refuse_left_out(tmp_path, "disable", ["sst2"])
    assert "unfinished disable run of rte; finish it first (the same command with --task rte)" in str(e.value)
    assert "--task: " not in str(e.value)
