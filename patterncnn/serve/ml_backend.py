"""The Label Studio ML backend protocol: ``POST /setup``, ``POST /predict`` and ``GET /versions`` (``GET /health`` is
shared), and the
answers to ``POST /webhook`` and ``POST /train``.

Label Studio calls ``/setup`` with a project's labeling config when the backend is connected, and
``/predict`` with tasks to pre-annotate. It also posts every annotation to ``/webhook``, and *Start Training*
to ``/train`` (or ``/webhook`` with ``START_TRAINING``): patterncnn does not learn from Label Studio (its labels
are pulled and trained on by the commands). ``/webhook`` needs no token (Label Studio's webhooks do not carry the
backend's credentials), reads nothing and answers ``ignored``; ``/train`` is refused (422, as every refusal of this
service is a 4xx) with a message, in this service's log, that says what to run. The tasks are the map tasks that ``patterncnn annotate
push`` creates: their data carries the map as a base64 ``.npy``. Predictions are built by
:func:`patterncnn.labelling.push.prediction`, with the label names the project's config uses.
"""

from __future__ import annotations

import logging
from typing import Union

import numpy as np
from fastapi import APIRouter, Depends, Response
from pydantic import TypeAdapter

from ..classifier.classify import TOO_LARGE, scorable
from ..core.maps import classifier_input
from ..labelling.push import choice_names, prediction
from .decode import JsonRoute, task_map
from .errors import BadInput, describe, error_responses
from .middleware import shown
from .schemas import (
    Error,
    Prediction,
    PredictRequest,
    PredictResponse,
    SetupRequest,
    SetupResponse,
    Task,
    UnusableTask,
    Versions,
    WebhookResponse,
)
from .state import Parts, get_parts

MAX_NAME = 256
PREDICTIONS = TypeAdapter(list[Union[Prediction, list[Prediction]]])  # PredictResponse's results, in parts
PREDICTIONS_VERSION = TypeAdapter(str)
SHOWN = 5  # unusable tasks named in the log line of one /predict
log = logging.getLogger("patterncnn.serve")
router = APIRouter(route_class=JsonRoute, tags=["Label Studio ML backend"],
                   responses=error_responses(400, 408, 413, 415, 422))


def project_names(config: str | None) -> tuple[str, str, tuple[str, ...]]:
    """(from_name, to_name, choices) of the pattern choices in a labeling config; 422 naming the problem."""
    try:
        names = choice_names(config)
    except ValueError as e:
        raise BadInput(str(e)) from None
    if any(len(name) > MAX_NAME for name in (*names[:2], *names[2])):  # /setup keeps them: bound what it keeps
        raise BadInput(f"the pattern Choices' name, toName or a Choice's alias is longer than {MAX_NAME} characters; "
                       f"shorten it")
    return names


@router.post("/setup", response_model=SetupResponse)
async def setup(req: SetupRequest, parts: Parts = Depends(get_parts)) -> SetupResponse:
    """Check a project's labeling config and remember its label names."""
    names = await parts.run(project_names, req.label_config, limiter=parts.limiter_of("/setup"))  # XML: off the loop
    parts.remember_project(req.project, names)
    return SetupResponse(model_version=parts.classifier.model_version)


@router.post("/predict", response_model=PredictResponse)
async def predict(req: PredictRequest, parts: Parts = Depends(get_parts)) -> PredictResponse:
    """Pre-annotations for map tasks: the top label and its probability, one prediction per task.

    Label Studio sends every selected task in one request and stores nothing if the answer is an error, so the
    tasks are classified ``max_batch`` at a time, and a task without a usable map gets none: an empty list in its
    place (the server log names it), which Label Studio reads as no prediction for that task. It stores nothing for
    it, and asks again at the next *Retrieve Predictions* (an empty prediction under the model's version made it
    skip that task for as long as the version served, even after a restart with a larger ``--max-t``).
    """
    if req.label_config:
        names = await parts.run(project_names, req.label_config)
    else:
        names = parts.projects.get(str(req.project)) or project_names(None)
    return await parts.run(_answer, parts, req.tasks, *names)


def _answer(parts: Parts, tasks: list[Task | UnusableTask], from_name: str, to_name: str,
            choices: tuple[str, ...]) -> Response:
    # Serialized here, in the worker: one prediction per task, which Label Studio may send by the ten thousand.
    # A thousand predictions per call: a serializer call holds the GIL, and with it the event loop, until it returns.
    version = parts.classifier.model_version
    results = [prediction(p, version, from_name, to_name, choices) if p is not None else []
               for p in _predict(parts, tasks)]
    chunks = [PREDICTIONS.dump_json(PREDICTIONS.validate_python(results[i:i + 1000]))[1:-1]
              for i in range(0, len(results), 1000)]
    return Response(b'{"results":[' + b",".join(chunks) + b'],"model_version":' +
                    PREDICTIONS_VERSION.dump_json(version) + b"}", media_type="application/json")


@router.get("/versions", response_model=Versions)
async def versions(parts: Parts = Depends(get_parts)) -> Versions:
    """The model versions this backend serves: the classifier's (Label Studio's *Settings → Model* asks for them)."""
    return Versions(versions=[parts.classifier.model_version])


NOT_LEARNED_HERE = ("patterncnn does not learn from Label Studio: pull the labels (`patterncnn annotate pull`) and "
                    "train on them (`patterncnn train`, or `patterncnn adapt finish` for a new encoder), then serve "
                    "the new classifier")
open_router = APIRouter(tags=["Label Studio ML backend"])  # no token: Label Studio's webhooks carry none


@open_router.post("/webhook", response_model=WebhookResponse)
async def webhook() -> WebhookResponse:
    """Label Studio's events (every annotation; *Start Training* as ``START_TRAINING``): acknowledged as ignored,
    the body unread (bulk events carry every task's map)."""
    return WebhookResponse(status="ignored", detail=NOT_LEARNED_HERE)


@router.post("/train", status_code=422, response_model=Error, responses=error_responses(422))  # no 200 to list
async def train() -> Error:
    """Label Studio's *Start Training* (older protocol, every annotated task in the body, unread): refused (422),
    naming the commands that train. Label Studio shows only the status; the message is in this service's log."""
    raise BadInput(NOT_LEARNED_HERE)


def _predict(parts: Parts, tasks: list[Task | UnusableTask]) -> list[np.ndarray | None]:
    """(5,) probabilities per task, or None for a task without a usable map (or that breaks the schema); each map
    decoded as its batch fills (:meth:`Parts.probabilities`), so at most one batch's maps are held at once."""
    s = parts.settings
    unusable: list[str] = []

    def items():
        for i, task in enumerate(tasks):
            if isinstance(task, UnusableTask):  # named by its id, or where it is
                name = f"task {task.id}" if task.id is not None else f"the task at position {i}"
                unusable.append(f"{name}: {describe(task.errors, whole='the task').removeprefix('invalid request: ')}")
                yield task.id, None, None, None
                continue
            try:
                a, errors, _ = classifier_input(task_map(task, s), max_t=s.max_t, seps=task.data.seps)
            except BadInput as e:
                a, errors = None, [e.detail]
            if errors:  # a map's own error names no task; task_map's name theirs
                named = errors[0].startswith(f"task {task.id}")
                unusable.append(errors[0] if named else f"task {task.id}: {errors[0]}")
            yield task.id, None if errors else a, task.data.seps, None

    out: list[np.ndarray | None] = []
    for key, _, p in parts.probabilities(items()):
        if p is not None and not scorable(p[None])[0]:
            unusable.append(f"task {key}: {TOO_LARGE}")
            p = None
        out.append(p)
    if unusable:
        log.warning("POST /predict: %d of %d tasks got no prediction (no usable map): %s%s", len(unusable),
                    len(tasks), shown("; ".join(unusable[:SHOWN]), 1000),
                    f"; and {len(unusable) - SHOWN} more" if len(unusable) > SHOWN else "")
    return out
