"""The census: how often each pattern occurs over a GLUE task's dev set, overall and per layer × head.

Usage (what ``patterncnn census`` runs)::

    result = run_census(encoder, classifier, split, out="runs/census", progress=tqdm)
    result["shares"]       # {"vertical": 0.41, ...} over all (example, layer, head) maps
    result["ci95"]         # bootstrap 95% interval over examples, per label
    result["heads"]        # per layer, per head: label shares and the majority label

Every example streams through the encoder and every map straight into the classifier: no map
touches the disk (unless ``save_maps``) and memory stays flat. Examples are processed in fixed
windows of ``WINDOW`` (the encoder sorts by length within a window), and each finished window is
saved atomically to ``out/.work/<task>/``. Re-running the same command skips the finished windows;
because a window always batches the same examples the same way, the resumed result is identical to
an uninterrupted one.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from . import __version__
from .encoder import Encoder
from .fileio import sha256_file, write_bytes, write_json
from .glue import GlueSplit
from .labels import LABELS

log = logging.getLogger(__name__)

WINDOW = 64
BOOTSTRAP = 1000
CNN_BATCH = 512  # maps per onnxruntime call


class CensusError(RuntimeError):
    """A census cannot start as asked (output exists, arguments changed); the message says what to do."""


def run_key(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


def _work_dir(out: Path, task: str, params: dict) -> Path:
    work = out / ".work" / task
    stamp = work / "run.json"
    if stamp.exists():
        old = json.loads(stamp.read_text())
        if old.get("key") != run_key(params):
            raise CensusError(f"{out} holds an unfinished census of {task} with other arguments "
                              f"({old.get('params')}); re-run with those to resume, or pass --overwrite")
    else:
        write_json(stamp, {"key": run_key(params), "params": params})
    return work


def classify_task(encoder: Encoder, classifier, split: GlueSplit, out: Path, params: dict,
                  batch_size: int = 16, progress: Callable | None = None, save_maps: bool = False) -> dict:
    """Label every (example, layer, head) map of ``split``; resumable. Returns the raw arrays."""
    from .maps import MapStore

    work = _work_dir(out, split.task.name, params)
    n_maps = encoder.num_layers * encoder.num_heads
    windows = [split.examples[s : s + WINDOW] for s in range(0, len(split.examples), WINDOW)]
    store = MapStore.create(out / "maps" / split.task.name, info={"model": encoder.fingerprint},
                            exist_ok=True) if save_maps else None
    bar = progress(total=len(split.examples), desc=f"census {split.task.name}", unit="ex") if progress else None
    truncated = 0
    for w, window in enumerate(windows):
        part = work / f"window-{w:05d}.npz"
        if part.exists():
            if bar:
                bar.update(len(window))
            continue
        idx, labels, probs = [], [], []
        records = []
        pending: list[tuple[int, torch.Tensor, list]] = []  # (example index, CNN input, seps)

        def flush():
            # One onnxruntime call for the maps of several examples: big batches run faster.
            if not pending:
                return
            p = classifier.run(torch.cat([x for _, x, _ in pending]))
            for k, (ex_index, x, seps) in enumerate(pending):
                pk = classifier.finish(p[k * n_maps : (k + 1) * n_maps], seps)  # (L*H, 5)
                idx.append(ex_index)
                labels.append(pk.argmax(1).astype(np.uint8))
                probs.append(pk.astype(np.float16))
            pending.clear()

        for ea in encoder.iter_attentions(window, batch_size=batch_size, window=WINDOW):
            t = ea.maps.shape[-1]
            seps = [ea.seps] * n_maps
            pending.append((ea.example.index, classifier.prepare(ea.maps.reshape(n_maps, t, t), seps), seps))
            if len(pending) * n_maps >= CNN_BATCH:
                flush()
            truncated += ea.truncated
            if store is not None:
                from .export import map_id

                for k in range(n_maps):
                    layer, head = divmod(k, encoder.num_heads)
                    records.append(({"id": map_id(encoder.tag, split.task.name, split.split, ea.example.index,
                                                  layer, head), "task": split.task.name, "split": split.split,
                                     "example": ea.example.index, "layer": layer, "head": head, "T": t,
                                     "tokens": ea.tokens, "seps": ea.seps}, ea.maps[layer, head]))
            if bar:
                bar.update(1)
        flush()
        if store is not None:  # after a crash mid-window some of these may already be saved
            store.append(r for r in records if r[0]["id"] not in store)
        buf = io.BytesIO()
        np.savez(buf, index=np.array(idx), labels=np.stack(labels), probs=np.stack(probs),
                 truncated=np.array(truncated))
        write_bytes(part, buf.getvalue())  # the window counts as done only once this lands
        truncated = 0
    if bar:
        bar.close()
    parts = [np.load(work / f"window-{w:05d}.npz") for w in range(len(windows))]
    order = np.argsort(np.concatenate([p["index"] for p in parts]), kind="stable")
    return {"index": np.concatenate([p["index"] for p in parts])[order],
            "labels": np.concatenate([p["labels"] for p in parts])[order],  # (N, L*H)
            "probs": np.concatenate([p["probs"] for p in parts])[order].astype(np.float32),
            "truncated": int(sum(int(p["truncated"]) for p in parts))}


def summarize(labels: np.ndarray, num_layers: int, num_heads: int, seed: int = 0) -> dict:
    """Shares, bootstrap CIs over examples, and per-head distributions from (N, L*H) label ids."""
    n, m = labels.shape
    per_example = np.stack([(labels == k).sum(1) for k in range(len(LABELS))], axis=1)  # (N, 5)
    counts = per_example.sum(0)
    shares = counts / counts.sum()
    rng = np.random.default_rng(seed)
    boot = per_example[rng.integers(0, n, size=(BOOTSTRAP, n))].sum(1)  # (B, 5)
    boot = boot / boot.sum(1, keepdims=True)
    lo, hi = np.percentile(boot, [2.5, 97.5], axis=0)
    heads = np.stack([(labels == k).mean(0) for k in range(len(LABELS))], axis=1)  # (L*H, 5)
    heads = heads.reshape(num_layers, num_heads, len(LABELS))
    return {
        "examples": int(n), "maps": int(n * m),
        "counts": {name: int(c) for name, c in zip(LABELS, counts)},
        "shares": {name: float(s) for name, s in zip(LABELS, shares)},
        "ci95": {name: [float(a), float(b)] for name, a, b in zip(LABELS, lo, hi)},
        "heads": [[{"shares": {name: round(float(s), 4) for name, s in zip(LABELS, heads[l, h])},
                    "majority": LABELS[int(heads[l, h].argmax())], "majority_share": round(float(heads[l, h].max()), 4)}
                   for h in range(num_heads)] for l in range(num_layers)],
    }


def run_census(encoder: Encoder, classifier, splits: list[GlueSplit], out: str | Path, limit: int | None,
               seed: int, batch_size: int = 16, progress: Callable | None = None, save_maps: bool = False,
               overwrite: bool = False) -> dict:
    """Census of each split into ``out`` (census.json, census.csv, heads.csv, census.png, heads.png)."""
    import shutil

    out = Path(out)
    if (out / "census.json").exists():
        if not overwrite:
            raise CensusError(f"{out} already holds a finished census; pass --overwrite or choose another --out")
        shutil.rmtree(out / ".work", ignore_errors=True)
    elif overwrite:
        shutil.rmtree(out / ".work", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    clf_file = Path(classifier.path)
    result = {"created_by": f"patterncnn {__version__}", "encoder": encoder.fingerprint,
              "layers": encoder.num_layers, "heads": encoder.num_heads, "max_length": encoder.max_length,
              "classifier": {"path": str(clf_file), "sha256": sha256_file(clf_file),
                             "version": classifier.model_version}, "limit": limit, "seed": seed,
              "labels": list(LABELS), "tasks": {}}
    t0 = time.time()
    for split in splits:
        params = {"task": split.task.name, "split": split.split, "source": split.source, "limit": limit,
                  "seed": seed, "encoder": encoder.fingerprint, "max_length": encoder.max_length,
                  "classifier": result["classifier"]["sha256"], "version": __version__}
        ts = time.time()
        raw = classify_task(encoder, classifier, split, out, params, batch_size, progress, save_maps)
        summary = summarize(raw["labels"], encoder.num_layers, encoder.num_heads, seed)
        summary.update({"source": split.source, "split": split.split, "of": split.total,
                        "truncated": raw["truncated"], "seconds": round(time.time() - ts, 1),
                        "mean_probability": {name: float(v) for name, v in zip(LABELS, raw["probs"].mean((0, 1)))}})
        result["tasks"][split.task.name] = summary
    result["seconds"] = round(time.time() - t0, 1)
    write_outputs(out, result)
    shutil.rmtree(out / ".work", ignore_errors=True)
    return result


def write_outputs(out: Path, result: dict) -> None:
    import csv

    from .fileio import write_text

    rows = io.StringIO()
    w = csv.writer(rows, lineterminator="\n")
    w.writerow(["task", "label", "share", "ci95_low", "ci95_high", "count", "examples", "maps"])
    for task, s in result["tasks"].items():
        for name in LABELS:
            w.writerow([task, name, f"{s['shares'][name]:.5f}", f"{s['ci95'][name][0]:.5f}",
                        f"{s['ci95'][name][1]:.5f}", s["counts"][name], s["examples"], s["maps"]])
    heads = io.StringIO()
    w = csv.writer(heads, lineterminator="\n")
    w.writerow(["task", "layer", "head", *LABELS, "majority"])
    for task, s in result["tasks"].items():
        for layer, row in enumerate(s["heads"]):
            for head, cell in enumerate(row):
                w.writerow([task, layer, head, *(f"{cell['shares'][n]:.4f}" for n in LABELS), cell["majority"]])
    write_text(out / "census.csv", rows.getvalue())
    write_text(out / "heads.csv", heads.getvalue())
    from .plots import census_figure, heads_figure

    write_bytes(out / "census.png", census_figure(result))
    write_bytes(out / "heads.png", heads_figure(result))
    write_json(out / "census.json", result)  # last: its presence marks a finished census


def table(result: dict) -> str:
    """A terminal table: one row per task, one column per pattern (share and 95% CI)."""
    head = f"{'task':<8} {'examples':>8} " + " ".join(f"{n:>21}" for n in LABELS)
    lines = [head, "-" * len(head)]
    for task, s in result["tasks"].items():
        cells = " ".join(f"{100 * s['shares'][n]:5.1f}% [{100 * s['ci95'][n][0]:4.1f},{100 * s['ci95'][n][1]:5.1f}]"
                         .rjust(21) for n in LABELS)
        lines.append(f"{task:<8} {s['examples']:>8} {cells}")
    return "\n".join(lines)


def compare(a: dict, b: dict) -> tuple[str, dict]:
    """Per-task, per-pattern share differences (b − a) between two census results, as text and data."""
    diff = {}
    lines = [f"B - A, percentage points (A: {a['encoder']['model']}, B: {b['encoder']['model']})",
             f"{'task':<8} " + " ".join(f"{n:>19}" for n in LABELS)]
    for task in a["tasks"]:
        if task not in b["tasks"]:
            continue
        sa, sb = a["tasks"][task], b["tasks"][task]
        d = {n: sb["shares"][n] - sa["shares"][n] for n in LABELS}
        # The difference is significant when the two 95% intervals do not overlap (conservative).
        sig = {n: sb["ci95"][n][0] > sa["ci95"][n][1] or sa["ci95"][n][0] > sb["ci95"][n][1] for n in LABELS}
        diff[task] = {"difference": d, "separated_ci95": sig}
        lines.append(f"{task:<8} " + " ".join(f"{100 * d[n]:+6.1f}{'*' if sig[n] else ' '}".rjust(19) for n in LABELS))
    lines.append("* the two 95% bootstrap intervals do not overlap")
    return "\n".join(lines), diff


def analyze(encoder: Encoder, classifier, texts: tuple[str, ...]) -> dict:
    """Classify every head's map for one input (one sentence or a pair).

    Returns:
        {"tokens", "seps", "truncated", "probs": (L, H, 5) array, "labels": (L, H) label names}.
    """
    from .glue import Example

    ea = next(encoder.iter_attentions([Example("input", "-", 0, tuple(texts), None)]))
    L, H, t, _ = ea.maps.shape
    probs = classifier.predict_same_length(ea.maps.reshape(L * H, t, t), [ea.seps] * (L * H)).reshape(L, H, -1)
    return {"tokens": ea.tokens, "seps": ea.seps, "truncated": ea.truncated, "probs": probs,
            "labels": [[LABELS[int(k)] for k in row] for row in probs.argmax(-1)]}


def grid_text(labels: list[list[str]]) -> str:
    short = {"vertical": "V", "diagonal": "D", "vertical+diagonal": "VD", "block": "B", "heterogeneous": "H"}
    heads = len(labels[0])
    lines = ["layer\\head " + " ".join(f"{h:>3}" for h in range(heads))]
    lines += [f"{l:>10} " + " ".join(f"{short[x]:>3}" for x in row) for l, row in enumerate(labels)]
    lines.append("V vertical, D diagonal, VD vertical+diagonal, B block, H heterogeneous")
    return "\n".join(lines)
