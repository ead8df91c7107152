"""The Benchmark panel's runs (validate, bench), one at a time, each in an engine host process
of its own.

A run loads two more copies of the model (plain and MTP) and OpenVINO with them; none of that
may live in the window's process, and a native crash or an out-of-memory kill during a run must
not take the window (or the chat's engine) down. So every run starts a fresh engine host
(`python -m qwen_mtp_desktop.host`, core.hosting.process.HostProcess) and sends it one
`Measure` request; the host answers with progress events and the report, and exits when asked,
which returns all of the run's memory to the system at once. The window saves the report (into
the model's history, with a benchmark's recommendation and the acceptance references) on the
I/O runner after it arrives, so a run that ends any other way leaves nothing behind.

Cancel asks the host to stop at the next decoding step; a host that has not ended within
`CANCEL_GRACE_MS` (a model still loading or compiling cannot be interrupted) is killed, so the
panel is idle again within a second. While a run goes, `memory` reports the run's process
resident memory (its own engines, nothing of the chat's) every `MEMORY_INTERVAL_MS`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.errors import UserFacingError, as_user_error
from qwen_mtp_desktop.core.hosting.process import Exited, HostProcess
from qwen_mtp_desktop.core.hosting.protocol import (
    Cancel,
    Measure,
    Measured,
    MeasureFailed,
    MeasureProgress,
    Ready,
)
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.workers.foundation import RequestIds
from qwen_mtp_desktop.workers.tasks import TaskRunner

if TYPE_CHECKING:  # the measurement code is imported when a report is saved
    from qwen_mtp_desktop.core.measure.records import Report

log = logging.getLogger(__name__)

#: After Cancel, how long the run's process may take to end by itself before it is killed.
CANCEL_GRACE_MS = 500
#: After the run ended, how long its process may take to release its engines and exit.
EXIT_GRACE_MS = 10_000
#: At the app's exit, how long a run's process may take to end before it is killed.
SHUTDOWN_GRACE_MS = 3_000
MEMORY_INTERVAL_MS = 1_000
STOPPED_CODE = "MEASURE_STOPPED"

RunKind = Literal["validate", "bench"]
_NOUNS = {"validate": "validation", "bench": "benchmark"}


@dataclass(frozen=True)
class JobResult:
    kind: str
    report: Report
    #: Where the report was saved in the model's history.
    path: Path


def stopped_error(kind: RunKind, exited: Exited, peak_rss: int | None) -> UserFacingError:
    """What the panel says when the run's process ended before the run did."""
    noun = _NOUNS[kind]
    fix = (
        "Nothing was saved, and the chat was not affected. Run it again; if it stops again, "
        "the app's log has what the runtime printed last."
    )
    if exited.returncode is not None and exited.how in ("SIGKILL", "exit code 137"):
        used = f" (this run used {format_bytes(peak_rss)} at most)" if peak_rss else ""
        fix += (
            f" A kill from outside often means the computer ran out of memory{used}: close "
            "other applications, or free the chat's copy of the model (Eject, in the chat) "
            "while the run goes."
        )
    return UserFacingError(
        f"The {noun} stopped: the process running it ended ({exited.how}) before it finished.",
        fix,
        code=STOPPED_CODE,
    )


def _save(kind: RunKind, raw: Mapping[str, object]) -> JobResult:
    """On the I/O runner: the report (`raw`, as the run's process sent it) into the model's
    history; a benchmark's recommendation (where Auto starts); the acceptance references the
    chat's health check compares with."""
    from qwen_mtp_desktop.core.measure.acceptance_health import save_reference
    from qwen_mtp_desktop.core.measure.recommendations import save_recommendation
    from qwen_mtp_desktop.core.measure.reports import checked_report, save_report

    report = checked_report(raw, f"The {_NOUNS[kind]}'s report")
    path = save_report(report)
    if report["kind"] == "bench":
        save_recommendation(report)
    save_reference(report)
    return JobResult(kind, report, path)


class BenchJob(QObject):
    """Signals:
    started(str): a run of kind "validate" or "bench" began.
    progress(MeasureProgress): a step began or ended (done/total and a message).
    memory(int, int): the run's process resident memory now and at most so far, in bytes.
    finished(JobResult): the run completed; its report is saved (and a benchmark's
        recommendation stored) already.
    failed(UserFacingError): the run could not complete; code MEASURE_STOPPED when its
        process died (a crash, a kill from outside).
    cancelled(): the run stopped at the user's request; nothing was saved.
    busy_changed(bool): a run started (True) or ended and its process is gone (False).
    """

    started = Signal(str)
    progress = Signal(object)
    memory = Signal(int, int)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    busy_changed = Signal(bool)

    _event = Signal(int, object)  # request id, event: from the run's host's reader thread

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        io: TaskRunner | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self._own_io = io is None
        self._io = io or TaskRunner("bench-save", self)
        self._command = command
        self._ids = RequestIds()
        self._host: HostProcess | None = None
        self._request: Measure | None = None
        #: ("finished", JobResult) | ("failed", UserFacingError) | ("cancelled", None)
        self._outcome: tuple[str, Any] | None = None
        self._exited: Exited | None = None
        self._saving = False
        self._cancelling = False
        self._process: Any = None  # psutil.Process of the run's host, once it is up
        self.peak_rss: int | None = None
        self._event.connect(self._on_event)
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self._kill)
        self._memory_timer = QTimer(self)
        self._memory_timer.setInterval(MEMORY_INTERVAL_MS)
        self._memory_timer.timeout.connect(self._sample_memory)

    @property
    def running(self) -> bool:
        """A run goes, or its process has not ended yet."""
        return self._request is not None

    @property
    def pid(self) -> int | None:
        """The process running the current run (None when idle)."""
        return self._host.pid if self._host is not None else None

    def start_validation(
        self,
        model_dir: Path,
        prompt_set: str | Path,
        *,
        method: DecodingMethod,
        max_new_tokens: int | None = None,
        device: str = "CPU",
    ) -> bool:
        """Start `validate` of a drafting `method` (MTP at a depth, prompt lookup); False if a
        run is already going."""
        return self._start(
            Measure(
                self._ids.next(),
                "validate",
                Path(model_dir),
                (prompt_set,),
                device=device,
                max_new_tokens=max_new_tokens,
                method=method,
            )
        )

    def start_benchmark(
        self,
        model_dir: Path,
        prompt_sets: Sequence[str | Path],
        *,
        depths: Sequence[int] = (1, 2, 3, 4),
        runs: int = 3,
        warmup: int = 1,
        max_new_tokens: int | None = None,
        device: str = "CPU",
        exact_numerics: bool = False,
        cache_dir: Path | None = None,
        lookup: DecodingMethod | None = None,
    ) -> bool:
        """Start `bench` (with prompt lookup as `lookup` says, unless None); False if a run
        is already going."""
        return self._start(
            Measure(
                self._ids.next(),
                "bench",
                Path(model_dir),
                tuple(prompt_sets),
                device=device,
                max_new_tokens=max_new_tokens,
                depths=tuple(depths),
                runs=runs,
                warmup=warmup,
                lookup=lookup,
                exact_numerics=exact_numerics,
                cache_dir=cache_dir,
            )
        )

    def cancel(self) -> None:
        """Stop the run at its next decoding step, or end its process within CANCEL_GRACE_MS
        (harmless when idle, or once the report has arrived)."""
        request, host = self._request, self._host
        if request is None or host is None or self._outcome is not None or self._saving:
            return
        if not self._cancelling:
            self._cancelling = True
            host.send(Cancel(request.request_id))
            self._kill_timer.start(CANCEL_GRACE_MS)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop the run and its process (at exit: this waits, at most SHUTDOWN_GRACE_MS before
        the process is killed: a run keeps nothing until its report arrives), then the saving
        of a report that had arrived. True if all of it ended in time."""
        self._kill_timer.stop()
        self._memory_timer.stop()
        host, self._host = self._host, None
        self._request = None
        grace_s = min(timeout_ms, SHUTDOWN_GRACE_MS) / 1000
        if host is not None and not host.stop(grace_s):
            log.info("the run's process was ended at exit")  # killed: gone all the same
        stopped = True
        if self._own_io:
            stopped = self._io.shutdown(timeout_ms) and stopped
        return stopped

    # ------------------------------------------------------------------ the run's life

    def _start(self, request: Measure) -> bool:
        if self._request is not None:
            return False
        self._request = request
        self._outcome, self._exited, self._process, self.peak_rss = None, None, None, None
        self._saving = self._cancelling = False
        rid = request.request_id
        host = HostProcess(lambda _n, event: self._event.emit(rid, event), self._command)
        self.started.emit(request.kind)
        self.busy_changed.emit(True)
        try:
            host.start()
        except OSError as exc:
            log.error("could not start the process for a %s: %s", request.kind, exc)
            self._outcome = (
                "failed",
                UserFacingError(
                    f"The {_NOUNS[request.kind]} could not start: no process for it ({exc}).",
                    "Check that the app's installation is complete, then try again.",
                    code=STOPPED_CODE,
                ),
            )
            self._exited = Exited(None, str(exc))
            self._finish()
            return True
        self._host = host
        host.send(request)
        self._memory_timer.start()
        return True

    @Slot(int, object)
    def _on_event(self, request_id: int, event: Any) -> None:
        request, host = self._request, self._host
        if request is None or host is None or request_id != request.request_id:
            return  # a late event of a run that was shut down
        if isinstance(event, Ready):
            self._watch(event.pid)
        elif isinstance(event, MeasureProgress):
            if event.request_id == request.request_id and not self._cancelling:
                self.progress.emit(event)
        elif isinstance(event, Measured):
            host.close()
            self._kill_timer.start(EXIT_GRACE_MS)
            if self._cancelling:  # it finished before the cancel arrived: keep nothing
                self._outcome = ("cancelled", None)
            else:
                self._saving = True
                self._io.submit(
                    functools.partial(_save, request.kind, event.report),
                    self._on_saved,
                    self._on_save_failed,
                )
        elif isinstance(event, MeasureFailed):
            host.close()
            if not self._cancelling:  # else the cancel's shorter deadline stands
                self._kill_timer.start(EXIT_GRACE_MS)
            if event.error.code == "CANCELLED" or self._cancelling:
                self._outcome = ("cancelled", None)
            else:
                self._outcome = ("failed", event.error)
        elif isinstance(event, Exited):
            host.forget()
            self._exited = event
            if self._outcome is None and not self._saving:
                if self._cancelling:
                    self._outcome = ("cancelled", None)
                else:
                    self._outcome = ("failed", stopped_error(request.kind, event, self.peak_rss))
                    log.error("%s process ended early (%s)", request.kind, event.how)
        self._maybe_finish()

    def _on_saved(self, result: JobResult) -> None:
        self._saving = False
        self._outcome = ("finished", result)
        self._maybe_finish()

    def _on_save_failed(self, exc: Exception) -> None:
        self._saving = False
        error = as_user_error(exc, UserFacingError)
        if isinstance(exc, OSError):
            error = UserFacingError(
                f"The report could not be saved: {exc.strerror or exc}.",
                "Check that the app's data folder is writable and has free space, then run again.",
                code="REPORT_NOT_SAVED",
            )
        self._outcome = ("failed", error)
        self._maybe_finish()

    def _maybe_finish(self) -> None:
        if self._outcome is not None and self._exited is not None and not self._saving:
            self._finish()

    def _finish(self) -> None:
        self._kill_timer.stop()
        self._memory_timer.stop()
        outcome = self._outcome
        assert outcome is not None
        self._host, self._request, self._process = None, None, None
        self.busy_changed.emit(False)
        what, value = outcome
        if what == "finished":
            self.finished.emit(value)
        elif what == "cancelled":
            self.cancelled.emit()
        else:
            self.failed.emit(value)

    # ------------------------------------------------------------------ its process

    def _kill(self) -> None:
        host = self._host
        if host is not None and host.running:
            log.warning("the %s process did not end in time; killing it", self._kind_noun())
            host.kill()

    def _kind_noun(self) -> str:
        return _NOUNS[self._request.kind] if self._request is not None else "run"

    def _watch(self, pid: int) -> None:
        import psutil

        try:
            self._process = psutil.Process(pid)
        except psutil.Error:
            self._process = None
        self._sample_memory()

    def _sample_memory(self) -> None:
        """The run's resident memory (reading it costs microseconds: fine on the GUI thread)."""
        process = self._process
        if process is None:
            return
        import psutil

        try:
            rss = int(process.memory_info().rss)
        except psutil.Error:
            return
        if rss == 0:  # the process has exited (a zombie reads 0): nothing resident to show
            return
        self.peak_rss = max(self.peak_rss or 0, rss)
        self.memory.emit(rss, self.peak_rss)
