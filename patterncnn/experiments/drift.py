"""What fine-tuning changed (paper Fig. 5): per layer x head, the cosine similarity of two encoders' maps.

Usage (what ``patterncnn drift A B`` runs)::

    res = drift("minilm", "models-ft/minilm-rte", tasks=["rte"], glue_dir="glue_data")   # the Python API
    result = run_drift(enc_a, enc_b, [split], out="runs/drift", progress=tqdm)             # its steps
    result["tasks"]["rte"]["cosine"]     # (L, H) nested lists: mean over examples of cos(flat map A, flat map B)
    result["tasks"]["rte"]["layer_mean"] # (L,) and whether the two lowest are the last two layers

Both encoders see the same inputs, so they must share a tokenizer (a model and its fine-tune do):
every example's tokens, and every input the two models are fed for it (token ids, attention mask, token types), are
compared and a mismatch is an error. Examples stream through both
encoders a window at a time; each finished window's sums are saved, so a run resumes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ..core import args
from ..core.errors import warn_truncated
from ..core.fileio import public_fingerprint, public_source, weights_id
from ..core.glue import GlueSplit, dev_splits
from ..core.plots import grid_plot, png
from ..core.work import (
    finish,
    output_dir,
    prepare_out,
    progress_bars,
    provenance,
    run_windows,
    spread,
    truncated_examples,
    work_dir,
    write_result,
)
from ..encoders.load import Encoder, EncoderError, load_encoder
from .result import ExperimentResult

log = logging.getLogger(__name__)

WINDOW = 64
RESULT = "drift.json"


def map_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(L, H, T, T) x 2 -> (L, H): cosine similarity of each head's flattened T x T maps."""
    a = a.reshape(*a.shape[:2], -1).astype(np.float64)
    b = b.reshape(*b.shape[:2], -1).astype(np.float64)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return (a * b).sum(-1) / np.where(den > 0, den, 1.0)


def drift_window(enc_a: Encoder, enc_b: Encoder, window: list, batch_size: int = 16,
                 on_example: Callable | None = None) -> dict:
    """Sums over one window of examples: {"sum": (L, H), "sumsq": (L, H), "n": (), "truncated": ()}."""
    shape = (enc_a.num_layers, enc_a.num_heads)
    total, total_sq, n, cut = np.zeros(shape), np.zeros(shape), 0, 0
    stream_b = enc_b.iter_attentions(window, batch_size=batch_size, window=WINDOW)
    for ea in enc_a.iter_attentions(window, batch_size=batch_size, window=WINDOW):
        eb = next(stream_b)
        if ea.example.index != eb.example.index or ea.tokens != eb.tokens:
            raise EncoderError(f"{enc_a.name} and {enc_b.name} tokenize example {ea.example.index} differently; "
                               f"drift compares a model with its fine-tune (same tokenizer)")
        if differ := input_differences(enc_a, enc_b, ea.ids, eb.ids):
            raise EncoderError(f"{enc_a.name} and {enc_b.name} feed example {ea.example.index} to their models "
                               f"differently ({differ}), so their maps would differ whatever fine-tuning did; drift "
                               f"compares a model with its fine-tune (the same tokenizer and its settings)")
        c = map_cosines(ea.maps, eb.maps)
        total += c
        total_sq += c**2
        n += 1
        cut += ea.truncated
        if on_example:
            on_example(ea)
    return {"sum": total, "sumsq": total_sq, "n": np.array(n), "truncated": np.array(cut)}


def input_differences(enc_a: Encoder, enc_b: Encoder, ids_a: list[int], ids_b: list[int]) -> str:
    """How the inputs the two encoders give their models for one example differ (every key of
    :meth:`Encoder.inputs`: token ids, attention mask, token types where used), or "" when they are the same."""
    a, b = enc_a.inputs([ids_a]), enc_b.inputs([ids_b])
    only = [f"{k} given to {enc_a.name if k in a else enc_b.name} only" for k in sorted(set(a) ^ set(b))]
    values = [f"other {k}" for k in a if k in b and not torch.equal(a[k], b[k])]
    return "; ".join(only + values)


MIN_CHANGE = 0.001  # 1 - cosine of a layer's mean below which "which layers changed most" is not asked


def summarize(parts: list[dict]) -> dict:
    """Per-head mean and standard deviation over examples, per-layer means, and the paper's check."""
    n = int(sum(int(p["n"]) for p in parts))
    mean = sum(p["sum"] for p in parts) / n
    std = spread(parts, "sumsq", mean, n)
    layer_mean = mean.mean(1)
    lowest = sorted(np.argsort(layer_mean)[:2].tolist())
    last_two = list(range(len(layer_mean) - 2, len(layer_mean)))
    largest = float(1 - layer_mean.min())
    return {"examples": n, "truncated": truncated_examples(parts), "cosine": np.round(mean, 5).tolist(),
            "std": np.round(std, 5).tolist(),
            "layer_mean": np.round(layer_mean, 5).tolist(), "lowest_two_layers": lowest,
            "largest_layer_change": round(largest, 7),
            # None: no layer changed enough for the paper's check to mean anything
            "last_two_change_most": lowest == last_two if largest >= MIN_CHANGE else None}


def verdict(task_result: dict) -> str:
    """The paper's check for one task, in words: yes, no, or why it is undecided."""
    answer = task_result["last_two_change_most"]
    if answer is None:
        return (f"undecided: no layer changed by {MIN_CHANGE} of cosine (the largest layer change, 1 - cosine, is "
                f"{task_result.get('largest_layer_change', 0):.1e})")
    return "yes" if answer else "no"


def _same_weights(enc_a: Encoder, enc_b: Encoder) -> bool:
    """Whether two loaded encoders hold the same weights: the same recorded weights, or equal tensors (weights saved
    in another file format or folder are still the same weights)."""
    same = weights_id(enc_a.fingerprint)
    if same is not None and same == weights_id(enc_b.fingerprint):
        return True
    a, b = enc_a.model.state_dict(), enc_b.model.state_dict()
    return a.keys() == b.keys() and all(a[k].shape == b[k].shape and torch.equal(a[k].cpu(), b[k].cpu()) for k in a)


def run_drift(enc_a: Encoder, enc_b: Encoder, splits: list[GlueSplit], out: str | Path, seed: int = 0,
              limit: int | None = None, batch_size: int = 16, progress: Callable | None = None,
              overwrite: bool = False) -> dict:
    """Drift between ``enc_a`` and ``enc_b`` on each split into ``out`` (drift.json, drift.csv, drift.png)."""
    if (enc_a.num_layers, enc_a.num_heads) != (enc_b.num_layers, enc_b.num_heads):
        raise EncoderError(f"{enc_a.name} has {enc_a.num_layers}x{enc_a.num_heads} heads and {enc_b.name} "
                           f"{enc_b.num_layers}x{enc_b.num_heads}; drift needs the same architecture")
    if _same_weights(enc_a, enc_b):
        log.warning("%s and %s have the same weights (%s): every cosine will be 1; drift compares a pretrained model "
                    "with its fine-tune (`patterncnn finetune`)", enc_a.name, enc_b.name, enc_a.tag)
    out = prepare_out(out, RESULT, overwrite, "drift", [s.task.name for s in splits])
    result = provenance(experiment="drift", model_a=public_fingerprint(enc_a.fingerprint), tag_a=enc_a.tag,
                        model_b=public_fingerprint(enc_b.fingerprint), tag_b=enc_b.tag, layers=enc_a.num_layers,
                        **{f"weights_{k}": e.weights_note for k, e in (("a", enc_a), ("b", enc_b)) if e.weights_note},
                        heads=enc_a.num_heads, max_length=enc_a.max_length, limit=limit, seed=seed, tasks={})
    for split in splits:
        t0 = time.time()
        params = {"task": split.task.name, "a": enc_a.fingerprint, "b": enc_b.fingerprint, "limit": limit,
                  "seed": seed, "max_length": enc_a.max_length, "source": split.source,
                  "data": split.digest()}
        work = work_dir(out, split.task.name, params, command="drift")
        parts = run_windows(work, split.examples, WINDOW,
                            lambda window, tick: drift_window(enc_a, enc_b, window, batch_size, tick), progress,
                            f"drift {split.task.name}")
        result["tasks"][split.task.name] = {**summarize(parts), "source": public_source(split.source),
                                            "of": split.total, "seconds": round(time.time() - t0, 1)}
    write_outputs(out, result)
    finish(out)
    return result


def drift(model_a: str, model_b: str, tasks: str | Sequence[str], limit: int | None = 1000,
          glue_dir: str | Path | None = None, out: str | Path | None = None, *, seed: int = 0, max_length: int = 128,
          batch_size: int = 16, device: str = "auto", overwrite: bool = False,
          progress: bool | Callable = False) -> ExperimentResult:
    """What fine-tuning changed: per layer × head, the cosine similarity of two encoders' maps (paper Fig. 5).

    What ``patterncnn drift A B`` runs. The two encoders must share a tokenizer (a model and its fine-tune).

    Args:
        model_a, model_b: encoders (``minilm``, a hub id, a folder written by ``patterncnn finetune``).
        tasks: GLUE task names, or ``"all"``; limit: examples per task (seeded sample); glue_dir: a ``glue_data``.
        out: the result folder (resumable); None: a new temporary folder.
        device: ``auto``, ``cpu`` or ``cuda`` (untested).

    Returns:
        :class:`ExperimentResult`: ``.frame`` (task, layer, head, cosine, std), ``.plot()``, ``.to_json()``.

    Example::

        >>> res = patterncnn.drift("minilm", "models-ft/minilm-rte", tasks=["rte"], glue_dir="../shared/glue")
        >>> res.frame.groupby("layer")["cosine"].mean()     # which layers changed most
    """
    args.check(model_a=model_a, model_b=model_b, tasks=tasks, limit=limit, glue_dir=glue_dir, out=out, seed=seed,
               max_length=max_length, batch_size=batch_size, overwrite=overwrite, progress=progress)
    splits = dev_splits(tasks, glue_dir, limit, seed)
    a, b = (load_encoder(m, max_length=max_length, device=device) for m in (model_a, model_b))
    folder = output_dir(out, "drift")
    result = run_drift(a, b, splits, folder, seed, limit, batch_size, progress_bars(progress), overwrite)
    warn_truncated(result, "drift.json")
    return ExperimentResult(result, folder, plot, rows)


def plot(result: dict):
    """The cosine similarity per layer × head, one panel per task (a Figure)."""
    panels = [(f"{t} ({s['examples']} ex.)", np.array(s["cosine"])) for t, s in result["tasks"].items()]
    lo = min([float(p.min()) for _, p in panels] + [0.99])  # at least 0.99-1: a change of 1e-4 does not look large
    return grid_plot(panels, f"drift: cosine similarity of maps, {result['tag_a']} vs {result['tag_b']} (1 = unchanged)",
                     "viridis", lo, 1.0)


def rows(result: dict) -> tuple[list[str], list[list]]:
    """(header, rows) of drift.csv: one row per task, layer and head."""
    return ["task", "layer", "head", "cosine", "std", "examples"], [
        [task, l, h, c, s["std"][l][h], s["examples"]]
        for task, s in result["tasks"].items() for l, row in enumerate(s["cosine"]) for h, c in enumerate(row)]


def write_outputs(out: Path, result: dict) -> None:
    """drift.csv (one row per task, layer and head), drift.png, then drift.json."""
    write_result(out, RESULT, result, tables={"drift.csv": rows(result)}, figures={"drift.png": png(plot(result))})
