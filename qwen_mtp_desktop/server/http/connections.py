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
  answering (still sending headers or idle between requests for `FRESH_S` or more, then still
  sending a body, then one that came within `FRESH_S`), so slow clients cannot crowd out a
  quick request such as /health; when every connection is being answered, the new one gets
  503. The grace matters under a flood: a quick client's request is read a turn or more of
  the event loop after its connection is accepted, and connections accepted meanwhile must
  not close it as the oldest that has sent no headers.

A connection closed after a refusal sent while its body still arrives (413, 429) lingers,
as Apache's and nginx's do: the answer is sent with a half-close, and the rest of the body is
read and dropped (at most `LINGER_BYTES`, `LINGER_S`) until the client closes. Closed at once,
the unread bytes reset the connection, and a client still sending its body never reads why
it was refused, only "connection reset by peer".

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

import h11
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

#: What a refused body's lingering close reads and drops at most, and for how long.
LINGER_BYTES = 64 * 1024 * 1024
LINGER_S = 10.0

#: What a connection is doing.
HEADERS, BODY, ANSWERING = 0, 1, 2
#: A connection waiting for headers this long has had its fair chance to send them.
FRESH_S = 1.0


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
        self._lingering = False
        self._dropped = 0
        super().connection_made(_LingeringTransport(transport, self))
        if not self._make_room():
            with contextlib.suppress(Exception):
                transport.write(_FULL_REPLY)
            transport.close()
            return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._clear_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:  # the rest of a refused body
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self._close_now()
            return
        super().data_received(data)

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

    def _close_requested(self, inner: asyncio.Transport) -> bool:
        """uvicorn closes the connection: True when it lingers instead (module docstring),
        because the client is still sending the body of a request already answered."""
        if self._lingering:
            return True
        if (
            inner.is_closing()
            or self.conn.their_state is not h11.SEND_BODY
            or not inner.can_write_eof()
        ):
            return False
        self._lingering = True
        self._clear_deadline()
        inner.write_eof()  # the answer, then end of stream; reading goes on
        inner.resume_reading()
        self._deadline = self.loop.call_later(LINGER_S, self._close_now)
        return True

    def _close_now(self) -> None:
        self._clear_deadline()
        transport = self.transport
        inner = transport.inner if isinstance(transport, _LingeringTransport) else transport
        inner.close()

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
        # Otherwise just close: a stalled body's request sees its client leave.
        self._close_now()

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
        now = time.monotonic()
        victim = min(victims, key=lambda other: other._expendability(now))
        victim._close_now()
        return True

    def _expendability(self, now: float) -> tuple[int, float]:
        """The order in which `_make_room` closes connections (lowest first): waiting for
        headers for `FRESH_S` or more, sending a body, waiting for headers for less; oldest
        first within each."""
        if self._phase == HEADERS:
            return (0 if now - self._since >= FRESH_S else 2), self._since
        return 1, self._since


class _LingeringTransport(asyncio.Transport):
    """The connection's transport as uvicorn sees it: `close()` may linger instead
    (GuardedH11Protocol._close_requested), and nothing is written while it lingers; the
    rest is the real transport's."""

    def __init__(self, inner: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        super().__init__()
        self.inner = inner
        self._protocol = protocol

    def close(self) -> None:
        if not self._protocol._close_requested(self.inner):
            self.inner.close()

    def is_closing(self) -> bool:
        return self._protocol._lingering or self.inner.is_closing()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._protocol._lingering:
            self.inner.write(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.inner.get_extra_info(name, default)

    def pause_reading(self) -> None:
        if not self._protocol._lingering:
            self.inner.pause_reading()

    def resume_reading(self) -> None:
        self.inner.resume_reading()

    def is_reading(self) -> bool:
        return self.inner.is_reading()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.inner.set_write_buffer_limits(high, low)

    def get_write_buffer_size(self) -> int:
        return self.inner.get_write_buffer_size()

    def can_write_eof(self) -> bool:
        return self.inner.can_write_eof()

    def write_eof(self) -> None:
        self.inner.write_eof()

    def abort(self) -> None:
        self.inner.abort()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """The protocol class for uvicorn.Config(http=...), with these limits."""
    return type("GuardedH11", (GuardedH11Protocol,), {"limits": limits})
