"""The service's settings: its limits and options, checked when they are made (no heavy imports, so ``patterncnn
serve`` refuses a bad token before it loads anything)."""

from __future__ import annotations

import dataclasses
import ipaddress

from ..core.arrayfile import ReadLimits


@dataclasses.dataclass
class ServeSettings:
    """Limits and options of one service. Sizes in bytes, times in seconds.

    Attributes:
        max_body_bytes: the largest request body.
        max_json_bytes: the largest JSON body (at most ``max_body_bytes``: a larger value is lowered to it);
            ``/predict`` takes up to ``max_body_bytes``, the JSON values in it bounded as in a body of this size.
        max_decoded_bytes: the most bytes the maps of one request may decode to, counted as float32 (an .npz
            is refused on its declared sizes before it is inflated).
        max_inflight_bytes: the most request-body bytes the server holds at once, all requests together (each
            body's bytes counted as they arrive, until its answer); a body that would pass it is refused, 503 with
            ``Retry-After``. At least ``max_body_bytes`` (a smaller value is raised to it).
        header_timeout: a client must send a request's headers within this time.
        body_timeout: a client must send a request's body within this time.
        shutdown_grace: on SIGTERM, running requests get this long to finish; the rest are answered 503 (a
            request whose body is still arriving is disconnected at once).
        api_token: UTF-8 text without control characters or surrounding spaces (what an HTTP header
            can carry); compared as UTF-8 bytes.
        loopback_only: answer only requests whose ``Host`` header names a loopback address (:func:`is_loopback`,
            any port). ``patterncnn serve`` sets it when it has no token: a web page could otherwise reach the
            token-less service through DNS rebinding (its own name made to resolve to 127.0.0.1).
    """

    api_token: str | None = None
    max_t: int = 512
    max_batch: int = 1024
    max_body_bytes: int = 256 * 1024 * 1024
    max_json_bytes: int = 16 * 1024 * 1024
    max_decoded_bytes: int = 512 * 1024 * 1024
    max_inflight_bytes: int = 1024 * 1024 * 1024
    cors_origins: tuple[str, ...] = ()
    workers: int = 2  # inference (and decoding) calls running at once
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    shutdown_grace: float = 1.0
    loopback_only: bool = False

    def __post_init__(self):
        for name in ("max_t", "max_batch", "max_body_bytes", "max_json_bytes", "max_decoded_bytes",
                     "max_inflight_bytes", "workers", "header_timeout", "body_timeout", "shutdown_grace"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServeSettings.{name} must be positive (got {getattr(self, name)!r})")
        # --max-body-mb bounds every body: a JSON body no more than the rest
        self.max_json_bytes = min(self.max_json_bytes, self.max_body_bytes)
        self.max_inflight_bytes = max(self.max_inflight_bytes, self.max_body_bytes)  # the largest body always fits
        if self.api_token is not None:
            check_token(self.api_token)

    @property
    def token_bytes(self) -> bytes | None:
        return self.api_token.encode("utf-8") if self.api_token else None

    @property
    def read_limits(self) -> ReadLimits:
        # counted as the float32 the classifier gets: a float16 or uint8 body is converted before it is classified
        return ReadLimits(max_t=self.max_t, max_maps=self.max_batch, max_bytes=self.max_decoded_bytes, min_itemsize=4)


def check_token(token: str) -> None:
    """Refuse, at start, a token no client could send in a header: not UTF-8, control characters, outer spaces."""
    try:
        token.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 reach Python as lone surrogates
        raise ValueError(f"the API token {token.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8 text; choose "
                         f"a token of printable characters") from None
    if not token or token != token.strip() or any(ord(c) < 32 or ord(c) == 127 for c in token):
        raise ValueError("the API token is empty, or holds control characters or leading/trailing spaces, which an "
                         "HTTP header cannot carry; choose a token of printable characters")


def is_loopback(host: str) -> bool:
    """Whether a host (``localhost``, an IP address, an IPv6 literal in brackets) is this machine's loopback."""
    try:
        return host.lower() == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # another host name
        return False
