"""A streamable HTTP MCP server that floods (issue 45, item 1): the HTTP counterpart of
flood_mcp_server.py. Raw JSON-RPC over HTTP/1.1 on 127.0.0.1, standard library only, in a
process of its own (`http_flood_server()`), so its flooding competes with the client for the
CPU, not for the client's interpreter. What it does is spelled in the URL:

    http://127.0.0.1:PORT/b/<url-safe base64 of a JSON spec>/mcp

The spec's keys (all optional):

- `tools`: how many tools `tools/list` answers with (3), `list_as`: "json" or "sse";
- `call`: what `tools/call` answers: "ok" (a short text), "big" (a text of `size_mb` MB; 0:
  endless), "notifications" (progress notifications, `size_mb` MB or endless, then the
  answer), "comments" (SSE comment lines, likewise), "drip" (the answer a byte per
  `delay_s`), "bomb" (a gzip body of 100 MB of spaces, not asked for); `call_as`: "json" or "sse";
- `get`: "flood" (the standing GET stream sends notifications forever), else 405.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import socketserver
import time
from typing import Any

from tests.hostile.net_servers import BLOCK, decode_spec, encode_spec, serve, server_process

MB = 1024 * 1024


def url(port: int, spec: dict[str, Any]) -> str:
    return f"http://127.0.0.1:{port}/b/{encode_spec(spec)}/mcp"


def _spec(path: str) -> dict[str, Any]:
    segments = path.split("/")
    if len(segments) < 3 or segments[1] != "b":
        return {}
    return decode_spec(segments[2])


def _tool(number: int) -> dict[str, object]:
    return {
        "name": f"tool_{number}",
        "description": f"Tool number {number}, one of very many.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }


def _event(message: object) -> bytes:
    return b"data: " + json.dumps(message).encode() + b"\n\n"


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(60)
        data = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in data:
                part = sock.recv(65536)
                if not part:
                    return
                data += part
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            while len(body) < length:
                part = sock.recv(65536)
                if not part:
                    return
                body += part
            self._reply(sock, method, _spec(path), body)
            sock.shutdown(socket.SHUT_WR)

    def _start(self, sock: socket.socket, status: int, kind: str, extra: str = "") -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nConnection: close\r\n"
        sock.sendall((head + "Mcp-Session-Id: s1\r\n" + extra + "\r\n").encode())

    def _reply(self, sock: socket.socket, method: str, spec: dict[str, Any], body: bytes) -> None:
        if method == "GET":
            if spec.get("get") != "flood":
                self._start(sock, 405, "text/plain")
                return
            self._start(sock, 200, "text/event-stream")
            note = _event({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
            while True:
                sock.sendall(note * (BLOCK // len(note)))
        if method != "POST":
            self._start(sock, 200, "text/plain")
            return
        message = json.loads(body)
        if "id" not in message:
            self._start(sock, 202, "text/plain")
            return
        asked, request_id = message["method"], message["id"]

        def answer(result: object) -> dict[str, object]:
            return {"jsonrpc": "2.0", "id": request_id, "result": result}

        if asked == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "flood", "version": "1"},
            }
            self._start(sock, 200, "application/json")
            sock.sendall(json.dumps(answer(result)).encode())
        elif asked == "tools/list":
            self._list(sock, spec, request_id)
        elif asked == "tools/call":
            self._call(sock, spec, request_id, answer)
        else:
            self._start(sock, 200, "application/json")
            sock.sendall(json.dumps(answer({})).encode())

    def _list(self, sock: socket.socket, spec: dict[str, Any], request_id: object) -> None:
        sse = spec.get("list_as") == "sse"
        self._start(sock, 200, "text/event-stream" if sse else "application/json")
        opening = '{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "result": {"tools": ['
        sock.sendall((b"data: " if sse else b"") + opening.encode())
        batch: list[bytes] = []
        first = True
        for number in range(int(spec.get("tools", 3))):
            batch.append(json.dumps(_tool(number)).encode())
            if len(batch) == 500:
                sock.sendall((b"" if first else b", ") + b", ".join(batch))
                batch, first = [], False
        if batch:
            sock.sendall((b"" if first else b", ") + b", ".join(batch))
        sock.sendall(b"]}}" + (b"\n\n" if sse else b""))

    def _call(
        self, sock: socket.socket, spec: dict[str, Any], request_id: object, answer: Any
    ) -> None:
        kind, sse = spec.get("call", "ok"), spec.get("call_as") == "sse"
        size = int(spec.get("size_mb", 0)) * MB
        done = answer({"content": [{"type": "text", "text": "done"}], "isError": False})
        if kind == "bomb":
            packed = gzip.compress(json.dumps(done).encode()[:-2] + b" " * (100 * MB) + b"}}")
            self._start(sock, 200, "application/json", "Content-Encoding: gzip\r\n")
            sock.sendall(packed)
            return
        self._start(sock, 200, "text/event-stream" if sse else "application/json")
        if kind == "drip":
            text = json.dumps(done).encode()
            for at in range(len(text)):
                sock.sendall(text[at : at + 1])
                time.sleep(float(spec.get("delay_s", 0.5)))
            return
        if kind == "big":
            head = json.dumps(done).encode().replace(b'"done"', b'"')
            sock.sendall((b"data: " if sse else b"") + head.split(b'"text": "')[0] + b'"text": "')
            self._repeat(sock, b"x" * 1024, size)
            sock.sendall(b'"}], "isError": false}}' + (b"\n\n" if sse else b""))
            return
        if kind == "notifications":
            note = {"jsonrpc": "2.0", "method": "notifications/progress"}
            unit = _event({**note, "params": {"progressToken": 1, "progress": 1}})
        else:
            assert kind in ("comments", "ok"), kind
            unit = b": keep-alive\n"
        if kind != "ok":
            self._repeat(sock, unit, size)
        sock.sendall(_event(done) if sse else json.dumps(done).encode())

    def _repeat(self, sock: socket.socket, unit: bytes, size: int) -> None:
        block = unit * max(1, BLOCK // len(unit))
        sent = 0
        while size == 0 or sent < size:
            sock.sendall(block)
            sent += len(block)


def serve_forever() -> None:
    serve(_Handler)


def http_flood_server() -> contextlib.AbstractContextManager[int]:
    """The server in a child process until the block ends; yields its port."""
    return server_process("tests.hostile.flood_mcp_http_server")


if __name__ == "__main__":
    serve_forever()
