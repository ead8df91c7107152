"""The engine thread: one long-lived QThread owns the Engine; requests run one at a time.

GUI code calls `EngineThread` methods; they are queued to the worker, so a load or a
generation never blocks the GUI thread. Step chunks are coalesced (at most one signal per
`coalesce_ms`) so a fast model cannot flood the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from qwen_mtp_desktop.core.engine import (
    Engine,
    EngineError,
    Generation,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.errors import as_user_error
from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread

log = logging.getLogger(__name__)


class _EngineWorker(QObject):
    """Lives on the engine thread. Its slots run there, in the order they were requested."""

    loading = Signal(object)  # Path
    loaded = Signal(object)  # LoadedModel
    load_failed = Signal(object)  # EngineError
    unloaded = Signal()
    started = Signal(int)  # request id
    chunks = Signal(int, object)  # request id, list[StepChunk]
    finished = Signal(int, object)  # request id, GenerationStats
    failed = Signal(int, object)  # request id, EngineError

    def __init__(self, coalesce_s: float) -> None:
        super().__init__()
        self.engine = Engine()
        self._coalesce_s = coalesce_s
        self._lock = threading.Lock()
        self._current: tuple[int, Generation] | None = None
        self._cancelled_ids: set[int] = set()

    def cancel(self, request_id: int | None) -> None:
        """Called from the GUI thread."""
        with self._lock:
            if request_id is not None:
                self._cancelled_ids.add(request_id)
            if self._current is not None and request_id in (None, self._current[0]):
                self._current[1].cancel()

    @Slot(object, object)
    def load(self, model_dir: Path, options: LoadOptions) -> None:
        self.loading.emit(model_dir)
        try:
            result = self.engine.load(model_dir, options)
        except Exception as exc:
            self.load_failed.emit(as_user_error(exc, EngineError))
            return
        self.loaded.emit(result)

    @Slot()
    def unload(self) -> None:
        self.engine.unload()
        self.unloaded.emit()

    @Slot(int, object, object)
    def generate(
        self, request_id: int, messages: Sequence[Message], settings: GenerationSettings
    ) -> None:
        with self._lock:
            if request_id in self._cancelled_ids:  # cancelled while still queued
                self._cancelled_ids.discard(request_id)
                self.failed.emit(request_id, EngineError("Cancelled.", code="CANCELLED"))
                return
        try:
            generation = self.engine.generate(messages, settings)
        except Exception as exc:
            self.failed.emit(request_id, as_user_error(exc, EngineError))
            return
        with self._lock:
            self._current = (request_id, generation)
        self.started.emit(request_id)
        buffer: list[StepChunk] = []
        last_emit = time.monotonic() - self._coalesce_s
        try:
            while True:
                if buffer:
                    # Let the steps of this window pile up, then take them in one go: waking
                    # per step would slow the decoding loop (benchmarks/engine_overhead.py).
                    remaining = last_emit + self._coalesce_s - time.monotonic()
                    if remaining > 0:
                        time.sleep(remaining)
                    try:
                        buffer.extend(generation.next_chunks(0, within_s=self._coalesce_s))
                    except StopIteration:
                        break
                else:
                    try:
                        buffer.extend(generation.next_chunks(None, within_s=self._coalesce_s))
                    except StopIteration:
                        break
                    if time.monotonic() - last_emit < self._coalesce_s:
                        continue  # more steps are coming; send them with this one
                self.chunks.emit(request_id, buffer)
                buffer = []
                last_emit = time.monotonic()
            if buffer:
                self.chunks.emit(request_id, buffer)
            self.finished.emit(request_id, generation.stats)
        except Exception as exc:
            if buffer:
                self.chunks.emit(request_id, buffer)
            self.failed.emit(request_id, as_user_error(exc, EngineError))
        finally:
            with self._lock:
                self._current = None
                self._cancelled_ids.discard(request_id)

    @Slot()
    def shutdown(self) -> None:
        self.engine.unload()


class EngineThread(QObject):
    """GUI-side handle of the engine thread.

    Signals:
        loading(Path): a load started.
        loaded(LoadedModel): the model is ready (mode says mtp or baseline, warnings included).
        load_failed(EngineError): the model could not be loaded; the previous one is unloaded.
        unloaded(): the model was released.
        started(int): request id began generating.
        chunks(int, list[StepChunk]): new steps for a request, coalesced.
        finished(int, GenerationStats): a request ended (also after cancel: finish_reason says).
        failed(int, EngineError): a request could not run or failed midway (chunks already
            delivered stay valid).
    """

    loading = Signal(object)
    loaded = Signal(object)
    load_failed = Signal(object)
    unloaded = Signal()
    started = Signal(int)
    chunks = Signal(int, object)
    finished = Signal(int, object)
    failed = Signal(int, object)

    _request_load = Signal(object, object)
    _request_unload = Signal()
    _request_generate = Signal(int, object, object)
    _request_shutdown = Signal()

    def __init__(self, coalesce_ms: int = 30, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = RequestIds()
        self._worker = _EngineWorker(coalesce_ms / 1000)
        self._thread = WorkerThread("engine", self._worker)
        self._request_load.connect(self._worker.load)
        self._request_unload.connect(self._worker.unload)
        self._request_generate.connect(self._worker.generate)
        self._request_shutdown.connect(self._worker.shutdown)
        for name in (
            "loading",
            "loaded",
            "load_failed",
            "unloaded",
            "started",
            "chunks",
            "finished",
            "failed",
        ):
            getattr(self._worker, name).connect(getattr(self, name))
        self._thread.start()

    @property
    def loaded_model(self) -> LoadedModel | None:
        return self._worker.engine.loaded

    @property
    def plain_ready(self) -> bool:
        """Whether plain decoding runs without loading a pipeline first (Auto's switch cost)."""
        return self._worker.engine.plain_ready

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None:
        self._request_load.emit(model_dir, options or LoadOptions())

    def unload(self) -> None:
        self._request_unload.emit()

    def generate(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        request_id = self._ids.next()
        self._request_generate.emit(request_id, list(messages), settings)
        return request_id

    def cancel(self, request_id: int | None = None) -> None:
        """Stop a request (or the running one) at its next decoding step."""
        self._worker.cancel(request_id)

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel, release the model and stop the thread. True if it stopped in time."""
        if not self._thread.running:
            return True
        self._worker.cancel(None)
        self._request_shutdown.emit()
        return self._thread.stop(timeout_ms)
