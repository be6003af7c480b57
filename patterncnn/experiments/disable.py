"""Which heads can be turned off (paper Fig. 8 and 9): the dev metric with one head, then one layer, disabled.

Usage (what ``patterncnn disable`` runs)::

    result = run_disable("models-ft/minilm-rte", split, out="runs/disable-rte", progress=tqdm)
    result["heads"][4][2]   # {"metric": 0.58, "change": -0.011, "ci95": [-0.036, 0.014], "outside": False}
    result["layers"][4]     # the same for all heads of layer 4 at once

Disabling is the paper's (:mod:`patterncnn.encoders.uniform_heads`): the head attends with 1/L to each real token.
Each unit (a head, or a layer's heads together) is one evaluation of the split, replaying only the
layers from the unit's layer up (:mod:`patterncnn.experiments.layercache`); its predictions are saved as they
finish, so an interrupted run resumes. The change of the task's own metric against the undisabled
model gets a paired bootstrap 95% interval over examples (the same resamples for every unit), so a
0.3-point gain on 277 examples is not read as real: ``outside`` marks intervals that exclude 0.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.glue import GlueSplit, GlueTask
from ..encoders.uniform_heads import UniformHeads
from ..core.work import finish, prepare_out, provenance, public_fingerprint, run_parts, work_dir

log = logging.getLogger(__name__)

PRIMARY = {"accuracy": "accuracy", "f1": "f1", "mcc": "mcc", "corr": "pearson"}
RESULT = "disable.json"


def primary_metric(task: GlueTask) -> str:
    return PRIMARY[task.metric]


def resampled_metric(task: GlueTask, preds: np.ndarray, labels: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The task's primary metric on each bootstrap resample.

    Args:
        preds: (N,) class ids (or scores for STS-B); labels: (N,) gold; idx: (B, N) resample indices.

    Returns:
        (B,) metric values (F1 and MCC of the positive class 1, as GLUE scores them).
    """
    p, y = preds[idx], labels[idx]  # (B, N)
    if task.metric == "corr":
        pc, yc = p - p.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
        return (pc * yc).sum(1) / np.sqrt((pc**2).sum(1) * (yc**2).sum(1)).clip(min=1e-12)
    if task.metric == "accuracy":
        return (p == y).mean(1)
    tp = ((p == 1) & (y == 1)).sum(1).astype(float)
    fp = ((p == 1) & (y != 1)).sum(1).astype(float)
    fn = ((p != 1) & (y == 1)).sum(1).astype(float)
    if task.metric == "f1":
        return 2 * tp / np.clip(2 * tp + fp + fn, 1, None)
    tn = idx.shape[1] - tp - fp - fn
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1), 0.0)


def metric(task: GlueTask, preds: np.ndarray, labels: np.ndarray) -> float:
    return float(resampled_metric(task, preds, labels, np.arange(len(labels))[None])[0])


def change_interval(task: GlueTask, base: np.ndarray, off: np.ndarray, labels: np.ndarray,
                    idx: np.ndarray) -> tuple[float, float]:
    """Paired bootstrap 95% interval of metric(off) - metric(base) over the resamples ``idx`` (B, N)."""
    d = resampled_metric(task, off, labels, idx) - resampled_metric(task, base, labels, idx)
    lo, hi = np.percentile(d, [2.5, 97.5])
    return float(lo), float(hi)


def _predictions(task: GlueTask, logits) -> np.ndarray:
    x = logits.float().numpy()
    return x[:, 0] if task.is_regression else x.argmax(1)


def load_classifier(name: str, max_length: int = 128):
    """(encoder record, sequence classifier, tokenizer) of a fine-tuned model folder (``patterncnn finetune``)."""
    from transformers import AutoModelForSequenceClassification

    from ..encoders.load import EncoderError, load_encoder, resolve_model

    enc = load_encoder(name, max_length=max_length)  # validates, fingerprints, caps max_length
    archs = enc.model.config.architectures or []
    if not any(a.endswith("ForSequenceClassification") for a in archs):
        raise EncoderError(f"{name!r} has no task head (architectures {archs}); disable needs a fine-tuned model: "
                           f"run `patterncnn finetune --task T --out models-ft/NAME` and pass --model models-ft/NAME")
    clf = AutoModelForSequenceClassification.from_pretrained(resolve_model(name), attn_implementation="eager")
    clf.eval()
    return enc, clf, enc.tokenizer


def units(num_layers: int, num_heads: int, layers: bool = True) -> list[str]:
    """Unit names: ``L2H5`` (one head) for every head, then ``L2`` (all heads of layer 2)."""
    names = [f"L{l}H{h}" for l in range(num_layers) for h in range(num_heads)]
    return names + ([f"L{l}" for l in range(num_layers)] if layers else [])


def parse_unit(name: str, num_heads: int) -> tuple[int, list[int]]:
    layer, _, head = name[1:].partition("H")
    return int(layer), ([int(head)] if head else list(range(num_heads)))


def _summarize(task: GlueTask, parts: dict, base: np.ndarray, labels: np.ndarray, idx: np.ndarray,
               num_layers: int, num_heads: int) -> tuple[list, list]:
    base_metric = metric(task, base, labels)

    def cell(name):
        off = parts[name]["preds"]
        m = metric(task, off, labels)
        lo, hi = change_interval(task, base, off, labels, idx)
        return {"metric": round(m, 5), "change": round(m - base_metric, 5), "ci95": [round(lo, 5), round(hi, 5)],
                "outside": bool(lo > 0 or hi < 0), "changed_predictions": int((off != base).sum())}

    heads = [[cell(f"L{l}H{h}") for h in range(num_heads)] for l in range(num_layers)]
    layers = [cell(f"L{l}") for l in range(num_layers) if f"L{l}" in parts]
    return heads, layers


def run_disable(model: str, split: GlueSplit, out: str | Path, seed: int = 0, max_length: int = 128,
                batch_size: int = 32, boot: int = 1000, progress: Callable | None = None,
                overwrite: bool = False, layers: bool = True) -> dict:
    """Disable each head, then each layer, of a fine-tuned ``model``; score on ``split`` (resumable).

    Returns:
        The result written to ``out/disable.json`` (also ``disable.csv``, ``disable.png``).
    """
    from .layercache import CachedClassifier

    out = prepare_out(out, RESULT, overwrite)
    task = split.task
    enc, clf, tok = load_classifier(model, max_length)
    labels = np.array([ex.label for ex in split.examples], dtype=float if task.is_regression else int)
    params = {"task": task.name, "model": enc.fingerprint, "examples": [ex.index for ex in split.examples],
              "max_length": enc.max_length, "layers": layers}
    work = work_dir(out, task.name, params)
    t0 = time.time()
    runner = CachedClassifier(clf, tok, [ex.texts for ex in split.examples], enc.max_length, batch_size)
    base = _predictions(task, runner.baseline)
    t_base = time.time() - t0
    names = units(enc.num_layers, enc.num_heads, layers)
    bar = progress(total=len(names), desc=f"disable {task.name}", unit="unit") if progress else None

    def compute(name):
        layer, hs = parse_unit(name, enc.num_heads)
        with UniformHeads(clf, {layer: hs}) as off:
            return {"preds": _predictions(task, runner.run(layer, off))}

    t1 = time.time()
    parts = run_parts(work, names, compute, (lambda _: bar.update(1)) if bar else None)
    if bar:
        bar.close()
    idx = np.random.default_rng(seed).integers(0, len(labels), size=(boot, len(labels)))
    heads, layer_cells = _summarize(task, parts, base, labels, idx, enc.num_layers, enc.num_heads)
    base_lo, base_hi = np.percentile(resampled_metric(task, base, labels, idx), [2.5, 97.5])
    result = provenance(
        experiment="disable", model=public_fingerprint(enc.fingerprint), tag=enc.tag, task=task.name,
        split=split.split, examples=len(labels), of=split.total, seed=seed, max_length=enc.max_length,
        metric=primary_metric(task), bootstrap=boot, layers_count=enc.num_layers, heads_count=enc.num_heads,
        baseline={"metric": round(metric(task, base, labels), 5), "ci95": [round(base_lo, 5), round(base_hi, 5)]},
        heads=heads, layers=layer_cells, seconds={"baseline": round(t_base, 1), "units": round(time.time() - t1, 1)})
    write_outputs(out, result)
    finish(out)
    return result


def write_outputs(out: Path, result: dict) -> None:
    import csv
    import io

    from ..core.fileio import write_bytes, write_json, write_text
    from ..core.plots import disable_figure

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task", "unit", "layer", "head", "metric", "change", "ci95_low", "ci95_high", "outside",
                "changed_predictions", "baseline"])
    rows = [(l, h, c) for l, row in enumerate(result["heads"]) for h, c in enumerate(row)]
    rows += [(l, "all", c) for l, c in enumerate(result["layers"])]
    for l, h, c in rows:
        w.writerow([result["task"], f"L{l}H{h}" if h != "all" else f"L{l}", l, h, c["metric"], c["change"],
                    *c["ci95"], int(c["outside"]), c["changed_predictions"], result["baseline"]["metric"]])
    write_text(out / "disable.csv", buf.getvalue())
    write_bytes(out / "disable.png", disable_figure(result))
    write_json(out / RESULT, result)  # last: its presence marks a finished run
