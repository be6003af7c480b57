"""One census window: every map of up to ``WINDOW`` examples through the encoder and the CNN; its file.

Usage::

    arrays = classify_window(encoder, classifier, examples)          # CNN overlapped with the encoder
    save_window(work / window_name(0), arrays)                       # atomic: the window is done
    arrays = read_window(work / window_name(0), examples, n_maps)    # None: not done, or damaged
    raw = merge_windows([arrays, ...])                               # all windows, in example order

The encoder runs in a background thread and hands each example's maps through a bounded queue to
the calling thread, which preprocesses and classifies them while the encoder computes the next
batch (torch and onnxruntime release the GIL). The CNN batches are formed exactly as in the serial
path (``overlap=False``), so both give bit-identical arrays. The local census
(:mod:`patterncnn.census.run`) and the Ray census (:mod:`patterncnn.census.ray`) both write windows with
:func:`save_window`, so either can resume the other's work.
"""

from __future__ import annotations

import io
import queue
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch

from ..core.fileio import write_bytes
from ..core.labels import LABELS
from ..core.work import read_part
from .thumbnails import Keeper, merge
from .thumbnails import problem as thumbnails_problem

WINDOW = 64
CNN_BATCH = 512  # maps per onnxruntime call
QUEUE = 32  # examples in flight between the encoder thread and the CNN: bounds memory


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


_DONE = object()


def _put(q: queue.Queue, item, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


def overlapped(stream: Iterator, size: int = QUEUE) -> Iterator:
    """Yield the items of ``stream``, computed ahead in a background thread (at most ``size`` waiting).

    An exception in the stream is re-raised here; leaving the loop early stops the thread.
    """
    q: queue.Queue = queue.Queue(maxsize=size)
    stop = threading.Event()

    def produce():
        try:
            for item in stream:
                if not _put(q, item, stop):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises it
            _put(q, _Failed(e), stop)
            return
        _put(q, _DONE, stop)

    worker = threading.Thread(target=produce, name="encoder", daemon=True)
    worker.start()
    try:
        while (item := q.get()) is not _DONE:
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        worker.join()


def classify_window(encoder, classifier, window: list, batch_size: int = 16, on_example: Callable | None = None,
                    overlap: bool = True) -> dict:
    """Label every map of one window of examples.

    The maps of several examples share one classifier call (``CNN_BATCH`` maps): big batches run faster.

    Args:
        encoder: a :class:`patterncnn.encoders.load.Encoder`; classifier: a :class:`patterncnn.census.run.Classifier`.
        on_example: called with each :class:`ExampleAttention` as it streams by (to save maps, to tick a bar).
        overlap: run the encoder in a second thread while the CNN classifies (same result either way).

    Returns:
        {"index": (N,) example indices, "labels": (N, L*H) uint8, "probs": (N, L*H, 5) float16, "truncated": n,
        and the window's example maps per head and pattern (:class:`patterncnn.census.thumbnails.Keeper`)}
    """
    n_maps = encoder.num_layers * encoder.num_heads
    idx, labels, probs, truncated = [], [], [], 0
    keeper = Keeper(n_maps)
    pending: list[tuple[torch.Tensor, list, object]] = []  # (CNN input, seps, the example's ExampleAttention)

    def flush():
        if not pending:
            return
        p = classifier.run(torch.cat([x for x, _, _ in pending]))
        for k, (_, seps, ea) in enumerate(pending):
            pk = classifier.apply_segment_rule(p[k * n_maps : (k + 1) * n_maps], seps)  # (L*H, 5)
            idx.append(ea.example.index)
            labels.append(pk.argmax(1).astype(np.uint8))
            probs.append(pk.astype(np.float16))
            keeper.offer(ea.example.index, pk, ea.maps, ea.tokens, ea.seps)
        pending.clear()

    stream = encoder.iter_attentions(window, batch_size=batch_size, window=WINDOW)
    for ea in overlapped(stream) if overlap else stream:
        t = ea.maps.shape[-1]
        seps = [ea.seps] * n_maps
        pending.append((classifier.prepare(ea.maps.reshape(n_maps, t, t), seps), seps, ea))
        if len(pending) * n_maps >= CNN_BATCH:
            flush()
        truncated += ea.truncated
        if on_example:
            on_example(ea)
    flush()
    return {"index": np.array(idx), "labels": np.stack(labels), "probs": np.stack(probs),
            "truncated": np.array(truncated), **keeper.arrays()}


def split_windows(examples: list) -> list[list]:
    """A task's examples cut into its census windows of ``WINDOW``, in order (window ``w`` is file ``w``)."""
    return [examples[s : s + WINDOW] for s in range(0, len(examples), WINDOW)]


def window_name(w: int) -> str:
    """The file of window ``w`` of a task, in its work folder."""
    return f"window-{w:05d}.npz"


def window_bytes(arrays: dict) -> bytes:
    """The exact bytes a finished window is stored as (the same wherever it was computed)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def save_window(path: Path, arrays: dict) -> None:
    """Write a finished window atomically: it counts as done only once this lands."""
    write_bytes(path, window_bytes(arrays))


def read_window(path: Path, examples: list, n_maps: int) -> dict | None:
    """A finished window read back and checked against what it must hold, or None: not done yet, or damaged (a
    warning says so, and the census computes it again).

    A window holds exactly its examples' indices, (N, n_maps) labels below 5, (N, n_maps, 5) probabilities,
    a count of truncated inputs and its example maps (:func:`patterncnn.census.thumbnails.problem`).
    """
    want = sorted(ex.index for ex in examples)

    def check(a: dict) -> str | None:
        n = len(want)
        shapes = {"index": (n,), "labels": (n, n_maps), "probs": (n, n_maps, len(LABELS)), "truncated": ()}
        for key, shape in shapes.items():
            if key not in a or a[key].shape != shape or a[key].dtype.kind not in "iuf":
                return f"{key} is missing or not of shape {shape}"
        if sorted(a["index"].tolist()) != want:
            return "its example indices are not the window's"
        labels, probs = a["labels"], a["probs"].astype(np.float32)
        if labels.dtype.kind == "f" or labels.size and (labels.min() < 0 or labels.max() >= len(LABELS)):
            return "a label is not one of the five"
        if probs.size and not (np.isfinite(probs).all() and probs.min() >= 0 and probs.max() <= 1):
            return "a probability is not a number from 0 to 1"
        return thumbnails_problem(a, n_maps)

    return read_part(path, check)


def merge_windows(parts: list[dict], thumbnails: bool = True) -> dict:
    """Windows' arrays merged in example order (probabilities as float32), with their example maps
    (``thumbnails``: the best of each head and pattern over all of them; left out when False)."""
    order = np.argsort(np.concatenate([p["index"] for p in parts]), kind="stable")
    return {"index": np.concatenate([p["index"] for p in parts])[order],
            "labels": np.concatenate([p["labels"] for p in parts])[order],  # (N, L*H)
            "probs": np.concatenate([p["probs"] for p in parts])[order].astype(np.float32),
            "truncated": int(sum(int(p["truncated"]) for p in parts)),
            **({"thumbnails": merge(parts)} if thumbnails else {})}
