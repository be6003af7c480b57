"""The model card (``models/README.md``), filled from ``metrics.json`` into ``templates/model_card.md``.

Usage::

    text = model_card(json.load(open("models/metrics.json")))

The prose lives in the template; this module only turns numbers into table rows and phrases.
"""

from __future__ import annotations

import string
from importlib import resources

import numpy as np

from ..classifier.model import MEMBER_SEED_STEP
from ..classifier.onnx import model_version
from ..core.labels import LABELS
from ..core.scores import spread
from .validate import markdown_table


def _f(x: float) -> str:
    """A score with three decimals, as every figure of the card is printed."""
    return f"{x:.3f}"


def _channels(mc: dict) -> str:
    parts = []
    if mc.get("mass_channel"):
        parts.append("one more channel holds log2 of each cell's mass relative to a uniform row (T·a, clipped to "
                     "[1/16, 64]), i.e. how concentrated the map is")
    parts.append("a channel marks the two segment squares (from the first `[SEP]`)" if mc["segment_channel"]
                 else "no segment channel")
    if mc.get("structure_channels"):
        parts.append("two more mark the diagonal band (|i−j| ≤ 1) and the `[CLS]`/`[SEP]` columns")
    return "; ".join(parts)


def _matrix_rows(matrix: list[list[int]]) -> str:
    """Table rows of a confusion matrix (rows: label, columns: prediction, LABELS order)."""
    return "\n".join(f"| **{LABELS[i]}** | " + " | ".join(str(c) for c in row) + " |" for i, row in enumerate(matrix))


NOT_VALIDATED = ("**Not validated.** The labelled set holds no maps drawn uniformly at random (map metadata "
                 "`\"sampling\": \"uniform\"`), so how far the census's shares are off is not measured, and the "
                 "census counts argmax labels (`count`) by default. Sample maps with `patterncnn sample --design "
                 "uniform`, label them, pull them into the labelled set and retrain: this section then holds the table.")


def _calibration(m: dict) -> dict[str, str]:
    """The fields of the calibration and validation sections."""

    c = m["calibration"]
    return {"temperature": f"{c['temperature']:.2f}", "nll_at_1": f"{c['nll_at_1']:.3f}", "nll": f"{c['nll']:.3f}",
            "uniform_rows": c["uniform_rows"], "row_encoders": ", ".join(f"`{k}` {v}" for k, v in c["encoders"].items()),
            "single_rows": sum(map(sum, c["confusion_single_segment"])),
            "pair_rows": sum(map(sum, c["confusion_two_segments"])),
            "confusion_single_rows": _matrix_rows(c["confusion_single_segment"]),
            "confusion_pair_rows": _matrix_rows(c["confusion_two_segments"]),
            "validation": markdown_table(m["validation"]) if m.get("validation") else NOT_VALIDATED}


def _score(s: dict | None) -> str:
    return "—" if s is None else f"{_f(s['macro_f1'])} / {_f(s['accuracy'])} ({s['maps']})"


def _per_encoder(e: dict) -> dict[str, str]:
    """Per encoder family: every method on all and on agreed maps, and a plain verdict per family."""
    rows, verdicts = [], []
    for fam, r in e["per_encoder"].items():
        for name, s in r["methods"].items():
            bold = "**" if name.startswith("CNN") else ""
            rows.append(f"| {fam} | {bold}{name}{bold} | {_score(s['all'])} | {_score(s['agreed'])} |")
        cnn, best = r["methods"]["CNN"]["all"]["macro_f1"], r["best_baseline"]
        verdicts.append(f"- **{fam}**: the CNN ({_f(cnn)}) " + (
            f"beats the best baseline ({best}, {_f(r['methods'][best]['all']['macro_f1'])})."
            if r["cnn_beats_best_baseline"] else
            f"**does not beat** the best baseline ({best}, {_f(r['methods'][best]['all']['macro_f1'])})."))
    v = e["votes"]
    note = (f"{v['maps_with_several_votes']} maps have votes from two or more annotators; on {v['agreed_maps']} "
            f"at least "
            f"two gave the same label (\"agreed\"). Annotators per map: "
            + ", ".join(f"{k}: {n}" for k, n in v["annotators_per_map"].items()) + ".")
    return {"per_encoder_rows": "\n".join(rows), "per_encoder_verdicts": "\n".join(verdicts), "votes_note": note}


def _yardstick(e: dict) -> str:
    """One blind annotator against the others, and every method on the same pairs (evaluate.annotator_yardstick)."""
    y = e.get("annotator_yardstick")
    if not y:
        return ("**Not measured**: " + ("no map has three or more annotators." if "annotator_yardstick" in e else
                                        "this classifier was trained before `patterncnn train` measured it."))
    rows = ["| encoder family | who | macro-F1 / accuracy (pairs) | per-class F1 (" + ", ".join(LABELS) + ") |",
            "| --- | --- | --- | --- |"]
    for fam, r in y.items():
        for name, s in [("one annotator", r["annotator"]), *r["methods"].items()]:
            bold = "**" if name in ("one annotator", "CNN") else ""
            f1 = " / ".join("—" if v is None else _f(v) for v in s["per_class_f1"].values())
            rows.append(f"| {fam} ({r['maps']} maps) | {bold}{name}{bold} | {_f(s['macro_f1'])} / {_f(s['agree'])} "
                        f"({s['pairs']}) | {f1} |")
    return "\n".join(rows)


def seed_runs(p: dict) -> list[dict]:
    """A leave-one-encoder-out pair's CNN fits; a metrics.json from before fits per seed were kept has one."""
    if "seeds" in p:
        return p["seeds"]
    cnn = p["methods"]["CNN"]
    return [{"seed": None, "best_epoch": p["best_epoch"], "all": cnn["all"], "agreed": cnn["agreed"]}]


def mean_sd(s: dict) -> str:
    """A :func:`patterncnn.core.scores.spread` as "mean ± sd", or "mean (one fit)" when there is nothing to spread."""
    return f"{_f(s['mean'])} ± {_f(s['sd'])}" if s["n"] > 1 else f"{_f(s['mean'])} (one fit)"


def _loeo(e: dict, members: int = 1) -> str:
    lo = e["leave_one_encoder_out"]
    if not lo["run"]:
        return f"**Not measured**: {lo['reason']}."
    first = seed_runs(lo["pairs"][0])[0]["seed"]
    which = "one fit" if first is None else f"seed {first}"
    lines = ["| train on | test on | CNN macro-F1, mean ± sd over seeds (min–max) | CNN accuracy, mean ± sd | "
             "four-class macro-F1 (no block maps), mean ± sd | census share error on its uniformly drawn maps, "
             "mean \\|error\\| per pattern (worst) | per seed: macro-F1 / accuracy |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in lo["pairs"]:
        runs = seed_runs(p)
        f1, acc = (spread([r["all"][k] for r in runs]) for k in ("macro_f1", "accuracy"))
        over = p.get("cnn_over_seeds", {})
        four = mean_sd(over["four_class_macro_f1"]) if "four_class_macro_f1" in over else "—"
        err = over.get("abs_share_error")
        shares = "—" if not err else (f"{100 * np.mean([e['mean'] for e in err.values()]):.1f} points "
                                      f"({max(err, key=lambda k: err[k]['mean'])} "
                                      f"{100 * max(e['mean'] for e in err.values()):.1f})")
        each = "; ".join(f"{'—' if r['seed'] is None else r['seed']}: {_f(r['all']['macro_f1'])} / "
                         f"{_f(r['all']['accuracy'])}" for r in runs)
        lines.append(f"| {p['train']} | {p['test']} | **{mean_sd(f1)}** ({_f(f1['min'])}–{_f(f1['max'])}, "
                     f"{f1['n']} seed{'s' if f1['n'] > 1 else ''}) | {mean_sd(acc)} | {four} | {shares} | {each} |")
    lines += ["", f"The CNN's fit ({which}) beside the feature baselines (fitted once: they use every training "
                  f"map, no early-stopping split):", "",
              "| train on | test on | method | macro-F1 / accuracy (maps), all | agreed | per-class F1 (all), "
              + ", ".join(LABELS) + " |", "| --- | --- | --- | --- | --- | --- |"]
    for p in lo["pairs"]:
        for name, s in p["methods"].items():
            name = f"{name} ({which})" if name == "CNN" else name
            f1 = " / ".join("—" if x is None else _f(x) for x in s["all"]["per_class_f1"].values())
            lines.append(f"| {p['train']} ({p['train_maps']} maps) | {p['test']} | {name} | {_score(s['all'])} | "
                         f"{_score(s['agreed'])} | {f1} |")
    dropped = ", ".join(f"{p['train']}→{p['test']}: {p['dropped_shared_examples']}" for p in lo["pairs"])
    epochs = ", ".join(f"{p['train']}→{p['test']}: " + ", ".join(str(r["best_epoch"]) for r in seed_runs(p))
                       for p in lo["pairs"])
    median = "an ensemble's: its members' median; " if members > 1 else ""
    skipped = [f"- train {s['train']} → test {s['test']}: {s['reason']}." for s in lo.get("skipped", [])]
    if skipped:  # decided before any fit (evaluate.loeo_plan): neither the CNN nor a baseline was fitted on them
        skipped = ["", "**Not measured** (directions whose training maps are too few or of one class; nothing was "
                       "fitted on them):", "", *skipped]
    return "\n".join(lines + ["", f"Training maps dropped because their input example is among the test maps: "
                                  f"{dropped}. Early-stopped epoch per seed ({median}cap {lo['pairs'][0]['max_epochs']}): "
                                  f"{epochs}.", *skipped])


def _soft(e: dict) -> str:
    s = e["soft_labels"]
    if not s["run"]:
        return f"**Not measured**: {s['reason']}."
    lines = ["| targets | macro-F1 / accuracy (maps), all | agreed | cross-entropy to the vote shares |",
             "| --- | --- | --- | --- |"]
    for name in ("hard", "soft"):
        r = s[name]
        lines.append(f"| {name} | {_score(r['all'])} | {_score(r['agreed'])} | "
                     f"{r['cross_entropy_to_vote_shares']:.3f} |")
    return "\n".join(lines)


def _defaults(v: dict | None) -> str:
    """The census's default estimator per validated encoder (or why there is none)."""
    if not v or not v.get("best_per_encoder"):
        return ("The census's default estimator is `count` (no validation), or the estimator that validated best "
                "over all encoders for a classifier validated before per-encoder defaults existed.")
    rows = ["| encoder | default estimator | calibrated on | mean \\|share error\\|, points | intervals hold the "
            "hand share | targets met |", "| --- | --- | --- | --- | --- | --- |"]
    rows += [f"| {enc} | **{d['estimator']}** | {d['scope'] or '—'} | {100 * d['mean_abs_error']:.1f} | "
             f"{100 * d['coverage']:.0f} % | {'yes' if d['meets_targets'] else '**no**'} |"
             for enc, d in v["best_per_encoder"].items()]
    return "\n".join(rows)


def _limits(m: dict) -> str:
    """The card's first limits: which encoder families trained it, and who labelled its maps."""
    e = m.get("evaluation") or {}
    families, votes = e.get("families") or {}, e.get("votes") or {}
    fams = ", ".join(f"{f} ({n} maps)" for f, n in families.items()) or "the encoders of the labelled set"
    lines = [f"- Trained on maps of these encoder families only: {fams}. Maps of other encoders may look different "
             "(the paper's were BERT-base fine-tuned on GLUE); the leave-one-encoder-out scores above say how far "
             "the classifier carries to an encoder it did not see."]
    per_map = votes.get("annotators_per_map") or {}
    if per_map and max(int(k) for k in per_map) >= 2:
        lines.append("- Labels resolve several annotators per map (" + ", ".join(f"{k}: {n} maps" for k, n in
                     per_map.items()) + "); see the datasheet for who they are, their agreement and the ambiguities "
                     "of the guide they disagreed on.")
    else:
        lines.append("- Labels come from one annotator per map; see the datasheet for its self-agreement and the "
                     "guide's known ambiguities.")
    return "\n".join(lines)


def _evaluation(m: dict) -> dict[str, str]:
    e = m.get("evaluation")
    if e is None:  # metrics of a classifier trained before these reports existed
        missing = "**Not measured** (this classifier was trained before `patterncnn train` measured it)."
        return {"per_encoder_rows": "| — | — | — | — |", "per_encoder_verdicts": missing, "votes_note": missing,
                "yardstick": missing, "loeo": missing, "soft": missing,
                "estimator_defaults": _defaults(m.get("validation"))}
    return {**_per_encoder(e), "yardstick": _yardstick(e), "loeo": _loeo(e, m["model_config"].get("members", 1)),
            "soft": _soft(e), "estimator_defaults": _defaults(m.get("validation"))}


def _rows(m: dict) -> dict[str, str]:
    cv = m["cv"]
    comp = m["representation_comparison"]
    return {
        "per_class_rows": "\n".join(
            f"| `{name}` | {_f(v['precision'])} | {_f(v['recall'])} | {_f(v['f1'])} | {v['support']} |"
            for name, v in cv["per_class"].items()),
        "confusion_rows": _matrix_rows(cv["confusion_matrix"]),
        "baseline_rows": "\n".join(f"| {k} | {_f(v['macro_f1'])} | {_f(v['weighted_f1'])} | {_f(v['accuracy'])} |"
                                   for k, v in m["baselines"].items()),
        "comparison_rows": "\n".join(
            f"| {k} | {_f(v['macro_f1'])} | {_f(v['fold_macro_f1_mean'])} ± {_f(v['fold_macro_f1_std'])} | "
            f"{v['torch_maps_per_s_T64_b512']} |" for k, v in comp.items())
        or "| (not run: `patterncnn train --compare`) | | | |",
    }


def _members_note(m: dict) -> str:
    """One CNN, or the ensemble of several (how each is trained, and how they are combined)."""
    k = m["model_config"].get("members", 1)
    if k == 1:
        return f"One such CNN: {m['parameters']:,} parameters."
    return (f"The classifier is **the mean of {k} such CNNs' probabilities** ({m['parameters']:,} parameters in "
            f"all). Each member is trained alone on the same maps; member s uses the single CNN's seed + "
            f"{MEMBER_SEED_STEP}·s, in "
            f"cross-validation as in the final fit. Every figure below is the ensemble's. One ONNX graph holds them "
            f"all.")


def _init_note(m: dict) -> str:
    """Where every fit (folds, leave one encoder out, the final fit) started: random, or pretrained weights."""
    init = m.get("init")
    if not init:
        return "Every fit starts from a random initialisation."
    on = init.get("pretrained_on", {})
    return (f"Every fit (each fold, each leave-one-encoder-out seed, the final fit) starts from the weights of "
            f"`{init['path']}` (sha256 `{init['sha256'][:16]}…`): the same CNN pretrained by `patterncnn pretrain` "
            f"on {on.get('synthetic_maps', '?'):,} synthetic maps labelled by construction (seed {on.get('seed', '?')}; "
            f"{on.get('held_out_accuracy', '?')} accuracy on {on.get('held_out', '?')} held-out synthetic maps), "
            f"never on a real map."
            + (" Its BatchNorm running statistics, learnt on those synthetic maps, are kept through the fine-tuning "
               "(`--freeze-bn`); the BatchNorm scales and shifts still learn." if m["train_config"].get("freeze_bn")
               else ""))


def _bias_note(m: dict) -> str:
    """The bias correction (`--bias-correction`): the logit shift the shipped CNN carries, and where it was fitted."""
    b = m.get("bias_correction")
    if not b:
        return ""
    shift = ", ".join(f"{name} {v:+.2f}" for name, v in b["logit_shift"].items())
    return (f" **Bias correction** (`--bias-correction`): the class weights tilt the CNN toward the rare classes; its "
            f"logits are shifted back per class ({shift}), the shift of bias-corrected temperature scaling fitted on "
            f"{b['fitted_on']}. Every out-of-fold figure below scores posteriors corrected by shifts fitted on the "
            f"other folds; each leave-one-encoder-out fit is corrected on its own early-stopping maps.")


def model_card(m: dict) -> str:
    """The model card as Markdown, from the metrics that ``patterncnn train`` writes."""
    cv, mc, data, tc = m["cv"], m["model_config"], m["data"], m["train_config"]
    version = (model_version(m["created_by"].split()[-1], data["data_hash"], m["recipe"], mc.get("members", 1))
               if m.get("recipe") else None)
    fields = {
        "labels": ", ".join(f"`{x}`" for x in LABELS), "created_by": m["created_by"],
        "maps": data["maps"], "annotations": data["annotations"], "groups": data["groups"],
        "label_counts": ", ".join(f"{k} {v}" for k, v in data["labels"].items()), "uncertain": data["uncertain"],
        "guides": ("; annotation guide " + ", ".join(f"{v} for {n}" for v, n in data["guides"].items())
                   if data.get("guides") else ""),  # not recorded before 2026-11-29
        "data_hash": data["data_hash"][:16],
        "version": f" Version `{version}` (data, then recipe: `{m['recipe']}`)." if version else "",
        "grid": mc["grid"], "representation": mc["representation"],
        "representation_note": "adaptive average pooling: mass-preserving, so one-token lines survive"
        if mc["representation"] == "area" else "bilinear interpolation",
        "channels": _channels(mc), "conv_layers": m["conv_layers"], "widths": list(mc["widths"]),
        "pool_after": [i + 1 for i in mc["pool_after"]], "dropout": mc["dropout"],
        "members_note": _members_note(m), **{k: tc[k] for k in (
            "lr", "weight_decay", "label_smoothing", "batch_size", "resample_p", "seed", "folds", "patience")},
        "class_weight_power": tc.get("class_weight_power", 1.0),
        "resample_range": list(tc["resample_range"]), "gamma_range": list(tc["gamma_range"]),
        "final_fit_epochs": m["final_fit_epochs"], "macro_f1": _f(cv["macro_f1"]),
        "fold_mean": _f(cv["fold_macro_f1_mean"]), "fold_std": _f(cv["fold_macro_f1_std"]),
        "weighted_f1": _f(cv["weighted_f1"]), "accuracy": _f(cv["accuracy"]),
        "certain_f1": _f(cv["certain_only_macro_f1"]), "label_order": ", ".join(LABELS),
        "label_header": " | ".join(LABELS), "label_rule": " | ".join("---" for _ in LABELS),
        "verdict": "The CNN beats every baseline on macro-F1." if m["cnn_beats_best_baseline"] else
        f"**The CNN does not beat the best baseline ({m['best_baseline']}) on macro-F1.**",
        "parity": f"{m['onnx_parity_max_abs_diff']:.2e}", "block_count": data["labels"].get("block"),
        "limits_data": _limits(m), "init_note": _init_note(m), "bias_note": _bias_note(m), **_rows(m),
        **_calibration(m), **_evaluation(m),
    }
    template = resources.files(__package__).joinpath("templates/model_card.md").read_text(encoding="utf-8")
    return string.Template(template).substitute(fields)
