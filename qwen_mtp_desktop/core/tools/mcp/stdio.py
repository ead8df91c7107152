"""MCP's stdio transport with its reading bounded: a server's messages are read line by line
into at most MAX_MESSAGE_BYTES, and an answer to `tools/list` into at most MAX_LIST_BYTES, of
which only the first MAX_TOOLS tools are ever validated.

Why our own: the SDK's stdio client (mcp.client.stdio) keeps a line whole however long it
grows (joining it again for every chunk read: quadratic) and validates all of it before the
client can cut it, so a server listing 100,000 tools took 19.7 s and 464 MB, holding the GIL
long enough to freeze the window. The rest (starting the server, its shutdown sequence) is the
SDK's, through its helpers; only the two pipe tasks are ours.

A message past its bound is never kept: what follows of its line is skipped as it arrives, and
the request it answers gets a JSON-RPC error that says how large it was (the session raises
it as the SDK's MCPError, which the client words for the user). When the answer's id cannot be
found in the line's first or last bytes, the connection ends instead, so no request waits.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, TextIO

#: The longest message read from a server (a tool's result is cut to 20,000 characters later,
#: but a result may carry images or resources of several MB).
MAX_MESSAGE_BYTES = 32 * 1024 * 1024
#: The longest answer to `tools/list` read: 128 tools of the largest schema and description
#: the client keeps are under 3 MB.
MAX_LIST_BYTES = 4 * 1024 * 1024
#: Tools validated of a list (the client offers at most this many: client.MAX_TOOLS).
MAX_LISTED_TOOLS = 128
#: The bytes kept of a line's start and end to find the id of a message that is too long.
_EDGE_BYTES = 4096
#: Non-JSON lines a server printed on stdout that an error quotes, and their length kept.
_STRAY_LINES = 3
_STRAY_CHARS = 200
#: JSON-RPC's "internal error" code, for an answer this client refused to read.
REFUSED_CODE = -32603
#: How the message of such an error ends (`refusal`).
REFUSED_ENDING = " this app reads"
_ID_AT_START = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"[^"\\]*")'
)
_ID_AT_END = re.compile(rb'"id"\s*:\s*(-?\d+|"[^"\\]*")\s*\}\s*$')


class MessageReader:
    """Splits a server's stdout into JSON-RPC messages with bounded memory and time: bytes in
    (`feed`), messages out (SDK SessionMessages, or an Exception for a line that is not one,
    which the session reports as the SDK's own reader does). `asked` is told each request sent,
    so an answer to `tools/list` is known and cut before it is validated."""

    def __init__(
        self,
        max_message: int = MAX_MESSAGE_BYTES,
        max_list: int = MAX_LIST_BYTES,
        max_tools: int = MAX_LISTED_TOOLS,
    ) -> None:
        self._max_message, self._max_list, self._max_tools = max_message, max_list, max_tools
        self._parts: list[bytes] = []
        self._size = 0
        self._first = b""  # the line's first bytes (where its id is)
        self._head = b""  # a skipped line's first bytes
        self._tail = b""  # and its last
        self._skipping = False
        self._open: set[object] = set()  # ids of requests sent and not answered
        self._lists: set[object] = set()  # those that are `tools/list`
        #: Set when a skipped line's request could not be told: the connection must end.
        self.broken = ""
        #: The first lines that were not JSON-RPC (a program that is not an MCP server prints
        #: its usage or a banner there): quoted when the connection fails.
        self.stray: list[str] = []

    def asked(self, message: Any) -> None:
        """A message sent to the server (a request's id is then awaited)."""
        method, request_id = getattr(message, "method", None), getattr(message, "id", None)
        if method is None or request_id is None:
            return
        self._open.add(request_id)
        if method == "tools/list":
            self._lists.add(request_id)

    def feed(self, chunk: bytes) -> list[Any]:
        """The messages `chunk` completes (a line's end is b"\\n")."""
        found: list[Any] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._take(piece)
            if end < 0:
                return found
            found += self._line_done()
            start = end + 1

    def _take(self, piece: bytes) -> None:
        if self._skipping:
            self._tail = (self._tail + piece)[-_EDGE_BYTES:]
            self._size += len(piece)
            return
        self._parts.append(piece)
        self._size += len(piece)
        if len(self._first) < _EDGE_BYTES:
            self._first += piece[: _EDGE_BYTES - len(self._first)]
        limit = self._limit()
        if self._size > limit:
            line = b"".join(self._parts)
            self._head, self._tail = line[:_EDGE_BYTES], line[-_EDGE_BYTES:]
            self._parts, self._skipping = [], True

    def _limit(self) -> int:
        """The bound of the line read now: a list's, once its start shows it answers one."""
        if not self._lists or self._size <= self._max_list:
            return self._max_message
        request_id = _id_in(_ID_AT_START, self._first)
        return self._max_list if request_id in self._lists else self._max_message

    def _line_done(self) -> list[Any]:
        skipped, size = self._skipping, self._size
        line = b"" if skipped else b"".join(self._parts)
        self._parts, self._size, self._skipping, self._first = [], 0, False, b""
        if skipped:
            return self._too_large(size)
        if not line.strip():
            return []
        return [self._message(line)]

    def _too_large(self, size: int) -> list[Any]:
        request_id = _id_in(_ID_AT_START, self._head)
        if request_id not in self._open:
            request_id = _id_in(_ID_AT_END, self._tail)
        if request_id not in self._open and len(self._open) == 1:
            request_id = next(iter(self._open))
        if request_id not in self._open:
            self.broken = f"it sent a message of {size:,} bytes, more than this app reads"
            return []
        what = "its list of tools" if request_id in self._lists else "its answer"
        limit = self._max_list if request_id in self._lists else self._max_message
        error = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": REFUSED_CODE,
                "message": refusal(what, limit, size),
            },
        }
        return [self._validated(error)]

    def _message(self, line: bytes) -> Any:
        import mcp_types

        try:
            if self._lists:
                # Parsed by the standard library (C) and cut before the SDK's validation,
                # which costs far more per tool.
                raw = json.loads(line)
                self._settle(raw)
                return self._validated(raw)
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except (ValueError, RecursionError) as exc:
            if len(self.stray) < _STRAY_LINES:
                self.stray.append(line[:_STRAY_CHARS].decode("utf-8", "replace").strip())
            return exc
        self._settle_message(message)
        return _session_message(message)

    def _settle(self, raw: object) -> None:
        if not isinstance(raw, dict) or "method" in raw:
            return
        request_id = raw.get("id")
        if not isinstance(request_id, int | str):
            return
        result = raw.get("result")
        if request_id in self._lists and isinstance(result, dict):
            tools = result.get("tools")
            if isinstance(tools, list) and len(tools) > self._max_tools:
                result["tools"] = tools[: self._max_tools]
        self._open.discard(request_id)
        self._lists.discard(request_id)

    def _settle_message(self, message: Any) -> None:
        if getattr(message, "method", None) is None:
            request_id = getattr(message, "id", None)
            self._open.discard(request_id)
            self._lists.discard(request_id)

    def _validated(self, raw: object) -> Any:
        import mcp_types

        try:
            message = mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except ValueError as exc:
            return exc
        self._settle_message(message)
        return _session_message(message)


def refusal(what: str, limit: int, size: int | None = None) -> str:
    """Why a message was not read: "its answer is 40.2 MB, more than the 34 MB this app
    reads" (`size` None: reading stopped at the bound, so the whole size is unknown)."""
    if size is None:
        return f"{what} is more than the {limit / 1e6:,.0f} MB{REFUSED_ENDING}"
    return f"{what} is {size / 1e6:,.1f} MB, more than the {limit / 1e6:,.0f} MB{REFUSED_ENDING}"


def _id_in(pattern: re.Pattern[bytes], data: bytes) -> object:
    found = pattern.search(data)
    if found is None:
        return None
    text = found.group(1)
    try:
        return json.loads(text)
    except ValueError:
        return None


def _session_message(message: Any) -> Any:
    from mcp.shared.message import SessionMessage

    return SessionMessage(message)


@asynccontextmanager
async def bounded_stdio_client(parameters: Any, errlog: TextIO) -> AsyncGenerator[Any, None]:
    """The SDK's `stdio_client` (mcp.client.stdio) with bounded reading (MessageReader): the
    same process start and shutdown sequence, through the SDK's own helpers."""
    import anyio
    import anyio.lowlevel
    from mcp.client import stdio as sdk

    command = await sdk._get_executable_command(parameters.command)
    process = await sdk._create_platform_compatible_process(
        command=command,
        args=parameters.args,
        env=sdk.get_default_environment() | (parameters.env or {}),
        errlog=errlog,
        cwd=parameters.cwd,
    )
    # No awaits until the task group is entered (the SDK's rule: a cancellation in the gap
    # would leak the live process).
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)
    reader = MessageReader()
    writer_done = anyio.Event()
    stdout, stdin = process.stdout, process.stdin
    assert stdout is not None and stdin is not None, "the server is started with pipes"

    async def stdout_reader() -> None:
        quoted = 0
        try:
            async with read_writer:
                try:
                    async for chunk in stdout:
                        messages = reader.feed(chunk)
                        for line in reader.stray[quoted:]:  # beside its stderr, for the error
                            errlog.write(f"(on stdout) {line}\n")
                        quoted = len(reader.stray)
                        for message in messages:
                            await read_writer.send(message)
                        if reader.broken:
                            errlog.write(f"[qwen-mtp-desktop] {reader.broken}\n")
                            return  # the session sees the connection end
                finally:
                    await sdk._drain_stdout(process)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass  # the session is gone, or our own shutdown closed the pipe

    async def stdin_writer() -> None:
        try:
            async with write_reader:
                async for session_message in write_reader:
                    reader.asked(session_message.message)
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send((text + "\n").encode(parameters.encoding))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk._stop_server_process(process)
        await sdk._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                await shutdown()
            group.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
