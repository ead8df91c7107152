"""`HostedEngine`: the `Engine` interface, with the engine itself in an engine host process.

For front ends without Qt that must outlive a crash of the runtime (`serve`): the HTTP server
stays up while the engine process dies, the answer that was streaming fails with ENGINE_STOPPED
(the server sends its client an error event), and a new engine process starts and reloads the
model by itself; requests that come meanwhile wait behind the reload in the host's queue.

It offers what `EngineService` and the server use of `Engine`: `load()`, `unload()`,
`loaded`, `plain_ready`, `require_loaded()` and `generate()`, whose `HostedAnswer` iterates
like a `Generation` (`next_chunk`, `next_chunks`, `cancel`, `run_to_end`, `stats`, `answer`).
Like `Engine`, one thread at a time calls load/unload/generate (EngineService sees to it).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.engine import (
    AnswerStream,
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    AnswerFailed,
    AnswerFinished,
    Generate,
    Loaded,
    LoadFailed,
    StateCacheQuery,
    StateCacheState,
    Unloaded,
)
from qwen_mtp_desktop.core.hosting.supervisor import Death, EngineSupervisor

log = logging.getLogger(__name__)

#: How long a load may take before the caller is told (a big model on a slow disk: minutes).
LOAD_TIMEOUT_S = 900.0


class HostedAnswer(AnswerStream):
    """A running answer in the engine process."""

    def __init__(self, client: HostedEngine, request_id: int) -> None:
        super().__init__()
        self._client = client
        self.request_id = request_id
        self._inbox: queue.SimpleQueue[
            list[StepChunk] | AnswerFinished | AnswerFailed | EngineError
        ] = queue.SimpleQueue()
        self._pending: deque[StepChunk] = deque()
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True
        self._client._cancel(self.request_id)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

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
            elif isinstance(item, AnswerFinished):
                self._finished = True
                self.stats = item.stats
            else:
                self._finished = True
                raise item.error if isinstance(item, AnswerFailed) else item
        return self._take(self._pending.popleft())


class HostedEngine:
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
        self._generations: dict[int, HostedAnswer] = {}
        #: The caller of load()/unload() waiting for its outcome, if any.
        self._waiter: queue.SimpleQueue[object] | None = None
        #: Callers of state_cache_report() waiting for the answer, oldest first.
        self._report_waiters: deque[queue.SimpleQueue[CacheReport | None]] = deque()
        self._supervisor = EngineSupervisor(self._on_event, command)
        self._supervisor.start()

    @property
    def pid(self) -> int | None:
        """The engine process's id (None while none runs)."""
        return self._supervisor.pid

    @property
    def loaded(self) -> LoadedModel | None:
        """The loaded model; while it is reloaded after a crash too, so that requests queue
        behind the reload in the new process instead of being turned away."""
        return self._supervisor.loaded or self._supervisor.reloading

    @property
    def plain_ready(self) -> bool:
        return self._supervisor.plain_ready

    @property
    def restarts(self) -> int:
        return self._supervisor.restarts

    # ------------------------------------------------------------------ Engine's interface

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> LoadedModel:
        outcome = self._call(lambda: self._supervisor.load(model_dir, options or LoadOptions()))
        if isinstance(outcome, Loaded):
            return outcome.model
        if isinstance(outcome, LoadFailed):
            raise outcome.error
        assert isinstance(outcome, EngineError)
        raise outcome

    def unload(self) -> None:
        if self._supervisor.pid is not None:
            self._call(self._supervisor.unload)
        else:
            self._supervisor.want = None

    def require_loaded(self) -> LoadedModel:
        loaded = self.loaded
        if loaded is None:
            raise EngineError("No model is loaded.", "Load a model first.", code="NOT_LOADED")
        return loaded

    def generate(
        self, messages: Sequence[Message], settings: GenerationSettings | None = None
    ) -> HostedAnswer:
        return self._generate(messages, settings or GenerationSettings(), None)

    def generate_raw(self, prompt: str, settings: GenerationSettings | None = None) -> HostedAnswer:
        """An answer to an already rendered prompt (no chat template), as Engine's."""
        return self._generate((), settings or GenerationSettings(), prompt)

    def _generate(
        self, messages: Sequence[Message], settings: GenerationSettings, raw_prompt: str | None
    ) -> HostedAnswer:
        generation = HostedAnswer(self, next(self._ids))
        with self._lock:
            if self._supervisor.pid is None:
                raise self._supervisor.not_running_error()
            self._generations[generation.request_id] = generation
            self._supervisor.submit(
                Generate(
                    generation.request_id,
                    tuple(messages),
                    settings,
                    self._coalesce_s,
                    raw_prompt,
                )
            )
        return generation

    def state_cache_report(self, timeout_s: float = LOAD_TIMEOUT_S) -> CacheReport | None:
        """What the engine process keeps of conversations (`Engine.state_cache_report`); None
        when no model with the app's decoder is loaded, or the engine is not running."""
        waiter: queue.SimpleQueue[CacheReport | None] = queue.SimpleQueue()
        with self._lock:
            if self._supervisor.pid is None:
                return None
            self._report_waiters.append(waiter)
            self._supervisor.send(StateCacheQuery())
        try:
            return waiter.get(timeout=timeout_s)
        except queue.Empty:
            with self._lock, contextlib.suppress(ValueError):
                self._report_waiters.remove(waiter)
            return None

    def close(self, timeout_s: float = 30.0) -> bool:
        """End the engine process (True if it ended in time); it is not restarted."""
        with self._lock:
            self._supervisor.closing = True
        return self._supervisor.stop(timeout_s)

    # ------------------------------------------------------------------ the child

    def _send(self, request: object) -> None:
        self._supervisor.send(request)

    def _cancel(self, request_id: int) -> None:
        with self._lock:  # a cancelled turn is never sent again after a crash
            self._supervisor.cancel(request_id)

    def _call(self, send: Callable[[], None]) -> object:
        """Send a load or unload and wait for its outcome (or the engine's death)."""
        waiter: queue.SimpleQueue[object] = queue.SimpleQueue()
        with self._lock:
            self._waiter = waiter
            send()
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

    def _on_event(self, incarnation: int, received: object) -> None:
        """On the reader thread: route each event to whoever waits for it."""
        with self._lock:
            event = self._supervisor.handle(incarnation, received)
            if isinstance(event, Loaded | LoadFailed | Unloaded):
                self._answer(event)
            elif isinstance(event, AnswerChunks):
                generation = self._generations.get(event.request_id)
                if generation is not None:
                    generation._inbox.put(event.chunks)
            elif isinstance(event, AnswerFinished | AnswerFailed):
                generation = self._generations.pop(event.request_id, None)
                if generation is not None:
                    generation._inbox.put(event)
            elif isinstance(event, StateCacheState):
                if self._report_waiters:
                    self._report_waiters.popleft().put(event.report)
            elif isinstance(event, Death):
                self._on_death(event)

    def _on_death(self, death: Death) -> None:
        """Called with the lock held."""
        log.error("%s", death.text)
        if self._on_stopped is not None:
            self._on_stopped(death.text)
        while self._report_waiters:  # the new process keeps nothing yet
            self._report_waiters.popleft().put(None)
        for request_id in death.failed_requests:  # the retried ones wait for the new process
            generation = self._generations.pop(request_id, None)
            if generation is not None:
                generation._inbox.put(death.error)
        if self._waiter is not None:
            self._answer(
                EngineError(
                    f"The inference engine stopped ({death.how}) before the model was ready.",
                    death.error.fix.removeprefix("The partial answer is kept. "),
                    code=death.error.code,
                )
            )
