"""Pull labels from Label Studio and merge them into a labelled set (:mod:`patterncnn.labelling.sets`).

Usage (what ``patterncnn annotate pull`` runs)::

    report = pull(connect(url, key), "attention patterns", maps=open_maps("exports/round1"), out="annotations")
    flat = flatten(read_export(raw)[0], names={1: "me@example.com"})     # the rows of one export

A pull reads the project's export (every annotation with its annotator's e-mail, every prediction
in full: :meth:`patterncnn.labelling.labelstudio.Connection.export`), turns it into one row per annotation
and one per prediction, and merges them by key into the set already in ``out``: nothing there is
lost unless ``replace`` is asked for. Then each map's label is resolved from all its annotators'
labels (:mod:`patterncnn.labelling.agreement`: majority or Dawid–Skene), and the method is recorded.

An export enters through :func:`read_export`, which inflates at most ``MAX_EXPORT_BYTES`` and
checks the shape of every task it reads (:func:`check_export`), so a damaged or foreign export is
refused naming the task and field, never half-merged.

A prediction's source is ``push`` (stored by ``patterncnn annotate push``: the task data names its
model), ``ml-backend`` (a model version that the project's ML backend, e.g. ``patterncnn serve``,
reported) or ``other``. Skipped tasks have no label and are counted.

Every row records its origin, the Label Studio task it came from (server, project, task id): labels of
one map pulled from a second server join the first server's as rows of their own, and ``labels.csv``
keeps the map's first origin (task and pre-annotation). Each vote records the annotation guide version
its task was pushed with (``guide`` in the task data; 1.0 for tasks pushed before versions were kept).

Pulling the same export twice changes nothing but ``pulls.jsonl``: the export is named by its content
(:func:`patterncnn.labelling.sets.export_identity`), and a row that only an export's name would change
keeps the export it came from first.
"""

from __future__ import annotations

import dataclasses
import datetime
import zlib
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

from ..core.errors import DataError
from ..core.fileio import parse_json
from ..core.labels import LABELS
from ..core.maps import MapStore, MultiStore
from ..core.version import __version__
from .agreement import FEW_FOR_DAWID_SKENE, METHODS, rater_votes, resolve_votes
from .labelstudio import AnnotateError, Connection
from .push import FROM_NAME, UNCERTAIN, same_map
from .sets import (
    GUIDE_BEFORE_VERSIONS,
    UNRESOLVED,
    Tables,
    check_maps,
    export_name,
    label_counts,
    merge_rows,
    read_tables,
    text,
    write_labelled_set,
)

META = ("model", "task", "split", "example", "layer", "head", "T")
MAX_EXPORT_BYTES = 512 << 20  # an export (inflated) read at most: its JSON is parsed whole
_SCALAR = (str, int, float, type(None))


def _expect(obj: dict, key: str, types: tuple, where: str, what: str) -> None:
    if not isinstance(obj.get(key), types) or isinstance(obj.get(key), bool) and bool not in types:
        raise AnnotateError(f"the export is not a Label Studio JSON export of patterncnn tasks: {where}.{key} must be "
                            f"{what} (it is {type(obj.get(key)).__name__}); export the project as JSON again")


def _check_result(item, where: str) -> None:
    if not isinstance(item, dict):
        raise AnnotateError(f"the export is not a Label Studio JSON export: {where} must be an object; export the "
                            f"project as JSON again")
    _expect(item, "result", (list, type(None)), where, "a list")
    for k, r in enumerate(item.get("result") or []):
        if not isinstance(r, dict):
            raise AnnotateError(f"the export is not a Label Studio JSON export: {where}.result[{k}] must be an "
                                f"object; export the project as JSON again")
        _expect(r, "from_name", (str, type(None)), f"{where}.result[{k}]", "a string")
        _expect(r, "value", (dict, type(None)), f"{where}.result[{k}]", "an object")
        choices = (r.get("value") or {}).get("choices")
        if choices is not None and not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
            raise AnnotateError(f"the export is not a Label Studio JSON export: {where}.result[{k}].value.choices "
                                f"must be a list of strings; export the project as JSON again")
    for key in ("id", "model_version", "created_at", "updated_at", "score", "lead_time"):
        _expect(item, key, _SCALAR, where, "a string, a number or null")
    for key in ("created_at", "updated_at", "model_version"):
        _expect(item, key, (str, type(None)), where, "a string or null")


def check_export(export) -> None:
    """Refuse (AnnotateError naming the task and field) an export whose tasks do not have the shape :func:`flatten`
    and :func:`learn_names` read: a list of task objects, each with ``data.map_id``, annotations and predictions
    as lists of objects (a prediction may also be an id), results as objects with string choices."""
    if not isinstance(export, list):
        raise AnnotateError("the export is not a Label Studio JSON export (a list of tasks); export as JSON")
    for i, task in enumerate(export):
        where = f"task #{i}"
        if not isinstance(task, dict):
            raise AnnotateError(f"the export is not a Label Studio JSON export: {where} must be an object; export the "
                                f"project as JSON again")
        _expect(task, "data", (dict,), where, "an object")
        data = task["data"]
        if not isinstance(data.get("map_id"), str) or not data["map_id"]:
            raise AnnotateError(f"task {task.get('id')} has no map_id: it was not pushed by patterncnn")
        for key in ("pre_model", "pre_label"):
            _expect(data, key, (str, type(None)), f"{where}.data", "a string or null")
        _expect(data, "pre_scores", (dict, type(None)), f"{where}.data", "an object")
        for key in ("id", "project", "created_at"):
            _expect(task, key, _SCALAR, where, "a string, a number or null")
        for key in ("annotations", "predictions"):
            _expect(task, key, (list, type(None)), where, "a list")
        for j, ann in enumerate(task.get("annotations") or []):
            _check_result(ann, f"{where}.annotations[{j}]")
            _expect(ann, "completed_by", (int, str, dict, type(None)), f"{where}.annotations[{j}]", "a user")
            _expect(ann, "updated_by", (int, str, dict, type(None)), f"{where}.annotations[{j}]", "a user")
            _expect(ann, "id", (int, type(None)), f"{where}.annotations[{j}]", "a number")
            who = ann.get("completed_by")
            if isinstance(who, dict):
                _expect(who, "email", (str, type(None)), f"{where}.annotations[{j}].completed_by", "a string")
                _expect(who, "id", _SCALAR, f"{where}.annotations[{j}].completed_by", "an id")
            _expect(ann, "parent_prediction", (int, type(None)), f"{where}.annotations[{j}]", "a prediction id")
            if isinstance(ann.get("prediction"), dict):
                _check_result(ann["prediction"], f"{where}.annotations[{j}].prediction")
        for j, p in enumerate(task.get("predictions") or []):
            if isinstance(p, dict):
                _check_result(p, f"{where}.predictions[{j}]")
                if p.get("id") is None:
                    raise AnnotateError(f"the export is not a Label Studio JSON export: {where}.predictions[{j}] has "
                                        f"no id; export the project as JSON again")
            elif not isinstance(p, (int, str)):
                raise AnnotateError(f"the export is not a Label Studio JSON export: {where}.predictions[{j}] must be "
                                    f"an object or an id; export the project as JSON again")


def _parent_prediction(ann: dict):
    """The id of the prediction an annotation started from (Label Studio's ``parent_prediction``: the pre-annotation
    the labelling screen showed pre-selected, which the annotator kept or changed), or None: started blank."""
    parent, carried = ann.get("parent_prediction"), _carried_prediction(ann)
    return carried["id"] if parent is None and carried is not None else parent


def _carried_prediction(ann: dict) -> dict | None:
    """The prediction an annotation carries in full (``prediction``: the one it started from, in exports of every
    Label Studio version, also those that list a task's predictions only by id), or None."""
    p = ann.get("prediction")
    return p if isinstance(p, dict) and p.get("id") is not None else None


def _label_of(ann: dict) -> tuple[str | None, bool]:
    """(pattern label or None, uncertain) of one annotation or prediction."""
    label, uncertain = None, False
    for r in ann.get("result") or []:
        choices = (r.get("value") or {}).get("choices") or []
        if r.get("from_name") == FROM_NAME and choices:
            if len(choices) > 1:
                raise AnnotateError(f"annotation {ann.get('id')} has {len(choices)} patterns ({', '.join(choices)}); "
                                    f"a map has one: have its annotator choose one in Label Studio (was the project's "
                                    f"labeling config edited to allow several?)")
            label = choices[0]
        if r.get("from_name") == UNCERTAIN and "uncertain" in choices:
            uncertain = True
    if label is not None and label not in LABELS:
        raise AnnotateError(f"annotation {ann.get('id')} has label {label!r}, not one of {', '.join(LABELS)}: "
                            f"was the project created with another labeling config?")
    return label, uncertain


@dataclasses.dataclass
class Flat:
    """The rows of one export."""

    annotations: list[dict]
    predictions: list[dict]
    info: dict[str, dict]  # map_id -> the task's map metadata and its origin (server, ls_project, ls_task_id)
    # tasks, cancelled (tasks only skipped), skipped_annotations (every skip, of labelled tasks too), unlabelled,
    # unknown_annotators, predictions_without_content, copied_from_predictions
    # (annotation ids), changed_by_another (annotation id, map, made_by, changed_by)
    report: dict


def _who(completed_by, names: dict[int, str]) -> tuple[str, str]:
    """(annotator e-mail, or "user <id>" when unknown; user id) from an annotation's ``completed_by``."""
    if isinstance(completed_by, dict):
        uid = completed_by.get("id")
        return completed_by.get("email") or names.get(uid) or f"user {uid}", text(uid)
    return names.get(completed_by) or f"user {completed_by}", text(completed_by)


def _user_id(user):
    return user.get("id") if isinstance(user, dict) else user


def _copied_prediction(ann: dict) -> bool:
    """An annotation that Label Studio copied from a prediction (its Data Manager action "Create Annotations From
    Predictions": ``parent_prediction`` set, ``updated_by`` null) and no person has submitted since (submitting
    sets ``updated_by``): no one looked at that map, so it is not a vote."""
    return ann.get("parent_prediction") is not None and "updated_by" in ann and ann["updated_by"] is None


def _decider(ann: dict):
    """Who gave an annotation its result: ``updated_by`` where the export has one (the member who last submitted
    it; any member can change another's annotation, and the admin can post one in another's name), else
    ``completed_by`` (exports of Label Studio versions without it)."""
    made, updated = ann.get("completed_by"), ann.get("updated_by")
    return made if updated is None or _user_id(updated) == _user_id(made) else updated


def _prediction_rows(task: dict, backends: dict[str, str], export_file: str, server: str = ""
                     ) -> tuple[list[dict], int]:
    """The task's predictions as rows, and how many the export names only by id."""
    data = task.get("data") or {}
    listed = task.get("predictions") or []
    full = {p["id"]: p for p in listed if isinstance(p, dict)}
    for ann in task.get("annotations") or []:
        p = _carried_prediction(ann)
        if p is not None:
            full.setdefault(p["id"], p)
    ids_only = len({p for p in listed if not isinstance(p, dict)} - set(full))
    pre_model, pre_scores = data.get("pre_model"), data.get("pre_scores") or {}
    rows = []
    # The pushed prediction came with the task, before any other of its version: an ML backend serving the same
    # classifier gives its own predictions that version too (Label Studio records no other mark of who made one), and
    # they were all taken for pushed ones, with the backend's URL (helper 97's walk of the docs)
    pushed = min((p["id"] for p in full.values() if pre_model and p.get("model_version") == pre_model
                  and isinstance(p.get("id"), int)), default=None)
    for p in full.values():
        label, _ = _label_of(p)
        mv = p.get("model_version") or ""
        source = "push" if p["id"] == pushed else "ml-backend" if mv in backends else "other"
        score = pre_scores.get(label, p.get("score")) if source == "push" else p.get("score")
        rows.append({"map_id": data["map_id"], "source": source,
                     "backend": backends.get(mv, "") if source == "ml-backend" else "", "model_version": mv,
                     "label": label, "score": score, "created_at": p.get("created_at"),
                     "ls_project": task.get("project"), "ls_task_id": task.get("id"), "ls_prediction_id": p["id"],
                     "export": export_file, "server": server})
    if pre_model and not any(r["source"] == "push" for r in rows):  # only the task data holds the pushed one
        rows.append({"map_id": data["map_id"], "source": "push", "model_version": pre_model,
                     "label": data.get("pre_label"), "score": pre_scores.get(data.get("pre_label")),
                     "created_at": task.get("created_at"), "ls_project": task.get("project"),
                     "ls_task_id": task.get("id"), "export": export_file, "server": server})
        ids_only = max(ids_only - 1, 0)  # the pushed prediction is one of the ids
    return rows, ids_only


def flatten(export: list[dict], names: dict[int, str] | None = None, backends: dict[str, str] | None = None,
            export_file: str = "", server: str = "") -> Flat:
    """One row per annotation and per prediction of a Label Studio JSON export.

    Args:
        names: Label Studio user id -> e-mail, for exports whose ``completed_by`` is a bare id.
        backends: model version -> URL of the ML backend that reported it.
        export_file: where the export is kept in the labelled set (recorded in every row).
        server: the Label Studio the export came from (recorded in every row; "" when unknown).
    """
    check_export(export)
    names, backends = names or {}, backends or {}
    anns, preds, info = [], [], {}
    report = {"tasks": len(export), "cancelled": 0, "skipped_annotations": 0, "unlabelled": 0,
              "unknown_annotators": set(),
              "predictions_without_content": 0, "copied_from_predictions": [], "changed_by_another": [],
              "started_from_predictions": {"votes": 0, "kept_its_label": 0}}
    names = {**names, **{_user_id(a["completed_by"]): a["completed_by"]["email"] for t in export
                         for a in t.get("annotations") or [] if isinstance(a.get("completed_by"), dict)
                         and a["completed_by"].get("email")}}  # the export's own e-mails name its bare ids too
    for task in export:
        data = task.get("data") or {}
        map_id = data.get("map_id")
        if map_id is None:
            raise AnnotateError(f"task {task.get('id')} has no map_id: it was not pushed by patterncnn")
        guide = text(data.get("guide")) or GUIDE_BEFORE_VERSIONS
        info[map_id] = {**{k: data.get(k) for k in META}, "server": server, "ls_project": text(task.get("project")),
                        "ls_task_id": text(task.get("id"))}
        labelled = cancelled = False
        for ann in task.get("annotations") or []:
            if _copied_prediction(ann):
                report["copied_from_predictions"].append(text(ann.get("id")))
                continue
            label, uncertain = _label_of(ann)
            if label is not None and not ann.get("was_cancelled") and ann.get("parent_prediction") is not None:
                # made from a prediction the labelling screen showed pre-selected (labelling alone): the editor sets
                # parent_prediction; `prediction`, which Label Studio fills for every annotation, is no evidence
                started = report["started_from_predictions"]
                shown = {p.get("id"): _label_of(p)[0] for p in task.get("predictions") or [] if isinstance(p, dict)}
                started["votes"] += 1
                started["kept_its_label"] += shown.get(ann["parent_prediction"]) == label
            decider = _decider(ann)
            who, uid = _who(decider, names)
            if who.startswith("user "):
                report["unknown_annotators"].add(uid)
            if decider is not ann.get("completed_by"):
                report["changed_by_another"].append({"ls_annotation_id": text(ann.get("id")), "map_id": map_id,
                                                     "made_by": _who(ann.get("completed_by"), names)[0],
                                                     "changed_by": who})
            labelled |= label is not None and not ann.get("was_cancelled")
            cancelled |= bool(ann.get("was_cancelled"))
            report["skipped_annotations"] += bool(ann.get("was_cancelled"))
            anns.append({"map_id": map_id, "annotator": who, "annotator_id": uid, "label": label,
                         "uncertain": uncertain, "skipped": bool(ann.get("was_cancelled")),
                         "lead_time": ann.get("lead_time"), "created_at": ann.get("created_at"),
                         "updated_at": ann.get("updated_at"), "ls_project": task.get("project"),
                         "ls_task_id": task.get("id"), "ls_annotation_id": ann.get("id"),
                         "ls_unique_id": ann.get("unique_id"), "export": export_file, "guide": guide,
                         "server": server, "ls_parent_prediction_id": _parent_prediction(ann)})
        if not labelled:
            report["cancelled" if cancelled else "unlabelled"] += 1
        rows, ids_only = _prediction_rows(task, backends, export_file, server)
        preds += rows
        report["predictions_without_content"] += ids_only
    report["unknown_annotators"] = sorted(report["unknown_annotators"], key=lambda u: (len(u), u))
    return Flat(anns, preds, info, report)


def learn_names(export: list[dict], tables: Tables, server: str = "") -> dict[int, str]:
    """User id -> e-mail as far as an existing labelled set tells of the Label Studio ``server`` the export came
    from (user ids count from 1 on every server): its annotation rows, and (for sets written before the votes were
    kept) its label rows' annotation ids matched to the export."""
    ours = [r for r in tables.annotations.values() if (r.get("server") or "") == server]
    names = {int(r["annotator_id"]): r["annotator"] for r in ours
             if r.get("annotator_id", "").isdigit() and not r["annotator"].startswith("user ")}
    by_annotation = {r["ls_annotation_id"]: r["annotator"] for r in tables.labels.values()
                     if (r.get("server") or "") == server and r.get("ls_annotation_id") and r.get("annotator")
                     and not r["annotator"].isdigit()}
    for task in export:
        for ann in task.get("annotations") or []:
            who = ann.get("completed_by")
            if isinstance(who, int) and who not in names and text(ann.get("id")) in by_annotation:
                names[who] = by_annotation[text(ann.get("id"))]
    return names


def origin_of(row: dict) -> tuple[str, str]:
    """The Label Studio task a row came from: (server, task id); task ids are unique within one server."""
    return row.get("server") or "", row.get("ls_task_id") or ""


def pre_annotations(annotations: Iterable[dict], predictions: Iterable[dict]) -> dict[tuple[str, tuple], dict]:
    """(map id, origin) -> the task's pre-annotation: the prediction its earliest annotation that records one started
    from (Label Studio's ``parent_prediction``: the one the labelling screen showed pre-selected, which is the
    project's chosen model version, not necessarily the latest; a labelled annotation before a skipped one). Where
    no annotation records one (blind annotators, votes pulled before 2026-11-28) or it is not among the labelled
    predictions: of the predictions with a label, the latest made before the task's first annotation, the one its
    annotators could have seen (a prediction made later, say by an ML backend after the labelling, is not); the
    earliest when none was made before it, or when time stamps are missing."""
    first_vote: dict[tuple[str, tuple], str] = {}
    parents: dict[tuple[str, tuple], tuple] = {}  # key -> (skipped, created_at, parent id) of the first with one
    for r in annotations:
        key, when = (r["map_id"], origin_of(r)), r.get("created_at") or ""
        if when and (key not in first_vote or when < first_vote[key]):
            first_vote[key] = when
        parent = text(r.get("ls_parent_prediction_id"))
        if parent:
            rank = (text(r.get("skipped")) == "True", when or "~", parent)
            if key not in parents or rank < parents[key]:
                parents[key] = rank
    pres: dict[tuple[str, tuple], dict] = {}
    started_from: dict[tuple[str, tuple], dict] = {}
    for p in sorted((p for p in predictions if p.get("label")), key=lambda p: p.get("created_at") or ""):
        key, when = (p["map_id"], origin_of(p)), p.get("created_at") or ""
        if key in parents and text(p.get("ls_prediction_id")) == parents[key][2]:
            started_from[key] = p
        if key not in pres or when and first_vote.get(key) and when < first_vote[key]:
            pres[key] = p
    return {**pres, **started_from}


def label_rows(annotations: dict[str, dict], predictions: dict[str, dict], info: dict[str, dict],
               method: str = "majority", first: dict[str, dict] | None = None) -> dict[str, dict]:
    """One row per map that has a vote: the resolution of all its annotations, beside its pre-annotation.

    Args:
        annotations, predictions: keyed rows (:class:`patterncnn.labelling.sets.Tables`).
        info: map id -> map metadata (model, task, ..., T).
        first: map id -> the map's first origin {server, ls_project, ls_task_id}: its task and pre-annotation
            (:func:`pre_annotations`) are the ones the row shows. A map without one takes the origin of its
            latest vote.
    """
    votes = rater_votes(annotations.values())
    resolved = resolve_votes(votes, method)
    labelled, origins = defaultdict(list), defaultdict(set)
    for r in annotations.values():
        if r.get("label") and r.get("skipped") != "True":
            labelled[r["map_id"]].append(r)
    for r in (*annotations.values(), *predictions.values()):
        origins[r["map_id"]].add(origin_of(r))
    pres = pre_annotations(annotations.values(), predictions.values())
    first = first or {}
    rows = {}
    for map_id, res in resolved.items():
        seen = Counter(r["label"] for r in labelled[map_id])
        chosen = res.vote.row if res.vote else {}
        latest = max(votes[map_id].values(),
                     key=lambda v: (v.row.get("updated_at") or "", v.row.get("created_at") or ""))
        where = first.get(map_id) or {k: latest.row.get(k, "") for k in ("server", "ls_project", "ls_task_id")}
        pre = pres.get((map_id, origin_of(where)), {})
        project = where.get("ls_project") or next((r.get("ls_project") for r in labelled[map_id]
                                                   if origin_of(r) == origin_of(where)), "")
        guides = sorted({v.row.get("guide") or GUIDE_BEFORE_VERSIONS for v in votes[map_id].values()})
        rows[map_id] = {k: text(v) for k, v in {
            "map_id": map_id, "label": res.label, "uncertain": res.uncertain, "annotator": chosen.get("annotator"),
            "pre_label": pre.get("label"), "pre_score": pre.get("score"), "pre_model": pre.get("model_version"),
            "lead_time": chosen.get("lead_time"), "n_annotations": sum(seen.values()), "disagreement": len(seen) > 1,
            "labels_seen": dict(seen), **{k: v for k, v in info.get(map_id, {}).items() if k in META},
            "ls_task_id": where.get("ls_task_id"), "ls_annotation_id": chosen.get("ls_annotation_id"),
            "annotated_at": chosen.get("updated_at") or chosen.get("created_at"), "pre_source": pre.get("source"),
            "n_annotators": len(votes[map_id]), "resolution": res.method, "resolution_p": round(res.p, 4),
            "tie": res.tie, "n_uncertain": res.n_uncertain, "guide": ";".join(guides),
            "server": where.get("server"), "ls_project": project, "origins": len(origins[map_id])}.items()}
    return rows


def read_export(raw: bytes) -> tuple[list[dict], bytes]:
    """A Label Studio JSON export from bytes, plain or gzipped (as ``pull`` stores it): (tasks, JSON bytes).

    A gzipped export is inflated to at most ``MAX_EXPORT_BYTES`` (a 16 MB gzip can inflate to 16 GB);
    the tasks are checked by :func:`check_export`.
    """
    if raw[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(wbits=31)  # gzip
        try:
            out = inflate.decompress(raw, MAX_EXPORT_BYTES + 1)
        except zlib.error as e:
            raise AnnotateError(f"the export is a broken gzip file ({e}); download it again") from None
        if len(out) > MAX_EXPORT_BYTES:
            raise AnnotateError(f"the export inflates to more than {MAX_EXPORT_BYTES >> 20} MiB; export fewer tasks "
                                f"at a time")
        if not inflate.eof:
            raise AnnotateError("the export is a truncated gzip file; download it again")
        raw = out
    export = parse_json(raw, "the export", "export the project as JSON (not CSV/COCO/...)", AnnotateError)
    check_export(export)
    return export, raw


def _fetch(ls: Connection | None, project, from_file: str | None,
           pushed_by: str = "patterncnn annotate push") -> tuple[bytes, str, str, dict, dict, tuple | None]:
    """(export bytes, where they came from, the server's URL ("" for a file), user id -> e-mail,
    model version -> ML backend URL, (annotations per task the project asks for, whether a skip counts as one of
    them) from its ``maximum_annotations`` and ``skip_queue`` (None for a file, or one per task)). ``pushed_by``: the
    command that pushed the project's maps and printed its title and id, for the errors."""
    if from_file:
        with open(from_file, "rb") as f:
            raw = f.read(MAX_EXPORT_BYTES + 1)
        if len(raw) > MAX_EXPORT_BYTES:
            raise AnnotateError(f"{from_file} is over {MAX_EXPORT_BYTES >> 20} MiB; export fewer tasks at a time")
        return raw, f"file {from_file}", "", {}, {}, None
    if project is None:
        raise AnnotateError("pass --project (title or id) to pull from a server, or --from-file EXPORT.json")
    found = ls.find_project(project, pushed_by=pushed_by)
    if found is None:
        raise AnnotateError(f"no Label Studio project titled {project!r}; check the title or pass its id "
                            f"(`{pushed_by}` printed both)")
    per_task = getattr(found, "maximum_annotations", None)
    # Label Studio's default skip queue (REQUEUE_FOR_OTHERS) gives a skipped task to another annotator: only under
    # IGNORE_SKIPPED does a skip complete it (helper 110, on a real Label Studio 1.23)
    skips_count = str(getattr(found, "skip_queue", "") or "").endswith("IGNORE_SKIPPED")
    return (ls.export(found), f"{ls.url} project {found.id} ({found.title!r})", ls.url, ls.annotators(),
            ls.ml_backends(found.id), (per_task, skips_count) if isinstance(per_task, int) and per_task > 1 else None)


def _maps_source(out: Path, maps):
    """The labelled set's own maps/ (first) and the given stores, or None when there are neither."""
    sources = [MapStore(out / "maps")] if (out / "maps" / "store.json").is_file() else []
    sources += [maps] if maps is not None else []
    return MultiStore(sources) if sources else None


def _check_contents(export: list[dict], maps) -> None:
    """Refuse a task whose map (``map_npy``) is not the map of its id in ``maps``: its labels are another map's
    (two plain .npy files both number their maps 0, 1, ...)."""
    for task in export if maps is not None else ():
        data = task["data"]
        if data["map_id"] in maps and not same_map(data, maps.get(data["map_id"])):
            raise AnnotateError(f"task {task.get('id')} holds another map than {data['map_id']} of {maps.root}, so its "
                                f"labels are not that map's; nothing was written: pass with --maps the store(s) the "
                                f"project was pushed from, or pull into another --out (a labelled set holds one map "
                                f"per id)")


def _map_info(old: Tables, flat: Flat, maps) -> dict[str, dict]:
    """Map id -> metadata columns of labels.csv: from the map stores, else the task data, else the old row."""
    info = {m: {k: r.get(k, "") for k in META} for m, r in old.labels.items()}
    for m, i in flat.info.items():
        meta = maps.metadata(m) if maps is not None and m in maps else {}
        info[m] = {k: text(meta.get(k, i.get(k))) for k in META}
    return info


def _seen(row: dict) -> dict:
    """A label row's ``labels_seen`` (JSON in the CSV cell)."""
    return parse_json(row.get("labels_seen") or "{}", f"labels.csv: labels_seen of {row['map_id']}",
                      "repair it, or pull the labelled set again", DataError)


def _first_origins(old: Tables, flat: Flat, replace: bool) -> dict[str, dict]:
    """Map id -> the map's first origin (server, ls_project, ls_task_id): the set's row's, else this export's."""
    first = {} if replace else {m: {"server": r.get("server", ""), "ls_project": r.get("ls_project", ""),
                                    "ls_task_id": r.get("ls_task_id", "")} for m, r in old.labels.items()}
    for m, i in flat.info.items():
        first.setdefault(m, {k: i[k] for k in ("server", "ls_project", "ls_task_id")})
    return first


def _check_origins(old: Tables, flat: Flat) -> None:
    """Refuse an export whose tasks the set knows as other maps of the same server: two servers under one name."""
    known = {origin_of(r): r["map_id"] for r in (*old.annotations.values(), *old.predictions.values())
             if r.get("server")}
    for m, i in flat.info.items():
        other = known.get(origin_of(i))
        if i["server"] and other is not None and other != m:
            raise AnnotateError(f"task {i['ls_task_id']} of {i['server']} is {m} in this export, but {other} in the "
                                f"set: these are two Label Studio servers under one name; pull with --server NAME "
                                f"(a name of its own for this one)")


def _few_for_dawid_skene(annotations: dict, settled: list[str]) -> dict:
    """The ties Dawid-Skene settled among raters with fewer than FEW_FOR_DAWID_SKENE labelled maps in the set (too
    few to estimate how each errs: two annotators' 1-1 splits came out at p 0.97, helper 103's review), and those
    raters' map counts: {"ties": [...], "raters": {annotator: maps}}; empty when there are none."""
    maps_of, raters_of = defaultdict(set), defaultdict(set)
    for r in annotations.values():
        if r.get("label") and r.get("skipped") != "True":
            maps_of[r["annotator"]].add(r["map_id"])
            raters_of[r["map_id"]].add(r["annotator"])
    few = {m: sorted(a for a in raters_of[m] if len(maps_of[a]) < FEW_FOR_DAWID_SKENE) for m in settled}
    ties = sorted(m for m, raters in few.items() if raters)
    return {"ties": ties, "raters": {a: len(maps_of[a]) for a in sorted({a for m in ties for a in few[m]})}} \
        if ties else {}


def _check_unnamed_file(old: Tables, flat: Flat, server: str) -> None:
    """Refuse an export file pulled without ``--server`` whose annotations the set holds as pulled from a server: its
    rows would be taken for another origin's and rewrite those votes (the UI's export names annotators by id: every
    vote became ``user <id>``, a kept one counted twice; helper 103's review)."""
    if server:
        return

    def same(r):  # ids alone repeat on two fresh servers (each counts from 1): the time it was made, too
        return (r.get("map_id"), text(r.get("ls_project")), text(r.get("ls_annotation_id")),
                text(r.get("ls_unique_id")), text(r.get("created_at")))

    known = {same(r): r["server"] for r in old.annotations.values() if r.get("server")}
    found = sorted({known[same(r)] for r in flat.annotations if same(r) in known})
    if found:
        raise AnnotateError(f"this file holds annotations the set has as pulled from {' and '.join(found)}; pull it "
                            f"with --server {found[0]}, so that they are read as those votes (without it, it would "
                            f"record them again as the votes of an unnamed origin)")


def _short_of_annotators(flat: Flat, per_task: int | None, skips_count: bool = False) -> dict | None:
    """The labelled maps of this export with fewer annotations than the project asks for (``per_task``, from the
    server; None: a file, or one per task): {"per_task", "maps": {map id: annotations so far}}, else None. Their
    labels are resolved from the votes they have, one annotator's as ``single``: a round pulled before it is done
    (until 2026-11-29 it was pulled as if it were, without a word; helper 103's review). Annotations are counted as
    Label Studio counts them toward a task's completion: a skip only when ``skips_count`` (the project's skip queue
    is IGNORE_SKIPPED; by default a skipped task goes to another annotator); a vote another member changed, as one."""
    if per_task is None:
        return None
    done = Counter(a["map_id"] for a in flat.annotations if skips_count or not a["skipped"])
    labelled = {a["map_id"] for a in flat.annotations if a["label"] and not a["skipped"]}
    short = {m: done[m] for m in sorted(labelled) if done[m] < per_task}
    return {"per_task": per_task, "maps": short} if short else None


def last_resolution(out) -> str | None:
    """The resolution method of the labelled set's latest pull (``pulls.jsonl``), if any."""
    log = Path(out) / "pulls.jsonl"
    if not log.is_file():
        return None
    lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        return None
    last = parse_json(lines[-1], f"{log} (its last line)", "repair it or pass --resolve", AnnotateError)
    if not isinstance(last, dict):
        raise AnnotateError(f"{log}: the last line is not a JSON object; repair it or pass --resolve")
    method = last.get("resolution")
    if method is not None and method not in METHODS:
        raise AnnotateError(f"{log}: the last pull's resolution {method!r} is not one of {', '.join(METHODS)}; "
                            f"pass --resolve")
    return method


def pull(ls: Connection | None, project: str | int | None, maps, out, from_file: str | None = None,
         method: str | None = None, replace: bool = False, dry_run: bool = False,
         names: dict[int, str] | None = None, server: str | None = None,
         pushed_by: str = "patterncnn annotate push", drop_deleted: bool = False) -> dict:
    """Export a project's annotations (or read an export file) and merge them into the labelled set ``out``.

    Args:
        maps: the map store(s) the tasks were pushed from (None: only maps already in ``out/maps``).
        method: how each map's label is resolved from its annotators' labels (``majority``, ``dawid-skene``,
            ``majority-dawid-skene``); None keeps the method of the set's latest pull (majority for a new set),
            so that a pull does not silently re-resolve every earlier map another way.
        replace: make the set exactly this export's labels, dropping the rest (the report lists them).
        dry_run: compute and report, write nothing.
        names: user id -> e-mail for annotators the export names only by id (``--annotator``).
        server: the name recorded as the rows' server: default the URL pulled from, or "" for a file
            (the unnamed origin of sets pulled before servers were recorded).
        pushed_by: the command that pushed the project's maps and printed its title and id, named where the
            project is not found (as the way to push them again).
        drop_deleted: drop the votes that earlier pulls of this export's project(s) brought and that it no longer
            holds (deleted in Label Studio); without it they are kept, and listed (``votes_not_in_export``).

    Returns:
        The pull report: this export's counts, the changes per table (added, updated, kept, dropped),
        the labels (counts), the maps with disagreeing annotations, the ties and how they were settled (with
        the most annotators of an unresolved one), whether the set changed.
    """
    out = Path(out)
    method = method or last_resolution(out) or "majority"
    raw, source, url, server_names, backends, per_task = _fetch(ls, project, from_file, pushed_by)
    server = url if server is None else server
    export, raw = read_export(raw)
    old = read_tables(out)
    backends = {**{p["model_version"]: p.get("backend", "") for p in old.predictions.values()
                   if p.get("source") == "ml-backend"}, **backends}
    name = export_name(export, raw, out)
    names = {**learn_names(export, old, server), **server_names, **(names or {})}
    flat = flatten(export, names, backends, name, server)
    _check_origins(old, flat)
    _check_unnamed_file(old, flat, server)
    new = Tables.of(annotations=flat.annotations, predictions=flat.predictions)
    annotations, a_changes = merge_rows(old.annotations, new.annotations, replace, version="updated_at")
    projects = {(i["server"], i["ls_project"]) for i in flat.info.values()}  # votes of these it lacks were deleted
    gone = [] if replace else [(k, r) for k, r in sorted(old.annotations.items()) if k not in new.annotations
                               and r.get("label") and r.get("skipped") != "True"
                               and (r.get("server") or "", text(r.get("ls_project"))) in projects]
    if drop_deleted:  # this project's votes deleted in Label Studio since an earlier pull: dropped, not kept
        for k, _ in gone:
            del annotations[k]
        a_changes = {**a_changes, "kept": a_changes["kept"] - len(gone), "dropped": sorted(k for k, _ in gone)}
    predictions, p_changes = merge_rows(old.predictions, new.predictions, replace, version="created_at")
    source_maps = _maps_source(out, maps)
    _check_contents(export, source_maps)
    if not any(a["label"] and not a["skipped"] for a in flat.annotations):
        raise AnnotateError(f"no labelled maps in the export ({flat.report['tasks']} task(s), "
                            f"{flat.report['cancelled']} skipped, {flat.report['unlabelled']} unlabelled"
                            + (f", {len(flat.report['copied_from_predictions'])} annotation(s) copied from "
                               f"predictions, which are not votes" if flat.report["copied_from_predictions"] else "")
                            + "); "
                            f"nothing written to {out}: label the maps first (the project's Label All Tasks in "
                            f"Label Studio), then run this again")
    labels, l_changes = merge_rows(old.labels, label_rows(annotations, predictions, _map_info(old, flat, source_maps),
                                                          method, _first_origins(old, flat, replace)), replace)
    if drop_deleted:  # a map whose every vote was dropped has no label left to keep
        voted = {r["map_id"] for r in annotations.values() if r.get("label") and r.get("skipped") != "True"}
        unvoted = sorted({r["map_id"] for _, r in gone} - voted)
        for m in unvoted:
            labels.pop(m, None)
        l_changes = {**l_changes, "kept": l_changes["kept"] - len(unvoted), "dropped": unvoted}
    l_changes["relabelled"] = sorted(m for m in l_changes["updated"] if old.labels[m]["label"] != labels[m]["label"])
    # a row of an older pull gets today's `uncertain` (more than half of the annotators' flags, where it was the
    # latest vote's): said, not done silently (helper 109: 448 shipped rows became 437, "0 relabelled")
    l_changes["uncertain_changed"] = sorted(m for m in l_changes["updated"] if "uncertain" in old.labels[m]
                                            and old.labels[m]["uncertain"] != labels[m]["uncertain"])
    changes = {"annotations": a_changes, "predictions": p_changes, "labels": l_changes}
    changed = not (out / name).is_file() or any(c["added"] or c["updated"] or c["dropped"] for c in changes.values())
    ties = sorted(m for m, r in labels.items() if r.get("tie") == "True")
    few = _few_for_dawid_skene(annotations, [m for m in ties if "dawid" in labels[m]["resolution"]])
    report = {**flat.report, "source": source, "server": server, "export": name, "resolution": method,
              "replace": replace, "dry_run": dry_run, "changed": changed, "labelled": len(labels),
              "labels": label_counts(r for r in labels.values() if r["label"]),
              "resolutions": dict(Counter(r.get("resolution") or "earlier pull" for r in labels.values())),
              "changes": changes,
              "disagreements": [{"map_id": m, "labels": _seen(r), "chosen": r["label"]}
                                for m, r in sorted(labels.items()) if r.get("disagreement") == "True"],
              "ties": {"unresolved": [m for m in ties if labels[m]["resolution"] == UNRESOLVED],
                       "resolved": {m: labels[m]["resolution"] for m in ties if labels[m]["resolution"] != UNRESOLVED},
                       "most_annotators": max((int(labels[m]["n_annotators"]) for m in ties
                                               if labels[m]["resolution"] == UNRESOLVED), default=0),
                       "dawid_skene_few_maps": few},
              "short_of_annotators": _short_of_annotators(flat, *(per_task or (None, False))),
              "guides": dict(Counter(r.get("guide", "") for r in annotations.values() if r.get("label"))),
              "votes_not_in_export": [{k: r.get(k, "") for k in ("map_id", "annotator", "ls_annotation_id")}
                                      for _, r in gone], "drop_deleted": drop_deleted}
    check_maps(out, labels, source_maps)
    if dry_run:
        return report
    log_entry = {"at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "source": source, "server": server, "export": name, "resolution": method, "replace": replace,
                 "patterncnn": __version__, "labelled": len(labels), "changed": changed,
                 "changes": {t: {k: v if isinstance(v, int) else len(v) for k, v in c.items()}
                             for t, c in changes.items()}}
    # A pull that changes nothing only logs itself: pull-report.json stays that of the latest pull that did.
    write_labelled_set(out, Tables(labels, annotations, predictions), source_maps, (name, raw),
                       report if changed else None, log_entry)
    return report
