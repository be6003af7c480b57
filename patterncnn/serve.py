"""The HTTP service: classify maps or text, and act as a Label Studio ML backend.

Usage (what ``patterncnn serve`` runs)::

    app = create_app(ServeSettings(api_token="..."), classifier=OnnxClassifier(...), encoder=load_encoder("minilm"))
    uvicorn.run(app, host="127.0.0.1", port=9090)

Endpoints (OpenAPI at ``/openapi.json``, docs at ``/docs``):

* ``POST /v1/classify``: maps -> label + probabilities. JSON ``{"maps": [[[...]]], "ids": [...], "seps": [...]}``
  (or ``{"map": [[...]]}``) for small maps; ``application/octet-stream`` bodies holding an ``.npy``
  ((T, T) or (N, T, T)) or an ``.npz`` (one square map per key) for big batches.
* ``POST /v1/analyze``: ``{"text": "...", "text_pair": "..."}`` -> the layer × head grid of labels.
* ``GET /health``, ``GET /v1/labels``, ``GET /v1/model``.
* Label Studio ML backend protocol: ``GET /health``, ``POST /setup``, ``POST /predict`` for map tasks
  pushed by ``patterncnn annotate push`` (their data carries the map as base64 ``.npy``).

Bad input gets a 4xx naming the problem; the server never returns a traceback. Bodies over the size
limit are refused (413) before they are parsed. With an API token, every endpoint but ``/health``
needs ``Authorization: Bearer <token>`` (or HTTP Basic with the token as password, which is what a
Label Studio ML-backend connection can send), compared in constant time. Models are loaded once;
inference runs in a worker thread, at most ``workers`` at a time.
"""


import base64
import dataclasses
import hmac
import io
import json
import logging
import zipfile

import numpy as np

from . import __version__
from .annotate import choice_names, prediction
from .classify import result_record
from .labels import LABELS
from .maps import check_map

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ServeSettings:
    api_token: str | None = None
    max_t: int = 512
    max_batch: int = 1024
    max_body_bytes: int = 256 * 1024 * 1024
    max_json_bytes: int = 16 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    workers: int = 2  # inference calls running at once


class BadInput(ValueError):
    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def decode_array_body(body: bytes) -> tuple[list[str], list[np.ndarray]]:
    """Maps from an ``.npy`` or ``.npz`` body. Never unpickles."""
    if body[:6] == b"\x93NUMPY":
        try:
            arr = np.load(io.BytesIO(body), allow_pickle=False)
        except ValueError as e:
            raise BadInput(f"unreadable .npy ({e}); send float32 arrays saved with np.save", 400) from None
        if arr.ndim == 2:
            return ["0"], [arr]
        if arr.ndim == 3:
            return [str(i) for i in range(arr.shape[0])], list(arr)
        raise BadInput(f".npy array has shape {arr.shape}; send (T, T) or (N, T, T)")
    if body[:2] == b"PK":
        try:
            npz = np.load(io.BytesIO(body), allow_pickle=False)
            return list(npz.files), [npz[k] for k in npz.files]
        except (ValueError, zipfile.BadZipFile, OSError) as e:
            raise BadInput(f"unreadable .npz ({e}); save maps with np.savez, one square array per key", 400) from None
    raise BadInput("binary body is neither .npy nor .npz; send np.save/np.savez output, or JSON", 415)


def decode_json_maps(obj) -> tuple[list[str], list[np.ndarray], list | None]:
    if not isinstance(obj, dict) or not ("maps" in obj or "map" in obj):
        raise BadInput('JSON body must be an object with "maps" (a list of T×T lists) or "map" (one T×T list)')
    raw = [obj["map"]] if "map" in obj else obj["maps"]
    if not isinstance(raw, list) or not raw:
        raise BadInput('"maps" must be a non-empty list of square 2-D lists')
    maps = []
    for i, m in enumerate(raw):
        try:
            a = np.asarray(m, dtype=np.float32)
        except (ValueError, TypeError):
            raise BadInput(f"map {i} is not a rectangular list of numbers") from None
        maps.append(a)
    ids = obj.get("ids") or [str(i) for i in range(len(maps))]
    if len(ids) != len(maps):
        raise BadInput(f'"ids" has {len(ids)} entries for {len(maps)} maps')
    seps = obj.get("seps")
    if seps is not None and (not isinstance(seps, list) or len(seps) != len(maps)):
        raise BadInput('"seps" must be a list with one list of separator positions per map')
    return [str(x) for x in ids], maps, seps


def validate(ids: list[str], maps: list[np.ndarray], s: ServeSettings) -> list[str | None]:
    """Raise BadInput naming every unusable map; return each map's warning (or None)."""
    if len(maps) > s.max_batch:
        raise BadInput(f"{len(maps)} maps in one request; the limit is {s.max_batch}: split the batch", 413)
    problems, warnings = [], []
    for k, a in zip(ids, maps):
        if a.dtype.kind not in "fiu":
            problems.append(f"map {k!r}: dtype {a.dtype} is not numeric")
            continue
        if a.ndim == 2 and a.shape[0] > s.max_t:
            problems.append(f"map {k!r}: T={a.shape[0]} exceeds the limit T <= {s.max_t}")
            continue
        errors, warns = check_map(a)
        if errors:
            problems.append(f"map {k!r}: {errors[0]}")
        warnings.append(warns[0] if warns else None)
    if problems:
        raise BadInput("; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else ""))
    return warnings


def map_from_task(task: dict) -> tuple[np.ndarray, list | None]:
    data = task.get("data") or {}
    if "map_npy" not in data:
        raise BadInput(f"task {task.get('id')} carries no map (data.map_npy); push maps with `patterncnn annotate push`")
    try:
        arr = np.load(io.BytesIO(base64.b64decode(data["map_npy"])), allow_pickle=False)
    except (ValueError, TypeError) as e:
        raise BadInput(f"task {task.get('id')}: data.map_npy is not a base64 .npy ({e})") from None
    return arr.astype(np.float32), data.get("seps")


def create_app(settings: ServeSettings, classifier, encoder=None):
    """The ASGI app. ``classifier`` is an :class:`patterncnn.infer.OnnxClassifier`; ``encoder`` enables analyze."""
    import anyio
    from fastapi import Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    limiter = anyio.CapacityLimiter(settings.workers)
    app = FastAPI(title="patterncnn", version=__version__,
                  description="Classify BERT-family self-attention maps into the five patterns of Kovaleva et al. "
                              "(2019). Also a Label Studio ML backend.")
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    async def infer(fn, *args):
        # Off the event loop, at most settings.workers at once.
        return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=limiter)

    def auth(request: Request) -> None:
        if not settings.api_token:
            return
        header = request.headers.get("authorization", "")
        given = ""
        if header.lower().startswith("bearer "):
            given = header[7:].strip()
        elif header.lower().startswith("basic "):
            try:
                given = base64.b64decode(header[6:].strip()).decode().split(":", 1)[-1]
            except (ValueError, UnicodeDecodeError):
                given = ""
        if not hmac.compare_digest(given.encode(), settings.api_token.encode()):
            raise BadInput("missing or wrong API token: send 'Authorization: Bearer <token>'", 401)

    @app.exception_handler(BadInput)
    async def bad_input(request: Request, exc: BadInput):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        return JSONResponse({"detail": f"invalid request: {first.get('msg', 'bad input')} at "
                                       f"{'.'.join(str(x) for x in first.get('loc', []))}"}, status_code=422)

    @app.exception_handler(_TooLarge)
    async def too_large(request: Request, exc: Exception):
        return JSONResponse({"detail": f"request body exceeds the limit of {settings.max_body_bytes} bytes"},
                            status_code=413)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception):
        log.exception("unhandled error on %s", request.url.path)
        return JSONResponse({"detail": "internal error; the server log has the details"}, status_code=500)

    async def read_json(request: Request):
        body = await request.body()
        if len(body) > settings.max_json_bytes:
            raise BadInput(f"JSON body of {len(body)} bytes exceeds {settings.max_json_bytes}; send big batches as "
                           f".npy/.npz (application/octet-stream)", 413)
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise BadInput(f"malformed JSON: {e}", 400) from None

    def classify_maps(ids, maps, seps, warnings):
        probs = classifier.predict([m.astype(np.float32) for m in maps], seps)
        return [result_record(k, p, warning) for k, p, warning in zip(ids, probs, warnings)]

    def project_names(config) -> tuple[str, str]:
        try:
            return choice_names(config)
        except ValueError as e:
            raise BadInput(str(e)) from None

    @app.get("/health")
    async def health():
        return {"status": "UP", "model_class": "patterncnn", "version": __version__}

    @app.get("/v1/labels", dependencies=[Depends(auth)])
    async def labels():
        return {"labels": list(LABELS)}

    @app.get("/v1/model", dependencies=[Depends(auth)])
    async def model():
        return {"patterncnn": __version__, "classifier": {"path": str(classifier.path),
                                                           "model_version": classifier.model_version,
                                                           "metadata": classifier.metadata},
                "encoder": encoder.fingerprint if encoder else None,
                "encoder_shape": {"layers": encoder.num_layers, "heads": encoder.num_heads,
                                  "max_length": encoder.max_length} if encoder else None,
                "limits": {"max_t": settings.max_t, "max_batch": settings.max_batch,
                           "max_body_bytes": settings.max_body_bytes, "max_json_bytes": settings.max_json_bytes}}

    @app.post("/v1/classify", dependencies=[Depends(auth)],
              openapi_extra={"requestBody": {"content": {
                  "application/json": {"schema": {"type": "object", "properties": {
                      "maps": {"type": "array", "items": {"type": "array", "items": {"type": "array",
                                                                                     "items": {"type": "number"}}}},
                      "ids": {"type": "array", "items": {"type": "string"}},
                      "seps": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}}}},
                  "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}})
    async def classify(request: Request):
        ctype = request.headers.get("content-type", "")
        if ctype.startswith("application/json"):
            ids, maps, seps = decode_json_maps(await read_json(request))
        elif ctype.startswith(("application/octet-stream", "application/x-npy", "application/x-npz")):
            ids, maps = decode_array_body(await request.body())
            seps = None
        else:
            raise BadInput(f"unsupported content type {ctype!r}: send application/json or application/octet-stream "
                           f"(.npy/.npz)", 415)
        warnings = validate(ids, maps, settings)
        return {"results": await infer(classify_maps, ids, maps, seps, warnings),
                "model_version": classifier.model_version}

    @app.post("/v1/analyze", dependencies=[Depends(auth)],
              openapi_extra={"requestBody": {"content": {"application/json": {"schema": {
                  "type": "object", "required": ["text"],
                  "properties": {"text": {"type": "string"}, "text_pair": {"type": "string"}}}}}}})
    async def analyze(request: Request):
        if encoder is None:
            raise BadInput("this server was started without an encoder; start it with --model", 503)
        obj = await read_json(request)
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str) or not obj["text"].strip():
            raise BadInput('send {"text": "a sentence"} (and optionally "text_pair")')
        texts = (obj["text"],) + ((obj["text_pair"],) if isinstance(obj.get("text_pair"), str) else ())
        ids, cut = encoder.tokenize(texts)
        if cut:
            raise BadInput(f"the input is longer than the encoder's limit of {encoder.max_length} tokens; shorten it")
        from .analyze import analyze as run

        res = await infer(run, encoder, classifier, texts)
        return {"tokens": res["tokens"], "seps": res["seps"], "labels": res["labels"],
                "probs": np.round(res["probs"], 5).tolist(), "label_order": list(LABELS),
                "encoder": encoder.fingerprint["model"], "model_version": classifier.model_version}

    # ---- Label Studio ML backend protocol ----
    projects: dict[str, tuple[str, str]] = {}

    @app.post("/setup", dependencies=[Depends(auth)])
    async def setup(request: Request):
        obj = await read_json(request)
        names = project_names(obj.get("schema") if isinstance(obj, dict) else None)
        projects[str(obj.get("project"))] = names
        return {"model_version": classifier.model_version}

    @app.post("/predict", dependencies=[Depends(auth)])
    async def predict(request: Request):
        obj = await read_json(request)
        tasks = obj.get("tasks") if isinstance(obj, dict) else None
        if not isinstance(tasks, list):
            raise BadInput('send {"tasks": [...]} as Label Studio does')
        from_name, to_name = (project_names(obj.get("label_config")) if obj.get("label_config")
                              else projects.get(str(obj.get("project")), project_names(None)))
        loaded = [map_from_task(t) for t in tasks]
        ids = [str(t.get("id")) for t in tasks]
        validate(ids, [m for m, _ in loaded], settings)
        probs = await infer(classifier.predict, [m for m, _ in loaded], [s for _, s in loaded])
        return {"results": [prediction(p, classifier.model_version, from_name, to_name) for p in probs],
                "model_version": classifier.model_version}

    return app


class BodyLimit:
    """ASGI middleware: refuse bodies over ``limit`` bytes (413) before the app reads them."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            return await self._refuse(send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send):
        body = json.dumps({"detail": f"request body exceeds the limit of {self.limit} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass
