"""A stdio MCP server that floods: it lists `--tools N` tools (each with a description and a
schema of a few properties) in one line, or answers any tool call with a JSON-RPC error.
Raw JSON-RPC, no SDK, so the server itself costs nothing next to the client reading it."""

from __future__ import annotations

import argparse
import json
import sys


def _tool(number: int) -> dict[str, object]:
    return {
        "name": f"tool_{number}",
        "description": f"Tool number {number}, one of very many.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "required": ["a"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=3)
    options = parser.parse_args()
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification
        method = message.get("method")
        if method == "initialize":
            result: object = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }
        elif method == "tools/list":
            out.write(b'{"jsonrpc": "2.0", "id": ' + json.dumps(message["id"]).encode())
            out.write(b', "result": {"tools": [')
            for number in range(options.tools):
                out.write((", " if number else "").encode() + json.dumps(_tool(number)).encode())
            out.write(b"]}}\n")
            out.flush()
            continue
        elif method == "tools/call":
            reply = {"code": -32602, "message": "Unknown argument 'x' for tool_1"}
            out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": reply}).encode())
            out.write(b"\n")
            out.flush()
            continue
        else:
            result = {}
        out.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode())
        out.write(b"\n")
        out.flush()


if __name__ == "__main__":
    main()
