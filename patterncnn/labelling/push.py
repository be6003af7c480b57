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

**Tasks are blind.** The annotation guide says to label by the picture, not by the encoder, task,
layer or head, so the task shows none of them: the labelling interface shows a neutral id
(:func:`blind_id`, also the picture's title) above the choices and the picture. The real map id
(which spells all four) stays in a data field the pull reads and the task list hides (``map_id``),
with the map itself (for the ML backend), the pre-annotation (label and per-class scores, so the label
table can put pre-annotation and final label side by side) and the version of the annotation guide
the task is labelled under (:func:`guide_version`). The picture is fitted to the view: a tall map
(many tokens) shrinks to the window's height instead of running off it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import re
import xml.etree.ElementTree as ET
from collections import Counter
from importlib import resources
from typing import Protocol

import numpy as np

from ..classifier.features import rule_scores
from ..classifier.onnx import SHIPPED
from ..classifier.render import render_png
from ..core.arrayfile import FILE_LIMITS, ArrayFileError, read_npy
from ..core.labels import LABELS
from .labelstudio import AnnotateError, Connection

log = logging.getLogger(__name__)

FROM_NAME, TO_NAME, UNCERTAIN = "pattern", "map", "uncertain"
RULE_VERSION = "rule-v1"
# Task data the task list (Data Manager) does not show: the real map id names encoder, task, layer and head.
HIDDEN_COLUMNS = ("map_id", "map_npy", "pre_scores", "seps", "pre_label", "pre_model")
# Task data fields an annotator may see: what the labelling interface and the task list show.
SHOWN = ("ref", "image", "T", "guide")
# The annotation guide: annotations/ANNOTATION_GUIDE.md, shipped in the package beside the classifier
# (models/ANNOTATION_GUIDE.md links to it), so that an install from a wheel records its version too.
GUIDE = "ANNOTATION_GUIDE.md"
# The picture's height: the window's, less Label Studio's bars, the header and the two rows of choices above it
# (measured in Chromium at 1280x1000 and 1920x1080, tests/labelling/test_annotate_browser.py).
MAX_HEIGHT = "calc(100vh - 330px)"


def guide_version(path=None) -> str:
    """The version of the annotation guide (its line ``Version X.Y (date): ...``), recorded with every task.

    Args:
        path: a guide file; default the one shipped with the package (``annotations/ANNOTATION_GUIDE.md``).
    """
    guide = resources.files(SHIPPED).joinpath(GUIDE) if path is None else path
    try:
        head = guide.read_text(encoding="utf-8").splitlines()[:5]
    except OSError as e:
        raise AnnotateError(f"cannot read the annotation guide {guide} ({e.strerror or e}); reinstall "
                            f"patterncnn") from None
    found = next((m.group(1) for line in head if (m := re.match(r"Version (\d+(?:\.\d+)*)\b", line))), None)
    if found is None:
        raise AnnotateError(f"{guide} names no version in its first lines ('Version X.Y (date): ...'); restore the "
                            f"guide's version line")
    return found


def blind_id(map_id: str) -> str:
    """The neutral id an annotator sees instead of the map id: ``map 1a2b3c4d`` (a digest of the map id, so
    a map keeps its id across pushes, and the id says nothing of encoder, task, layer or head)."""
    return f"map {hashlib.sha256(map_id.encode('utf-8')).hexdigest()[:8]}"


def label_config() -> str:
    """The labeling config: a neutral id, one single choice of the five labels, an uncertain box, the picture."""
    choices = "\n".join(f'    <Choice value="{name}"/>' for name in LABELS)
    # The choices and the uncertain box come before the picture, so they stay in view above a tall map, and the
    # picture is no taller than the rest of the window (MAX_HEIGHT).
    return f"""<View>
  <Header value="$ref" size="5"/>
  <Choices name="{FROM_NAME}" toName="{TO_NAME}" choice="single-radio" showInline="true" required="true">
{choices}
  </Choices>
  <Choices name="{UNCERTAIN}" toName="{TO_NAME}" choice="multiple" showInline="true">
    <Choice value="uncertain" hint="two labels fit equally well (annotations/ANNOTATION_GUIDE.md, rule 6)"/>
  </Choices>
  <Image name="{TO_NAME}" value="$image" zoom="true" zoomControl="true" maxWidth="100%" maxHeight="{MAX_HEIGHT}"/>
</View>"""


def shown_fields(config: str) -> set[str]:
    """The task data fields a labeling config shows (its ``$field`` values)."""
    return set(re.findall(r'value="\$(\w+)"', config))


def blind_project(ls: Connection, project) -> bool:
    """Give a project made by an earlier patterncnn, whose config showed the map id or its metadata
    (``$map_id``, ``$info``), the blind config; the labels stay compatible (same choices). True if changed."""
    config = getattr(project, "label_config", None) or ""
    if not shown_fields(config) & {"map_id", "info", "model", "task", "layer", "head"}:
        return False
    ls.update_project(project.id, label_config=label_config())
    return True


class Predictor(Protocol):
    model_version: str

    def predict(self, maps: list[np.ndarray], seps: list[list[int] | None]) -> np.ndarray:
        """(N, 5) class probabilities in LABELS order."""


class RulePredictor:
    """Pre-annotation from the transparent feature rule (:func:`patterncnn.classifier.features.rule_scores`)."""

    model_version = RULE_VERSION

    def predict(self, maps, seps):
        return np.stack([rule_scores(m, s) for m, s in zip(maps, seps)])


def choice_names(config: str | None) -> tuple[str, str, tuple[str, ...]]:
    """(from_name, to_name, choices) of the pattern Choices in a project's labeling config: ``choices`` are what
    Label Studio stores for each of LABELS, in their order (a Choice's ``alias`` if it has one, else its value).

    Raises:
        ValueError: the config is not XML, or has no Choices with exactly patterncnn's labels, or that Choices
            has no ``name`` or ``toName``.
    """
    if not config:
        return FROM_NAME, TO_NAME, tuple(LABELS)
    try:
        root = ET.fromstring(config)
    except ET.ParseError as e:
        raise ValueError(f"labeling config is not valid XML ({e})") from None
    for ch in root.iter("Choices"):
        choices = {c.get("value"): c.get("alias") or c.get("value") for c in ch.iter("Choice")}
        if set(choices) & set(LABELS):
            unknown = [v for v in choices if v not in LABELS]
            if unknown:
                raise ValueError(f"the project's Choices {ch.get('name')!r} has labels {unknown} that patterncnn does "
                                 f"not predict; use the config from `patterncnn annotate config`")
            missing = [label for label in LABELS if label not in choices]
            if missing:
                raise ValueError(f"the project's Choices {ch.get('name')!r} lacks the labels {missing}, which "
                                 f"patterncnn predicts; use the config from `patterncnn annotate config`")
            if not ch.get("name") or not ch.get("toName"):
                raise ValueError("the project's pattern Choices needs a name and a toName (the Image it labels); use "
                                 "the config from `patterncnn annotate config`")
            return ch.get("name"), ch.get("toName"), tuple(choices[label] for label in LABELS)
    raise ValueError("the project's labeling config has no Choices with the five pattern labels; use the config "
                     "from `patterncnn annotate config`")


def choice_result(label: str, from_name: str = FROM_NAME, to_name: str = TO_NAME) -> dict:
    return {"from_name": from_name, "to_name": to_name, "type": "choices", "value": {"choices": [label]}}


def prediction(probs: np.ndarray, model_version: str, from_name: str = FROM_NAME, to_name: str = TO_NAME,
               choices: tuple[str, ...] = LABELS) -> dict:
    """A Label Studio prediction (pre-annotation) from (5,) class probabilities: the top label (as ``choices`` name
    it: a project's aliases, from :func:`choice_names`) and its score."""
    best = int(np.argmax(probs))
    score = float(probs[best])
    return {"model_version": model_version, "score": score,
            "result": [{**choice_result(choices[best], from_name, to_name), "score": score}]}


def make_task(meta: dict, arr: np.ndarray, probs: np.ndarray | None = None, model_version: str = "",
              guide: str | None = None) -> dict:
    """One blind Label Studio task (data + optional prediction) for one map (see the module docstring).

    Args:
        guide: the annotation guide's version (default :func:`guide_version`).
    """
    ref = blind_id(meta["id"])
    png = render_png(arr, meta.get("tokens"), meta.get("seps"), title=ref)
    buf = io.BytesIO()
    np.save(buf, _as_sent(arr))  # the map itself, for the ML backend (`patterncnn serve`)
    data = {"ref": ref, "image": "data:image/png;base64," + base64.b64encode(png).decode("ascii"),
            "T": int(arr.shape[0]), "guide": guide or guide_version(), "map_id": meta["id"], "seps": meta.get("seps"),
            "map_npy": base64.b64encode(buf.getvalue()).decode("ascii")}
    task: dict = {"data": data}
    if probs is not None:
        data["pre_label"] = LABELS[int(np.argmax(probs))]
        data["pre_scores"] = {name: round(float(p), 4) for name, p in zip(LABELS, probs)}
        data["pre_model"] = model_version
        task["predictions"] = [prediction(probs, model_version)]
    return task


def _as_sent(arr: np.ndarray) -> np.ndarray:
    """A map as a task carries it (``map_npy``): float16, which is plenty for the ML backend and halves the task."""
    return np.asarray(arr, dtype=np.float16)


SAME_MAP_ATOL = 2e-3  # two float16 steps at 1.0: the same map recomputed (another backend, device or batch) differs
# in the last bits, which can round to the neighbouring float16 (the onnx and torch backends: up to 5.6e-9 before
# rounding); another map under the same id differs by far more


def same_map(data: dict, arr: np.ndarray) -> bool:
    """Whether a task (its ``data``) carries this map: the same shape and values, as the task stores them (float16),
    to within :data:`SAME_MAP_ATOL`.

    A task without a readable ``map_npy`` (pushed before tasks carried the map) cannot tell: it counts as the
    same, so that its map id alone decides, as it did then."""
    try:
        sent = read_npy(base64.b64decode(data.get("map_npy") or "", validate=True), FILE_LIMITS, name="map_npy")
    except (ArrayFileError, ValueError):
        return True
    mine = _as_sent(arr)
    return (len(sent) == 1 and sent[0].shape == mine.shape
            and np.allclose(sent[0].astype(np.float32), mine.astype(np.float32), rtol=0, atol=SAME_MAP_ATOL))


def check_pushable(maps) -> None:
    """Refuse maps of which any cannot be drawn (checked as ``classify`` checks a map): an annotator cannot label
    what the task cannot show. Called before Label Studio is asked anything."""
    bad = [(m["id"], errors[0]) for m in maps.meta
           for errors in [maps.input_of(m)[1]] if errors]
    if bad:
        raise AnnotateError(f"{len(bad)} of the {len(maps.meta)} map(s) cannot be shown ({bad[0][0]}: {bad[0][1]}); "
                            f"nothing was pushed: fix or remove them (`patterncnn classify` lists every bad map)")


def push(ls: Connection, project, maps, predictor: Predictor | None = None, order: str = "store",
         limit: int | None = None, batch: int = 50, labelled: set[str] | frozenset = frozenset(),
         skip_labelled: bool = False) -> dict:
    """Import maps as tasks, skipping map ids already in the project (idempotent).

    A map whose id the project holds with another map (two plain ``.npy`` files both number their maps
    0, 1, ...) is refused before anything is pushed: it is not the task's map, nor may it be skipped as one.

    Args:
        maps: a map store or plain npz (see :func:`patterncnn.core.maps.open_maps`).
        predictor: pre-annotates each task; None pushes without predictions.
        order: ``store`` (as stored) or ``uncertain`` (lowest top-class probability first; needs a predictor).
        limit: push at most this many new maps (after ordering).
        labelled: map ids already labelled in the set the labels will be pulled into.
        skip_labelled: leave those maps out (else they are pushed, and reported).

    Returns:
        {"pushed": n, "skipped_existing": n, "project": id, "guide": version, "already_labelled": [the map ids
        that ``labelled`` holds: pushed anyway, or left out with ``skip_labelled``], "skipped_labelled": n,
        "without_seps": n (maps pushed with a pre-annotation made without their separator positions)}
    """
    if order not in ("store", "uncertain"):
        raise AnnotateError(f"unknown --order {order!r}; use 'store' or 'uncertain'")
    if order == "uncertain" and predictor is None:
        raise AnnotateError("--order uncertain needs a predictor: pass --classifier models/patterncnn.onnx or "
                            "--pre rule")
    check_pushable(maps)
    guide = guide_version()
    have = {d.get("map_id"): d for d in ls.task_data(project.id)}
    taken = [m["id"] for m in maps.meta if m["id"] in have and not same_map(have[m["id"]], maps.get(m["id"]))]
    if taken:
        raise AnnotateError(f"{len(taken)} map(s) of {maps.root} differ from the maps that project {project.id} holds "
                            f"under their ids (e.g. {taken[0]}); nothing was pushed: push them to another project, or "
                            f"give them ids of their own (a plain .npy numbers its maps 0, 1, ...; save them as an "
                            f".npz keyed by id)")
    todo = [m for m in maps.meta if m["id"] not in have]
    skipped = len(maps.meta) - len(todo)
    already = sorted(m["id"] for m in todo if m["id"] in labelled)
    if skip_labelled:
        todo = [m for m in todo if m["id"] not in labelled]
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
    if not skip_labelled:  # the ones pushed anyway
        already = sorted(m["id"] for m in todo if m["id"] in labelled)
    version = predictor.model_version if predictor is not None else ""
    for start in range(0, len(todo), batch):
        try:
            ls.import_tasks(project.id, [make_task(m, maps.get(m["id"]), probs.get(m["id"]), version, guide)
                                         for m in todo[start : start + batch]])
        except AnnotateError as e:  # the server went away mid-push: say what landed, and what a rerun pushes
            rest = (f"; a rerun pushes the maps not yet in the project, and its --limit counts only those: pass "
                    f"--limit {limit - start} to push the rest of this push's {limit}" if limit is not None and start
                    else "; run the same command again to push the rest (maps already there are skipped)")
            raise AnnotateError(f"{e}; {start} of the {len(todo)} map(s) to push were imported before it failed (the "
                                f"last batch may have landed too){rest}") from None
    without = sum(m.get("seps") is None for m in todo) if predictor is not None else 0
    return {"pushed": len(todo), "skipped_existing": skipped, "project": project.id, "guide": guide,
            "already_labelled": already, "skipped_labelled": len(already) if skip_labelled else 0,
            "without_seps": without}


def setup_annotators(ls: Connection, project, per_task: int, blind: bool = True, new_link: bool = False) -> dict:
    """Set a project up for several annotators: each task is labelled by ``per_task`` of them.

    In *Label All Tasks* (Label Studio's label stream) each annotator gets every task until
    ``per_task`` annotators have labelled it, and never sees another annotator's annotation there.
    ``blind`` also hides the predictions (``show_collab_predictions=False``); they stay stored, so
    the pre-annotation is still pulled beside the labels. Annotation history stays hidden. ``new_link``: the
    sign-up link is made anew, and the earlier one (sent before, or seen by someone it should not have been)
    stops working.

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
    return {"project": project.id, "per_task": per_task, "blind": blind, "invite": ls.invite_link(new=new_link),
            "members": ls.annotators()}
