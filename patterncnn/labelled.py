"""The labelled set: the folder ``annotate pull`` writes and ``train`` reads (e.g. ``annotations/``).

Layout::

    labels.csv                   one row per labelled map (TABLE_COLUMNS): label, uncertain, annotator,
                                 pre-annotation, Label Studio ids, ... joined to the map metadata
    maps/                        a map store (patterncnn.maps) holding exactly the labelled maps
    labelstudio-export.json.gz   the Label Studio export the labels came from, as it came
    pull-report.json             counts: tasks, labelled, skipped, disagreements, labels

Usage::

    write_labelled_set("annotations", export_bytes, rows, report, maps)    # atomic, staged
    data = load_labelled("annotations")                                     # for training
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from .fileio import write_bytes, write_json, write_text
from .labels import LABELS, label_index
from .labelstudio import AnnotateError
from .maps import MapStore

TABLE_COLUMNS = ("map_id", "label", "uncertain", "annotator", "pre_label", "pre_score", "pre_model", "lead_time",
                 "n_annotations", "disagreement", "labels_seen", "model", "task", "split", "example", "layer", "head",
                 "T", "ls_task_id", "ls_annotation_id", "annotated_at")




def label_counts(rows: Iterable[dict]) -> dict[str, int]:
    c = Counter(r["label"] for r in rows)
    return {name: c.get(name, 0) for name in LABELS}


def write_labelled_set(out, export_bytes: bytes, rows: list[dict], report: dict, maps=None) -> dict:
    """Write a labelled set into ``out`` (e.g. ``annotations/``), every file atomically.

    Files: ``labelstudio-export.json.gz`` (the export bytes as they came, gzipped), ``labels.csv``
    (the tidy table), ``pull-report.json`` and, when ``maps`` is given, ``maps/``: a map store with
    exactly the labelled maps. Everything is built beside ``out`` first; existing files are replaced
    only once all new ones are complete, so a failed pull leaves ``out`` as it was.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".pull-", dir=out))
    try:
        if maps is not None:
            missing = [r["map_id"] for r in rows if r["map_id"] not in maps]
            if missing:
                raise AnnotateError(f"{len(missing)} labelled map(s) are not in the given map store(s), e.g. "
                                    f"{missing[0]}: pass every store the project was pushed from with --maps")
            store = MapStore.create(stage / "maps", info={"labelled_set": True, "source": str(maps.root)})
            store.append((maps.metadata(r["map_id"]), maps.get(r["map_id"])) for r in rows)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(TABLE_COLUMNS), lineterminator="\n")
        w.writeheader()
        w.writerows(sorted(rows, key=lambda r: r["map_id"]))
        write_text(stage / "labels.csv", buf.getvalue())
        write_bytes(stage / "labelstudio-export.json.gz", gzip.compress(export_bytes, mtime=0))
        write_json(stage / "pull-report.json", {**report, "labels": label_counts(rows)})
        # All staged: move into place. Files by atomic rename; the maps folder by rename-aside.
        for name in ("labels.csv", "labelstudio-export.json.gz", "pull-report.json"):
            os.replace(stage / name, out / name)
        if maps is not None:
            old = out / "maps"
            if old.exists():
                aside = stage / "old-maps"
                old.rename(aside)
            (stage / "maps").rename(old)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {**report, "labels": label_counts(rows)}


@dataclasses.dataclass
class Labelled:
    ids: list[str]
    maps: list[np.ndarray]
    seps: list[list[int] | None]
    y: np.ndarray  # (N,) label indices
    groups: np.ndarray  # (N,) input-example keys
    uncertain: np.ndarray  # (N,) bool
    data_hash: str
    meta: list[dict]


def load_labelled(annotations: str | Path) -> Labelled:
    """Read ``labels.csv`` and the labelled maps (``maps/``) written by ``patterncnn annotate pull``."""
    root = Path(annotations)
    table = root / "labels.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table} not found: --annotations must be a folder written by "
                                f"`patterncnn annotate pull` (labels.csv + maps/)")
    store = MapStore(root / "maps")
    rows = list(csv.DictReader(open(table, encoding="utf-8")))
    if not rows:
        raise ValueError(f"{table} holds no labelled maps")
    h = hashlib.sha256()
    ids, maps, seps, y, groups, unc, metas = [], [], [], [], [], [], []
    for r in sorted(rows, key=lambda r: r["map_id"]):
        meta = store.metadata(r["map_id"])
        arr = np.asarray(store.get(r["map_id"]), dtype=np.float32)
        h.update(r["map_id"].encode() + r["label"].encode() + arr.tobytes())
        ids.append(r["map_id"])
        maps.append(arr)
        seps.append(meta.get("seps"))
        y.append(label_index(r["label"]))
        # The same input example seen through different encoders is one group.
        groups.append(f"{meta.get('task')}/{meta.get('split')}/{meta.get('example')}")
        unc.append(r.get("uncertain") == "True")
        metas.append(meta)
    return Labelled(ids, maps, seps, np.array(y), np.array(groups), np.array(unc), h.hexdigest(), metas)
