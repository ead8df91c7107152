"""Real servers for the remote-model and API tests: `qwen-mtp-desktop serve` in a process of
its own (its URL, an openai client of it, raw HTTP to it), a way to slow it down (to kill it
mid-answer), a host that never accepts a connection, one that counts the connections it gets,
and a tiny HTTP server that streams whatever bytes a test gives it (at once, or event by event
at a pace)."""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import psutil

KEY = "remote-test-key-0123456789"


@contextlib.contextmanager
def serving(
    model_dir: Path, key: str | None = KEY, *args: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`serve MODEL_DIR --port 0 [ARGS]` until the block ends; yields the process and its /v1
    URL."""
    env = {**os.environ}
    env.pop("QWEN_MTP_API_KEY", None)
    if key:
        env["QWEN_MTP_API_KEY"] = key
    process = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(model_dir), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        url = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            match = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
            if match:
                url = match.group(1)
                break
        assert url, "serve did not print its URL"
        # Keep reading stdout so the server never blocks on a full pipe.
        threading.Thread(target=process.stdout.read, daemon=True).start()
        yield process, url
    finally:
        kill_tree(process.pid)
        process.wait(30)


def client_of(url: str, timeout: float = 120) -> openai.OpenAI:
    """An openai client of the server at `url` (no retries: a test sees every failure)."""
    return openai.OpenAI(base_url=url, api_key=KEY, max_retries=0, timeout=timeout)


@contextlib.contextmanager
def serving_client(model_dir: Path, *args: str) -> Iterator[openai.OpenAI]:
    """`serving`, as an openai client of it (`client_of`)."""
    with serving(model_dir, KEY, *args) as (_process, url):
        yield client_of(url)


@contextlib.contextmanager
def raw_http(client: openai.OpenAI) -> Iterator[httpx.Client]:
    """Raw HTTP to the server `client` talks to (its root, its key): for what the SDK hides
    (SSE framing, error bodies, unknown fields)."""
    base = str(client.base_url).rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {client.api_key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
        yield http


def kill_tree(pid: int) -> None:
    """SIGKILL a process and its children (a stopped child would never exit by itself)."""
    try:
        parent = psutil.Process(pid)
        family = [*parent.children(recursive=True), parent]
    except psutil.NoSuchProcess:
        return
    for member in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.kill()
    psutil.wait_procs(family, timeout=10)


@contextlib.contextmanager
def throttled(process: subprocess.Popen[str], duty: float = 0.05) -> Iterator[None]:
    """Run the server's processes `duty` of the time (SIGSTOP / SIGCONT), so a demo-model
    answer that takes 50 ms takes about a second and can be cut in the middle."""
    family = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    stop = threading.Event()

    def run() -> None:
        period = 0.04
        while not stop.is_set():
            for member in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    member.send_signal(signal.SIGSTOP)
            stop.wait(period * (1 - duty))
            for member in family:
                with contextlib.suppress(psutil.NoSuchProcess):
                    member.send_signal(signal.SIGCONT)
            time.sleep(period * duty)

    thread = threading.Thread(target=run, name="throttle", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        for member in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.send_signal(signal.SIGCONT)


@contextlib.contextmanager
def never_accepting() -> Iterator[str]:
    """A base URL whose host never completes a connection: a listening socket with a full
    backlog drops new SYNs, so a connect times out, as to an unreachable host."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(3):  # fill the backlog (its size is 0 or 1 depending on the kernel)
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        for filler in fillers:
            filler.close()
        server.close()


class ConnectionCounter:
    """A local TCP server that counts connections and closes each (a stand-in for a remote
    image host: a render that fetches one shows in `connections`)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200
    content_type = "text/event-stream"
    #: Above 0: the body's SSE events ("\n\n"-separated) are sent this many seconds apart,
    #: as a server streams an answer, and the connection closes after the last.
    pace_s = 0.0

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        self._reply()

    def do_GET(self) -> None:
        self._reply()

    def _reply(self) -> None:
        if self.pace_s > 0:
            self._stream()
            return
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def _stream(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Connection", "close")
        self.end_headers()
        for event in self.body.split(b"\n\n"):
            if event.strip():
                self.wfile.write(event + b"\n\n")
                self.wfile.flush()
                time.sleep(self.pace_s)
        self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def canned_server() -> Iterator[tuple[str, type[_Handler]]]:
    """A real HTTP server on 127.0.0.1 answering every request with `handler.body`."""
    handler = type("Handler", (_Handler,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="canned-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
