"""Classify every map of a map store or plain ``.npz``/``.npy`` into JSON lines (what ``patterncnn classify`` runs).

Usage::

    summary = classify_maps(open_maps("annotations/maps"), OnnxClassifier(), "runs/pred.jsonl")
    summary["counts"]     # {"vertical": 120, ...};  summary["rejected"], summary["flagged"]
    classify_maps(maps, classifier, sys.stdout)                 # a stream instead of a file

One line per map: ``{"id", "label", "probs": {label: p}}``. A map that fails
:func:`patterncnn.core.maps.check_map` (on the float32 the classifier reads, with its separators),
whose header already declares no usable map (not square and 2-D, over the reader's T limit, not
a number type: refused before it is read), or whose values are too large for the classifier to
score, gets ``{"id", "error"}`` while the rest
are classified (and is listed in the summary); a map whose rows do not sum to ~1 is classified and
carries a ``"warning"``. The lines come out in the input's order, an error line where its map was.
Maps are read one at a time and classified in batches of at most ``BATCH_MAPS`` maps and
``BATCH_BYTES`` bytes, so memory stays bounded by the largest map (the reader's limit) and one
batch, whatever the file holds. Nothing but valid JSON is written.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import IO, Iterable, Iterator

import numpy as np

from ..core.arrayfile import SEPS_KEY
from ..core.fileio import atomic_open
from ..core.labels import LABELS

BATCH_MAPS = 1024  # maps per classifier call at most
BATCH_BYTES = 64 << 20  # float32 map bytes per classifier call at most (a bigger map is classified alone)
TOO_LARGE = ("values too large for the classifier to score; send attention weights (rows summing to 1) or scale "
             "the map down")


def result_record(map_id: str, probs: np.ndarray, warning: str | None = None) -> dict:
    """The JSON record of one classified map (shared by ``classify`` and the service)."""
    rec = {"id": map_id, "label": LABELS[int(probs.argmax())],
           "probs": {name: round(float(x), 6) for name, x in zip(LABELS, probs)}}
    if warning:
        rec["warning"] = warning
    return rec


def scorable(probs: np.ndarray) -> np.ndarray:
    """(N,) bool: the rows of (N, 5) probabilities the classifier could score (finite; a map near float32's limit
    overflows inside the preprocessing and comes out NaN)."""
    return np.isfinite(probs).all(axis=1)


def batches(items: Iterable[tuple], most_maps: int = BATCH_MAPS) -> Iterator[list[tuple]]:
    """Consecutive runs of ``items`` ``(key, float32 map or None, ...)``, each of at most ``most_maps`` items and
    ``BATCH_BYTES`` map bytes (a bigger map alone), in order: the one batching of ``classify`` and the service.

    Lazy: an item is taken only when its run is being filled, so a caller that makes each float32 map as it is
    taken (and drops its source) holds one run of converted maps at a time, whatever the input holds.
    """
    batch, size = [], 0
    for item in items:
        nbytes = 0 if item[1] is None else item[1].size * 4
        if batch and (len(batch) >= most_maps or size + nbytes > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += nbytes
    if batch:
        yield batch


def without_seps_note(n: int, fix: str, reader: str = "the classifier") -> str:
    """What ``classify``, the service and ``annotate push`` say of ``n`` maps that ``reader`` labelled without
    separator positions, then ``fix`` (for a file, :data:`FILE_SEPS_FIX`)."""
    return (f"{n} map(s) carry no separator positions: {reader} reads them without their segments and [SEP] "
            f"columns, so their labels can differ from those the same maps get with them, and not only on block; "
            f"{fix}")


# How maps read from a file get their separators: the fix ``classify`` and ``annotate push`` name
FILE_SEPS_FIX = (f"give their separators (a map store from `patterncnn sample` records them; a plain .npz takes them "
                 f"as a member {SEPS_KEY}) for the labels the census gives")


def classify_maps(maps, classifier, out: str | Path | IO[str]) -> dict:
    """Classify every map of ``maps`` into JSON lines: a file ``out`` (written atomically) or an open text stream.

    Returns:
        {"counts": {label: n}, "classified": n, "rejected": [(map id, why), ...], "flagged": n, "without_seps": n
        (classified maps with no separator positions)}
    """
    if hasattr(out, "write"):
        return _classify_into(maps, classifier, out)
    with atomic_open(out, "w", encoding="utf-8") as f:
        return _classify_into(maps, classifier, f)


def _classify_into(maps, classifier, f: IO[str]) -> dict:
    counts: Counter = Counter()
    rejected, flagged, without_seps = [], 0, 0

    def write(rec: dict) -> None:
        f.write(json.dumps(rec, allow_nan=False) + "\n")

    def reject(map_id: str, why: str) -> None:
        rejected.append((map_id, why))
        write({"id": map_id, "error": why})

    def flush(batch: list) -> None:
        """Write the batch's lines in input order: a rejected map's error line where the map was."""
        nonlocal flagged, without_seps
        valid = [(m, a) for m, a, _ in batch if a is not None]
        if valid:
            probs = classifier.predict([a for _, a in valid], [m.get("seps") for m, _ in valid])
            scored = iter(zip(probs, scorable(probs)))
        for m, a, note in batch:  # note: the map's error when a is None, else its warning (or None)
            if a is None:
                reject(m["id"], note)
                continue
            p, ok = next(scored)
            if not ok:
                reject(m["id"], TOO_LARGE)
                continue
            rec = result_record(m["id"], p, note)
            flagged += note is not None
            without_seps += m.get("seps") is None
            counts[rec["label"]] += 1
            write(rec)

    def inputs():
        for m in maps.meta:
            arr, errs, warns = maps.input_of(m)  # a member whose header declares no map: its own error line
            # a rejected map stays in the batch (without its array), so its error line comes out where the map was
            yield (m, None, errs[0]) if errs else (m, arr, warns[0] if warns else None)

    for batch in batches(inputs()):
        flush(batch)
    return {"counts": {k: counts.get(k, 0) for k in LABELS}, "classified": sum(counts.values()),
            "rejected": rejected, "flagged": flagged, "without_seps": without_seps}
