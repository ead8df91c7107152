"""Remote models for the chat: the saved endpoints and their keys, and an engine handle that
sends a turn to the local engine process or to a remote server, whichever the chat's model is.

`RemoteModels` keeps the endpoint list (read and written on the chat store's thread, with the
keychain, whose calls can block on D-Bus) and lists a server's models on a thread of its own.
`ModelRouter` has the EngineProcess signals and methods the chat panel uses (`load`,
`generate`, `cancel`, `plain_ready`, loading/loaded/load_failed/chunks/finished/failed), so the
panel talks to one object: a model path naming an endpoint (core.remote.endpoints.remote_ref)
routes the turn to `core.remote.client.RemoteAnswer`, pumped on the "remote-answer" thread
(remote request ids are negative, so they never meet the engine process's). The GUI thread
never touches the network or the keychain.

The pump hands the window one batch of text at a time and waits until the window has taken
it: a server that floods faster than the chat can render then slows down (the answer stops
reading its socket) instead of piling signals up in the GUI's event queue, and a Stop is
followed by at most one batch, which is dropped.
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
from qwen_mtp_desktop.core.remote.endpoints import (
    RemoteEndpoint,
    endpoint_id,
    load_endpoints,
    save_endpoints,
)
from qwen_mtp_desktop.core.remote.keys import KeyStore
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread
from qwen_mtp_desktop.workers.tasks import TaskRunner

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.remote.client import RemoteAnswer

#: How often the pump hands text to the GUI at most (as the engine process coalesces steps).
COALESCE_S = 0.03


def is_remote(model_dir: Path | str) -> bool:
    return endpoint_id(model_dir) is not None


class RemoteModels(QObject):
    """The saved remote endpoints. Signals:
    changed(): the list was loaded or changed (`endpoints`).
    problem(str): the saved list was damaged (what was skipped), or a save failed.
    """

    changed = Signal()
    problem = Signal(str)

    def __init__(self, io: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._io = io
        self._probe: TaskRunner | None = None
        self.endpoints: list[RemoteEndpoint] = []
        self.loaded = False
        #: Opened on first use, off the GUI thread (the keychain may answer over D-Bus), so a
        #: user who never adds a server never touches it.
        self._keys: KeyStore | None = None
        self._keys_lock = threading.Lock()
        self._io.submit(self._open, self._on_opened, self._on_failed)

    @staticmethod
    def _open() -> tuple[list[RemoteEndpoint], list[str]]:
        loaded = load_endpoints()
        return loaded.endpoints, loaded.problems

    def _on_opened(self, opened: tuple[list[RemoteEndpoint], list[str]]) -> None:
        self.endpoints, problems = opened
        self.loaded = True
        self.changed.emit()
        for text in problems:
            self.problem.emit(text)

    def _on_failed(self, exc: Exception) -> None:
        self.loaded = True
        self.problem.emit(str(as_user_error(exc, EngineError)))
        self.changed.emit()

    def find(self, ident: str) -> RemoteEndpoint | None:
        return next((e for e in self.endpoints if e.id == ident), None)

    def key_store(self) -> KeyStore:
        """The API key store, opened on first use. Blocking: call it off the GUI thread."""
        with self._keys_lock:
            if self._keys is None:
                self._keys = KeyStore()
            return self._keys

    @property
    def key_note(self) -> str:
        """Where keys are kept, for the dialog (empty until the key store was opened)."""
        keys = self._keys
        return keys.where if keys is not None else ""

    def probe_keys(self, done: Callable[[str], None]) -> None:
        """Open the key store off the GUI thread, then `done(where keys are kept)`."""
        self._io.submit(lambda: self.key_store().where, done)

    def save(self, endpoint: RemoteEndpoint, key: str | None, *, keep_key: bool) -> None:
        """Add or replace `endpoint`. `key`: the new API key (None: none); `keep_key`: leave the
        stored key as it is."""
        has_key = endpoint.has_key if keep_key else bool(key)
        saved = RemoteEndpoint(
            endpoint.id, endpoint.name, endpoint.base_url, endpoint.model, has_key
        )
        others = [e for e in self.endpoints if e.id != saved.id]
        position = next((i for i, e in enumerate(self.endpoints) if e.id == saved.id), None)
        new = others[:]
        new.insert(len(others) if position is None else position, saved)
        self.endpoints = new
        self.changed.emit()

        def write() -> None:
            if not keep_key:
                if key:
                    self.key_store().set(saved.id, key)
                else:
                    self.key_store().delete(saved.id)
            save_endpoints(new)

        self._io.submit(write, None, self._on_save_failed)

    def remove(self, ident: str) -> None:
        self.endpoints = [e for e in self.endpoints if e.id != ident]
        remaining = list(self.endpoints)
        self.changed.emit()

        def write() -> None:
            self.key_store().delete(ident)
            save_endpoints(remaining)

        self._io.submit(write, None, self._on_save_failed)

    def _on_save_failed(self, exc: Exception) -> None:
        self.problem.emit(f"The remote servers could not be saved: {exc}")

    def fetch_models(
        self,
        endpoint: RemoteEndpoint,
        key: str | None,
        on_done: Callable[[list[str]], None],
        on_error: Callable[[Exception], None],
        *,
        stored_key: bool = False,
    ) -> None:
        """The server's models (GET /models), off the GUI thread. `stored_key`: use the key
        kept for `endpoint` instead of `key`."""
        if self._probe is None:
            self._probe = TaskRunner("remote-probe", self)

        def fetch() -> list[str]:
            from qwen_mtp_desktop.core.remote.client import list_models

            use = self.key_store().get(endpoint.id) if stored_key else key
            return list_models(endpoint, use)

        self._probe.submit(fetch, on_done, on_error)

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        return self._probe.shutdown(timeout_ms) if self._probe is not None else True


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

    chunks = Signal(int, object)
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
                self.chunks.emit(job.request_id, chunks)


class _Live:
    """What the chat shows while a remote answer streams (it has no token ids to count)."""

    def __init__(self, endpoint: RemoteEndpoint) -> None:
        self.endpoint = endpoint
        self.first_s: float | None = None
        self.last_s = 0.0
        self.events = 0
        self.chars = 0


class ModelRouter(QObject):
    """The chat's engine: the EngineProcess for local models, a remote server for remote ones.
    Signals as EngineProcess's: loading, loaded, load_failed, chunks, finished, failed."""

    loading = Signal(object)
    loaded = Signal(object)
    load_failed = Signal(object)
    chunks = Signal(int, object)
    finished = Signal(int, object)
    failed = Signal(int, object)
    _run = Signal(object)

    def __init__(
        self, engine: EngineProcess, remote: RemoteModels, parent: QObject | None = None
    ) -> None:
        super().__init__(parent)
        self.engine = engine
        self.remote = remote
        self._ids = RequestIds()
        self._endpoint: RemoteEndpoint | None = None
        #: A remote model asked for before the endpoint list was read.
        self._pending: Path | None = None
        self._jobs: dict[int, _Job] = {}
        self._live: dict[int, _Live] = {}
        self._thread: WorkerThread | None = None
        engine.loading.connect(self._local(self.loading.emit))
        engine.loaded.connect(self._local(self.loaded.emit))
        engine.load_failed.connect(self._local(self.load_failed.emit))
        engine.chunks.connect(self.chunks)
        engine.finished.connect(self.finished)
        engine.failed.connect(self.failed)
        remote.changed.connect(self._on_endpoints_changed)

    def _local(self, emit: Callable[[Any], None]) -> Callable[[Any], None]:
        """Forward an engine load event only while the chat's model is a local one."""

        def forward(value: Any) -> None:
            if self._endpoint is None and self._pending is None:
                emit(value)

        return forward

    # ------------------------------------------------------------------ EngineProcess's API

    @property
    def plain_ready(self) -> bool:
        return self.engine.plain_ready

    @property
    def endpoint(self) -> RemoteEndpoint | None:
        """The remote endpoint the chat uses now (None for a local model)."""
        return self._endpoint

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None:
        if not is_remote(model_dir):
            self._endpoint = self._pending = None
            self.engine.load(model_dir, options)
            return
        self._endpoint, self._pending = None, model_dir
        self.loading.emit(model_dir)
        if self.remote.loaded:
            QTimer.singleShot(0, self._resolve)

    def unload(self) -> None:
        """Free the local model's memory (a remote model holds none here)."""
        if self._endpoint is None:
            self.engine.unload()

    def generate(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        endpoint = self._endpoint
        if endpoint is None:
            return self.engine.generate(messages, settings)
        request_id = -self._ids.next()
        job = _Job(request_id, endpoint, messages, settings)
        self._jobs[request_id] = job
        self._live[request_id] = _Live(endpoint)
        self._ensure_thread()
        self._run.emit(job)
        return request_id

    def cancel(self, request_id: int | None = None) -> None:
        if request_id is None or request_id >= 0:
            self.engine.cancel(request_id)
        if request_id is None or request_id < 0:
            for ident, job in list(self._jobs.items()):
                if request_id is None or ident == request_id:
                    job.cancel()

    def live_text(self, request_id: int) -> str | None:
        """The live figures of a remote answer (None for a local one)."""
        live = self._live.get(request_id)
        if live is None:
            return None
        parts = [f"from {live.endpoint.name}"]
        if live.first_s is not None:
            parts.append(f"TTFT {live.first_s * 1000:.0f} ms")
            parts.append(f"{live.chars} characters")
        return "  ·  ".join(parts)

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

    def _on_chunks(self, request_id: int, chunks: list[StepChunk]) -> None:
        job = self._jobs.get(request_id)
        if job is None or job.cancelled:
            return  # stopped: text that was on its way is not shown
        try:
            live = self._live.get(request_id)
            if live is not None:
                if live.first_s is None and chunks:
                    live.first_s = chunks[0].elapsed_s
                live.events += len(chunks)
                live.chars += sum(len(c.answer) + len(c.reasoning) for c in chunks)
                live.last_s = chunks[-1].elapsed_s if chunks else live.last_s
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
            self._endpoint = None
            self.load_failed.emit(
                EngineError(
                    "This chat's remote server is no longer in the list.",
                    "Choose another model in the picker, or add the server again.",
                    code="REMOTE_GONE",
                )
            )
            return
        self._endpoint = endpoint
        self.loaded.emit(
            LoadedModel(
                model_dir=ref,
                device="remote",
                mode="baseline",
                model_type="remote",
                load_s=0.0,
            )
        )
