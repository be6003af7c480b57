"""What the routers read from ``app.state``: the settings, each request's budget, the models, and the limiter.

A request's **budget** (:meth:`Parts.budget`) is what it may cost, fixed by its route and media
type before any of its body is read: its body bytes (:class:`patterncnn.serve.middleware.BodyGuard`
refuses on ``Content-Length`` and counts the bytes as they stream), the characters of its texts
(``/v1/analyze``: checked before tokenizing) and the bytes its maps decode to (checked on the
declared sizes before anything is inflated: :mod:`patterncnn.core.arrayfile`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Iterator

import anyio
import numpy as np
from fastapi import Request

from ..classifier.classify import BATCH_MAPS, TOO_LARGE, batches, scorable
from ..core.arrayfile import ReadLimits
from ..core.fileio import sha256_file
from .decode import Batch, inputs, read_body, refusal
from .errors import BadInput
from .settings import ServeSettings

if TYPE_CHECKING:
    from ..classifier.onnx import OnnxClassifier
    from ..encoders.load import Encoder

MAX_PROJECTS = 1000  # Label Studio projects whose label names /setup remembers
RETRY_AFTER = "1"  # seconds a client refused for want of body memory is told to wait
JSON_ESCAPE = 12  # the most JSON bytes one character can take (a surrogate pair as two \uXXXX escapes)


@dataclasses.dataclass(frozen=True)
class Budget:
    """What one request may cost (see the module docstring)."""

    body_bytes: int
    text_chars: int | None  # characters per text, for /v1/analyze
    decoded: ReadLimits


@dataclasses.dataclass
class Parts:
    """The service's parts, kept in ``app.state.parts``."""

    settings: ServeSettings
    classifier: OnnxClassifier
    encoder: Encoder | None = None  # None: no /v1/analyze
    limiter: anyio.CapacityLimiter = None
    projects: dict[str, tuple[str, str, tuple[str, ...]]] = dataclasses.field(default_factory=dict)
    large_bodies: anyio.CapacityLimiter = None  # bodies over the JSON limit worked on at once
    setup_limiter: anyio.CapacityLimiter = None  # the small work of /setup and /v1/model (limiter_of)
    inflight_bytes: int = 0  # body bytes held by requests now (BodySlot), at most settings.max_inflight_bytes
    classifier_sha256: str = ""  # of the classifier's file when the server started (/v1/model)

    def __post_init__(self):
        path = getattr(self.classifier, "path", None)  # a classifier object of the caller's may have no file
        self.classifier_sha256 = self.classifier_sha256 or (sha256_file(path) if path is not None else "")
        if self.limiter is None:
            self.limiter = anyio.CapacityLimiter(self.settings.workers)
        if self.large_bodies is None:
            self.large_bodies = anyio.CapacityLimiter(self.settings.workers)
        if self.setup_limiter is None:
            self.setup_limiter = anyio.CapacityLimiter(self.settings.workers)
        if self.encoder is not None:
            # Settle the fast tokenizer on the one setting every request uses (Encoder.tokenize) while one
            # thread has it: switching that setting while another thread encodes fails.
            self.encoder.tokenize(("patterncnn",))

    @property
    def text_chars(self) -> int | None:
        """The most characters of one /v1/analyze text: more would be cut by the encoder, so is refused."""
        return self.encoder.max_chars if self.encoder is not None else None

    def budget(self, path: str, media: str) -> Budget:
        """The budget of a request to ``path`` with this media type (lower case, no parameters)."""
        s = self.settings
        if path == "/v1/analyze" and self.encoder is not None:  # two texts, each character escaped at worst
            body = min(s.max_json_bytes, 2 * JSON_ESCAPE * self.text_chars + 64 * 1024)
        elif path == "/v1/classify" and media != "application/json":
            body = s.max_body_bytes  # .npy/.npz: its decoded size is checked on its declared sizes
        elif path in ("/webhook", "/train"):
            body = s.max_body_bytes  # Label Studio's events and training calls: never read, so never parsed
        elif path == "/predict":
            body = s.max_body_bytes  # Label Studio sends every selected task in one request, each with its picture
        else:
            body = s.max_json_bytes
        return Budget(body_bytes=body, text_chars=self.text_chars, decoded=s.read_limits)

    @contextlib.asynccontextmanager
    async def body_slot(self) -> AsyncIterator[BodySlot]:
        """What a request holds while its body is read and worked on (:class:`BodySlot`), given back when it is
        answered."""
        async with contextlib.AsyncExitStack() as stack:
            slot = BodySlot(self, stack)
            try:
                yield slot
            finally:
                self.inflight_bytes -= slot.held

    def limiter_of(self, path: str) -> anyio.CapacityLimiter:
        """The limiter of a route's work: ``/setup``'s and ``/v1/model``'s own, small work (Label Studio gives
        ``/setup`` 3 s, so it never waits behind inference: helper 90's review measured 4.4 s under load), else that
        of decoding and inference."""
        return self.setup_limiter if path in ("/setup", "/v1/model") else self.limiter

    async def run(self, fn: Callable, *args, limiter: anyio.CapacityLimiter | None = None) -> Any:
        """``fn(*args)`` off the event loop, at most ``settings.workers`` at once (decoding and inference; another
        ``limiter``, such as :meth:`limiter_of`'s, bounds other work).

        A request cancelled while its call runs (the server stopping) returns at once; the call's
        result is dropped.
        """
        return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter or self.limiter,
                                              abandon_on_cancel=True)

    def probabilities(self, items: Iterable[tuple]) -> Iterator[tuple[Any, str | None, np.ndarray | None]]:
        """``(key, warning, (5,) probabilities or None)`` of each item ``(key, float32 map or None, seps,
        warning)``, classified a batch (:func:`patterncnn.classifier.classify.batches`, as ``classify`` does, of at
        most ``max_batch`` maps) at a time: the items are taken as a batch fills, so one batch of float32 maps is
        held at once."""
        for batch in batches(items, min(BATCH_MAPS, self.settings.max_batch)):
            valid = [item for item in batch if item[1] is not None]
            probs = iter(self.classifier.predict([a for _, a, _, _ in valid], [sep for _, _, sep, _ in valid])
                         if valid else ())
            for key, a, _, warning in batch:
                yield key, warning, None if a is None else next(probs)

    def predict(self, batch: Batch) -> tuple[np.ndarray, list[str | None]]:
        """(N, 5) probabilities and each map's warning; 422 naming every unusable map, or the maps the classifier
        cannot score (values near float32's limit). ``batch.maps`` is emptied as its maps are converted."""
        problems: list[str] = []
        out = list(self.probabilities(inputs(batch, self.settings, problems)))
        if problems:
            raise refusal(problems)
        probs = np.stack([p for _, _, p in out])
        bad = [k for (k, _, _), ok in zip(out, scorable(probs)) if not ok]
        if bad:
            raise BadInput(f"map(s) {', '.join(map(repr, bad[:10]))}: {TOO_LARGE}")
        return probs, [w for _, w, _ in out]

    def remember_project(self, project: str | int | None, names: tuple[str, str, tuple[str, ...]]) -> None:
        """Keep a Label Studio project's (from_name, to_name, choices); the oldest is forgotten past MAX_PROJECTS."""
        self.projects.pop(str(project), None)
        self.projects[str(project)] = names
        while len(self.projects) > MAX_PROJECTS:
            self.projects.pop(next(iter(self.projects)))


class BodySlot:
    """What one request holds of the server's body budget (:meth:`Parts.body_slot`): the bytes of its body that have
    arrived, charged as they arrive, so that a body that would take the server past ``max_inflight_bytes`` is
    refused (503 with ``Retry-After``) and the bodies in memory never pass that total; and, once a body over the
    JSON limit is in, one of ``workers`` slots to work on it (the others wait).

    Until 2026-11-29 a body was charged its declared ``Content-Length`` (its route's limit if it had none) before a
    byte arrived: 64 connections that sent headers and nothing else locked every body route out for 60 s, and a
    large upload that stalled held a work slot (helper 90's review).
    """

    def __init__(self, parts: Parts, stack: contextlib.AsyncExitStack):
        self.parts, self.stack, self.held = parts, stack, 0

    def charge(self, n: int) -> None:
        """Take ``n`` more body bytes from the server's budget (no await: checked and taken at once)."""
        p, most = self.parts, self.parts.settings.max_inflight_bytes
        if p.inflight_bytes + n > most:
            raise BadInput(f"the server holds {p.inflight_bytes} bytes of request bodies ({self.held} of them this "
                           f"one's), and its next {n} would pass its limit of {most} (--max-inflight-mb); retry in a "
                           f"moment, or send smaller requests", 503,
                           headers={"Retry-After": RETRY_AFTER, "Connection": "close"})
        p.inflight_bytes += n
        self.held += n

    async def read(self, request: Request) -> bytearray:
        """The request's body (:func:`patterncnn.serve.decode.read_body`), charged as it arrives; a body over the
        JSON limit then waits for a work slot, held until the answer."""
        body = await read_body(request, self.charge)
        if len(body) > self.parts.settings.max_json_bytes:
            await self.stack.enter_async_context(self.parts.large_bodies)
        return body


def get_parts(request: Request) -> Parts:
    """The dependency every route takes its parts from."""
    return request.app.state.parts
