"""Bounded decoding of request bodies: content types, JSON within limits, and maps from JSON, ``.npy``,
``.npz`` or a Label Studio task, each then checked by :func:`patterncnn.core.maps.check_map`.

JSON is parsed by pydantic-core's parser, which refuses nesting deeper than about ``JSON_MAX_DEPTH`` levels (its
own recursion limit: 201 levels pass, 250 do not),
lone surrogates and other invalid UTF-8, and takes ``NaN``/``Infinity`` (so that a map holding
them is refused by name). Arrays are read by :mod:`patterncnn.core.arrayfile`, which refuses an
over-limit header before allocating. Everything here but the content-type check runs in a worker
thread, under the limiter of inference, including the validation of the body models of the routes that
declare one (:class:`JsonRoute`); list lengths are bounded before their items are validated.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Callable, Iterator

import numpy as np
import pydantic_core
from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from ..core.arrayfile import NPY_MAGIC, ZIP_MAGIC, ArrayFileError, read_npy, read_npz
from ..core.maps import classifier_input
from .errors import BadInput, describe
from .schemas import ClassifyRequest, Task
from .settings import ServeSettings

JSON_MAX_DEPTH = 200  # about where pydantic-core's parser refuses deeper nesting; no body here needs more than 6
JSON = "application/json"
BINARY = ("application/octet-stream", "application/x-npy", "application/x-npz")
_STATUS = {"unreadable": 400, "invalid": 422, "too_large": 413}


def media_type(request: Request) -> str:
    """The request's media type, lower case, without parameters (``Application/JSON; charset=utf-8`` -> json)."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def require_json(request: Request) -> None:
    if media_type(request) != JSON:
        raise BadInput(f"unsupported content type {request.headers.get('content-type', '')!r}: send the body as "
                       f"JSON, with 'Content-Type: application/json'", 415)


def parse_json(body: bytes | bytearray, max_bytes: int, max_values: int | None = None):
    """The JSON value of ``body``; 413 over ``max_bytes`` or (for a body larger than ``max_values`` bytes) over
    ``max_values`` objects, arrays and items, counted before parsing; 400 if malformed or nested too deep.

    Parsed, each of those takes tens of bytes, against one to three in the body: a body larger than the JSON limit
    (``/predict``'s) must hold its bulk in strings (a task's picture and map), not in values.
    """
    if len(body) > max_bytes:
        raise BadInput(f"JSON body of {len(body)} bytes exceeds {max_bytes}; send big batches as .npy/.npz "
                       f"(application/octet-stream)", 413)
    if max_values is not None and len(body) > max_values:
        values = body.count(b",") + body.count(b"[") + body.count(b"{")  # an upper bound (strings hold some)
        if values > max_values:
            raise BadInput(f"JSON body of about {values} values (objects, arrays, items) is over the limit of "
                           f"{max_values}; send fewer tasks per request", 413)
    try:
        return pydantic_core.from_json(body, allow_inf_nan=True)
    except ValueError as e:
        hint = f"nest at most {JSON_MAX_DEPTH} levels" if "recursion limit" in str(e) else "send UTF-8 JSON (RFC 8259)"
        raise BadInput(f"malformed JSON: {e}; {hint}", 400) from None


def validated(model: type[BaseModel], data):
    """``data`` as ``model``: its lists bounded first (``model.max_items``, before any item is validated), then the
    model; 422 (413 for a list over its bound) naming the problem."""
    if isinstance(data, dict):
        for key, most in getattr(model, "max_items", {}).items():
            if isinstance(data.get(key), list) and len(data[key]) > most:
                raise BadInput(f"{len(data[key])} items in {key!r}; the limit is {most}: split the request", 413)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise BadInput(describe(e.errors())) from None


def parse_model(model: type[BaseModel], body: bytes, limit: int, max_values: int):
    return validated(model, parse_json(body, limit, max_values))


async def read_body(request: Request, charge: Callable[[int], None]) -> bytearray:
    """The request's body in one buffer, grown as its chunks arrive (Starlette's ``body()`` keeps the chunks and
    joins them, holding the body twice for a moment; a buffer of the declared length made up front would take that
    memory before a byte arrives), each chunk first passed to ``charge`` (:class:`patterncnn.serve.state.BodySlot`).
    A bytearray, so that an ``.npy``'s maps are views of it (:func:`patterncnn.core.arrayfile.read_npy`)."""
    length = request.headers.get("content-length", "")
    declared = int(length) if length.isdigit() else None  # BodyGuard refused a length over the budget
    buf = bytearray()
    async for chunk in request.stream():
        charge(len(chunk))
        buf += chunk  # a large buffer grows in place (glibc's realloc remaps its pages: nothing is copied)
        if declared is not None and len(buf) > declared:
            raise BadInput(f"the body is longer than its Content-Length of {declared} bytes; send its length", 400)
    if declared is not None and len(buf) < declared:
        raise BadInput(f"the body ended after {len(buf)} of the {declared} bytes its Content-Length declares; send "
                       f"it whole", 400)
    return buf


class BoundedRequest(Request):
    """A request whose ``json()`` is :func:`parse_json` under its route's body budget, then validated as the
    route's body model (``body_model``), all in a worker thread: nothing proportional to the body runs on the
    event loop (FastAPI takes the validated model as it is)."""

    body_model: type[BaseModel] | None = None
    slot = None  # the request's BodySlot (patterncnn.serve.state), which reads the body

    async def body(self) -> bytearray:
        if not hasattr(self, "_body"):
            self._body = await self.slot.read(self)
        return self._body

    async def json(self):
        if not hasattr(self, "_json"):
            parts, path = self.app.state.parts, self.scope.get("path", "")
            limit = parts.budget(path, JSON).body_bytes
            max_values = parts.settings.max_json_bytes // 4
            if self.body_model is None:
                call = (parse_json, await self.body(), limit, max_values)
            else:
                call = (parse_model, self.body_model, await self.body(), limit, max_values)
            self._json = await parts.run(*call, limiter=parts.limiter_of(path))
        return self._json


class JsonRoute(APIRoute):
    """A route whose body model is only read from ``application/json`` (else 415), parsed and validated within
    bounds off the event loop (:class:`BoundedRequest`)."""

    def get_route_handler(self):
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        model = self.body_field.field_info.annotation
        model = model if isinstance(model, type) and issubclass(model, BaseModel) else None

        async def bounded(request: Request):
            require_json(request)
            bounded_request = BoundedRequest(request.scope, request.receive)
            bounded_request.body_model = model
            # FastAPI reads the body before the route parses it: its bytes (and a large body's work slot: /predict's
            # may be up to --max-body-mb) are held from then until the answer
            async with request.app.state.parts.body_slot() as bounded_request.slot:
                # Read here, not inside FastAPI's body parsing, which turns a client that leaves mid-body into a
                # "400 There was an error parsing the body" (helper 90's review): it is one info line (CatchAll).
                await bounded_request.body()
                return await handler(bounded_request)

        return bounded


@dataclasses.dataclass
class Batch:
    """The maps of one request as decoded (any number type; :func:`inputs` converts and checks them): ids, maps,
    their seps (or None)."""

    ids: list[str]
    maps: list[np.ndarray | None]
    seps: list | None


def classify_batch(media: str, body: bytes | bytearray, s: ServeSettings) -> Batch:
    """The checked maps of a /v1/classify body (JSON, or an .npy/.npz for ``BINARY`` media types)."""
    if media == JSON:
        data = parse_json(body, s.max_json_bytes)
        if isinstance(data, dict):  # counted before any map is validated
            longest = max((len(v) for k in ("maps", "ids", "seps") if isinstance(v := data.get(k), list)), default=0)
            if longest > s.max_batch:
                raise _too_many(longest, s)
        req = validated(ClassifyRequest, data)
        ids, seps = req.id_list, req.seps
        if len(ids) > s.max_batch:
            raise _too_many(len(ids), s)
        maps = [_rows_to_array(i, rows) for i, rows in enumerate(req.map_list)]
    else:
        ids, maps, seps = _arrays(body, s)
    if len(maps) > s.max_batch:
        raise _too_many(len(maps), s)
    if not maps:
        raise BadInput("the request holds no maps; send at least one")
    return Batch(ids, maps, seps)


def task_map(task: Task, s: ServeSettings) -> np.ndarray:
    """The map a Label Studio task carries as a base64 .npy in ``data.map_npy`` (from `annotate push`)."""
    if task.data.map_npy is None:
        raise BadInput(f"task {task.id} carries no map (data.map_npy); push maps with `patterncnn annotate push`")
    try:
        raw = base64.b64decode(task.data.map_npy, validate=True)
    except ValueError:
        raw = b""
    if raw[:6] != NPY_MAGIC:
        raise BadInput(f"task {task.id}: data.map_npy is not a base64 .npy; push maps with `patterncnn annotate push`")
    try:
        maps = read_npy(raw, s.read_limits, name=f"task {task.id}: data.map_npy")
    except ArrayFileError as e:
        raise BadInput(str(e), _STATUS[e.kind]) from None
    if len(maps) != 1:
        raise BadInput(f"task {task.id}: data.map_npy holds {len(maps)} maps; a task carries one (T, T) map")
    return maps[0]


def inputs(batch: Batch, s: ServeSettings, problems: list[str]) -> Iterator[tuple]:
    """``(id, float32 map or None, seps, warning)`` of each map of ``batch``, made by
    :func:`patterncnn.core.maps.classifier_input` as it is taken, the decoded map then dropped from ``batch.maps``:
    a request holds its decoded maps or their float32 copies, not both. An unusable map's error goes to
    ``problems``; from the first one on no map is given (the request will be refused), only checked."""
    for i, k in enumerate(batch.ids):
        sep = batch.seps[i] if batch.seps else None
        a, errors, warns = classifier_input(batch.maps[i], max_t=s.max_t, seps=sep)
        batch.maps[i] = None
        if errors:
            problems.append(f"map {k!r}: {errors[0]}")
        yield k, None if problems else a, sep, warns[0] if warns else None


def refusal(problems: list[str]) -> BadInput:
    """The 422 naming a request's unusable maps (the first ten)."""
    return BadInput("; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else ""))


def _too_many(n: int, s: ServeSettings) -> BadInput:
    return BadInput(f"{n} maps in one request; the limit is {s.max_batch}: split the batch", 413)


def _rows_to_array(i: int, rows: list[list[float]]) -> np.ndarray:
    with np.errstate(over="ignore"):
        try:
            return np.asarray(rows, dtype=np.float32)
        except ValueError:
            raise BadInput(f"map {i} is not a rectangular list of numbers") from None


def _arrays(body: bytes | bytearray, s: ServeSettings) -> tuple[list[str], list[np.ndarray], list | None]:
    """(ids, maps, seps or None) of an .npy or .npz body; only an .npz carries separators (its SEPS_KEY member)."""
    try:
        if body[:6] == NPY_MAGIC:
            maps = read_npy(body, s.read_limits)
            return [str(i) for i in range(len(maps))], maps, None
        if body[:2] == ZIP_MAGIC:
            return read_npz(body, s.read_limits)
    except ArrayFileError as e:
        raise BadInput(str(e), _STATUS[e.kind]) from None
    if not body:
        raise BadInput("the body is empty; send an .npy or .npz (np.save/np.savez output) as the body, or JSON", 400)
    # the detail never quotes the body: it is logged, and the log never holds a request's raw body
    raise BadInput("the binary body is neither .npy nor .npz (it starts with neither .npy's magic b'\\x93NUMPY' nor "
                   "a zip's b'PK'); send np.save/np.savez output, or JSON", 400)
