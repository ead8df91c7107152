"""`ModelRouter`: the chat's engine, which sends each turn to the local engine process or to a
remote server, whichever the chat's model is.

It offers the chat panel the `ChatEngine` interface (workers.chat_engine), as `EngineProcess`
does, so the panel talks to one object: a model path naming an endpoint
(core.remote.endpoints.remote_ref) routes the turn to `core.remote.client.RemoteAnswer`, pumped
on the "remote-answer" thread (remote request ids are negative, so they never meet the engine
process's); every other path goes to the local engine process.

The pump hands the window one batch of text at a time and waits until the window has taken
it: a server that floods faster than the chat can render then slows down (the answer stops
reading its socket) instead of piling signals up in the GUI's event queue, and a Stop is
followed by at most one batch, which is dropped.

Each batch comes with the stream's progress (core.remote.progress): the live line's figures
are the server's streamed token count when it sends one, else the stream's chunks, never
tokens guessed from characters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.errors import as_user_error
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint, endpoint_id
from qwen_mtp_desktop.core.remote.keys import KeyStore
from qwen_mtp_desktop.core.remote.progress import StreamProgress
from qwen_mtp_desktop.workers.chat_engine import ChatEngine
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread
from qwen_mtp_desktop.workers.remote_models import RemoteModels, is_remote

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.remote.client import RemoteAnswer

#: How often the pump hands text to the GUI at most (as the engine process coalesces steps).
COALESCE_S = 0.03


class _Job:
    """One remote turn: what to send, its answer once the pump has made it, and whether the
    window still has a batch of its text to take (the pump waits for that)."""

    def __init__(
        self,
        request_id: int,
        endpoint: RemoteEndpoint,
        messages: Sequence[Message],
        settings: GenerationSettings,
    ) -> None:
        self.request_id = request_id
        self.endpoint = endpoint
        self.messages = tuple(messages)
        self.settings = settings
        self._lock = threading.Condition()
        self._answer: RemoteAnswer | None = None
        self._cancelled = False
        self._in_flight = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def attach(self, answer: RemoteAnswer) -> None:
        with self._lock:
            self._answer = answer
            cancelled = self._cancelled
        if cancelled:
            answer.cancel()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            answer = self._answer
            self._lock.notify_all()
        if answer is not None:
            answer.cancel()

    def sent(self) -> None:
        """The pump emitted a batch (pump thread)."""
        with self._lock:
            self._in_flight = True

    def delivered(self) -> None:
        """The window took the batch (GUI thread)."""
        with self._lock:
            self._in_flight = False
            self._lock.notify_all()

    def wait_delivered(self) -> None:
        """Until the window took the last batch, or the turn was cancelled (pump thread)."""
        with self._lock:
            while self._in_flight and not self._cancelled:
                self._lock.wait()


class _Pump(QObject):
    """On the "remote-answer" thread: runs a job's answer to its end, emitting as it goes."""

    #: request id, the batch's StepChunks, the answer's StreamProgress after them
    chunks = Signal(int, object, object)
    finished = Signal(int, object)
    failed = Signal(int, object)

    def __init__(self, keys: Callable[[], KeyStore]) -> None:
        super().__init__()
        self._keys = keys

    @Slot(object)
    def run(self, job: _Job) -> None:
        # Imported here: httpx costs 0.1-0.2 s of the window's start-up otherwise.
        from qwen_mtp_desktop.core.remote.client import RemoteAnswer

        try:
            key = self._keys().get(job.endpoint.id) if job.endpoint.has_key else None
            answer = RemoteAnswer(job.endpoint, key, job.messages, job.settings)
        except EngineError as exc:
            self.failed.emit(job.request_id, exc)
            return
        except Exception as exc:
            self.failed.emit(job.request_id, as_user_error(exc, EngineError))
            return
        job.attach(answer)
        while True:
            job.wait_delivered()
            try:
                chunks = answer.next_chunks(0.1, within_s=COALESCE_S)
            except StopIteration:
                self.finished.emit(job.request_id, answer.stats)
                return
            except EngineError as exc:
                self.failed.emit(job.request_id, exc)
                return
            if chunks:
                job.sent()
                self.chunks.emit(job.request_id, chunks, answer.progress)


class _Live:
    """What the chat shows while a remote answer streams: the server and its stream's
    progress so far."""

    def __init__(self, endpoint: RemoteEndpoint) -> None:
        self.endpoint = endpoint
        self.progress = StreamProgress()


class ModelRouter(QObject):
    """The chat's engine (`ChatEngine`): the engine process for local models, a remote server
    for remote ones. Signals as EngineProcess's: loading, loaded, load_failed, chunks,
    finished, failed."""

    loading = Signal(object)
    loaded = Signal(object)
    load_failed = Signal(object)
    chunks = Signal(int, object)
    finished = Signal(int, object)
    failed = Signal(int, object)
    _run = Signal(object)

    def __init__(
        self, engine_process: EngineProcess, remote: RemoteModels, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        #: Where local models' turns run.
        self.engine_process = engine_process
        self.remote = remote
        self._ids = RequestIds()
        self._endpoint: RemoteEndpoint | None = None
        #: The remote model the chat asked for last (None: a local one), and what `loaded`
        #: said of it (None until its endpoint is found, and after it was not).
        self._remote_ref: Path | None = None
        self._remote_model: LoadedModel | None = None
        #: A remote model asked for before the endpoint list was read.
        self._pending: Path | None = None
        self._jobs: dict[int, _Job] = {}
        self._live: dict[int, _Live] = {}
        self._thread: WorkerThread | None = None
        engine_process.loading.connect(self._local(self.loading.emit))
        engine_process.loaded.connect(self._local(self.loaded.emit))
        engine_process.load_failed.connect(self._local(self.load_failed.emit))
        engine_process.chunks.connect(self.chunks)
        engine_process.finished.connect(self.finished)
        engine_process.failed.connect(self.failed)
        remote.changed.connect(self._on_endpoints_changed)

    def _local(self, emit: Callable[[Any], None]) -> Callable[[Any], None]:
        """Forward an engine load event only while the chat's model is a local one."""

        def forward(value: Any) -> None:
            if self._endpoint is None and self._pending is None:
                emit(value)

        return forward

    # ------------------------------------------------------------------ ChatEngine

    @property
    def loaded_model(self) -> LoadedModel | None:
        """The engine process's model for a local chat model; the endpoint's for a remote one
        (None while its endpoint is looked up, or after it was not found)."""
        if self._remote_ref is None:
            return self.engine_process.loaded_model
        return self._remote_model

    @property
    def plain_ready(self) -> bool:
        return self.engine_process.plain_ready

    @property
    def endpoint(self) -> RemoteEndpoint | None:
        """The remote endpoint the chat uses now (None for a local model)."""
        return self._endpoint

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None:
        self._remote_ref = model_dir if is_remote(model_dir) else None
        self._remote_model = None
        if not is_remote(model_dir):
            self._endpoint = self._pending = None
            self.engine_process.load(model_dir, options)
            return
        self._endpoint, self._pending = None, model_dir
        self.loading.emit(model_dir)
        if self.remote.loaded:
            QTimer.singleShot(0, self._resolve)

    def unload(self) -> None:
        """Free the local model's memory (a remote model holds none here)."""
        if self._endpoint is None:
            self.engine_process.unload()

    def start_generation(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        endpoint = self._endpoint
        if endpoint is None:
            return self.engine_process.start_generation(messages, settings)
        request_id = -self._ids.next()
        job = _Job(request_id, endpoint, messages, settings)
        self._jobs[request_id] = job
        self._live[request_id] = _Live(endpoint)
        self._ensure_thread()
        self._run.emit(job)
        return request_id

    def cancel(self, request_id: int | None = None) -> None:
        if request_id is None or request_id >= 0:
            self.engine_process.cancel(request_id)
        if request_id is None or request_id < 0:
            for ident, job in list(self._jobs.items()):
                if request_id is None or ident == request_id:
                    job.cancel()

    def live_text(self, request_id: int) -> str | None:
        """The live figures of a remote answer (None for a local one)."""
        live = self._live.get(request_id)
        if live is None:
            return None
        return "  ·  ".join([f"from {live.endpoint.name}", *live.progress.figures()])

    def names(self) -> dict[Path, str]:
        """The picker's names of the remote models ("remote:…" references)."""
        return {e.ref: f"{e.name} (remote)" for e in self.remote.endpoints}

    def status_text(self) -> str:
        """The chat header's status for a remote model: its model and server."""
        endpoint = self._endpoint
        if endpoint is None:
            return ""
        return f"{endpoint.model} on {endpoint.base_url}"

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        """Cancel remote answers and stop the threads this made."""
        for job in list(self._jobs.values()):
            job.cancel()
        ok = self.remote.shutdown(timeout_ms)
        if self._thread is not None:
            ok = self._thread.stop(timeout_ms) and ok
        return ok

    # ------------------------------------------------------------------ remote turns

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        pump = _Pump(self.remote.key_store)
        self._thread = WorkerThread("remote-answer", pump)
        self._run.connect(pump.run)
        pump.chunks.connect(self._on_chunks)
        pump.finished.connect(self._on_finished)
        pump.failed.connect(self._on_failed)
        self._thread.start()

    def _on_chunks(
        self, request_id: int, chunks: list[StepChunk], progress: StreamProgress
    ) -> None:
        job = self._jobs.get(request_id)
        if job is None or job.cancelled:
            return  # stopped: text that was on its way is not shown
        try:
            live = self._live.get(request_id)
            if live is not None:
                live.progress = progress
            self.chunks.emit(request_id, chunks)  # the chat shows it before the next batch
        finally:
            job.delivered()

    def _on_finished(self, request_id: int, stats: object) -> None:
        self._jobs.pop(request_id, None)
        self._live.pop(request_id, None)
        self.finished.emit(request_id, stats)

    def _on_failed(self, request_id: int, error: EngineError) -> None:
        self._jobs.pop(request_id, None)
        self._live.pop(request_id, None)
        self.failed.emit(request_id, error)

    # ------------------------------------------------------------------ endpoints

    def _on_endpoints_changed(self) -> None:
        current = self._endpoint
        if current is not None:
            updated = self.remote.find(current.id)
            if updated is None:
                self._pending = current.ref  # removed: say so through a failed load
            else:
                self._endpoint = updated  # edited: the next turn uses the new settings
        if self._pending is not None:
            self._resolve()

    def _resolve(self) -> None:
        """Finish the 'load' of a remote model once the endpoint list is known."""
        ref = self._pending
        if ref is None:
            return
        self._pending = None
        ident = endpoint_id(ref)
        endpoint = self.remote.find(ident) if ident is not None else None
        if endpoint is None:
            self._endpoint = self._remote_model = None
            self.load_failed.emit(
                EngineError(
                    "This chat's remote server is no longer in the list.",
                    "Choose another model in the picker, or add the server again.",
                    code="REMOTE_GONE",
                )
            )
            return
        self._endpoint = endpoint
        self._remote_model = LoadedModel(
            model_dir=ref, device="remote", mtp=False, model_type="remote", load_s=0.0
        )
        self.loaded.emit(self._remote_model)


# mypy checks both against the protocol here (QObjects cannot name a Protocol as a base).
if TYPE_CHECKING:
    _CONFORMS: tuple[type[ChatEngine], ...] = (EngineProcess, ModelRouter)

# RemoteModels and is_remote come along: the chat panel, which makes the router, uses them too.
__all__ = ["ModelRouter", "RemoteModels", "is_remote"]
