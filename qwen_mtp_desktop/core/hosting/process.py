"""One engine host child process (qwen_mtp_desktop.host): start it, send it requests, read its
events on a thread, and say in plain words how it ended.

`core.hosting.supervisor.EngineSupervisor` keeps one running for the window and for `serve`,
following `RestartPolicy`: restart after a death, unless the engine died three times in a row
without a model loaded in between (a model that crashes the runtime while loading, a broken
install).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    Cancel,
    FrameWriter,
    ProtocolError,
    Shutdown,
    read_frame,
)

log = logging.getLogger(__name__)
host_log = logging.getLogger("qwen_mtp_desktop.host")

#: Deaths in a row without a model loaded in between that stop automatic restarts.
MAX_DEATHS_IN_A_ROW = 3
STOPPED_CODE = "ENGINE_STOPPED"


def host_command() -> list[str]:
    """How to start the engine host: the same interpreter, or the frozen app itself (its entry
    point runs the host for `-m qwen_mtp_desktop.host`)."""
    return [sys.executable, "-m", "qwen_mtp_desktop.host"]


def describe_exit(returncode: int | None) -> str:
    """A child's end in plain words: "SIGSEGV", "exit code 3", "access violation"."""
    if returncode is None:
        return "no exit status"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    if sys.platform == "win32" and returncode >= 0x80000000:
        known = {0xC0000005: "access violation", 0xC00000FD: "stack overflow"}
        return known.get(returncode, f"exception 0x{returncode:08X}")
    return f"exit code {returncode}"


@dataclass(frozen=True)
class Exited:
    """The last event of a child: how it ended."""

    returncode: int | None
    detail: str = ""

    @property
    def how(self) -> str:
        return describe_exit(self.returncode)


class RestartPolicy:
    """Whether to start a new engine after a death."""

    def __init__(self) -> None:
        self.deaths_in_a_row = 0

    def useful(self) -> None:
        """The engine loaded a model (or came up with nothing to load)."""
        self.deaths_in_a_row = 0

    def died(self) -> bool:
        """Count a death; True if the engine should be restarted."""
        self.deaths_in_a_row += 1
        return self.deaths_in_a_row < MAX_DEATHS_IN_A_ROW


class HostProcess:
    """A running engine host. `on_event(incarnation, event)` is called on the reader thread for
    every event, and finally with `Exited`; `incarnation` tells a replaced child's late events
    apart."""

    def __init__(
        self,
        on_event: Callable[[int, object], None],
        command: Sequence[str] | None = None,
    ) -> None:
        self._on_event = on_event
        self._command = list(command or host_command())
        self.incarnation = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._writer: FrameWriter | None = None
        self._threads: list[threading.Thread] = []
        #: Seconds from the host sending a chunk batch to the reader thread receiving it.
        self.hop_s: deque[float] = deque(maxlen=4096)

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> int:
        """Start a new child (the previous one must have ended); its incarnation number."""
        self.incarnation += 1
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        process = subprocess.Popen(
            self._command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        self._process = process
        self._writer = FrameWriter(process.stdin)
        n = self.incarnation
        self._threads = [
            threading.Thread(
                target=self._read_events,
                args=(process, process.stdout, n),
                name=f"engine-events-{n}",
                daemon=True,
            ),
            threading.Thread(
                target=_forward_log, args=(process.stderr,), name=f"engine-log-{n}", daemon=True
            ),
        ]
        for thread in self._threads:
            thread.start()
        log.info("engine process %d started", process.pid)
        return n

    def forget(self) -> None:
        """The child ended (its Exited event came): drop it."""
        self._process, self._writer = None, None

    def send(self, request: object) -> None:
        """Send a request; a child that is gone is reported by its Exited event instead."""
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.send(request)

    def close(self) -> None:
        """Ask the child to end (Shutdown, then its stdin closes) without waiting for it: its
        `Exited` event follows when it has released everything."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.send(Shutdown())
                writer.close()

    def kill(self) -> None:
        """End the child at once (SIGKILL; TerminateProcess on Windows) without waiting: its
        `Exited` event follows."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(OSError):
                process.kill()

    def stop(self, timeout_s: float) -> bool:
        """Cancel, let the host release the model and exit. True if it ended in time (else
        it is killed)."""
        process, writer = self._process, self._writer
        self._process, self._writer = None, None
        if process is None:
            return True
        if writer is not None:
            with contextlib.suppress(OSError):
                writer.send(Cancel(None))
                writer.send(Shutdown())
                writer.close()
        in_time = True
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            in_time = False
            process.kill()
            process.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        return in_time

    def _read_events(self, process: subprocess.Popen[bytes], stream: IO[bytes], n: int) -> None:
        detail = ""
        try:
            while (event := read_frame(stream)) is not None:
                if isinstance(event, AnswerChunks):
                    self.hop_s.append(time.time() - event.sent_at)
                self._on_event(n, event)
        except ProtocolError as exc:
            detail = str(exc)
            log.error("engine process %d broke the protocol: %s", process.pid, exc)
            process.kill()
        except OSError as exc:
            detail = str(exc)
        exited = Exited(process.wait(), detail)
        log.log(
            logging.INFO if exited.returncode == 0 else logging.ERROR,
            "engine process %d ended (%s) %s",
            process.pid,
            exited.how,
            detail,
        )
        self._on_event(n, exited)


def _forward_log(stream: IO[bytes]) -> None:
    """The child's stderr into this process's log: its log records (one JSON line each, see
    host.engine_host.RecordLines) as the records they were, anything else (what the native
    runtime or a crash prints) as lines of the host's log."""
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip()
        if line:
            _log_line(line)
    stream.close()


def _log_line(line: str) -> None:
    if line.startswith("{"):
        try:
            record = json.loads(line)
            level, name, message = record["level"], record["name"], record["message"]
        except (ValueError, KeyError, TypeError):
            pass
        else:
            if isinstance(level, int) and isinstance(name, str) and isinstance(message, str):
                logging.getLogger(name).log(level, "%s", message)
                return
    host_log.info("%s", line)
