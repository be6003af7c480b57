"""Label Studio round trip: labeling config from labels.py, push map tasks, pull annotations.

Usage (what ``patterncnn annotate push/pull`` run)::

    ls = connect("http://localhost:8080", api_key)
    project = ensure_project(ls, "attention patterns")
    push(ls, project, open_maps("exports/demo"), predictor=RulePredictor())
    export = fetch_export(ls, project)                    # the JSON export, as bytes
    rows, report = tidy(json.loads(export), open_maps("exports/demo"))

**Images are embedded in the task as PNG data URIs** (``data:image/png;base64,...``). That works on
a stock Label Studio with no storage set up (no local-files serving, no cloud bucket, no upload
step that ties tasks to one server's media folder), keeps every task self-contained (an exported
task still shows the exact picture the annotator labelled) and makes pushing idempotent by map id.
The price is size: about 30-60 kB per task, which is why ``pull`` stores the export gzipped.

Each task's data also carries the map's metadata (model, task, example, layer, head, T) so an
annotator can see it, but the label is decided by the picture, and the pre-annotation (label and
per-class scores) so the label table can put pre-annotation and final label side by side.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
from collections import Counter
from typing import Iterable, Protocol

import numpy as np

from .features import rule_scores
from .labels import LABELS
from .render import render_png

log = logging.getLogger(__name__)

FROM_NAME, TO_NAME, UNCERTAIN = "pattern", "map", "uncertain"
RULE_VERSION = "rule-v1"


class AnnotateError(RuntimeError):
    """A Label Studio step failed; the message names the cause and the fix, in one line."""


def label_config() -> str:
    """The labeling config: the map picture, one single choice of the five labels, an uncertain box."""
    choices = "\n".join(f'    <Choice value="{name}"/>' for name in LABELS)
    return f"""<View>
  <Header value="$map_id" size="5"/>
  <Image name="{TO_NAME}" value="$image" zoom="true" zoomControl="true" maxWidth="760px"/>
  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single-radio" showInline="true" required="true">
{choices}
  </Choices>
  <Choices name="{UNCERTAIN}" toName="{TO_NAME}" choice="multiple" showInline="true">
    <Choice value="uncertain" hint="two labels fit equally well (ANNOTATION_GUIDE.md, rule 6)"/>
  </Choices>
  <Text name="info" value="$info"/>
</View>"""


class Predictor(Protocol):
    model_version: str

    def predict(self, maps: list[np.ndarray], seps: list[list[int] | None]) -> np.ndarray:
        """(N, 5) class probabilities in LABELS order."""


class RulePredictor:
    """Pre-annotation from the transparent feature rule (:func:`patterncnn.features.rule_scores`)."""

    model_version = RULE_VERSION

    def predict(self, maps, seps):
        return np.stack([rule_scores(m, s) for m, s in zip(maps, seps)])


def choice_result(label: str) -> dict:
    return {"from_name": FROM_NAME, "to_name": TO_NAME, "type": "choices", "value": {"choices": [label]}}


def make_task(meta: dict, arr: np.ndarray, probs: np.ndarray | None = None, model_version: str = "") -> dict:
    """One Label Studio task (data + optional prediction) for one map."""
    png = render_png(arr, meta.get("tokens"), meta.get("seps"), title=meta["id"])
    where = " | ".join(str(x) for x in (
        meta.get("model"), f"{meta.get('task', '?')} {meta.get('split', '')} #{meta.get('example', '?')}",
        f"layer {meta.get('layer', '?')} head {meta.get('head', '?')}", f"T={arr.shape[0]}") if x)
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr, dtype=np.float16))  # the map itself, for the ML backend (`patterncnn serve`)
    data = {"image": "data:image/png;base64," + base64.b64encode(png).decode("ascii"), "map_id": meta["id"],
            "info": where, **{k: meta[k] for k in ("model", "task", "split", "example", "layer", "head") if k in meta},
            "T": int(arr.shape[0]), "seps": meta.get("seps"),
            "map_npy": base64.b64encode(buf.getvalue()).decode("ascii")}
    task: dict = {"data": data}
    if probs is not None:
        best = int(np.argmax(probs))
        data["pre_label"] = LABELS[best]
        data["pre_scores"] = {name: round(float(p), 4) for name, p in zip(LABELS, probs)}
        data["pre_model"] = model_version
        task["predictions"] = [{"model_version": model_version, "score": float(probs[best]),
                                "result": [{**choice_result(LABELS[best]), "score": float(probs[best])}]}]
    return task


# ----------------------------------------------------------------------------------------------- server


def connect(url: str | None, api_key: str | None):
    """A checked Label Studio client: the server answers and the key is accepted.

    Raises:
        AnnotateError: no URL/key, server down, not Label Studio, or key refused (one line each).
    """
    import httpx
    from label_studio_sdk import LabelStudio

    if not url:
        raise AnnotateError("no Label Studio URL: pass --url or set LABEL_STUDIO_URL (e.g. http://localhost:8080)")
    if not api_key:
        raise AnnotateError("no Label Studio API key: pass --api-key or set LABEL_STUDIO_API_KEY (Label Studio UI: "
                            "Account & Settings > Legacy Token)")
    url = url.rstrip("/")
    try:
        health = httpx.get(f"{url}/health", timeout=10)
    except httpx.HTTPError as e:
        raise AnnotateError(f"cannot reach Label Studio at {url} ({type(e).__name__}): is the server running? "
                            f"Start it with `label-studio start` or fix --url") from None
    if health.status_code != 200 or "UP" not in health.text:
        raise AnnotateError(f"{url} answered /health with HTTP {health.status_code}; it does not look like Label "
                            f"Studio: check --url")
    client = LabelStudio(base_url=url, api_key=api_key, timeout=120)
    _call(lambda: client.projects.list(page_size=1), url)
    client._patterncnn_url = url  # for messages
    return client


def _call(fn, url: str = "Label Studio"):
    """Run one SDK call, turning HTTP failures into one-line AnnotateErrors."""
    import httpx
    from label_studio_sdk.core.api_error import ApiError

    try:
        return fn()
    except ApiError as e:
        body = str(e.body)[:200] if e.body else ""
        if e.status_code in (401, 403):
            hint = " (the server may need LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true)" if "legacy" in body.lower() else ""
            raise AnnotateError(f"Label Studio at {url} refused the API key (HTTP {e.status_code}){hint}: check "
                                f"--api-key / LABEL_STUDIO_API_KEY") from None
        raise AnnotateError(f"Label Studio at {url} answered HTTP {e.status_code}: {body}") from None
    except httpx.HTTPError as e:
        raise AnnotateError(f"lost the connection to Label Studio at {url} ({type(e).__name__}); is it running?") from None


def find_project(client, project: str | int):
    """A project by id (digits) or exact title; None when there is no such title."""
    url = getattr(client, "_patterncnn_url", "Label Studio")
    if isinstance(project, int) or str(project).isdigit():
        try:
            return _call(lambda: client.projects.get(id=int(project)), url)
        except AnnotateError as e:
            if "HTTP 404" in str(e):
                raise AnnotateError(f"no Label Studio project with id {project} at {url}; list them in the UI or "
                                    f"pass a title to create one") from None
            raise
    matches = [p for p in _call(lambda: list(client.projects.list(title=str(project))), url) if p.title == project]
    if len(matches) > 1:
        raise AnnotateError(f"{len(matches)} projects are titled {project!r}; pass the project id instead")
    return matches[0] if matches else None


def ensure_project(client, project: str | int, description: str = ""):
    """Reuse the project (by id or title) or create it with the patterncnn labeling config."""
    found = find_project(client, project)
    if found is not None:
        return found
    url = getattr(client, "_patterncnn_url", "Label Studio")
    return _call(lambda: client.projects.create(
        title=str(project), label_config=label_config(), show_skip_button=True,
        description=description or "Label each attention map by looking at it (ANNOTATION_GUIDE.md)."), url)


def existing_map_ids(client, project_id: int) -> set[str]:
    url = getattr(client, "_patterncnn_url", "Label Studio")
    tasks = _call(lambda: list(client.tasks.list(project=project_id, fields="all")), url)
    return {t.data.get("map_id") for t in tasks if t.data}


def push(client, project, maps, predictor: Predictor | None = None, order: str = "store", limit: int | None = None,
         batch: int = 50) -> dict:
    """Import maps as tasks, skipping map ids already in the project (idempotent).

    Args:
        maps: a map store or plain npz (see :func:`patterncnn.maps.open_maps`).
        predictor: pre-annotates each task; None pushes without predictions.
        order: ``store`` (as stored) or ``uncertain`` (lowest top-class probability first; needs a predictor).
        limit: push at most this many new maps (after ordering).

    Returns:
        {"pushed": n, "skipped_existing": n, "project": id}
    """
    if order not in ("store", "uncertain"):
        raise AnnotateError(f"unknown --order {order!r}; use 'store' or 'uncertain'")
    if order == "uncertain" and predictor is None:
        raise AnnotateError("--order uncertain needs a predictor: pass --classifier models/patterncnn.onnx or --pre rule")
    have = existing_map_ids(client, project.id)
    todo = [m for m in maps.meta if m["id"] not in have]
    skipped = len(maps.meta) - len(todo)
    probs: dict[str, np.ndarray] = {}
    if predictor is not None:
        for start in range(0, len(todo), 256):
            chunk = todo[start : start + 256]
            p = predictor.predict([maps.get(m["id"]) for m in chunk], [m.get("seps") for m in chunk])
            probs.update({m["id"]: row for m, row in zip(chunk, p)})
    if order == "uncertain":
        todo.sort(key=lambda m: (float(np.max(probs[m["id"]])), m["id"]))
    if limit is not None:
        todo = todo[:limit]
    url = getattr(client, "_patterncnn_url", "Label Studio")
    version = predictor.model_version if predictor is not None else ""
    for start in range(0, len(todo), batch):
        tasks = [make_task(m, maps.get(m["id"]), probs.get(m["id"]), version) for m in todo[start : start + batch]]
        _call(lambda: client.projects.import_tasks(project.id, request=tasks), url)
    return {"pushed": len(todo), "skipped_existing": skipped, "project": project.id}


def fetch_export(client, project) -> bytes:
    """The project's JSON export (all tasks), exactly as Label Studio sends it."""
    url = getattr(client, "_patterncnn_url", "Label Studio")
    return _call(lambda: b"".join(client.projects.exports.download_sync(
        project.id, export_type="JSON", download_all_tasks=True)), url)


def annotator_names(client) -> dict[int, str]:
    url = getattr(client, "_patterncnn_url", "Label Studio")
    return {u.id: u.email or u.username for u in _call(lambda: list(client.users.list()), url)}


# ------------------------------------------------------------------------------------------- resolution


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


TABLE_COLUMNS = ("map_id", "label", "uncertain", "annotator", "pre_label", "pre_score", "pre_model", "lead_time",
                 "n_annotations", "disagreement", "labels_seen", "model", "task", "split", "example", "layer", "head",
                 "T", "ls_task_id", "ls_annotation_id", "annotated_at")


def tidy(export: list[dict], maps=None, annotators: dict[int, str] | None = None) -> tuple[list[dict], dict]:
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
    import csv
    import gzip
    import io
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from .fileio import write_bytes, write_json, write_text
    from .maps import MapStore

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
