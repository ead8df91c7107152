"""MCP's streamable HTTP transport with its reading bounded, as core.tools.mcp.stdio bounds a
stdio server: a message is read into at most MAX_MESSAGE_BYTES and an answer to `tools/list`
into at most MAX_LIST_BYTES, of which only the first MAX_LISTED_TOOLS tools reach the SDK.

How: the SDK's own transport (mcp.client.streamable_http) is given an HTTP client whose
transport (`BoundedTransport`) reads every response before the SDK does. A JSON body is read
up to its bound; an event stream is passed on event by event, each event up to its bound, the
whole response up to MAX_MESSAGE_BYTES. Past a bound nothing more is read: the request gets a
JSON-RPC error saying what was too large (the session raises it as the SDK's MCPError, which
the client words for the user), and the connection is closed. What the SDK itself would keep
whole (a body of any size, a list of any length, an endless stream of events) never reaches
it. Compressed answers are not asked for (Accept-Encoding: identity) and, sent anyway,
refused: a few kB of gzip can expand a thousandfold.

The app uses nothing a server sends unasked, so it opens no standing stream (MCP's GET
stream): an endless or reconnect-looping one could otherwise run for the connection's whole
life. Notifications inside an answer's stream are dropped here (the app has no use for them),
so a flood of them costs a JSON parse each, not the SDK's validation. Time is bounded by the
client: every request runs under a deadline (core.tools.mcp.client), so a slow drip ends there.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2

from qwen_mtp_desktop.core.tools.mcp.stdio import (
    MAX_LIST_BYTES,
    MAX_LISTED_TOOLS,
    MAX_MESSAGE_BYTES,
    REFUSED_CODE,
    REFUSED_ENDING,
    refusal,
)

#: What is read of a body the SDK does not parse (an HTTP error page, a redirect).
MAX_OTHER_BYTES = 64 * 1024
#: Seconds for the answer to a message no one waits for (a notification, the closing DELETE).
QUICK_TIMEOUT_S = 10.0
#: The SDK's own bound on an event: above ours, so ours always acts first.
SDK_EVENT_BYTES = MAX_MESSAGE_BYTES + 1024 * 1024


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport that bounds what each response can make the app hold."""

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":  # MCP's standing stream: not opened (see the module)
            return httpx2.Response(405, request=request)
        request_id, method = _asked(request)
        if request_id is None:  # a notification, or the closing DELETE: only its status counts
            with anyio.fail_after(QUICK_TIMEOUT_S):
                response = await self._inner.handle_async_request(request)
                await _close(response)
            return httpx2.Response(response.status_code, headers=_kept(response), request=request)
        response = await self._inner.handle_async_request(request)
        headers = _kept(response)
        is_list = method == "tools/list"
        what = "its list of tools" if is_list else "its answer"
        limit = MAX_LIST_BYTES if is_list else MAX_MESSAGE_BYTES

        def refused(reason: str) -> httpx2.Response:
            body = json.dumps(_error(request_id, reason)).encode()
            headers["content-type"] = "application/json"
            return httpx2.Response(response.status_code, headers=headers, content=body)

        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await _close(response)
            return refused(
                f"{what} came compressed ({encoding[:40]}) unasked, not what{REFUSED_ENDING}"
            )
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind == "text/event-stream":
            events = _BoundedEvents(response, request_id, what, limit, is_list)
            return httpx2.Response(response.status_code, headers=headers, stream=events)
        if kind != "application/json":
            body, _whole = await _read(response, MAX_OTHER_BYTES)
            return httpx2.Response(response.status_code, headers=headers, content=body)
        body, whole = await _read(response, limit)
        if not whole:
            return refused(refusal(what, limit))
        if is_list:
            body = _cut(body)
        return httpx2.Response(response.status_code, headers=headers, content=body)

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_http_client(headers: dict[str, str]) -> httpx2.AsyncClient:
    """The SDK's default MCP client (mcp.shared._httpx_utils.create_mcp_http_client: 30 s to
    connect and write, 300 s between reads of a stream) over BoundedTransport."""
    return httpx2.AsyncClient(
        headers={**headers, "Accept-Encoding": "identity"},
        timeout=httpx2.Timeout(30.0, read=300.0),
        transport=BoundedTransport(),
    )


def _asked(request: httpx2.Request) -> tuple[object, str]:
    """The JSON-RPC id and method of the request the SDK sends (None: no answer is awaited)."""
    if request.method != "POST":
        return None, ""
    try:
        sent = json.loads(request.content)
    except ValueError:
        return None, ""
    if not isinstance(sent, dict) or "method" not in sent:
        return None, ""  # an answer of ours to the server
    return sent.get("id"), str(sent["method"])


def _kept(response: httpx2.Response) -> dict[str, str]:
    """The response's headers but its framing and encoding (the body is handed on as read)."""
    dropped = {"content-length", "transfer-encoding", "content-encoding"}
    return {name: value for name, value in response.headers.items() if name.lower() not in dropped}


def _error(request_id: object, reason: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": REFUSED_CODE, "message": reason}}


async def _close(response: httpx2.Response) -> None:
    await response.aclose()


async def _read(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the body, and whether that was all of it."""
    parts: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > limit:
                return b"", False
            parts.append(chunk)
    finally:
        await response.aclose()
    return b"".join(parts), True


def _cut(body: bytes) -> bytes:
    """A tools/list answer with only the tools the client keeps (parsed by the standard
    library: the SDK's validation costs far more per tool)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return body  # the SDK says what is wrong with it
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        return body
    tools = result.get("tools")
    if not isinstance(tools, list) or len(tools) <= MAX_LISTED_TOOLS:
        return body
    result["tools"] = tools[:MAX_LISTED_TOOLS]
    return json.dumps(answer).encode()


class _BoundedEvents(httpx2.AsyncByteStream):
    """An event stream passed on event by event: each event's data up to `limit` bytes, the
    whole response up to `total`; notifications dropped; a tools/list answer cut.
    Past a bound, an error event for the request ends the stream."""

    def __init__(
        self,
        response: httpx2.Response,
        request_id: object,
        what: str,
        limit: int,
        is_list: bool,
        total: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._response = response
        self._request_id, self._what, self._limit, self._is_list = request_id, what, limit, is_list
        self._total = total

    async def __aiter__(self) -> AsyncIterator[bytes]:
        data: list[bytes] = []  # the event's data lines
        line: list[bytes] = []  # the line being read
        event_size = line_size = total = 0
        after_cr = False  # the last chunk ended in CR: a LF opening this one is its CRLF
        try:
            async for chunk in self._response.aiter_raw():
                total += len(chunk)
                if total > self._total:
                    yield self._refusal(refusal("its answer's stream", self._total))
                    return
                if after_cr and chunk.startswith(b"\n"):
                    chunk = chunk[1:]
                after_cr = chunk.endswith(b"\r")
                for piece, ended in _lines(chunk):
                    line.append(piece)
                    line_size += len(piece)
                    if event_size + line_size > self._limit + 16:
                        yield self._refusal(refusal(self._what, self._limit))
                        return
                    if not ended:
                        continue
                    text, line, line_size = b"".join(line), [], 0
                    if text:
                        field, _, value = text.partition(b":")
                        if field == b"data":
                            value = value[1:] if value.startswith(b" ") else value
                            data.append(value)
                            event_size += len(value) + 1
                        continue  # ids, retries and event names: nothing here uses them
                    if data:
                        passed = self._passed(b"\n".join(data))
                        data, event_size = [], 0
                        if passed:
                            yield passed
        finally:
            await self._response.aclose()

    def _passed(self, data: bytes) -> bytes:
        """The event as the SDK reads it; b"" for a notification (dropped)."""
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            message = None  # passed on: the SDK reports what is wrong with it
        if isinstance(message, dict) and "method" in message and "id" not in message:
            return b""
        if self._is_list and isinstance(message, dict) and "method" not in message:
            data = _cut(data)
        return b"".join(b"data: " + part + b"\n" for part in data.split(b"\n")) + b"\n"

    def _refusal(self, reason: str) -> bytes:
        return b"data: " + json.dumps(_error(self._request_id, reason)).encode() + b"\n\n"

    async def aclose(self) -> None:
        await self._response.aclose()


def _lines(chunk: bytes) -> list[tuple[bytes, bool]]:
    """`chunk` in line pieces, each with whether a line end (CR, LF or CRLF) closed it."""
    pieces: list[tuple[bytes, bool]] = []
    for part in chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        pieces.append((part, True))
    last, _ = pieces[-1]
    pieces[-1] = (last, False)
    return pieces
