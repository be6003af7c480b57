"""The ASGI app: its parts in ``app.state``, its middleware, error handlers and routers."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError

from ..core.version import __version__
from . import ml_backend as labelstudio
from . import routes
from .errors import error_responses, invalid_request
from .middleware import BodyGuard, CatchAll, LoopbackHost, TokenAuth
from .settings import ServeSettings
from .state import Parts

# No token: /health, and /webhook, which Label Studio posts every annotation to without the backend's credentials
# and which reads nothing and does nothing (ml_backend.py).
OPEN_PATHS = ("/health", "/webhook")
DESCRIPTION = ("Classify BERT-family self-attention maps into the five patterns of Kovaleva et al. (2019). Also a "
               "Label Studio ML backend. With an API token, every path but /health and /webhook (this spec "
               "included) needs 'Authorization: Bearer <token>', or HTTP Basic with the token as password.")


def create_app(settings: ServeSettings, classifier, encoder=None) -> FastAPI:
    """The service.

    Args:
        classifier: an :class:`patterncnn.classifier.onnx.OnnxClassifier`.
        encoder: a :class:`patterncnn.encoders.load.Encoder` for ``/v1/analyze``, or None.
    """
    # No /docs or /redoc: those pages load their scripts from a CDN, so they are blank offline.
    app = FastAPI(title="patterncnn", version=__version__, description=DESCRIPTION, docs_url=None, redoc_url=None)
    app.state.parts = Parts(settings, classifier, encoder)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.include_router(routes.open_router)
    app.include_router(labelstudio.open_router)
    app.include_router(routes.router, responses=error_responses(401))
    app.include_router(labelstudio.router, responses=error_responses(401))
    # Added innermost first: a request meets CORS, then CatchAll, LoopbackHost, TokenAuth and BodyGuard.
    app.add_middleware(BodyGuard, limit=lambda path, media: app.state.parts.budget(path, media).body_bytes,
                       timeout=settings.body_timeout)
    app.add_middleware(TokenAuth, token=settings.token_bytes, open_paths=OPEN_PATHS)
    app.add_middleware(LoopbackHost, enabled=settings.loopback_only)
    app.add_middleware(CatchAll)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    return app
