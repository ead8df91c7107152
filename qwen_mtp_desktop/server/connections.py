"""Connections to the API server, guarded before a request reaches the app (and its key check).

uvicorn (h11) holds a connection that has not finished sending its request for as long as the
client likes: its keep-alive timeout starts only after a response, and a trickle of bytes
stops it. Half-sent requests held open ("slowloris") used up the process's file descriptors,
and then nobody, /health included, got an answer. `guarded_protocol(limits)` is uvicorn's h11
protocol with three rules added:

- a request's line and headers must arrive within `header_timeout_s` of the connection (or of
  the previous response on a kept-alive one), however they trickle in;
- a request body may pause at most `body_idle_s` (unless the server itself paused reading);
- at most `max_connections` are open: one more closes the oldest connection that nobody is
  answering (still sending headers, idle between requests, then still sending a body), so
  slow clients cannot crowd out a quick request such as /health; when every connection is
  being answered, the new one gets 503.

`connection_limit()` derives `max_connections` from the file-descriptor limit, so the server
never runs out of descriptors for the connections it keeps. The accept loop takes up to
`BACKLOG` connections per turn of the event loop, which reach this protocol (and can make
room) only two turns later, and a closed connection lets go of its descriptor a turn after
that: the limit leaves room for four such batches (measured: fewer ran out of descriptors).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.protocols.http.h11_impl import H11Protocol

#: Connections accepted per wake of the accept loop, and the kernel's queue of pending ones.
BACKLOG = 16
#: Descriptors kept free besides the connections: logs, the engine's pipes, image files.
RESERVED_FDS = 32
DEFAULT_MAX_CONNECTIONS = 128
MIN_CONNECTIONS = 8
_TIMEOUT_REPLY = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 40\r\n"
    b"connection: close\r\n\r\nThe request did not arrive in time.\r\n\r\n\r\n"
)
_FULL_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n"
    b"content-length: 38\r\nconnection: close\r\n\r\nToo many connections; retry shortly.\r\n"
)

#: What a connection is doing; the order is the order in which they are closed when full.
HEADERS, BODY, ANSWERING = 0, 1, 2


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0
    body_idle_s: float = 15.0
    max_connections: int = DEFAULT_MAX_CONNECTIONS


def connection_limit(default: int = DEFAULT_MAX_CONNECTIONS) -> int:
    """The most connections this process can hold with descriptors to spare: `default`, or
    fewer when the file-descriptor limit (ulimit -n) is low."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # Windows: no such limit on sockets
        return default
    if soft == resource.RLIM_INFINITY:
        return default
    import psutil

    try:
        open_now = psutil.Process().num_fds()
    except (psutil.Error, AttributeError):
        open_now = 64
    spare = soft - open_now - 4 * BACKLOG - RESERVED_FDS
    return max(MIN_CONNECTIONS, min(default, spare))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body timeouts and a connection cap (module
    docstring). `limits` is set on the subclass `guarded_protocol` makes."""

    limits: ClassVar[ConnectionLimits] = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._phase = HEADERS
        self._since = time.monotonic()
        self._deadline: asyncio.TimerHandle | None = None
        self._seen_cycle: object = None

    # ------------------------------------------------------------------ uvicorn's hooks

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._make_room():
            with contextlib.suppress(Exception):
                transport.write(_FULL_REPLY)
            transport.close()
            return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._clear_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        if cycle is not self._seen_cycle:  # a request's headers are in
            self._seen_cycle = cycle
            self._phase = BODY
            self._since = time.monotonic()
        if self._phase == BODY:
            if cycle.more_body and not cycle.response_complete:
                self._set_deadline(self.limits.body_idle_s)
            else:
                self._phase = ANSWERING
                self._clear_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_headers()  # the next request, or the client's leftover body

    # ------------------------------------------------------------------ the rules

    def _await_headers(self) -> None:
        self._phase = HEADERS
        self._since = time.monotonic()
        self._set_deadline(self.limits.header_timeout_s)

    def _set_deadline(self, seconds: float) -> None:
        self._clear_deadline()
        self._deadline = self.loop.call_later(seconds, self._timed_out)

    def _clear_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == BODY and self.flow.read_paused:
            self._set_deadline(self.limits.body_idle_s)  # the app is behind, not the client
            return
        if self._phase == HEADERS and self._seen_cycle is None:  # no request came at all
            with contextlib.suppress(Exception):
                self.transport.write(_TIMEOUT_REPLY)
        # Otherwise just close: after an answer the client may still be sending a body we
        # refused, and a stalled body's request sees its client leave.
        self.transport.close()

    def _make_room(self) -> bool:
        """Under the cap, or made so by closing the connection that matters least; False
        when every other connection is being answered."""
        open_now = [
            other
            for other in self.connections
            if isinstance(other, GuardedH11Protocol) and not other.transport.is_closing()
        ]
        if len(open_now) <= self.limits.max_connections:
            return True
        victims = [other for other in open_now if other is not self and other._phase != ANSWERING]
        if not victims:
            return False
        victim = min(victims, key=lambda other: (other._phase, other._since))
        victim._clear_deadline()
        victim.transport.close()
        return True


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn.Config(http=...), with these limits."""
    return type("GuardedH11", (GuardedH11Protocol,), {"limits": limits})
