"""The MCP client (core.tools.mcp.client) against a real stdio MCP server (tests/mcp_server.py):
tools listed and called; a hanging tool times out, a crashing server is reported with its
stderr and restarted, errors and huge output come back bounded; close() ends the servers."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.tools.mcp.client import MAX_RESULT_CHARS, McpError, McpHub
from qwen_mtp_desktop.core.tools.mcp.config import McpServer

SERVER = McpServer(
    "tests", command=sys.executable, args=(str(Path(__file__).parents[1] / "mcp_server.py"),)
)


@pytest.fixture(scope="module")
def hub() -> Iterator[McpHub]:
    made = McpHub()
    yield made
    made.close()


@pytest.mark.subprocess
def test_lists_and_calls_tools(hub: McpHub) -> None:
    tools = hub.list_tools(SERVER).result(60)
    names = {tool.name for tool in tools}
    assert {"add", "echo", "hang", "crash", "fail", "huge"} <= names
    add = next(tool for tool in tools if tool.name == "add")
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    result = hub.call_tool(SERVER, "add", {"a": 2, "b": 40}).result(60)
    assert result.text == "2 + 40 = 42" and not result.is_error and result.duration_s < 30


@pytest.mark.subprocess
def test_a_hanging_tool_times_out_and_the_server_comes_back(hub: McpHub) -> None:
    started = time.monotonic()
    with pytest.raises(McpError) as caught:
        hub.call_tool(SERVER, "hang", {}, timeout_s=1.5).result(60)
    assert time.monotonic() - started < 15
    assert "did not answer within 2 s" in caught.value.message
    assert caught.value.code == "MCP_TIMEOUT"
    assert hub.call_tool(SERVER, "echo", {"text": "again"}).result(60).text == "echo: again"


@pytest.mark.subprocess
def test_a_crashing_server_is_reported_and_restarted(hub: McpHub) -> None:
    with pytest.raises(McpError) as caught:
        hub.call_tool(SERVER, "crash", {}, timeout_s=20).result(60)
    assert "failed" in caught.value.message
    assert "crashing on purpose" in caught.value.message  # the end of its stderr
    assert hub.call_tool(SERVER, "echo", {"text": "back"}).result(60).text == "echo: back"


@pytest.mark.subprocess
def test_tool_errors_and_huge_output(hub: McpHub) -> None:
    failed = hub.call_tool(SERVER, "fail", {"message": "nope"}).result(60)
    assert failed.is_error and "nope" in failed.text
    huge = hub.call_tool(SERVER, "huge", {"size": 3_000_000}).result(120)
    assert huge.truncated and len(huge.text) < MAX_RESULT_CHARS + 100
    assert "more characters cut" in huge.text


def test_a_missing_program_is_a_clear_error(hub: McpHub) -> None:
    missing = McpServer("missing", command="/nonexistent/mcp-server")
    with pytest.raises(McpError) as caught:
        hub.list_tools(missing).result(60)
    assert "could not be started" in caught.value.message


@pytest.mark.subprocess
def test_a_program_that_is_not_a_server() -> None:
    hub = McpHub()
    try:
        not_mcp = McpServer("shell", command=sys.executable, args=("-c", "print('hello')"))
        with pytest.raises(McpError) as caught:
            hub.list_tools(not_mcp).result(60)
        # What it printed is quoted: it is not an MCP server (issue 44, minor 12).
        message = caught.value.message
        assert "ended before answering MCP's handshake" in message
        assert message.endswith('Its last output: "(on stdout) hello".')
    finally:
        hub.close()


@pytest.mark.subprocess
def test_close_ends_the_server_processes() -> None:
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    hub = McpHub()
    hub.list_tools(SERVER).result(60)
    children = psutil.Process().children(recursive=True)
    servers = [p for p in children if p.pid not in before]
    assert servers
    hub.close()
    _gone, alive = psutil.wait_procs(servers, timeout=10)
    assert not alive
    with pytest.raises(McpError):
        hub.list_tools(SERVER).result(5)


@pytest.mark.subprocess
def test_streamable_http_server() -> None:
    import socket
    import subprocess

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, SERVER.args[0], "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    hub = McpHub()
    try:
        http = McpServer("web", "http", url=f"http://127.0.0.1:{port}/mcp")
        deadline = time.monotonic() + 60
        while True:  # the server takes a moment to listen
            try:
                tools = hub.list_tools(http).result(60)
                break
            except McpError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert "ping" in {tool.name for tool in tools}
        assert hub.call_tool(http, "add", {"a": 1, "b": 2}).result(60).text == "1 + 2 = 3"
        with pytest.raises(McpError) as caught:
            hub.call_tool(http, "hang", {}, timeout_s=1).result(60)
        assert caught.value.code == "MCP_TIMEOUT"
    finally:
        hub.close()
        process.kill()  # a graceful stop would wait for the hanging call
        process.wait(10)


def test_unusable_listed_tools_are_left_out() -> None:
    from types import SimpleNamespace

    from qwen_mtp_desktop.core.tools.mcp.client import _info

    def tool(name: object, schema: object, description: object = "d") -> object:
        return SimpleNamespace(name=name, input_schema=schema, description=description)

    assert _info(SERVER, tool("ok", {"type": "object"})) is not None
    assert _info(SERVER, tool("x" * 500, {})) is None
    assert _info(SERVER, tool("bad\x1bname", {})) is None
    assert _info(SERVER, tool("big", {"enum": ["y" * 100] * 500})) is None
    assert _info(SERVER, tool("no-schema", None)) is None
    long = _info(SERVER, tool("long", {}, "z" * 10_000))
    assert long is not None and len(long.description) == 2_000
