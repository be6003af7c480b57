"""Pull labels from Label Studio: resolve each task's annotations into one label, joined to its map.

Usage (what ``patterncnn annotate pull`` runs)::

    result = pull(connect(url, key), "attention patterns", maps=open_maps("exports/round1"), out="annotations")
    rows, report = label_rows(json.loads(export_bytes), maps)      # the same from an export file

Several annotations on one task are resolved by majority, ties going to the most recent.
Cancelled (skipped) tasks are left out and counted. The labelled set is written by
:func:`patterncnn.labelled.write_labelled_set`.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter

from .annotate import FROM_NAME, UNCERTAIN
from .labelled import write_labelled_set
from .labels import LABELS
from .labelstudio import AnnotateError, Connection


@dataclasses.dataclass
class Resolved:
    label: str
    uncertain: bool
    annotation: dict
    n_annotations: int
    labels_seen: dict[str, int]

    @property
    def disagreement(self) -> bool:
        return len(self.labels_seen) > 1


def _label_of(ann: dict) -> tuple[str | None, bool]:
    label, uncertain = None, False
    for r in ann.get("result") or []:
        choices = (r.get("value") or {}).get("choices") or []
        if r.get("from_name") == FROM_NAME and choices:
            label = choices[0]
        if r.get("from_name") == UNCERTAIN and "uncertain" in choices:
            uncertain = True
    return label, uncertain


def resolve(annotations: list[dict]) -> Resolved | None:
    """One label from a task's annotations: the majority label, ties broken by the most recent.

    Cancelled (skipped) annotations and annotations without a pattern choice do not vote.
    Returns None when no annotation votes.
    """
    votes = []
    for ann in annotations:
        if ann.get("was_cancelled"):
            continue
        label, uncertain = _label_of(ann)
        if label is None:
            continue
        if label not in LABELS:
            raise AnnotateError(f"annotation {ann.get('id')} has label {label!r}, not one of {', '.join(LABELS)}: "
                                f"was the project created with another labeling config?")
        votes.append((label, uncertain, ann))
    if not votes:
        return None
    counts = Counter(v[0] for v in votes)
    top = max(counts.values())
    tied = {label for label, c in counts.items() if c == top}
    recent = max((v for v in votes if v[0] in tied), key=lambda v: (v[2].get("updated_at") or v[2].get("created_at")
                                                                     or "", v[2].get("id") or 0))
    return Resolved(recent[0], recent[1], recent[2], len(votes), dict(counts))


def label_rows(export: list[dict], maps=None, annotators: dict[int, str] | None = None) -> tuple[list[dict], dict]:
    """Label table rows (one per labelled map) from a Label Studio JSON export, joined to the map store.

    Returns:
        (rows, report). The report counts tasks, labelled maps, skipped/cancelled and unlabelled tasks,
        and lists the tasks whose annotators disagreed.
    """
    if not isinstance(export, list):
        raise AnnotateError("the export is not a Label Studio JSON export (a list of tasks); export as JSON")
    rows, report = [], {"tasks": len(export), "labelled": 0, "cancelled": 0, "unlabelled": 0, "disagreements": [],
                        "not_in_store": 0}
    for task in export:
        data = task.get("data") or {}
        map_id = data.get("map_id")
        if map_id is None:
            raise AnnotateError(f"task {task.get('id')} has no map_id: it was not pushed by patterncnn")
        anns = task.get("annotations") or []
        res = resolve(anns)
        if res is None:
            if any(a.get("was_cancelled") for a in anns):
                report["cancelled"] += 1
            else:
                report["unlabelled"] += 1
            continue
        if res.disagreement:
            report["disagreements"].append({"map_id": map_id, "labels": res.labels_seen, "chosen": res.label})
        meta = {}
        if maps is not None:
            if map_id in maps:
                meta = maps.metadata(map_id)
            else:
                report["not_in_store"] += 1
        who = res.annotation.get("completed_by")
        if isinstance(who, dict):
            who = who.get("email") or who.get("id")
        who = (annotators or {}).get(who, who)
        pre = data.get("pre_scores") or {}
        rows.append({
            "map_id": map_id, "label": res.label, "uncertain": res.uncertain, "annotator": who,
            "pre_label": data.get("pre_label"), "pre_score": pre.get(data.get("pre_label")) if pre else None,
            "pre_model": data.get("pre_model"), "lead_time": res.annotation.get("lead_time"),
            "n_annotations": res.n_annotations, "disagreement": res.disagreement,
            "labels_seen": json.dumps(res.labels_seen, sort_keys=True),
            **{k: meta.get(k, data.get(k)) for k in ("model", "task", "split", "example", "layer", "head")},
            "T": meta.get("T", data.get("T")), "ls_task_id": task.get("id"),
            "ls_annotation_id": res.annotation.get("id"),
            "annotated_at": res.annotation.get("updated_at") or res.annotation.get("created_at"),
        })
    report["labelled"] = len(rows)
    return rows, report


def read_export(raw: bytes) -> tuple[list[dict], bytes]:
    """A Label Studio JSON export from bytes, plain or gzipped (as ``pull`` stores it): (tasks, JSON bytes)."""
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise AnnotateError(f"the export is a broken gzip file ({e}); download it again") from None
    try:
        return json.loads(raw), raw
    except ValueError:
        raise AnnotateError("the export is not JSON: export the project as JSON (not CSV/COCO/...)") from None


def pull(ls: Connection | None, project: str | int | None, maps, out, from_file: str | None = None) -> dict:
    """Export a project's annotations (or read an export file) and write the labelled set into ``out``.

    Returns:
        The pull report: tasks, labelled, cancelled, unlabelled, disagreements, labels (counts).
    """
    if from_file:
        with open(from_file, "rb") as f:
            raw = f.read()
        names: dict[int, str] = {}
    else:
        if project is None:
            raise AnnotateError("pass --project (title or id) to pull from a server, or --from-file EXPORT.json")
        found = ls.find_project(project)
        if found is None:
            raise AnnotateError(f"no Label Studio project titled {project!r}; check the title or pass its id")
        raw, names = ls.export(found), ls.annotators()
    export, raw = read_export(raw)
    rows, report = label_rows(export, maps, names)
    if not rows:
        raise AnnotateError(f"no labelled maps in the export ({report['tasks']} task(s), {report['cancelled']} "
                            f"skipped, {report['unlabelled']} unlabelled); nothing written to {out}")
    return write_labelled_set(out, raw, rows, report, maps)
