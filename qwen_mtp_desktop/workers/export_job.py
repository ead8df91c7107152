"""The export queue: one QThread runs export (and toolkit-install) jobs one at a time.

Jobs outlive the wizard page: the queue belongs to the export panel, which lives as long as the
main window, and `busy` / `busy_changed` let the window ask before quitting. The heavy work is
`core.models.export.job.ExportJob` (a supervised subprocess); this module only relays its callbacks
as signals, coalescing log lines so a chatty exporter cannot flood the GUI thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot

from qwen_mtp_desktop.core.errors import as_user_error
from qwen_mtp_desktop.core.models.export.job import (
    ExportJob,
    ExportOutcome,
    ExportRequest,
    explain_failure,
)
from qwen_mtp_desktop.core.models.export.options import ExportError
from qwen_mtp_desktop.core.models.export.process_group import (
    ProcessOutcome,
    ProcessStats,
    SupervisedProcess,
)
from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InstallRequest:
    """pip-install the export toolkit; `command` is shown to the user as is."""

    command: tuple[str, ...]


@dataclass
class InstallOutcome:
    request: InstallRequest
    process: ProcessOutcome | None
    error: ExportError | None = None

    @property
    def succeeded(self) -> bool:
        return self.process is not None and self.process.ok

    @property
    def cancelled(self) -> bool:
        return self.process is not None and self.process.cancelled


class _LineBuffer:
    """Collects lines and hands them over at most every `interval` seconds."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.lines: list[str] = []
        self.last = 0.0

    def add(self, line: str) -> list[str] | None:
        self.lines.append(line)
        return self.due()

    def due(self, force: bool = False) -> list[str] | None:
        now = time.monotonic()
        if self.lines and (force or now - self.last >= self.interval):
            out, self.lines, self.last = self.lines, [], now
            return out
        return None


class _QueueWorker(QObject):
    """Lives on the queue's thread; its slots run there, in submission order."""

    started = Signal(int)
    lines = Signal(int, object)  # job id, list[str]
    progress = Signal(int, object)  # job id, ProgressEvent
    stats = Signal(int, object)  # job id, ProcessStats
    finished = Signal(int, object)  # job id, ExportOutcome | InstallOutcome

    def __init__(self, grace: tuple[float, float]) -> None:
        super().__init__()
        self._grace = grace
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        self._current: tuple[int, threading.Event] | None = None

    def cancel(self, job_id: int | None) -> None:
        """Called from the GUI thread: cancel a queued job, or the running one (None = all)."""
        with self._lock:
            if job_id is not None:
                self._cancelled.add(job_id)
            if self._current is not None and job_id in (None, self._current[0]):
                self._current[1].set()

    def _begin(self, job_id: int) -> threading.Event | None:
        with self._lock:
            if job_id in self._cancelled:
                self._cancelled.discard(job_id)
                return None
            event = threading.Event()
            self._current = (job_id, event)
            return event

    def _end(self) -> None:
        with self._lock:
            self._current = None

    def _run_job(
        self,
        job_id: int,
        cancelled: object,
        body: Callable[[threading.Event, _Relay], object],
    ) -> None:
        """Run one job: `cancelled` is its outcome when it was cancelled before it began;
        `body(cancel, relay)` runs it and returns its outcome. Its output is relayed as it
        comes, the last lines before `finished`."""
        cancel = self._begin(job_id)
        if cancel is None:
            self.finished.emit(job_id, cancelled)
            return
        self.started.emit(job_id)
        relay = _Relay(self, job_id)
        try:
            outcome = body(cancel, relay)
        finally:
            self._end()
        relay.flush()
        self.finished.emit(job_id, outcome)

    @Slot(int, object)
    def run_export(self, job_id: int, request: ExportRequest) -> None:
        def body(cancel: threading.Event, relay: _Relay) -> ExportOutcome:
            job = ExportJob(
                request,
                on_line=relay.line,
                on_event=lambda event: self.progress.emit(job_id, event),
                on_stats=relay.stats,
                grace=self._grace,
            )
            job.cancel_event = cancel
            try:
                return job.run()
            except Exception as exc:  # a bug must not kill the queue thread
                log.error("export job %d crashed", job_id)
                error = as_user_error(exc, ExportError)
                return ExportOutcome(request, "failed", None, 0.0, 0, error=error)

        self._run_job(job_id, ExportOutcome(request, "cancelled", None, 0.0, 0), body)

    @Slot(int, object)
    def run_install(self, job_id: int, request: InstallRequest) -> None:
        def body(cancel: threading.Event, relay: _Relay) -> InstallOutcome:
            process = SupervisedProcess(
                request.command,
                on_line=relay.line,
                on_stats=relay.stats,
                cancel=cancel,
                grace=self._grace,
            )
            try:
                result = process.run()
            except OSError as exc:
                error = ExportError(f"pip could not be started: {exc}", "Install it manually.")
                return InstallOutcome(request, None, error)
            failed = not (result.ok or result.cancelled)
            return InstallOutcome(
                request, result, explain_failure(result, "installer") if failed else None
            )

        self._run_job(job_id, InstallOutcome(request, None), body)


class _Relay:
    """One job's output to the GUI thread: log lines in batches (at most one per 0.1 s, so a
    chatty exporter cannot flood it) and the process's stats."""

    def __init__(self, worker: _QueueWorker, job_id: int) -> None:
        self._worker = worker
        self._job_id = job_id
        self._buffer = _LineBuffer()

    def line(self, line: str) -> None:
        self._send(self._buffer.add(line))

    def stats(self, stats: ProcessStats) -> None:
        self._send(self._buffer.due())
        self._worker.stats.emit(self._job_id, stats)

    def flush(self) -> None:
        self._send(self._buffer.due(force=True))

    def _send(self, batch: list[str] | None) -> None:
        if batch:
            self._worker.lines.emit(self._job_id, batch)


class ExportQueue(QObject):
    """GUI-side handle of the export thread.

    Signals:
        queued(int, object): a job id was accepted (request: ExportRequest | InstallRequest).
        started(int): the job began running.
        lines(int, list[str]): new log lines (coalesced, at most ~10 batches a second).
        progress(int, ProgressEvent): stage and percentage changes.
        stats(int, ProcessStats): elapsed time, current and peak RSS of the process tree.
        finished(int, ExportOutcome | InstallOutcome): the job ended (also when cancelled).
        busy_changed(bool): True while any job is queued or running.
    """

    queued = Signal(int, object)
    started = Signal(int)
    lines = Signal(int, object)
    progress = Signal(int, object)
    stats = Signal(int, object)
    finished = Signal(int, object)
    busy_changed = Signal(bool)

    _request_export = Signal(int, object)
    _request_install = Signal(int, object)

    def __init__(
        self, grace: tuple[float, float] = (5.0, 5.0), parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self._ids = RequestIds()
        self._pending: dict[int, ExportRequest | InstallRequest] = {}
        self._running: int | None = None
        self._worker = _QueueWorker(grace)
        self._thread = WorkerThread("export", self._worker)
        self._request_export.connect(self._worker.run_export)
        self._request_install.connect(self._worker.run_install)
        self._worker.started.connect(self._on_started)
        self._worker.lines.connect(self.lines)
        self._worker.progress.connect(self.progress)
        self._worker.stats.connect(self.stats)
        self._worker.finished.connect(self._on_finished)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    @property
    def running_job(self) -> int | None:
        return self._running

    def jobs(self) -> Sequence[int]:
        """Ids of queued and running jobs, oldest first."""
        return sorted(self._pending)

    def request(self, job_id: int) -> ExportRequest | InstallRequest | None:
        return self._pending.get(job_id)

    def submit(self, request: ExportRequest) -> int:
        return self._submit(request, self._request_export)

    def submit_install(self, request: InstallRequest) -> int:
        return self._submit(request, self._request_install)

    def _submit(self, request: ExportRequest | InstallRequest, signal: SignalInstance) -> int:
        job_id = self._ids.next()
        was_busy = self.busy
        self._pending[job_id] = request
        signal.emit(job_id, request)
        self.queued.emit(job_id, request)
        if not was_busy:
            self.busy_changed.emit(True)
        return job_id

    def cancel(self, job_id: int | None = None) -> None:
        """Cancel a queued or running job; None cancels the running one and all queued."""
        if job_id is None:
            for pending in list(self._pending):
                self._worker.cancel(pending)
        else:
            self._worker.cancel(job_id)

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel everything, wait for the subprocesses to be gone, stop the thread."""
        if not self._thread.running:
            return True
        self.cancel(None)
        return self._thread.stop(timeout_ms)

    @Slot(int)
    def _on_started(self, job_id: int) -> None:
        self._running = job_id
        self.started.emit(job_id)

    @Slot(int, object)
    def _on_finished(self, job_id: int, outcome: object) -> None:
        self._pending.pop(job_id, None)
        if self._running == job_id:
            self._running = None
        self.finished.emit(job_id, outcome)
        if not self._pending:
            self.busy_changed.emit(False)
