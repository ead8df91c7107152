"""Misbehaving HTTP servers for the network hostile tests (issue 29, classes 1-5).

One real HTTP server on 127.0.0.1, run in a process of its own (`hostile_server()`), so its
flooding competes with the client for the CPU, not for the client's interpreter. What it does
to a request is spelled in the request's path, so one server serves every generated case:

    http://127.0.0.1:PORT/b/<url-safe base64 of a JSON spec>/v1/chat/completions

`base_url(port, spec)` makes such a base URL. The spec's keys (all optional):

- `status` (200), `content_type` ("text/event-stream"), `headers` (extra header lines);
- `framing`: "close" (the body ends when the connection does), "chunked", or "length"
  (a Content-Length of `length`, true or not);
- `body`: bytes sent first (latin-1 text), then `repeat` (latin-1) sent `times` times (-1:
  forever, until the client goes away), then `tail`;
- `delay_s`: a pause before each repeat (a slow drip);
- `pieces`: a list of texts, sent as one chat chunk event each, then a finish event and
  `[DONE]` (replaces `body`: a short URL for texts full of escapes).

Standard library only: it also measures the code before a fix (see the report of issue 29).
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import socketserver
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 64 * 1024


def encode_spec(spec: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(spec).encode()).decode().rstrip("=")


def decode_spec(text: str) -> dict[str, Any]:
    padded = text + "=" * (-len(text) % 4)
    spec: dict[str, Any] = json.loads(base64.urlsafe_b64decode(padded))
    return spec


def base_url(port: int, spec: dict[str, Any]) -> str:
    return f"http://127.0.0.1:{port}/b/{encode_spec(spec)}/v1"


def sse_chunk(content: str = "", reasoning: str = "", finish: str | None = None) -> str:
    """One `data:` event of an OpenAI chat.completion.chunk (with its blank line)."""
    delta: dict[str, str] = {}
    if content:
        delta["content"] = content
    if reasoning:
        delta["reasoning_content"] = reasoning
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + json.dumps({"object": "chat.completion.chunk", "choices": [choice]}) + "\n\n"


def flood_spec(text: str = "flood ", *, reasoning: bool = False) -> dict[str, Any]:
    """Chunk events with `text`, as fast as the socket takes them, forever."""
    event = sse_chunk(reasoning=text) if reasoning else sse_chunk(content=text)
    return {"repeat": event, "times": -1}


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(60)
        head = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in head and len(head) < 65536:
                part = sock.recv(65536)
                if not part:
                    return
                head += part
        header_text, _, rest = head.partition(b"\r\n\r\n")
        lines = header_text.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length" and value.strip().isdigit():
                length = int(value.strip())
        with contextlib.suppress(OSError):
            while len(rest) < length:
                part = sock.recv(65536)
                if not part:
                    break
                rest += part
        segments = path.split("/")
        spec = decode_spec(segments[2]) if len(segments) > 2 and segments[1] == "b" else {}
        with contextlib.suppress(OSError):
            self._reply(sock, spec)

    def _reply(self, sock: socket.socket, spec: dict[str, Any]) -> None:
        status = int(spec.get("status", 200))
        framing = spec.get("framing", "close")
        head = [
            f"HTTP/1.1 {status} X",
            f"Content-Type: {spec.get('content_type', 'text/event-stream')}",
            "Connection: close",
            *spec.get("headers", []),
        ]
        if framing == "chunked":
            head.append("Transfer-Encoding: chunked")
        elif framing == "length":
            head.append(f"Content-Length: {int(spec.get('length', 0))}")
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))

        def send(data: bytes) -> None:
            if not data:
                return
            if framing == "chunked":
                data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            sock.sendall(data)

        if "pieces" in spec:
            events = "".join(sse_chunk(content=piece) for piece in spec["pieces"])
            send((events + sse_chunk(finish="stop") + "data: [DONE]\n\n").encode())
        send(spec.get("body", "").encode("latin-1"))
        repeat = spec.get("repeat", "").encode("latin-1")
        times = int(spec.get("times", 0))
        delay = float(spec.get("delay_s", 0))
        if repeat:
            # Whole blocks of the repeated unit per write: as fast as the socket takes them.
            per = max(1, BLOCK // len(repeat)) if delay == 0 else 1
            block = repeat * per
            sent = 0
            while times < 0 or sent < times:
                if delay:
                    time.sleep(delay)
                count = per if times < 0 else min(per, times - sent)
                send(block if count == per else repeat * count)
                sent += count
        send(spec.get("tail", "").encode("latin-1"))
        if framing == "chunked":
            sock.sendall(b"0\r\n\r\n")
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(2)
            while sock.recv(65536):  # let the client read it all before the close
                pass


class ThreadingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def serve(handler: type[socketserver.BaseRequestHandler]) -> None:
    """Serve `handler` on a free loopback port, printed first as "PORT n" for the parent."""
    with ThreadingServer(("127.0.0.1", 0), handler) as server:
        print(f"PORT {server.server_address[1]}", flush=True)
        server.serve_forever()


def serve_forever() -> None:
    serve(_Handler)


@contextlib.contextmanager
def server_process(module: str) -> Iterator[int]:
    """`module`'s `serve_forever()` in a child process until the block ends; yields its port."""
    process = subprocess.Popen(
        [sys.executable, "-c", f"from {module} import serve_forever; serve_forever()"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the server of {module} did not start: {line!r}"
        yield int(line.split()[1])
    finally:
        process.kill()
        process.wait(10)


def hostile_server() -> contextlib.AbstractContextManager[int]:
    """The server in a child process until the block ends; yields its port."""
    return server_process("tests.hostile.net_servers")


if __name__ == "__main__":
    serve_forever()
