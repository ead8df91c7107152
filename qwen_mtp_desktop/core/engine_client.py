"""`RemoteEngine`: the `Engine` interface, with the engine itself in an engine host process.

For front ends without Qt that must outlive a crash of the runtime (`serve`): the HTTP server
stays up while the engine process dies, the answer that was streaming fails with ENGINE_STOPPED
(the server sends its client an error event), and a new engine process starts and reloads the
model by itself; requests that come meanwhile wait behind the reload in the host's queue.

It offers what `EngineService` and the server use of `Engine`: `load()`, `unload()`,
`loaded`, `plain_ready`, `require_loaded()` and `generate()`, whose `RemoteGeneration` iterates
like a `Generation` (`next_chunk`, `next_chunks`, `cancel`, `run_to_end`, `stats`, `answer`).
Like `Engine`, one thread at a time calls load/unload/generate (EngineService sees to it).
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from qwen_mtp_desktop.core.decoding import GenerationStats
from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
    take_ready,
)
from qwen_mtp_desktop.core.engine_protocol import (
    Cancel,
    Chunks,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Ready,
    Unload,
    Unloaded,
)
from qwen_mtp_desktop.core.host_process import STOPPED_CODE, Exited, HostProcess, RestartPolicy

log = logging.getLogger(__name__)

#: How long a load may take before the caller is told (a big model on a slow disk: minutes).
LOAD_TIMEOUT_S = 900.0


def _stopped(how: str, restarting: bool) -> EngineError:
    fix = (
        "The engine is being restarted and the model reloaded; try again in a moment."
        if restarting
        else "The engine was not restarted after repeated crashes; check the model and device."
    )
    return EngineError(f"The inference engine stopped ({how}).", fix, code=STOPPED_CODE)


class RemoteGeneration(Iterator[StepChunk]):
    """A running answer in the engine process; iterate it for step chunks, `stats` at the end."""

    def __init__(self, engine: RemoteEngine, request_id: int) -> None:
        self._engine = engine
        self.request_id = request_id
        self._inbox: queue.SimpleQueue[list[StepChunk] | Finished | Failed | EngineError] = (
            queue.SimpleQueue()
        )
        self._pending: deque[StepChunk] = deque()
        self._cancelled = False
        self._finished = False
        self.stats: GenerationStats | None = None
        self.reasoning = ""
        self.answer = ""
        self.token_ids: list[int] = []

    def cancel(self) -> None:
        self._cancelled = True
        self._engine._send(Cancel(self.request_id))

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def __iter__(self) -> RemoteGeneration:
        return self

    def __next__(self) -> StepChunk:
        chunk = self.next_chunk()
        assert chunk is not None
        return chunk

    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        """As `Generation.next_chunk`: a chunk, None after `timeout`, StopIteration at the end,
        EngineError if it failed (ENGINE_STOPPED when the engine process died)."""
        while not self._pending:
            if self._finished:
                raise StopIteration
            try:
                item = self._inbox.get(timeout=timeout)
            except queue.Empty:
                return None
            if isinstance(item, list):
                self._pending.extend(item)
            elif isinstance(item, Finished):
                self._finished = True
                self.stats = item.stats
            else:
                self._finished = True
                raise item.error if isinstance(item, Failed) else item
        chunk = self._pending.popleft()
        self.reasoning += chunk.reasoning
        self.answer += chunk.answer
        self.token_ids.extend(chunk.token_ids)
        return chunk

    def next_chunks(
        self, timeout: float | None = None, *, within_s: float | None = None
    ) -> list[StepChunk]:
        """As `Generation.next_chunks`."""
        return take_ready(self.next_chunk, timeout, within_s)

    def run_to_end(self) -> GenerationStats:
        for _chunk in self:
            pass
        assert self.stats is not None
        return self.stats

    def close(self) -> None:
        """Cancel and wait for the end (safe to call at any time)."""
        if self._finished:
            return
        self.cancel()
        while True:
            try:
                next(self)
            except (StopIteration, EngineError):
                return


class RemoteEngine:
    """An `Engine` whose work runs in an engine host process that is restarted when it dies.

    `on_stopped(text)` (called on a reader thread) says in plain words when the engine process
    died and whether it is being restarted.
    """

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        coalesce_s: float = 0.0,
        on_stopped: Callable[[str], None] | None = None,
    ) -> None:
        self._coalesce_s = coalesce_s
        self._on_stopped = on_stopped
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._generations: dict[int, RemoteGeneration] = {}
        #: The caller of load()/unload() waiting for its outcome, if any.
        self._waiter: queue.SimpleQueue[object] | None = None
        self._want: tuple[Path, LoadOptions] | None = None
        self._policy = RestartPolicy()
        self.loaded: LoadedModel | None = None
        self.plain_ready = False
        self.restarts = 0
        self._closing = False
        self._host = HostProcess(self._on_event, command)
        self._host.start()

    @property
    def pid(self) -> int | None:
        """The engine process's id (None while none runs)."""
        return self._host.pid

    # ------------------------------------------------------------------ Engine's interface

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> LoadedModel:
        options = options or LoadOptions()
        self._want = (model_dir, options)
        outcome = self._call(Load(model_dir, options))
        if isinstance(outcome, Loaded):
            return outcome.model
        if isinstance(outcome, LoadFailed):
            raise outcome.error
        assert isinstance(outcome, EngineError)
        raise outcome

    def unload(self) -> None:
        self._want = None
        if self._host.pid is not None:
            self._call(Unload())
        self.loaded, self.plain_ready = None, False

    def require_loaded(self) -> LoadedModel:
        if self.loaded is None:
            raise EngineError("No model is loaded.", "Load a model first.", code="NOT_LOADED")
        return self.loaded

    def generate(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> RemoteGeneration:
        generation = RemoteGeneration(self, next(self._ids))
        with self._lock:
            if self._host.pid is None:
                raise _stopped("it was not restarted", restarting=False)
            self._generations[generation.request_id] = generation
        self._send(Generate(generation.request_id, tuple(messages), settings, self._coalesce_s))
        return generation

    def close(self, timeout_s: float = 30.0) -> bool:
        """End the engine process (True if it ended in time); it is not restarted."""
        with self._lock:
            self._closing = True
        return self._host.stop(timeout_s)

    # ------------------------------------------------------------------ the child

    def _send(self, request: object) -> None:
        self._host.send(request)

    def _call(self, request: Load | Unload) -> object:
        """Send a load or unload and wait for its outcome (or the engine's death)."""
        waiter: queue.SimpleQueue[object] = queue.SimpleQueue()
        with self._lock:
            if self._host.pid is None:  # not restarted after repeated crashes: try again
                self._policy.useful()
                self._host.start()
            self._waiter = waiter
        self._send(request)
        try:
            return waiter.get(timeout=LOAD_TIMEOUT_S)
        except queue.Empty:
            return EngineError("The engine did not answer in time.", code="ENGINE_TIMEOUT")
        finally:
            with self._lock:
                self._waiter = None

    def _answer(self, outcome: object) -> None:
        if self._waiter is not None:
            self._waiter.put(outcome)

    def _on_event(self, incarnation: int, event: object) -> None:
        """On the reader thread: route each event to whoever waits for it."""
        with self._lock:
            if incarnation != self._host.incarnation or self._closing:
                return
            if isinstance(event, Ready):
                if self._want is None:
                    self._policy.useful()
            elif isinstance(event, Loaded):
                self.loaded, self.plain_ready = event.model, event.plain_ready
                self._policy.useful()
                self._answer(event)
            elif isinstance(event, LoadFailed):
                self.loaded, self.plain_ready, self._want = None, False, None
                self._answer(event)
            elif isinstance(event, Unloaded):
                self._answer(event)
            elif isinstance(event, Chunks):
                generation = self._generations.get(event.request_id)
                if generation is not None:
                    generation._inbox.put(event.chunks)
            elif isinstance(event, Finished | Failed):
                if isinstance(event, Finished):
                    self.plain_ready = event.plain_ready
                generation = self._generations.pop(event.request_id, None)
                if generation is not None:
                    generation._inbox.put(event)
            elif isinstance(event, Exited):
                self._on_exit(event)

    def _on_exit(self, exited: Exited) -> None:
        """Called with the lock held."""
        self._host.forget()
        self.plain_ready = False
        restart = self._policy.died()
        if not (restart and self._want is not None):
            # While the model reloads, `loaded` stays: requests queue behind the reload in the
            # new host, so the server need not turn them away.
            self.loaded = None
        text = f"The inference engine stopped ({exited.how}); " + (
            "restarting it and reloading the model." if restart else "it was not restarted."
        )
        log.error("%s", text)
        if self._on_stopped is not None:
            self._on_stopped(text)
        error = _stopped(exited.how, restart)
        for generation in self._generations.values():
            generation._inbox.put(error)
        self._generations.clear()
        self._answer(error)
        if restart:
            self.restarts += 1
            self._host.start()
            if self._want is not None:
                self._send(Load(*self._want))  # requests sent after this wait behind it
