"""uvicorn for the service, with deadlines for slow clients and a bounded shutdown.

uvicorn closes an idle keep-alive connection, but waits forever for a client that sends half its
headers; :class:`DeadlineH11` closes a connection whose request headers are not complete within
``header_timeout`` s, closes a connection answered before its request's body was read, and on shutdown ends
the requests whose body is still arriving. The body's
deadline is :class:`patterncnn.serve.middleware.BodyGuard`'s. On SIGTERM, running requests get
``shutdown_grace`` s to finish; the rest are answered 503 (:class:`patterncnn.serve.middleware.CatchAll`), and
those whose body is still arriving are disconnected without an answer.

The socket is bound by :func:`bind` before the service says it is serving, so a taken port is
one line of error, not an announcement followed by uvicorn's.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..core.errors import PatternCNNError

if TYPE_CHECKING:
    from .settings import ServeSettings


class ServeError(PatternCNNError, RuntimeError):
    """The service cannot start as asked (its address cannot be bound); the message says what to do."""

log = logging.getLogger("patterncnn.serve")


class DeadlineH11(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request headers take over ``header_timeout`` s."""

    header_timeout = 10.0

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_timer = None
        self._arm_header_deadline()

    def _arm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _headers_overdue(self) -> None:
        # IDLE: the next request's headers are not complete yet (once they are, the body's deadline applies).
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("closed a connection from %s: request headers not complete within %g s", self.client,
                     self.header_timeout)
            self.transport.close()

    def on_response_complete(self) -> None:
        # An answer given before the request's body was read (a 401, 404, 405, /webhook, /train): the rest of the
        # body would never be read, and once the client sends a byte of it no deadline covers the connection
        # (uvicorn's keep-alive timer is cancelled by any data): close it, as a client would after Connection: close.
        if self.conn.their_state is not h11.DONE and not self.transport.is_closing():
            self.transport.close()
        super().on_response_complete()
        self._arm_header_deadline()

    def shutdown(self) -> None:
        # A client still sending its body when the server stops is treated as gone: its request ends
        # now (the app sees a disconnect) instead of holding the shutdown until it is cancelled.
        if self.cycle is not None and not self.cycle.response_complete and self.conn.their_state is h11.SEND_BODY:
            self.cycle.disconnected = True
            self.cycle.message_event.set()
            self.transport.close()
            return
        super().shutdown()

    def connection_lost(self, exc) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)


def server_config(app, host: str, port: int, settings: ServeSettings) -> uvicorn.Config:
    """uvicorn's config for the service: the h11 protocol with a header deadline, a bounded shutdown."""
    protocol = type("DeadlineH11", (DeadlineH11,), {"header_timeout": settings.header_timeout})
    return uvicorn.Config(app, host=host, port=port, http=protocol, log_level="warning", timeout_keep_alive=5,
                          timeout_graceful_shutdown=settings.shutdown_grace)


def bind(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on (host, port), as uvicorn binds one.

    Raises:
        ServeError: the address is taken, or not one of this machine's.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise ServeError(f"cannot serve on {host}: {e.strerror}; pass --host an address of this machine") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise ServeError(f"cannot serve on {host}:{port}: {e.strerror}; choose another --port (or --host), or stop "
                         f"what serves there") from None
    sock.set_inheritable(True)
    return sock


def run(app, sock: socket.socket, settings: ServeSettings) -> None:
    """Serve on a socket from :func:`bind` until SIGINT/SIGTERM (running requests get ``shutdown_grace`` s)."""
    host, port = sock.getsockname()[:2]
    uvicorn.Server(server_config(app, host, port, settings)).run(sockets=[sock])
