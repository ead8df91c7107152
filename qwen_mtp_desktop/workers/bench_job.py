"""Run one validation or benchmark at a time on its own thread, for the Benchmark panel.

A run loads its own two pipelines (plain and MTP), so it does not go through the chat's engine
thread; it loads prompt sets, saves the report into the model's history and stores the
benchmark's depth recommendation on the worker thread too, so the GUI thread only relays signals.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QThread, Signal, Slot

from qwen_mtp_desktop.core.decoding.prompt_lookup import DraftMethod
from qwen_mtp_desktop.core.errors import RunCancelledError, UserFacingError, as_user_error
from qwen_mtp_desktop.workers.foundation import track

if TYPE_CHECKING:  # measurement loads the decoding loop (and numpy): not before the window
    from qwen_mtp_desktop.core.measurement import Progress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobResult:
    kind: str
    report: dict[str, Any]
    #: Where the report was saved in the model's history.
    path: Path


class _JobThread(QThread):
    progressed = Signal(object)
    succeeded = Signal(object)
    errored = Signal(object)

    def __init__(self, fn: Callable[[Callable[[Progress], None]], JobResult]) -> None:
        super().__init__()
        self._fn = fn

    def run(self) -> None:
        try:
            result = self._fn(self.progressed.emit)
        except Exception as exc:  # every failure reaches the panel as a signal
            self.errored.emit(exc)
            return
        self.succeeded.emit(result)


class BenchJob(QObject):
    """Signals:
    started(str): a run of kind "validate" or "bench" began.
    progress(Progress): a step began or ended (done/total and a message).
    finished(JobResult): the run completed; its report is saved (and a benchmark's
        recommendation stored) already.
    failed(UserFacingError): the run could not complete.
    cancelled(): the run stopped at the user's request.
    busy_changed(bool): a run started (True) or ended (False).
    """

    started = Signal(str)
    progress = Signal(object)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()
    busy_changed = Signal(bool)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: _JobThread | None = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start_validation(
        self,
        model_dir: Path,
        prompt_set: str | Path,
        *,
        num_assistant_tokens: int = 1,
        max_new_tokens: int | None = None,
        device: str = "CPU",
        method: DraftMethod = "mtp",
    ) -> bool:
        """Start `validate` of `method` (MTP, or prompt lookup at `num_assistant_tokens`
        drafts per step); False if a run is already going."""

        def job(progress: Callable[[Progress], None]) -> JobResult:
            from qwen_mtp_desktop.core.acceptance_health import save_reference
            from qwen_mtp_desktop.core.prompt_sets import load_prompt_set
            from qwen_mtp_desktop.core.reports import save_report
            from qwen_mtp_desktop.core.validate import run_validation

            report = run_validation(
                model_dir,
                load_prompt_set(prompt_set),
                max_new_tokens=max_new_tokens,
                num_assistant_tokens=num_assistant_tokens,
                device=device,
                progress=progress,
                cancel=self._cancel,
                method=method,
            )
            path = save_report(report)
            save_reference(report)  # what the chat's acceptance health check compares with
            return JobResult("validate", report, path)

        return self._start("validate", job)

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
        lookup_tokens: int | None = None,
    ) -> bool:
        """Start `bench` (with prompt lookup at `lookup_tokens` drafts per step unless None);
        False if a run is already going."""

        def job(progress: Callable[[Progress], None]) -> JobResult:
            from qwen_mtp_desktop.core.acceptance_health import save_reference
            from qwen_mtp_desktop.core.bench import run_benchmark
            from qwen_mtp_desktop.core.prompt_sets import load_prompt_set
            from qwen_mtp_desktop.core.recommendations import save_recommendation
            from qwen_mtp_desktop.core.reports import save_report

            report = run_benchmark(
                model_dir,
                [load_prompt_set(spec) for spec in prompt_sets],
                depths=depths,
                runs=runs,
                warmup=warmup,
                max_new_tokens=max_new_tokens,
                device=device,
                exact_numerics=exact_numerics,
                cache_dir=cache_dir,
                progress=progress,
                cancel=self._cancel,
                lookup_tokens=lookup_tokens,
            )
            path = save_report(report)
            save_recommendation(report)
            save_reference(report)
            return JobResult("bench", report, path)

        return self._start("bench", job)

    def cancel(self) -> None:
        """Stop the run at the next decoding step (thread-safe, harmless when idle)."""
        self._cancel.set()

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel and wait for the thread. True if it stopped in time."""
        thread = self._thread
        if thread is None:
            return True
        self.cancel()
        return thread.wait(timeout_ms)

    def _start(self, kind: str, fn: Callable[[Callable[[Progress], None]], JobResult]) -> bool:
        if self._thread is not None:
            return False
        self._cancel = threading.Event()
        thread = _JobThread(fn)
        thread.setObjectName(f"bench-{kind}")
        track(thread)
        thread.progressed.connect(self.progress)
        thread.succeeded.connect(self._on_succeeded)
        thread.errored.connect(self._on_errored)
        self._thread = thread
        thread.start()
        self.started.emit(kind)
        self.busy_changed.emit(True)
        return True

    def _finish(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.wait()
            thread.deleteLater()
        self.busy_changed.emit(False)

    @Slot(object)
    def _on_succeeded(self, result: JobResult) -> None:
        self._finish()
        self.finished.emit(result)

    @Slot(object)
    def _on_errored(self, exc: Exception) -> None:
        self._finish()
        if isinstance(exc, RunCancelledError):
            self.cancelled.emit()
        else:
            self.failed.emit(as_user_error(exc, UserFacingError))
