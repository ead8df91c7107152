"""A real MCP server on stdio for the tests (the `mcp` SDK's MCPServer, formerly FastMCP):
tools that answer, hang, crash the process, report errors, and return huge output.

Run: python tests/mcp_server.py (stdio), or python tests/mcp_server.py --http PORT
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

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


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on 127.0.0.1:PORT/mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
