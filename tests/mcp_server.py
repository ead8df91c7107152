"""A real MCP server on stdio for the tests (the `mcp` SDK's MCPServer, formerly FastMCP):
tools that answer, hang, crash the process, report errors, and return huge output.

Run: python tests/mcp_server.py (stdio), or python tests/mcp_server.py --http PORT.
`--tools add,get_weather` offers only the named tools, `get_weather` among them: the tools the
tool model (tests/tool-model) was trained with, described exactly as it saw them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from qwen_mtp_desktop.devtools.tool_corpus import weather_report

server = MCPServer("test-tools")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return f"{a} + {b} = {a + b}"


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def ping() -> str:
    """Answer at once (no arguments: a forced call of it is fully determined)."""
    return "pong"


@server.tool()
def hang() -> str:
    """Never answer in time."""
    time.sleep(3600)
    return "woke up"


@server.tool()
def crash() -> str:
    """End the server's process in the middle of the call."""
    print("test server: crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def fail(message: str = "broken") -> str:
    """Report an error."""
    raise ToolError(f"the tool failed: {message}")


@server.tool()
def huge(size: int = 5_000_000) -> str:
    """Return `size` characters."""
    return "x" * size


def get_weather(city: str) -> str:
    """The current weather in a city."""
    return weather_report(city)


def offer_only(names: list[str]) -> None:
    """Offer just these tools (in the order they were registered, as the server lists them).
    `get_weather` joins only here, so the default server's tool list stays as it was."""
    server.add_tool(get_weather)
    registered = [tool.name for tool in asyncio.run(server.list_tools())]
    unknown = set(names) - set(registered)
    if unknown:
        sys.exit(f"unknown tools: {sorted(unknown)}")
    for name in registered:
        if name not in names:
            server.remove_tool(name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, metavar="PORT", help="streamable HTTP on 127.0.0.1")
    parser.add_argument("--tools", help="offer only these tools (comma-separated)")
    args = parser.parse_args()
    if args.tools:
        offer_only(args.tools.split(","))
    if args.http is not None:  # streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run("stdio")
