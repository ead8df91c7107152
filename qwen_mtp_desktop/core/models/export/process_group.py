"""Runs one command in its own process group, streaming its output line by line and stopping
it with an escalating cancel.

POSIX signals the whole group (SIGINT -> SIGTERM -> SIGKILL). Windows has no process groups to
signal: the command starts in a new console process group, the first step sends it
CTRL_BREAK_EVENT, and the later steps terminate, then kill, every process of its tree.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

LOG_TAIL_LINES = 40
#: The cancel's escalation, `grace` seconds apart.
StopStep = Literal["interrupt", "terminate", "kill"]
_POSIX_SIGNALS: dict[StopStep, int] = {
    "interrupt": signal.SIGINT,
    "terminate": signal.SIGTERM,
    "kill": signal.SIGKILL,
}


@dataclass(frozen=True)
class ProcessStats:
    elapsed_s: float
    rss_bytes: int
    peak_rss_bytes: int


@dataclass
class ProcessOutcome:
    command: list[str]
    exit_status: int | None
    cancelled: bool
    seconds: float
    peak_rss_bytes: int
    tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.cancelled

    @property
    def signal_name(self) -> str | None:
        if self.exit_status is not None and self.exit_status < 0:
            with contextlib.suppress(ValueError):
                return signal.Signals(-self.exit_status).name
            return f"signal {-self.exit_status}"
        return None


def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants (0 if it is gone)."""
    try:
        process = psutil.Process(pid)
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for member in members:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def _split_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Split on \\n and \\r (tqdm redraws with \\r); returns (complete lines, remainder)."""
    parts = re.split(rb"\r\n|\r|\n", buffer)
    return parts[:-1], parts[-1]


class SupervisedProcess:
    """Runs one command in its own process group, streaming its output line by line.

    `run()` blocks; every callback is called on the calling thread. Setting `cancel` escalates
    SIGINT -> SIGTERM -> SIGKILL to the whole group, `grace` seconds apart; when the command
    ends, whatever is left in its group is killed, so nothing outlives the job.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
        on_stats: Callable[[ProcessStats], None] | None = None,
        cancel: threading.Event | None = None,
        grace: tuple[float, float] = (5.0, 5.0),
        sample_interval: float = 0.5,
        tail_lines: int = LOG_TAIL_LINES,
    ) -> None:
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.on_line = on_line
        self.on_stats = on_stats
        self.cancel = cancel or threading.Event()
        self.grace = grace
        self.sample_interval = sample_interval
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.pid: int | None = None

    def run(self) -> ProcessOutcome:
        started = time.monotonic()
        process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
            **_new_group_kwargs(),
        )
        self.pid = process.pid
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(
            target=self._read, args=(process.stdout, lines), name="export-log", daemon=True
        )
        reader.start()
        peak = 0
        last_sample = 0.0
        escalation: list[tuple[float, StopStep]] = []
        cancelled = False
        eof = False
        exited_at: float | None = None
        try:
            while not eof or process.poll() is None:
                if not eof and process.poll() is not None:
                    # A grandchild may still hold the pipe open: give it 2 s, then kill it.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 2.0:
                        self._signal_group(process.pid, "kill")
                    if time.monotonic() - exited_at > 5.0:
                        break
                if self.cancel.is_set() and not cancelled:
                    cancelled = True
                    now = time.monotonic()
                    escalation = [
                        (now, "interrupt"),
                        (now + self.grace[0], "terminate"),
                        (now + self.grace[0] + self.grace[1], "kill"),
                    ]
                while escalation and time.monotonic() >= escalation[0][0]:
                    _, sig = escalation.pop(0)
                    self._signal_group(process.pid, sig)
                try:
                    line = lines.get(timeout=0.1)
                except queue.Empty:
                    line = ""
                if line is None:
                    eof = True
                elif line and self.on_line is not None:
                    self.on_line(line)
                now = time.monotonic()
                if now - last_sample >= self.sample_interval:
                    last_sample = now
                    rss = tree_rss(process.pid) if process.poll() is None else 0
                    peak = max(peak, rss)
                    if self.on_stats is not None:
                        self.on_stats(ProcessStats(now - started, rss, peak))
                if eof and process.poll() is None:
                    time.sleep(0.05)
        finally:
            if process.poll() is None:  # our caller raised: leave nothing running
                self._signal_group(process.pid, "kill")
            process.wait()
            # Children that outlived the leader (e.g. a worker that ignored SIGINT) die too.
            self._signal_group(process.pid, "kill")
            reader.join(timeout=5)
            process.stdout.close()
        return ProcessOutcome(
            self.command,
            process.returncode,
            cancelled,
            time.monotonic() - started,
            peak,
            list(self.tail),
        )

    def _read(self, stream: Any, lines: queue.Queue[str | None]) -> None:
        buffer = b""
        fd = stream.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                complete, buffer = _split_lines(buffer + chunk)
                for raw in complete:
                    self._push(raw, lines)
            if buffer:
                self._push(buffer, lines)
        except OSError:
            pass
        finally:
            lines.put(None)

    def _push(self, raw: bytes, lines: queue.Queue[str | None]) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip()
        if text:
            self.tail.append(text)
            lines.put(text)

    @staticmethod
    def _signal_group(pgid: int, step: StopStep) -> None:
        if sys.platform == "win32":
            _stop_tree_windows(pgid, step)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, _POSIX_SIGNALS[step])


def _new_group_kwargs() -> dict[str, Any]:
    """Popen arguments that start the command in its own process group."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}  # signals to the group reach every child


def _stop_tree_windows(pid: int, step: StopStep) -> None:
    if sys.platform == "win32":
        if step == "interrupt":
            with contextlib.suppress(OSError):
                os.kill(pid, signal.CTRL_BREAK_EVENT)
            return
        try:
            leader = psutil.Process(pid)
            members = [*leader.children(recursive=True), leader]
        except psutil.Error:
            return
        for member in members:
            with contextlib.suppress(psutil.Error):
                member.terminate() if step == "terminate" else member.kill()
