"""The MCP client: connects to the configured servers, lists their tools and calls them, all on
an asyncio event loop of its own in a daemon thread, so nothing here ever blocks the caller.

Each call returns a `concurrent.futures.Future` at once; the GUI relays its result as a signal
(workers.mcp_tools). Why a loop of our own rather than qasync's: the app's qasync loop only
awaits the window's close (docs/architecture.md), and a stdio server that floods or hangs must
not touch the GUI thread's loop at all; the SDK is asyncio-only, and one dedicated loop serves
every server.

One connection per server, opened on first use and kept: its transport and session are entered
and left in one task (`_Connection.run`), as anyio's cancel scopes require. A call is bounded by
`timeout_s`; a timed-out or crashed server is closed (its process ended) and reconnected on the
next call, and its error says what happened, with the end of its stderr for a crash (a tool's
JSON-RPC error is what the server answered: its connection is kept). Results are bounded to
`MAX_RESULT_CHARS` before they reach the model; what is read from a server at all is bounded
by core.tools.mcp.stdio and core.tools.mcp.http (a tool list of 100,000 entries is refused at
4 MB, never parsed; an answer past 34 MB is refused as it arrives).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import threading
import time
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, Any, TypeVar

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.tools.mcp.config import DEFAULT_TIMEOUT_S, McpServer
from qwen_mtp_desktop.core.tools.mcp.stdio import (
    MAX_LISTED_TOOLS,
    REFUSED_CODE,
    REFUSED_ENDING,
    bounded_stdio_client,
)

log = logging.getLogger(__name__)

#: What reaches the model of one tool's result (characters); the rest is cut with a note.
MAX_RESULT_CHARS = 20_000
#: Tools listed per server, and a tool's description and schema kept (characters).
MAX_TOOLS = MAX_LISTED_TOOLS  # the stdio transport validates no more than these
MAX_DESCRIPTION = 2_000
MAX_SCHEMA = 20_000
MAX_NAME = 128
#: Seconds to start a server and finish MCP's handshake.
CONNECT_TIMEOUT_S = 30.0
#: The end of a crashed server's stderr quoted in its error.
STDERR_TAIL = 600

T = TypeVar("T")


#: Where a server's settings are changed, as a fix outside that place names it.
SETTINGS_PLACE = "in Tools > MCP servers"


class McpError(UserFacingError):
    """A server could not be reached or a tool call failed; the message says which and why."""

    code = "MCP"

    def fix_here(self) -> str:
        """The fix as the MCP servers dialog says it: that dialog is the place the fix names."""
        return self.fix.replace(SETTINGS_PLACE, "here")


@dataclass(frozen=True)
class ToolInfo:
    """A tool a server offers: its name, description and JSON schema of its arguments."""

    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """What a tool answered: its text (bounded), whether the tool reported an error, and how
    long the call took."""

    text: str
    is_error: bool
    duration_s: float
    truncated: bool = False


def bounded(text: str, limit: int = MAX_RESULT_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters cut)", True


def result_text(content: list[Any], structured: object = None) -> str:
    """A CallToolResult's content as text: text parts as they are, others named."""
    parts: list[str] = []
    for item in content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(getattr(item, "text", "")))
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource {resource}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and structured is not None:
        parts.append(str(structured))
    return "\n".join(parts)


class _Connection:
    """One server's transport and session, held open by `run` until `close`."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: Any = None
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.closing = asyncio.Event()
        self.done = asyncio.Event()
        self.stderr: IO[str] | None = None

    async def run(self) -> None:
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(*streams[:2]))
                with _deadline(CONNECT_TIMEOUT_S):
                    await session.initialize()
                self.session = session
                if not self.ready.done():
                    self.ready.set_result(session)
                await self.closing.wait()
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(self._connect_error(exc))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None
            self.done.set()
            if self.stderr is not None:
                self.stderr.close()

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        server = self.server
        if server.transport == "http":
            from mcp.client.streamable_http import streamable_http_client

            from qwen_mtp_desktop.core.tools.mcp.http import SDK_EVENT_BYTES, bounded_http_client

            # Bounded reading (core.tools.mcp.http): the SDK reads only what its transport let by.
            client = bounded_http_client(dict(server.headers))
            await stack.enter_async_context(client)
            return await stack.enter_async_context(
                streamable_http_client(
                    server.url, http_client=client, max_sse_event_size=SDK_EVENT_BYTES
                )
            )
        from mcp.client.stdio import StdioServerParameters

        # A real file: the server's stderr goes there, and a crash quotes its end.
        self.stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed when the connection ends)
        parameters = StdioServerParameters(
            command=server.command, args=list(server.args), env=dict(server.env) or None
        )
        # Bounded reading (core.tools.mcp.stdio): a flood of tools or a huge line costs a bounded
        # read.
        return await stack.enter_async_context(bounded_stdio_client(parameters, self.stderr))

    def stderr_tail(self) -> str:
        """The server's last lines on stderr (and any stray stdout), as the cause of a failure."""
        if self.stderr is None or self.stderr.closed:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0)
            text = self.stderr.read()
        except (OSError, ValueError):
            return ""
        lines = [" ".join(line.split()) for line in text.splitlines()]
        tail = " / ".join(line for line in lines if line)[-STDERR_TAIL:]
        return f' Its last output: "{tail}".' if tail else ""

    def _connect_error(self, exc: BaseException) -> McpError:
        name, what = self.server.name, self.server.summary[:200]
        inner = _innermost(exc)
        tail = self.stderr_tail()
        if isinstance(inner, TimeoutError):
            return McpError(
                f"MCP server {name!r} did not answer MCP's handshake within "
                f"{CONNECT_TIMEOUT_S:.0f} s ({what}).{tail}",
                "Check that the command starts an MCP server on stdio, or the URL.",
            )
        if isinstance(inner, FileNotFoundError | PermissionError):
            return McpError(
                f"MCP server {name!r} could not be started: {inner.strerror or inner} ({what}).",
                f"Check the command {SETTINGS_PLACE}; give its full path if it is not on PATH.",
            )
        reason = _reason(exc)
        if self.server.transport == "stdio" and _closed(inner):
            # The program ended (or shut its output) before MCP's first answer: most often it
            # is not an MCP server, or it needs other arguments; what it wrote says which.
            return McpError(
                f"MCP server {name!r} ended before answering MCP's handshake ({what})."
                + (tail or " It wrote nothing on stderr."),
                f"Check the command and its arguments {SETTINGS_PLACE}: they must start an "
                "MCP server on stdio.",
            )
        return McpError(
            f"MCP server {name!r} could not be reached: {reason} ({what}).{tail}",
            f"Check its command or URL {SETTINGS_PLACE}.",
        )

    async def close(self) -> None:
        self.closing.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), 10)


def _innermost(exc: BaseException) -> BaseException:
    """The exception inside anyio's groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _closed(exc: BaseException) -> bool:
    """Whether `exc` is the SDK's "Connection closed" (the server's output ended)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def _reason(exc: BaseException) -> str:
    """The innermost meaningful message of an exception (anyio wraps them in groups)."""
    exc = _innermost(exc)
    text = " ".join(str(exc).split())[:300]
    return text or type(exc).__name__


def _answered_error(exc: BaseException) -> str | None:
    """What the server answered, when `exc` is its JSON-RPC error (the SDK's MCPError; not the
    SDK's own "connection closed" or time-out, which are not answers): "CODE: MESSAGE"."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if not isinstance(exc, MCPError) or exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
        return None
    said = " ".join(str(exc.message).split())[:300] or "no message"
    return f"{said} (JSON-RPC error {exc.code})"


def _refused(exc: BaseException) -> str | None:
    """Why this client read no further than a bound, when `exc` is its refusal of an answer."""
    from mcp.shared.exceptions import MCPError

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if not isinstance(exc, MCPError) or exc.code != REFUSED_CODE:
        return None
    message = " ".join(str(exc.message).split())[:300]
    return message if message.endswith(REFUSED_ENDING) else None


@contextlib.contextmanager
def _deadline(seconds: float) -> Any:
    import anyio

    with anyio.fail_after(seconds):
        yield


def _info(server: McpServer, tool: Any) -> ToolInfo | None:
    """A listed tool as the chat offers it; None (logged) for one the model cannot be shown:
    a name that is not short printable text, or a schema too large for a prompt."""
    name, schema = tool.name, tool.input_schema
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        log.warning("MCP server %r: a tool with an unusable name is left out", server.name)
        return None
    if not isinstance(schema, dict) or len(json.dumps(schema, default=str)) > MAX_SCHEMA:
        log.warning("MCP server %r: tool %r has no usable schema; left out", server.name, name)
        return None
    description = tool.description if isinstance(tool.description, str) else ""
    return ToolInfo(server.name, name, description[:MAX_DESCRIPTION], schema)


def _launch(server: McpServer) -> tuple[object, ...]:
    """What starts or reaches a server (a change of its allowed tools keeps the connection)."""
    return (server.transport, server.command, server.args, server.env, server.url, server.headers)


class McpHub:
    """The MCP servers' client for one app run; thread-safe; `close()` ends every server."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._connections: dict[str, _Connection] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._thread = threading.Thread(target=self._run_loop, name="mcp-client", daemon=True)
        self._thread.start()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if self._closed:
            coro.close()
            failed: Future[T] = Future()
            failed.set_exception(McpError("The MCP client is closed (the app is quitting)."))
            return failed
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def list_tools(self, server: McpServer) -> Future[list[ToolInfo]]:
        return self._submit(self._list_tools(server))

    def call_tool(
        self,
        server: McpServer,
        name: str,
        arguments: Mapping[str, Any],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> Future[ToolResult]:
        return self._submit(self._call_tool(server, name, dict(arguments), timeout_s))

    def forget(self, server_name: str) -> Future[None]:
        """Close one server's connection (its configuration changed or it was removed)."""
        return self._submit(self._drop(server_name))

    def close(self, timeout_s: float = 10.0) -> None:
        """End every server (their processes) and the loop's thread."""
        if self._closed:
            return
        future = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
        self._closed = True
        try:
            future.result(timeout_s)
        except Exception:
            log.warning("MCP servers did not close within %.0f s", timeout_s, exc_info=True)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)

    # --- on the loop ------------------------------------------------------------------------

    async def _session(self, server: McpServer) -> tuple[_Connection, Any]:
        connection = self._connections.get(server.name)
        if connection is not None and (connection.server != server or connection.done.is_set()):
            await self._drop(server.name)
            connection = None
        if connection is None:
            connection = _Connection(server)
            self._connections[server.name] = connection
            task = asyncio.create_task(connection.run(), name=f"mcp:{server.name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return connection, await connection.ready
        except McpError:
            self._connections.pop(server.name, None)
            raise

    async def _drop(self, name: str) -> None:
        connection = self._connections.pop(name, None)
        if connection is not None:
            await connection.close()

    async def _list_tools(self, server: McpServer) -> list[ToolInfo]:
        _connection, session = await self._session(server)
        try:
            with _deadline(CONNECT_TIMEOUT_S):
                listed = await session.list_tools()
        except BaseException as exc:
            await self._drop(server.name)
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise McpError(
                f"MCP server {server.name!r} did not list its tools: {_reason(exc)}.",
                "Check the server, then enable it again.",
            ) from None
        return [info for tool in list(listed.tools)[:MAX_TOOLS] if (info := _info(server, tool))]

    async def _call_tool(
        self, server: McpServer, name: str, arguments: dict[str, Any], timeout_s: float
    ) -> ToolResult:
        connection, session = await self._session(server)
        started = time.monotonic()
        try:
            with _deadline(timeout_s):
                result = await session.call_tool(name, arguments)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                await self._drop(server.name)
                raise
            refused = _refused(exc)
            if refused is not None:  # read no further (core.tools.mcp.stdio and .http)
                raise McpError(
                    f"The tool {name!r} of MCP server {server.name!r} failed: {refused}, so "
                    "it was not read.",
                    "Ask the tool for less (a smaller file, range or page of results), or "
                    "check the server.",
                    code="MCP_CALL",
                ) from None
            answered = _answered_error(exc)
            if answered is not None:  # the server is fine and said why: it keeps running
                raise McpError(
                    f"The tool {name!r} of MCP server {server.name!r} failed: the server "
                    f"answered with an error: {answered}.",
                    "Check the tool's arguments, or the server's log.",
                    code="MCP_CALL",
                ) from None
            tail = connection.stderr_tail()
            stopped = connection.done.is_set()  # before the drop below ends it either way
            await self._drop(server.name)  # a stuck or dead server is ended, then restarted
            if isinstance(exc, TimeoutError):
                raise McpError(
                    f"The tool {name!r} of MCP server {server.name!r} did not answer within "
                    f"{timeout_s:.0f} s, so it was stopped (the server is restarted on the "
                    "next call).",
                    f"Try again, or raise the time limit {SETTINGS_PLACE}.",
                    code="MCP_TIMEOUT",
                ) from None
            raise McpError(
                f"The tool {name!r} of MCP server {server.name!r} failed: "
                f"{'the server stopped' if stopped else 'the connection failed'} "
                f"({_reason(exc)}).{tail}",
                "Check the server's log or command; it is restarted on the next call.",
                code="MCP_CALL",
            ) from None
        text, truncated = bounded(
            result_text(list(result.content), getattr(result, "structured_content", None))
        )
        return ToolResult(text, bool(result.is_error), time.monotonic() - started, truncated)

    async def _close_all(self) -> None:
        for name in list(self._connections):
            await self._drop(name)
        for task in list(self._tasks):
            task.cancel()
