"""Issue 29, items 6-8: the local API server when hostile clients reach it, through the real
`qwen-mtp-desktop serve` process on the demo model.

Item 6, slow clients: hypothesis mixes hundreds of sockets that send nothing, trickle header
lines, stop in the request line, trickle a body after complete (keyed) headers, or keep
sending a body the server already refused, against a server whose file-descriptor limit is
256 (as on macOS by default). /health must answer every probe meanwhile, a keyed chat request
must be answered, and connections that never finish their headers must be closed.

Item 7, memory per request: with the engine paused (SIGSTOP), 16 requests of up to 30 MB each
wait in the queue: free-form fields, tiny-value bombs, ignored fields, long text. The server's
resident memory must stay bounded, each request either waits or is refused with a 4xx; and
uploads that stall mid-body fill a memory budget (429), which their timeout gives back.

Item 8, the Host header: generated hosts (user info with '@', brackets, ports, trailing
garbage) are accepted exactly when they name loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.server.http.hosts import host_name
from tests.conftest import REPO_ROOT
from tests.reliability import figures

KEY = "hostile-api-key-0123456789"
NOFILE = 256
SLOW_EXAMPLES = 4
MEMORY_EXAMPLES = 5
HOST_EXAMPLES = 60
#: The server's header timeout (server.http.connections.ConnectionLimits) and some slack.
HEADER_TIMEOUT_S = 10.0


@dataclass
class Served:
    process: subprocess.Popen[str]
    port: int
    #: Descriptors the server holds with no client connected.
    idle_fds: int = 0

    def rss_mb(self) -> float:
        return float(psutil.Process(self.process.pid).memory_info().rss) / 2**20

    def engine(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)

    def fds(self) -> int:
        return int(psutil.Process(self.process.pid).num_fds())


@contextlib.contextmanager
def serving(demo: Path, *, key: str | None = None, nofile: int | None = None) -> Iterator[Served]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("QWEN_MTP_API_KEY", None)
    if key:
        env["QWEN_MTP_API_KEY"] = key

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    process = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(demo), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        preexec_fn=limit,
    )
    try:
        assert process.stdout is not None
        port = None
        for line in process.stdout:
            found = re.search(r"at http://127\.0\.0\.1:(\d+)/v1", line)
            if found:
                port = int(found.group(1))
                break
        assert port, "serve did not print its URL"
        threading.Thread(target=process.stdout.read, daemon=True).start()
        served = Served(process, port)
        served.idle_fds = served.fds()
        yield served
    finally:
        for member in [*psutil.Process(process.pid).children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.send_signal(signal.SIGCONT)
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def request(
    port: int,
    method: str,
    path: str,
    *,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    timeout: float = 10,
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: (status, headers, body); status 0 if none came."""
    head = {"Host": "127.0.0.1", "Connection": "close", **(headers or {})}
    if body:
        head.setdefault("Content-Type", "application/json")
        head["Content-Length"] = str(len(body))
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items()), "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + body)
        data = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                data += chunk
    if not data.startswith(b"HTTP/1.1 "):
        return 0, {}, data
    top, _, payload = data.partition(b"\r\n\r\n")
    status_line, *header_lines = top.decode("latin-1").split("\r\n")
    parsed = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), parsed, payload


def chat_body(**fields: Any) -> bytes:
    body = {"model": "demo-model", "messages": [{"role": "user", "content": "Count from 1 to 5."}]}
    return json.dumps({**body, **fields}).encode()


# --- item 6: slow clients -------------------------------------------------------------------

KINDS = ["silent", "header trickle", "cut request line", "body trickle", "refused body"]


@dataclass
class Attacker:
    kind: str
    sock: socket.socket
    #: When the connection was established (a SYN the kernel dropped is sent again later).
    connected_at: float | None = None
    sent: int = 0
    closed_at: float | None = None
    reply: bytes = b""


@dataclass
class Attack:
    port: int
    attackers: list[Attacker] = field(default_factory=list)

    def open(self, kind: str) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            sock.connect(("127.0.0.1", self.port))
        self.attackers.append(Attacker(kind, sock))

    def step(self) -> None:
        """Each open attacker sends its next bit; connections, replies and closes are noted."""
        waiting = [a for a in self.attackers if a.connected_at is None and a.closed_at is None]
        for start in range(0, len(waiting), 500):
            batch = waiting[start : start + 500]
            _, writable, _ = select.select([], [a.sock for a in batch], [], 0)
            for one in batch:
                if one.sock in writable:
                    failed = one.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if failed:
                        one.closed_at = time.monotonic()
                    else:
                        one.connected_at = time.monotonic()
        for one in self.attackers:
            if one.closed_at is not None or one.connected_at is None:
                continue
            with contextlib.suppress(BlockingIOError, InterruptedError):
                try:
                    data = self._next_bytes(one)
                    if data:
                        one.sock.send(data)
                        one.sent += 1
                except OSError:
                    one.closed_at = time.monotonic()
        open_now = [a for a in self.attackers if a.closed_at is None]
        for start in range(0, len(open_now), 500):
            batch = open_now[start : start + 500]
            readable, _, _ = select.select([a.sock for a in batch], [], [], 0)
            for one in batch:
                if one.sock in readable:
                    try:
                        data = one.sock.recv(4096)
                    except OSError:
                        data = b""
                    one.reply += data
                    if not data:
                        one.closed_at = time.monotonic()

    @staticmethod
    def _next_bytes(one: Attacker) -> bytes:
        first = one.sent == 0
        if one.kind == "silent":
            return b""
        if one.kind == "header trickle":
            return b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" if first else b"X-a: b\r\n"
        if one.kind == "cut request line":
            return b"GET /heal" if first else b""
        if one.kind in ("body trickle", "stalled body"):  # keyed: its body is read (slowly)
            if one.kind == "stalled body" and not first:
                return b""
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                "Content-Length: 1000000\r\n\r\n"
            )
            return head.encode() if first else b" "
        # "refused body": no key, so 401 at once; then it keeps sending the body
        head = (
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
        )
        return head.encode() if first else b" " * 100

    def close(self) -> None:
        for one in self.attackers:
            one.sock.close()


_slow: dict[str, Any] = {"opened": 0, "probes": [], "chats": 0, "late_closes": 0}


@pytest.fixture(scope="module")
def guarded(demo_model: Path) -> Iterator[Served]:
    with serving(demo_model, key=KEY, nofile=NOFILE) as served:
        yield served


@pytest.mark.subprocess
class TestSlowClients:
    @pytest.mark.timeout(300)  # 150+ slow connections per example held open (57 s in the baseline)
    @settings(
        max_examples=SLOW_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each takes 20-40 s
    )
    @given(
        mix=st.fixed_dictionaries({kind: st.integers(0, 200) for kind in KINDS}).filter(
            lambda mix: sum(mix.values()) >= 150
        ),
        interval=st.sampled_from([0.5, 1.0, 2.0]),
    )
    def test_health_answers_and_slow_connections_end(
        self, guarded: Served, mix: dict[str, int], interval: float
    ) -> None:
        attack = Attack(guarded.port)
        for kind, count in mix.items():
            for _ in range(count):
                attack.open(kind)
        chat: dict[str, Any] = {}

        def chat_turn() -> None:  # a keyed client that behaves: it is answered
            time.sleep(2)
            status, _, body = request(
                guarded.port,
                "POST",
                "/v1/chat/completions",
                body=chat_body(),
                headers={"Authorization": f"Bearer {KEY}"},
                timeout=60,
            )
            chat.update(status=status, body=body)

        talker = threading.Thread(target=chat_turn, daemon=True)
        talker.start()
        started = time.monotonic()
        probes: list[tuple[bool, float]] = []
        unanswered: list[str] = []  # when and why, for the failure message
        most_fds = 0
        try:
            while time.monotonic() - started < HEADER_TIMEOUT_S + 4:
                attack.step()
                most_fds = max(most_fds, guarded.fds())
                begun = time.monotonic()
                try:
                    status, _, body = request(guarded.port, "GET", "/health", timeout=5)
                    ok = status == 200 and json.loads(body)["status"] == "ok"
                    why = f"status {status}: {body[:80]!r}"
                except OSError as exc:
                    ok, why = False, repr(exc)
                took = time.monotonic() - begun
                probes.append((ok, took))
                if not ok:
                    unanswered.append(f"at {begun - started:.1f} s, after {took:.2f} s: {why}")
                time.sleep(max(0.0, interval - (time.monotonic() - begun)))
            talker.join(60)
            attack.step()
        finally:
            attack.close()
        assert guarded.process.poll() is None
        answered = [took for ok, took in probes if ok]
        assert len(answered) == len(probes), f"probes unanswered: {unanswered}"
        assert chat.get("status") == 200, chat
        assert json.loads(chat["body"])["choices"][0]["message"]["content"].startswith("1")
        # The server kept within its descriptors (the kernel drops the connections it has no
        # room for before they reach it), and lets go of every one once the clients leave.
        assert most_fds < NOFILE - 16, most_fds
        deadline = time.monotonic() + 10
        while guarded.fds() > guarded.idle_fds + 4:
            assert time.monotonic() < deadline, f"{guarded.fds()} descriptors still open"
            time.sleep(0.2)
        _slow["most_fds"] = max(_slow.get("most_fds", 0), most_fds)
        _slow["opened"] += len(attack.attackers)
        _slow["probes"] += probes
        _slow["chats"] += 1

    def test_half_sent_requests_time_out(self, guarded: Served) -> None:
        """Without pressure, each kind of half-sent request is closed by its own timeout:
        the headers' (10 s, however they trickle), and a body's pause (15 s)."""
        attack = Attack(guarded.port)
        kinds = ["silent", "header trickle", "cut request line", "refused body", "stalled body"]
        for kind in kinds:
            attack.open(kind)
        started = time.monotonic()
        try:
            while time.monotonic() - started < 25 and any(
                one.closed_at is None for one in attack.attackers
            ):
                attack.step()
                time.sleep(0.5)
        finally:
            attack.close()
        lasted = {
            one.kind: None if one.closed_at is None else round(one.closed_at - started, 1)
            for one in attack.attackers
        }
        for kind in kinds[:4]:
            closed = lasted[kind]
            assert closed is not None and 9 <= closed <= 13, lasted
        stalled = lasted["stalled body"]
        assert stalled is not None and 14 <= stalled <= 18, lasted
        silent = next(one for one in attack.attackers if one.kind == "silent")
        assert silent.reply.startswith(b"HTTP/1.1 408"), silent.reply
        refused = next(one for one in attack.attackers if one.kind == "refused body")
        assert refused.reply.startswith(b"HTTP/1.1 401"), refused.reply
        _slow["timeouts_s"] = lasted

    def test_record(self) -> None:
        probes = _slow["probes"]
        assert probes
        took = sorted(t for _, t in probes)
        figures.record(
            "hostile",
            slow_clients_nofile=NOFILE,
            slow_connections=_slow["opened"],
            slow_health_answered=f"{sum(ok for ok, _ in probes)}/{len(probes)}",
            slow_health_ms_p50_max=[
                round(statistics.median(took) * 1000),
                round(took[-1] * 1000),
            ],
            slow_chat_turns_answered=_slow["chats"],
            slow_server_fds_max=_slow.get("most_fds"),
            slow_timeouts_s=_slow.get("timeouts_s"),
        )


# --- item 7: memory per request ---------------------------------------------------------------

MB = 1024 * 1024


def hostile_body(kind: str, size_mb: float) -> bytes:
    size = int(size_mb * MB)
    if kind == "tool_choice string":
        return chat_body(tool_choice="x" * size)
    if kind == "response_format junk":
        return chat_body(response_format={"type": "text", "junk": ["y" * 1000] * (size // 1003)})
    if kind == "tiny values in an ignored field":
        junk = "[" + ",".join(["[]"] * (size // 3)) + "]"
        return chat_body(metadata=0).replace(b'"metadata": 0', f'"metadata": {junk}'.encode())
    if kind == "objects in tool_choice":
        junk = "[" + ",".join(['{"a":1}'] * (size // 8)) + "]"
        return chat_body(tool_choice=0).replace(
            b'"tool_choice": 0', f'"tool_choice": {junk}'.encode()
        )
    if kind == "many messages":
        count = min(size // 60, 10_000)
        message = {"role": "user", "content": "Count from 1 to 5. " * 2}
        return chat_body(messages=[message] * max(count, 1))
    if kind == "long astral text":  # beyond Latin-1: 4 bytes a character in Python
        message = {"role": "user", "content": "\U0001f600" * (size // 4)}
        return json.dumps(
            {"model": "demo-model", "messages": [message]}, ensure_ascii=False
        ).encode()
    assert kind == "huge model name"
    return chat_body(model="m" * size)


MEMORY_KINDS = [
    "tool_choice string",
    "response_format junk",
    "tiny values in an ignored field",
    "objects in tool_choice",
    "many messages",
    "long astral text",
    "huge model name",
]
_memory: dict[str, Any] = {"requests": 0, "growth": [], "statuses": {}}


@pytest.fixture(scope="module")
def open_server(demo_model: Path) -> Iterator[Served]:
    with serving(demo_model) as served:
        yield served


def _post_and_hold(port: int, body: bytes, held: list[socket.socket]) -> None:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    held.append(sock)


def _status_of(sock: socket.socket, wait_s: float) -> int:
    """The status a held request got (0: none yet, it waits)."""
    sock.settimeout(wait_s)
    try:
        data = sock.recv(64)
    except OSError:
        return 0
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else -1


def _health(port: int) -> dict[str, Any]:
    status, _, body = request(port, "GET", "/health")
    assert status == 200
    result: dict[str, Any] = json.loads(body)
    return result


@contextlib.contextmanager
def engine_paused(served: Served) -> Iterator[Callable[[], None]]:
    """A turn that cannot finish: the engine process is stopped (SIGSTOP) while a first
    request runs, so the next ones wait in the queue. Yields a function that resumes it."""
    engine = served.engine()
    assert engine, "serve has no engine process"
    held: list[socket.socket] = []
    for member in engine:
        member.send_signal(signal.SIGSTOP)
    resumed = False

    def resume() -> None:
        nonlocal resumed
        if not resumed:
            for member in engine:
                with contextlib.suppress(psutil.NoSuchProcess):
                    member.send_signal(signal.SIGCONT)
            resumed = True

    try:
        _post_and_hold(served.port, chat_body(), held)
        deadline = time.monotonic() + 30
        while not _health(served.port)["busy"]:
            assert time.monotonic() < deadline, "the first request never started"
            time.sleep(0.1)
        yield resume
    finally:
        resume()
        for sock in held:
            sock.close()


@pytest.mark.subprocess
class TestRequestMemory:
    @settings(
        max_examples=MEMORY_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each sends up to 500 MB
    )
    @given(kind=st.sampled_from(MEMORY_KINDS), size_mb=st.sampled_from([2.0, 10.0, 30.0]))
    def test_waiting_requests_hold_bounded_memory(
        self, open_server: Served, kind: str, size_mb: float
    ) -> None:
        body = hostile_body(kind, size_mb)
        assert len(body) <= 32 * MB
        before = open_server.rss_mb()
        held: list[socket.socket] = []
        statuses: list[int] = []
        with engine_paused(open_server):
            for _ in range(16):
                _post_and_hold(open_server.port, body, held)
            statuses = [0] * len(held)
            deadline = time.monotonic() + 120
            while True:  # until each request waits in the queue or was answered
                for index, sock in enumerate(held):
                    statuses[index] = statuses[index] or _status_of(sock, 0.02)
                answered = sum(1 for status in statuses if status)
                if answered + _health(open_server.port)["waiting"] >= len(held):
                    break
                assert time.monotonic() < deadline, statuses
                time.sleep(0.5)
            growth = open_server.rss_mb() - before
        for sock in held:
            sock.close()
        _memory["requests"] += len(held)
        _memory["growth"].append(round(growth, 1))
        for status in statuses:
            _memory["statuses"][str(status)] = _memory["statuses"].get(str(status), 0) + 1
        # Each one waits (0: no answer yet) or is refused with a 4xx that says why.
        assert all(status == 0 or 400 <= status < 500 for status in statuses), statuses
        # At most the budget (256 MiB) is ever held for requests; here far less.
        assert growth < 200, f"{kind} ({size_mb} MB) x 16: +{growth:.0f} MB"

    def test_stalled_uploads_fill_the_budget_and_time_out(self, open_server: Served) -> None:
        """Uploads that stop halfway hold their bytes: past the budget (256 MiB) a large body
        gets 429 while it arrives, a small request is still served, and once the stalled
        uploads time out the budget takes large bodies again."""
        stalled: list[socket.socket] = []
        part = b" " * (24 * MB)
        refused_at = None
        large = chat_body(user="x" * (20 * MB))  # valid, and answered (`user` changes nothing)
        for index in range(14):
            sock = socket.create_connection(("127.0.0.1", open_server.port), timeout=30)
            head = (
                "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {30 * MB}\r\n\r\n"
            )
            sock.sendall(head.encode() + part)
            stalled.append(sock)
            time.sleep(0.3)
            if _status_of(sock, 0.5) == 429:
                refused_at = index
                break
        try:
            assert refused_at is not None and 8 <= refused_at <= 12, refused_at
            status, headers, body = request(
                open_server.port, "POST", "/v1/chat/completions", body=large, timeout=60
            )
            assert status == 429 and headers.get("retry-after") == "1", (status, body[:300])
            assert json.loads(body)["error"]["code"] == "queue_full"
            status, _, body = request(
                open_server.port, "POST", "/v1/chat/completions", body=chat_body(), timeout=60
            )
            assert status == 200, body
            time.sleep(17)  # the body timeout (15 s) closes the stalled uploads
            status, _, body = request(
                open_server.port, "POST", "/v1/chat/completions", body=large, timeout=60
            )
            assert status == 200, body[:300]
        finally:
            for sock in stalled:
                sock.close()

    def test_record(self) -> None:
        assert _memory["growth"]
        figures.record(
            "hostile",
            queued_memory_inputs=_memory["requests"],
            queued_memory_growth_mb_max=max(_memory["growth"]),
            queued_memory_statuses=_memory["statuses"],
        )


# --- item 8: the Host header ------------------------------------------------------------------

_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_host_text = st.one_of(
    st.text(alphabet="abclo1270.:[]@-_ ", max_size=30),
    st.builds(
        lambda user, host, port, tail: f"{user}{host}{port}{tail}",
        st.sampled_from(["", "user@", "localhost@", "127.0.0.1@", "[::1]@", "a:b@"]),
        st.sampled_from(
            [
                "localhost",
                "127.0.0.1",
                "[::1]",
                "LOCALHOST",
                "localhost.",
                "evil.example",
                "[::1",
                "::1",
            ]
        ),
        st.sampled_from(["", ":8000", ":", ":80:80", ":99999", ":8o", ":0"]),
        st.sampled_from(["", "@evil.example", "evil", ".evil.example", "/", " ", "#"]),
    ),
)
_host_counts = {"parser": 0, "server": 0}


class TestHostHeader:
    @settings(max_examples=1000)
    @given(_host_text)
    def test_the_parser_accepts_only_a_host_and_a_port(self, header: str) -> None:
        _host_counts["parser"] += 1
        name = host_name(header)
        if name is None:
            return
        assert "@" not in header and " " not in header and "/" not in header
        if header.startswith("["):
            assert header[: header.index("]") + 1].count(":") >= 2  # an IPv6 address
            rest = header[header.index("]") + 1 :]
        else:
            rest = header[len(name.rstrip(".")) :].lstrip(".")
            assert re.fullmatch(r"[a-z0-9.-]+", name)
        assert rest == "" or (re.fullmatch(r":[0-9]{1,5}", rest) and int(rest[1:]) <= 65535)

    @pytest.mark.subprocess
    @settings(
        max_examples=HOST_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(_host_text.filter(lambda h: h.isprintable() and h == h.strip() and h))
    def test_the_server_answers_only_loopback_hosts(self, open_server: Served, header: str) -> None:
        _host_counts["server"] += 1
        status, _, body = request(open_server.port, "GET", "/v1/models", headers={"Host": header})
        expected = host_name(header) in _LOOPBACK
        assert (status == 200) == expected, (header, status, body[:200])
        if not expected and status == 403:
            assert json.loads(body)["error"]["code"] == "invalid_host"

    @pytest.mark.subprocess
    def test_record(self) -> None:
        figures.record(
            "hostile",
            host_parser_inputs=_host_counts["parser"],
            host_server_inputs=_host_counts["server"],
        )
