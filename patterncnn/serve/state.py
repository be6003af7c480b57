"""What the routers read from ``app.state``: the settings, the models, and the limiter they run under."""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, Callable

import anyio
import numpy as np
from fastapi import Request

from ..core.arrayfile import ReadLimits
from .errors import BadInput

if TYPE_CHECKING:
    from ..classifier.onnx import OnnxClassifier
    from ..encoders.load import Encoder

MAX_PROJECTS = 1000  # Label Studio projects whose label names /setup remembers


@dataclasses.dataclass
class ServeSettings:
    """Limits and options of one service. Sizes in bytes, times in seconds.

    Attributes:
        max_decoded_bytes: the most bytes the maps of one request may decode to (an .npz is
            refused on its declared sizes before it is inflated).
        header_timeout: a client must send a request's headers within this time.
        body_timeout: a client must send a request's body within this time.
    """

    api_token: str | None = None
    max_t: int = 512
    max_batch: int = 1024
    max_body_bytes: int = 256 * 1024 * 1024
    max_json_bytes: int = 16 * 1024 * 1024
    max_decoded_bytes: int = 512 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    workers: int = 2  # inference (and decoding) calls running at once
    header_timeout: float = 10.0
    body_timeout: float = 60.0

    def __post_init__(self):
        for name in ("max_t", "max_batch", "max_body_bytes", "max_json_bytes", "max_decoded_bytes", "workers",
                     "header_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServeSettings.{name} must be positive (got {getattr(self, name)!r})")

    @property
    def read_limits(self) -> ReadLimits:
        return ReadLimits(max_t=self.max_t, max_maps=self.max_batch, max_bytes=self.max_decoded_bytes)


@dataclasses.dataclass
class Parts:
    """The service's parts, kept in ``app.state.parts``."""

    settings: ServeSettings
    classifier: OnnxClassifier
    encoder: Encoder | None = None  # None: no /v1/analyze
    limiter: anyio.CapacityLimiter = None
    projects: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.limiter is None:
            self.limiter = anyio.CapacityLimiter(self.settings.workers)
        if self.encoder is not None:
            # Settle the fast tokenizer on "no truncation" (how every request uses it) while one
            # thread has it: switching that setting while another thread encodes fails.
            self.encoder.tokenizer("patterncnn", truncation=False, verbose=False)

    async def run(self, fn: Callable, *args) -> Any:
        """``fn(*args)`` off the event loop, at most ``settings.workers`` at once (decoding and inference)."""
        return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=self.limiter)

    def predict(self, ids: list[str], maps: list[np.ndarray], seps: list | None) -> np.ndarray:
        """(N, 5) probabilities; 422 naming the maps the classifier cannot score (values near float32's limit)."""
        probs = self.classifier.predict(maps, seps)
        bad = [k for k, p in zip(ids, probs) if not np.isfinite(p).all()]
        if bad:
            raise BadInput(f"map(s) {', '.join(map(repr, bad[:10]))}: values too large for the classifier to score; "
                           f"send attention weights (rows summing to 1) or scale the maps down")
        return probs

    def remember_project(self, project: str | int | None, names: tuple[str, str]) -> None:
        """Keep a Label Studio project's (from_name, to_name); the oldest is forgotten past MAX_PROJECTS."""
        self.projects.pop(str(project), None)
        self.projects[str(project)] = names
        while len(self.projects) > MAX_PROJECTS:
            self.projects.pop(next(iter(self.projects)))


def get_parts(request: Request) -> Parts:
    """The dependency every route takes its parts from."""
    return request.app.state.parts
