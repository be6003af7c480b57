"""Label Studio round trip: labeling config from labels.py, push map tasks, set up several annotators.

Usage (what ``patterncnn annotate push`` and ``annotators`` run; pulling is :mod:`patterncnn.labelling.pull`)::

    ls = connect("http://localhost:8080", api_key)                 # patterncnn.labelling.labelstudio
    project = ls.ensure_project("attention patterns", label_config(), hidden_columns=HIDDEN_COLUMNS)
    push(ls, project, open_maps("exports/demo"), predictor=RulePredictor())
    setup_annotators(ls, project, per_task=3)                       # three blind annotators per map

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
import io
import logging
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Protocol

import numpy as np

from ..classifier.features import rule_scores
from ..classifier.render import render_png
from ..core.labels import LABELS
from .labelstudio import AnnotateError, Connection

log = logging.getLogger(__name__)

FROM_NAME, TO_NAME, UNCERTAIN = "pattern", "map", "uncertain"
RULE_VERSION = "rule-v1"
HIDDEN_COLUMNS = ("map_npy", "pre_scores", "seps", "pre_label", "pre_model")  # not for the task list


def label_config() -> str:
    """The labeling config: the map picture, one single choice of the five labels, an uncertain box."""
    choices = "\n".join(f'    <Choice value="{name}"/>' for name in LABELS)
    # The choices and the uncertain box come before the picture, so they stay in view above a tall map.
    return f"""<View>
  <Header value="$map_id" size="5"/>
  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single-radio" showInline="true" required="true">
{choices}
  </Choices>
  <Choices name="{UNCERTAIN}" toName="{TO_NAME}" choice="multiple" showInline="true">
    <Choice value="uncertain" hint="two labels fit equally well (annotations/ANNOTATION_GUIDE.md, rule 6)"/>
  </Choices>
  <Image name="{TO_NAME}" value="$image" zoom="true" zoomControl="true" maxWidth="760px"/>
  <Text name="info" value="$info"/>
</View>"""


class Predictor(Protocol):
    model_version: str

    def predict(self, maps: list[np.ndarray], seps: list[list[int] | None]) -> np.ndarray:
        """(N, 5) class probabilities in LABELS order."""


class RulePredictor:
    """Pre-annotation from the transparent feature rule (:func:`patterncnn.classifier.features.rule_scores`)."""

    model_version = RULE_VERSION

    def predict(self, maps, seps):
        return np.stack([rule_scores(m, s) for m, s in zip(maps, seps)])


def choice_names(config: str | None) -> tuple[str, str]:
    """(from_name, to_name) of the pattern Choices in a project's labeling config; checks its labels.

    Raises:
        ValueError: the config is not XML, or has no Choices with exactly patterncnn's labels.
    """
    if not config:
        return FROM_NAME, TO_NAME
    try:
        root = ET.fromstring(config)
    except ET.ParseError as e:
        raise ValueError(f"labeling config is not valid XML ({e})") from None
    for ch in root.iter("Choices"):
        values = [c.get("value") for c in ch.iter("Choice")]
        if set(values) & set(LABELS):
            unknown = [v for v in values if v not in LABELS]
            if unknown:
                raise ValueError(f"the project's Choices {ch.get('name')!r} has labels {unknown} that patterncnn does "
                                 f"not predict; use the config from `patterncnn annotate config`")
            return ch.get("name"), ch.get("toName")
    raise ValueError("the project's labeling config has no Choices with the five pattern labels; use the config "
                     "from `patterncnn annotate config`")


def choice_result(label: str, from_name: str = FROM_NAME, to_name: str = TO_NAME) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [label]}}


def prediction(probs: np.ndarray, model_version: str, from_name: str = FROM_NAME, to_name: str = TO_NAME) -> dict:
    """A Label Studio prediction (pre-annotation) from (5,) class probabilities: the top label and its score."""
    best = int(np.argmax(probs))
    score = float(probs[best])
    return {"model_version": model_version, "score": score,
            "result": [{**choice_result(LABELS[best], from_name, to_name), "score": score}]}


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
        data["pre_label"] = LABELS[int(np.argmax(probs))]
        data["pre_scores"] = {name: round(float(p), 4) for name, p in zip(LABELS, probs)}
        data["pre_model"] = model_version
        task["predictions"] = [prediction(probs, model_version)]
    return task


def push(ls: Connection, project, maps, predictor: Predictor | None = None, order: str = "store",
         limit: int | None = None, batch: int = 50) -> dict:
    """Import maps as tasks, skipping map ids already in the project (idempotent).

    Args:
        maps: a map store or plain npz (see :func:`patterncnn.core.maps.open_maps`).
        predictor: pre-annotates each task; None pushes without predictions.
        order: ``store`` (as stored) or ``uncertain`` (lowest top-class probability first; needs a predictor).
        limit: push at most this many new maps (after ordering).

    Returns:
        {"pushed": n, "skipped_existing": n, "project": id}
    """
    if order not in ("store", "uncertain"):
        raise AnnotateError(f"unknown --order {order!r}; use 'store' or 'uncertain'")
    if order == "uncertain" and predictor is None:
        raise AnnotateError("--order uncertain needs a predictor: pass --classifier models/patterncnn.onnx or "
                            "--pre rule")
    have = ls.map_ids(project.id)
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
    version = predictor.model_version if predictor is not None else ""
    for start in range(0, len(todo), batch):
        ls.import_tasks(project.id, [make_task(m, maps.get(m["id"]), probs.get(m["id"]), version)
                                     for m in todo[start : start + batch]])
    return {"pushed": len(todo), "skipped_existing": skipped, "project": project.id}


def setup_annotators(ls: Connection, project, per_task: int, blind: bool = True) -> dict:
    """Set a project up for several annotators: each task is labelled by ``per_task`` of them.

    In *Label All Tasks* (Label Studio's label stream) each annotator gets every task until
    ``per_task`` annotators have labelled it, and never sees another annotator's annotation there.
    ``blind`` also hides the predictions (``show_collab_predictions=False``); they stay stored, so
    the pre-annotation is still pulled beside the labels. Annotation history stays hidden.

    Returns:
        {"project", "per_task", "blind", "invite" (the sign-up link to send), "members" (user id -> e-mail)}
    """
    if per_task < 1:
        raise AnnotateError(f"--per-task must be at least 1 (got {per_task})")
    shown = {}
    if not blind:
        # Label Studio shows the predictions of the project's model version, and forgets it when they
        # are hidden: show the ML backend's, else the pushed pre-annotations' most common version.
        pushed = Counter(d.get("pre_model") for d in ls.task_data(project.id) if d.get("pre_model"))
        versions = list(ls.ml_backends(project.id)) or [v for v, _ in pushed.most_common(1)]
        shown = {"model_version": versions[0]} if versions else {}
    ls.update_project(project.id, maximum_annotations=per_task, show_collab_predictions=not blind,
                      show_annotation_history=False, show_overlap_first=True, **shown)
    return {"project": project.id, "per_task": per_task, "blind": blind, "invite": ls.invite_link(),
            "members": ls.annotators()}
