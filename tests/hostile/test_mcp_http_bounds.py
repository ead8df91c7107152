"""Issue 45, item 1 (the rest of item 6): what a streamable HTTP MCP server can make the app
hold is bounded as a stdio server's is (core.tools.mcp.http over the SDK's transport).

- Generated event streams (hypothesis), cut anywhere, with any line ends: every answer comes
  through whole and every notification is dropped while under the bounds; past a bound the
  request gets one error naming it, and the reader never keeps more than the bound.
- A real server on loopback (flood_mcp_http_server.py, a process of its own): a 100,000-tool
  list as JSON and as an event, answers of 300 MB and endless, a flood of notifications or
  comments, a gzip bomb, a slow drip, a standing stream that floods. The memory cases run in
  a child under a 1 GB address-space limit, each case's peak (VmHWM, reset per case) measured.
  Before: the JSON list took 9.8 s and +401 MB and the 300 MB answer a 1.97 GB peak (both
  read whole), a legitimate 3 MB event was refused (the SDK's 1 MB event bound), 60 MB of
  notifications ran past the 15 s time limit and a gzip bomb was expanded.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.tools.mcp.client import MAX_TOOLS, McpError, McpHub
from qwen_mtp_desktop.core.tools.mcp.config import McpServer
from qwen_mtp_desktop.core.tools.mcp.http import _BoundedEvents
from tests.costs import costs
from tests.hostile.flood_mcp_http_server import http_flood_server, url
from tests.hostile.isolation import run_isolated
from tests.reliability import figures

PEAK_LIMIT_MB = 100


@pytest.fixture(scope="module")
@costs("subprocess")  # the flooding server is a child process
def port() -> Iterator[int]:
    with http_flood_server() as made:
        yield made


@pytest.fixture(scope="module")
def hub() -> Iterator[McpHub]:
    made = McpHub()
    yield made
    made.close()


# --- the event stream's reader, generated -----------------------------------------------------


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _read(chunks: list[bytes], limit: int, total: int, is_list: bool) -> list[bytes]:
    response = httpx2.Response(200, stream=_Chunks(chunks))
    events = _BoundedEvents(response, 7, "its answer", limit, is_list, total)

    async def run() -> list[bytes]:
        return [piece async for piece in events]

    return asyncio.run(run())


def _data(out: list[bytes]) -> list[Any]:
    """The messages the SDK would read from what was passed on."""
    text = b"".join(out).decode()
    assert text == "" or text.endswith("\n\n")
    found = []
    for event in text.split("\n\n")[:-1]:
        lines = event.split("\n")
        assert all(line.startswith("data: ") for line in lines), event
        found.append(json.loads("\n".join(line[6:] for line in lines)))
    return found


_message = st.one_of(
    st.builds(
        lambda n, size: {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"pad": "n" * size, "n": n},
        },
        st.integers(0, 9),
        st.integers(0, 300),
    ),
    st.builds(
        lambda n, size: {"jsonrpc": "2.0", "id": 7, "result": {"text": "r" * size, "n": n}},
        st.integers(0, 9),
        st.integers(0, 3000),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    messages=st.lists(_message, max_size=8),
    comments=st.lists(st.integers(0, 200), max_size=4),
    end=st.sampled_from(["\n", "\r\n", "\r"]),
    multiline=st.booleans(),
    cuts=st.lists(st.integers(1, 700), max_size=30),
)
def test_any_event_stream_is_read_within_its_bounds(
    messages: list[dict[str, Any]],
    comments: list[int],
    end: str,
    multiline: bool,
    cuts: list[int],
) -> None:
    limit, total = 2_000, 12_000
    stream = "".join(f": {'c' * size}{end}" for size in comments)
    events = []
    for message in messages:
        text = json.dumps(message, indent=1 if multiline else None)
        events.append("".join(f"data: {line}{end}" for line in text.split("\n")) + end)
    stream += "".join(events)
    data = stream.encode()
    chunks, at = [], 0
    for size in cuts:
        chunks.append(data[at : at + size])
        at += size
    chunks.append(data[at:])

    out = _read(chunks, limit, total, is_list=False)
    assert max((len(piece) for piece in out), default=0) <= limit + 100, "an event past the bound"
    found = _data(out)
    answers = [message for message in messages if "id" in message]  # notifications dropped
    largest = max((len(event.encode()) for event in events), default=0)
    under = largest <= limit and len(data) <= total
    over = largest > limit + 40 or len(data) > total
    if under:
        assert found == answers
    elif found and "error" in found[-1]:
        assert found[-1]["id"] == 7 and found[-1]["error"]["message"].endswith("this app reads")
        assert found[:-1] == answers[: len(found) - 1]
    else:
        assert not over, "a stream past its bounds was passed on whole"
        assert found == answers


def test_a_list_event_is_cut_to_the_tools_kept() -> None:
    tools = [{"name": f"t{n}", "inputSchema": {"type": "object"}} for n in range(1000)]
    answer = {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools}}
    event = b"data: " + json.dumps(answer).encode() + b"\n\n"
    found = _data(_read([event[:1000], event[1000:]], 10**6, 10**7, is_list=True))
    assert [tool["name"] for tool in found[0]["result"]["tools"]] == [
        f"t{n}" for n in range(MAX_TOOLS)
    ]


# --- a real server ----------------------------------------------------------------------------


def _server(port: int, name: str, spec: dict[str, Any]) -> McpServer:
    return McpServer(name, "http", url=url(port, spec))


def test_lists_of_100000_tools_are_refused_quickly(port: int, hub: McpHub) -> None:
    for how in ("json", "sse"):
        server = _server(port, f"list_{how}", {"tools": 100_000, "list_as": how})
        started = time.monotonic()
        with pytest.raises(McpError) as caught:
            hub.list_tools(server).result(120)
        took = time.monotonic() - started
        message = caught.value.message
        assert "did not list its tools" in message, message
        assert re.search(r"list of tools is more than the 4 MB this app reads", message), message
        assert took < 10, f"{how}: {took:.1f} s"
        figures.record("hostile", **{f"mcp_http_list_100k_{how}_s": round(took, 2)})


def test_long_lists_under_the_bound_keep_the_first_tools(port: int, hub: McpHub) -> None:
    for how in ("json", "sse"):
        tools = hub.list_tools(_server(port, f"many_{how}", {"tools": 5000, "list_as": how}))
        assert [tool.name for tool in tools.result(120)] == [f"tool_{n}" for n in range(MAX_TOOLS)]


def test_an_answer_of_several_mb_is_read(port: int, hub: McpHub) -> None:
    """A 3 MB event (an image, a file): the SDK's own 1 MB event bound refused it."""
    server = _server(port, "three_mb", {"call": "big", "size_mb": 3, "call_as": "sse"})
    result = hub.call_tool(server, "tool_1", {}).result(60)
    assert result.truncated and result.text.startswith("x" * 1000)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"call": "big", "size_mb": 300}, "its answer is more than the 34 MB"),
        ({"call": "big", "size_mb": 0, "call_as": "sse"}, "more than the 34 MB"),
        ({"call": "notifications", "size_mb": 0, "call_as": "sse"}, "stream is more than"),
        ({"call": "comments", "size_mb": 0, "call_as": "sse"}, "stream is more than"),
        ({"call": "bomb"}, "its answer came compressed (gzip) unasked"),
    ],
    ids=["300 MB body", "endless event", "notification flood", "comment flood", "gzip bomb"],
)
def test_floods_are_refused_with_a_clear_error(
    port: int, hub: McpHub, spec: dict[str, Any], said: str
) -> None:
    server = _server(port, "flood", spec)
    started = time.monotonic()
    with pytest.raises(McpError) as caught:
        hub.call_tool(server, "tool_1", {}, timeout_s=60).result(120)
    message = caught.value.message
    assert said in message and "so it was not read" in message, message
    assert "Ask the tool for less" in caught.value.fix
    assert time.monotonic() - started < 30
    # The connection is fine: the next call is answered.
    assert hub.list_tools(server).result(60)


def test_a_slow_drip_ends_at_the_time_limit(port: int, hub: McpHub) -> None:
    server = _server(port, "drip", {"call": "drip", "delay_s": 0.3})
    started = time.monotonic()
    with pytest.raises(McpError) as caught:
        hub.call_tool(server, "tool_1", {}, timeout_s=2).result(60)
    assert caught.value.code == "MCP_TIMEOUT"
    assert time.monotonic() - started < 8


def test_a_flooding_standing_stream_is_never_opened(port: int, hub: McpHub) -> None:
    """MCP's GET stream (messages the server sends unasked): the app opens none, so a server
    flooding it costs nothing (the SDK kept it open for the connection's whole life)."""
    import resource

    server = _server(port, "get_flood", {"get": "flood"})
    assert hub.list_tools(server).result(60)
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(2)
    after = resource.getrusage(resource.RUSAGE_SELF)
    busy = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert busy < 0.5, f"the client worked {busy:.2f} s of CPU in 2 s of idling"
    assert hub.call_tool(server, "tool_1", {}).result(60).text == "done"


# --- memory, in a child under 1 GB ------------------------------------------------------------

MEMORY_CASES: list[tuple[str, dict[str, Any]]] = [
    ("list 100k json", {"tools": 100_000}),
    ("list 100k sse", {"tools": 100_000, "list_as": "sse"}),
    ("answer 300 MB json", {"call": "big", "size_mb": 300}),
    ("answer 300 MB sse", {"call": "big", "size_mb": 300, "call_as": "sse"}),
    ("notifications", {"call": "notifications", "size_mb": 0, "call_as": "sse"}),
    ("gzip bomb", {"call": "bomb"}),
]


def memory_case(port: int) -> dict[str, Any]:
    """Runs in the child: each case's peak resident growth (MB)."""

    def status_mb(field: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise AssertionError(f"no {field}")

    hub = McpHub()
    peaks: dict[str, float] = {}
    try:
        hub.list_tools(_server(port, "warm", {})).result(60)  # imports and the loop, once
        for name, spec in MEMORY_CASES:
            server = _server(port, name.replace(" ", "_"), spec)
            before = status_mb("VmRSS")
            Path("/proc/self/clear_refs").write_text("5")
            with pytest.raises(McpError):
                if "tools" in spec:
                    hub.list_tools(server).result(120)
                else:
                    hub.call_tool(server, "tool_1", {}, timeout_s=60).result(120)
            peaks[name] = round(status_mb("VmHWM") - before, 1)
    finally:
        hub.close()
    return {"peaks": peaks}


def test_floods_cost_bounded_memory(port: int) -> None:
    result = run_isolated(
        "tests.hostile.test_mcp_http_bounds:memory_case",
        timeout_s=300,
        memory_mb=1024,
        limit="as",
        port=port,
    )
    peaks = result["peaks"]
    assert set(peaks) == {name for name, _ in MEMORY_CASES}
    assert max(peaks.values()) < PEAK_LIMIT_MB, peaks
    figures.record("hostile", mcp_http_memory_peaks_mb=peaks)
