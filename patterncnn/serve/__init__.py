"""The HTTP service: classify maps or text, and act as a Label Studio ML backend.

Usage (what ``patterncnn serve`` runs)::

    app = create_app(ServeSettings(api_token="..."), classifier=OnnxClassifier(...), encoder=load_encoder("minilm"))
    run(app, "127.0.0.1", 9090, settings)          # uvicorn, with deadlines for slow clients

Endpoints (OpenAPI at ``/openapi.json``):

* ``POST /v1/classify``: maps -> label + probabilities. JSON ``{"maps": [[[...]]], "ids": [...], "seps": [...]}``
  (or ``{"map": [[...]]}``) for small maps; ``application/octet-stream`` bodies holding an ``.npy``
  ((T, T) or (N, T, T)) or an ``.npz`` (one square map per key) for big batches.
* ``POST /v1/analyze``: ``{"text": "...", "text_pair": "..."}`` -> the layer × head grid of labels.
* ``GET /health``, ``GET /v1/labels``, ``GET /v1/model``.
* Label Studio ML backend protocol: ``GET /health``, ``POST /setup``, ``POST /predict``, ``GET /versions`` for map tasks
  pushed by ``patterncnn annotate push`` (their data carries the map as base64 ``.npy``).

Bad input gets a 4xx whose ``detail`` names the fix; an unexpected error gets a JSON 500 and one
log line, never a traceback. Every body is typed (:mod:`.schemas`); arrays are decoded within
limits that are checked before anything is allocated (:mod:`.decode`, :mod:`patterncnn.core.arrayfile`),
off the event loop, under the same limiter as inference (at most ``workers`` at once). Bodies over
the size limit are refused (413) before they are read, and slow clients are cut off
(:mod:`.server`, :class:`.middleware.BodyGuard`). With an API token, every path but ``/health`` and
``/webhook`` needs it (:class:`.middleware.TokenAuth`).

Modules: ``app`` (create_app), ``settings`` (limits and options, checked when made), ``state`` (each
request's budget and the parts routes read from ``app.state``), ``schemas`` (pydantic models), ``decode``
(bounded decoding), ``routes`` (``/health``, ``/v1``), ``ml_backend`` (the ML-backend protocol),
``middleware``, ``errors``, ``server`` (uvicorn).
"""

from .settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]


def __getattr__(name: str):
    if name == "create_app":
        from .app import create_app  # lazy: `patterncnn serve` checks its token and port before the app's imports

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
