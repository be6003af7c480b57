"""ASGI middleware of the service: one-line 500s (and 503s on shutdown), one log line per refused request, the API
token, and the body's budget and deadline.

Each wraps the app below it and answers by itself (JSON ``{"detail": ...}``) when it refuses a
request, before any route or body parsing runs.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import traceback
from typing import Callable

import anyio
from fastapi import HTTPException
from starlette.requests import ClientDisconnect

from .settings import is_loopback

log = logging.getLogger("patterncnn.serve")
CLOSE = {"Connection": "close"}


async def send_json(send, status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def shown(text: str, limit: int = 300) -> str:
    """``text`` fit for one log line: cut to ``limit`` characters, escaped if it holds line breaks or controls."""
    text = text[:limit]
    return text if text.isprintable() else repr(text)


def log_refusal(scope, status: int, body: bytes) -> None:
    """One line for a refused request (a 4xx, or a 503: busy): status, method, path and our ``detail`` (never the
    request's headers or raw body, so never its token; a detail may quote a value the client sent, such as a map
    id): what a client such as Label Studio sends its user to the server log for."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    reason = detail if isinstance(detail, str) else "(no reason given)"
    log.warning("%d %s %s refused: %s", status, scope.get("method"), shown(str(scope.get("path", ""))),
                shown(reason))


class CatchAll:
    """A JSON 500 for any unhandled error, and one log line about it (no traceback in body or log); one log line
    for each request refused with a 4xx or a 503 (the body budget full, no encoder), whichever layer below refused it
    (:func:`log_refusal`; until 2026-11-29 a 503 went unlogged, helper 90's review).

    A request cancelled because the server is stopping (its shutdown grace ran out) gets a JSON 503
    and one log line, instead of uvicorn's plain-text 500 and traceback.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, refused = False, 0

        async def tracked(message):
            nonlocal started, refused
            if message["type"] == "http.response.start":
                started = True
                refused = message["status"] if 400 <= message["status"] < 500 or message["status"] == 503 else 0
            elif refused and message["type"] == "http.response.body":  # our refusals are one short JSON message
                log_refusal(scope, refused, message.get("body", b"")[:4096])
                refused = 0
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except anyio.get_cancelled_exc_class():
            log.warning("503 on %s %s: the server stopped before the request finished", scope.get("method"),
                        scope.get("path"))
            if not started:
                with anyio.CancelScope(shield=True):
                    await send_json(send, 503, "the server is stopping; send the request again", [(b"retry-after", b"1")])
            # Not raised again: the request is answered, and uvicorn would log a traceback for it.
        except ClientDisconnect:  # the client left (or the server is stopping) while sending its body
            log.info("%s %s: the client disconnected before its body arrived", scope.get("method"), scope.get("path"))
        except HTTPException as exc:  # raised where no route handles it (e.g. by BodyGuard): still a 4xx
            if not started:
                await send_json(tracked, exc.status_code, str(exc.detail),
                                [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()])
        except Exception as exc:  # noqa: BLE001 - the last line of defence: every error becomes one log line
            frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
            where = f" at {frame.filename}:{frame.lineno}" if frame else ""
            log.error("500 on %s %s: %s: %r%s", scope.get("method"), scope.get("path"), type(exc).__name__,
                      str(exc)[:200], where)
            if not started:
                await send_json(send, 500, "internal error; the server log has one line about it")


class TokenAuth:
    """With a token, every path but ``open_paths`` needs ``Authorization: Bearer <token>``.

    HTTP Basic with the token as password also passes (a Label Studio ML-backend connection sends
    that, and a browser asks for it). Tokens are compared as bytes (the token's UTF-8, what a
    client sends in either scheme), in constant time.
    """

    def __init__(self, app, token: bytes | None, open_paths: tuple[str, ...] = ("/health",)):
        self.app, self.token, self.open_paths = app, token, open_paths

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and self.token and scope["path"] not in self.open_paths \
                and not self._allowed(scope):
            return await send_json(send, 401, "missing or wrong API token: send 'Authorization: Bearer <token>'",
                                   [(b"www-authenticate", b"Bearer"),
                                    (b"www-authenticate", b'Basic realm="patterncnn", charset="UTF-8"')])
        await self.app(scope, receive, send)

    def _allowed(self, scope) -> bool:
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, value = header.partition(b" ")
        given = b""
        if scheme.lower() == b"bearer":
            given = value.strip(b" \t")
        elif scheme.lower() == b"basic":
            try:
                given = base64.b64decode(value.strip(b" \t"), validate=True).split(b":", 1)[-1]
            except ValueError:  # bad base64 (binascii.Error)
                given = b""
        return hmac.compare_digest(given, self.token)


class LoopbackHost:
    """Without a token (``ServeSettings.loopback_only``), a request whose ``Host`` header names anything but a loopback
    address (``localhost``, ``127.0.0.1``, ``[::1]``; any port) is refused, 400: the service listens on loopback
    then, and only a page that had its own name resolve to 127.0.0.1 (DNS rebinding) would send another name. Until
    2026-11-29 any name was answered (helper 90's review)."""

    def __init__(self, app, enabled: bool):
        self.app, self.enabled = app, enabled

    async def __call__(self, scope, receive, send):
        if self.enabled and scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"host")
            if header is not None and not is_loopback(host_name(header.decode("latin-1"))):
                return await send_json(send, 400, (
                    f"the Host header {shown(header.decode('latin-1'), 100)!r} does not name this machine's loopback: "
                    f"a server without an API token answers only requests to localhost, 127.0.0.1 or [::1]; use one "
                    f"of those in the URL, or start the server with a token (--api-token or PATTERNCNN_API_TOKEN)"),
                    [(b"connection", b"close")])
        await self.app(scope, receive, send)


def host_name(host: str) -> str:
    """A Host header's name without its port: ``[::1]:9090`` -> ``[::1]``, ``localhost:9090`` -> ``localhost``."""
    host = host.strip()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class BodyGuard:
    """Refuse a body over its budget (413) before the app reads it, or not sent within ``timeout`` s (408); a request
    with two ``Content-Type`` headers is refused (400) before its body is read.

    The budget is ``limit(path, media type)`` (:meth:`patterncnn.serve.state.Parts.budget`): a
    declared ``Content-Length`` over it is refused before one byte is read, and a body without one
    (chunked) is cut off as soon as the bytes that arrived pass it.
    """

    def __init__(self, app, limit: Callable[[str, str], int], timeout: float):
        self.app, self.budget, self.timeout = app, limit, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if sum(name == b"content-type" for name, _ in scope.get("headers") or ()) > 1:
            # The budget would follow one of them and the route might read the body as the other: refused.
            return await send_json(send, 400, "the request has more than one Content-Type header; send one",
                                   [(b"connection", b"close")])
        headers = dict(scope.get("headers") or [])
        media = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower().decode("latin-1")
        limit = self.budget(scope.get("path", ""), media)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > limit:
            return await send_json(send, 413, self._too_large(limit), [(b"connection", b"close")])
        deadline = anyio.current_time() + self.timeout
        seen, done = 0, False

        async def guarded():
            nonlocal seen, done
            if done:  # the body is in: later calls wait for the disconnect, without a deadline
                return await receive()
            with anyio.move_on_after(deadline - anyio.current_time()) as scope_:
                message = await receive()
            # The rest of the body is not read: the connection closes after the answer.
            if scope_.cancelled_caught:
                raise HTTPException(408, f"the request body did not arrive within {self.timeout:g} s; send it "
                                         f"faster, or in smaller requests", headers=CLOSE)
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                done = not message.get("more_body", False)
                if seen > limit:
                    raise HTTPException(413, self._too_large(limit), headers=CLOSE)
            return message

        # The route's exception handling turns these HTTPExceptions into JSON responses.
        await self.app(scope, guarded, send)

    @staticmethod
    def _too_large(limit: int) -> str:
        return (f"request body exceeds the limit of {limit} bytes for this route and content type; send a smaller "
                f"batch (a JSON batch is smaller as .npy/.npz to /v1/classify, whose limit is --max-body-mb), or "
                f"shorter text")
