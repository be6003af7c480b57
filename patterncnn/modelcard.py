"""The model card (``models/README.md``), filled from ``metrics.json`` into ``templates/model_card.md``.

Usage::

    text = model_card(json.load(open("models/metrics.json")))

The prose lives in the template; this module only turns numbers into table rows and phrases.
"""

from __future__ import annotations

import string
from importlib import resources

from .labels import LABELS


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
    from .validate import markdown_table

    c = m["calibration"]
    return {"temperature": f"{c['temperature']:.2f}", "nll_at_1": f"{c['nll_at_1']:.3f}", "nll": f"{c['nll']:.3f}",
            "uniform_rows": c["uniform_rows"], "row_encoders": ", ".join(f"`{k}` {v}" for k, v in c["encoders"].items()),
            "single_rows": sum(map(sum, c["confusion_single_segment"])),
            "pair_rows": sum(map(sum, c["confusion_two_segments"])),
            "confusion_single_rows": _matrix_rows(c["confusion_single_segment"]),
            "confusion_pair_rows": _matrix_rows(c["confusion_two_segments"]),
            "validation": markdown_table(m["validation"]) if m.get("validation") else NOT_VALIDATED}


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


def model_card(m: dict) -> str:
    """The model card as Markdown, from the metrics that ``patterncnn train`` writes."""
    cv, mc, data, tc = m["cv"], m["model_config"], m["data"], m["train_config"]
    fields = {
        "labels": ", ".join(f"`{x}`" for x in LABELS), "created_by": m["created_by"],
        "maps": data["maps"], "annotations": data["annotations"], "groups": data["groups"],
        "label_counts": ", ".join(f"{k} {v}" for k, v in data["labels"].items()), "uncertain": data["uncertain"],
        "data_hash": data["data_hash"][:16], "grid": mc["grid"], "representation": mc["representation"],
        "representation_note": "adaptive average pooling: mass-preserving, so one-token lines survive"
        if mc["representation"] == "area" else "bilinear interpolation",
        "channels": _channels(mc), "conv_layers": m["conv_layers"], "widths": list(mc["widths"]),
        "pool_after": [i + 1 for i in mc["pool_after"]], "dropout": mc["dropout"],
        "parameters": f"{m['parameters']:,}", **{k: tc[k] for k in (
            "lr", "weight_decay", "label_smoothing", "batch_size", "resample_p", "seed", "folds", "patience")},
        "resample_range": list(tc["resample_range"]), "gamma_range": list(tc["gamma_range"]),
        "final_fit_epochs": m["final_fit_epochs"], "macro_f1": _f(cv["macro_f1"]),
        "fold_mean": _f(cv["fold_macro_f1_mean"]), "fold_std": _f(cv["fold_macro_f1_std"]),
        "weighted_f1": _f(cv["weighted_f1"]), "accuracy": _f(cv["accuracy"]),
        "certain_f1": _f(cv["certain_only_macro_f1"]), "label_order": ", ".join(LABELS),
        "label_header": " | ".join(LABELS), "label_rule": " | ".join("---" for _ in LABELS),
        "verdict": "The CNN beats every baseline on macro-F1." if m["cnn_beats_best_baseline"] else
        f"**The CNN does not beat the best baseline ({m['best_baseline']}) on macro-F1.**",
        "parity": f"{m['onnx_parity_max_abs_diff']:.2e}", "block_count": data["labels"].get("block"),
        **_rows(m), **_calibration(m),
    }
    template = resources.files("patterncnn").joinpath("templates/model_card.md").read_text(encoding="utf-8")
    return string.Template(template).substitute(fields)
