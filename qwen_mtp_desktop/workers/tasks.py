"""Run short blocking jobs (SQL, file scanning, inspection) off the GUI thread.

A `TaskRunner` owns one QThread and runs the callables submitted to it one at a time, in
order (so a runner used for the database serializes every write, Anki-style). Each result or
exception comes back on the GUI thread through the callbacks given to `submit`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal, Slot

from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Worker(QObject):
    done = Signal(int, object)
    failed = Signal(int, object)

    @Slot(int, object)
    def run(self, task_id: int, fn: Callable[[], Any]) -> None:
        try:
            result = fn()
        except Exception as exc:
            log.debug("task %d failed", task_id, exc_info=True)
            self.failed.emit(task_id, exc)
            return
        self.done.emit(task_id, result)


class TaskRunner(QObject):
    """Signals:
    idle(): emitted on the GUI thread when the last pending task has reported back.
    """

    idle = Signal()
    _submit = Signal(int, object)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = RequestIds()
        self._callbacks: dict[
            int, tuple[Callable[[Any], None] | None, Callable[[Exception], None] | None]
        ] = {}
        self._worker = _Worker()
        self._thread = WorkerThread(name, self._worker)
        self._submit.connect(self._worker.run)
        self._worker.done.connect(self._on_done)
        self._worker.failed.connect(self._on_failed)
        self._thread.start()

    @property
    def pending(self) -> int:
        return len(self._callbacks)

    def submit(
        self,
        fn: Callable[[], T],
        on_done: Callable[[T], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
    ) -> None:
        task_id = self._ids.next()
        self._callbacks[task_id] = (on_done, on_error)
        self._submit.emit(task_id, fn)

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Finish queued tasks, then stop the thread. True if it stopped in time."""
        return self._thread.stop(timeout_ms)

    @Slot(int, object)
    def _on_done(self, task_id: int, result: object) -> None:
        on_done, _on_error = self._callbacks.pop(task_id, (None, None))
        if on_done is not None:
            on_done(result)
        self._maybe_idle()

    @Slot(int, object)
    def _on_failed(self, task_id: int, exc: Exception) -> None:
        _on_done, on_error = self._callbacks.pop(task_id, (None, None))
        if on_error is not None:
            on_error(exc)
        else:
            log.error("background task failed: %s", exc, exc_info=exc)
        self._maybe_idle()

    def _maybe_idle(self) -> None:
        if not self._callbacks:
            self.idle.emit()
