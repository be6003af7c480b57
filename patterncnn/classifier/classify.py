"""Classify every map of a map store or plain ``.npz`` into JSON lines (what ``patterncnn classify`` runs).

Usage::

    summary = classify_maps(open_maps("annotations/maps"), OnnxClassifier(), "runs/pred.jsonl")
    summary["counts"]     # {"vertical": 120, ...};  summary["rejected"], summary["flagged"]

One line per map: ``{"id", "label", "probs": {label: p}}``. A map that fails
:func:`patterncnn.core.maps.check_map` gets ``{"id", "error"}`` (and a log line) while the rest are
classified (and is listed in the summary); a map whose rows do not sum to ~1 is classified and
carries a ``"warning"``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..core.fileio import atomic_open
from ..core.labels import LABELS
from ..core.maps import check_map

CHUNK = 1024  # maps per classifier call


def result_record(map_id: str, probs: np.ndarray, warning: str | None = None) -> dict:
    """The JSON record of one classified map (shared by ``classify`` and the service)."""
    rec = {"id": map_id, "label": LABELS[int(probs.argmax())],
           "probs": {name: round(float(x), 6) for name, x in zip(LABELS, probs)}}
    if warning:
        rec["warning"] = warning
    return rec


def classify_maps(maps, classifier, out: str | Path) -> dict:
    """Classify every map of ``maps`` into the JSON-lines file ``out`` (written atomically).

    Returns:
        {"counts": {label: n}, "classified": n, "rejected": [(map id, why), ...], "flagged": n}
    """
    counts: Counter = Counter()
    rejected, flagged = [], 0
    with atomic_open(out, "w", encoding="utf-8") as f:
        for start in range(0, len(maps.meta), CHUNK):
            ok, arrs = [], []
            for m in maps.meta[start : start + CHUNK]:
                arr = maps.get(m["id"])
                errs, warns = check_map(arr)
                if errs:
                    rejected.append((m["id"], errs[0]))
                    f.write(json.dumps({"id": m["id"], "error": errs[0]}) + "\n")
                    continue
                ok.append((m, warns[0] if warns else None))
                arrs.append(arr.astype(np.float32))
            probs = classifier.predict(arrs, [m.get("seps") for m, _ in ok]) if arrs else []
            for (m, warning), p in zip(ok, probs):
                rec = result_record(m["id"], p, warning)
                flagged += warning is not None
                counts[rec["label"]] += 1
                f.write(json.dumps(rec) + "\n")
    return {"counts": {k: counts.get(k, 0) for k in LABELS}, "classified": sum(counts.values()),
            "rejected": rejected, "flagged": flagged}
