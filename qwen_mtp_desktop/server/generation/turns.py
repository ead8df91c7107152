"""One API request's turn on the engine, run on a thread of its own.

The event loop never blocks on the engine: a request becomes a `TurnJob` whose thread waits for
the engine in `EngineService`'s fair queue, runs the generation and hands events back to the
loop (`Started`, `Chunks`, `Finished`, `Failed`, `Gone`) through a callback that is safe to call
from any thread. `TurnJob.cancel()` (the client went away, the server stops) takes effect at
once: a waiting job leaves the queue, a running generation stops at its next step.

Also here, as a plain function: the speculative-decoding statistics a response carries
(`mtp_stats`); what the engine is asked is server.generation.planning.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.chat.turns import AutoDecoding, Turn
from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import (
    AnswerStream,
    EngineError,
    GenerationSettings,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.hosting.service import (
    EngineService,
    WaitCancelledError,
    coalesced,
)
from qwen_mtp_desktop.server.http.errors import ApiError, from_engine_error

log = logging.getLogger(__name__)

#: Longest a streaming turn keeps gathering ready steps before sending them (seconds).
READY_BATCH_S = 0.05
#: The server's draft setting (`serve --num-assistant-tokens`): a fixed MTP depth, or the
#: chat's Auto policy.
Depth = int | Literal["auto"]


@dataclass(frozen=True)
class TurnDefaults:
    """What a request that does not say otherwise gets."""

    max_tokens: int = 512
    depth: Depth = 1
    thinking: bool = False
    #: Sampling fields a request leaves out come from the model's generation_config.json
    #: (core.chat.generation_defaults), as vLLM's `--generation-config auto`; False: the
    #: server's own (greedy; top-p 0.9, top-k 20 for a request that samples).
    model_sampling: bool = True


# --- what a response reports -------------------------------------------------------------------

#: OpenAI's finish reasons for the engine's (a cancelled turn has no client left to tell).
FINISH_REASONS = {"eos": "stop", "stop_string": "stop", "length": "length", "cancelled": "stop"}


def usage(stats: GenerationStats) -> dict[str, Any]:
    """OpenAI's `usage`; `cached_tokens` counts the prompt tokens whose state the engine kept
    from an earlier request (core.decoding.state_cache): only the rest were prefilled."""
    return {
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.generated_tokens,
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
        "prompt_tokens_details": {"cached_tokens": stats.reused_tokens},
        "completion_tokens_details": {"reasoning_tokens": stats.reasoning_tokens},
    }


def mtp_stats(
    stats: GenerationStats, record: dict[str, Any], *, queue_wait_s: float
) -> dict[str, Any]:
    """The `mtp` extension object of a response (docs/api-server.md, "Speculative-decoding
    statistics"): its "mode" is the method's kind ("plain", "mtp" or "lookup": Auto may choose
    prompt lookup), "method" the whole method (`DecodingMethod.to_record`)."""
    method = stats.method
    switched = stats.switched_to_plain_at
    result: dict[str, Any] = {
        "mode": method.kind,
        "draft_tokens_per_step": method.drafts,
        "method": method.to_record(),
        "decoding": record.get("decoding", "fixed"),
        "decoder": stats.decoder,
        "drafted_tokens": stats.drafted_tokens,
        "accepted_tokens": stats.accepted_tokens,
        "acceptance_rate": round(stats.acceptance_rate, 4),
        "mean_accepted_per_step": round(stats.mean_accepted_per_step, 4),
        "acceptance_by_position": [round(p, 4) for p in stats.acceptance_by_position],
        "steps": stats.steps,
        "ttft_s": round(stats.ttft_s, 6),
        "decode_tokens_per_s": round(stats.decode_tokens_per_s, 2),
        "total_s": round(stats.total_s, 6),
        "queue_wait_s": round(queue_wait_s, 6),
        "switched_to_plain_after_tokens": sum(stats.chunk_sizes[:switched])
        if switched is not None
        else None,
    }
    if "auto" in record:
        auto = record["auto"]
        result["auto"] = {"choice": auto["choice"], "reason": auto["reason"]}
    return result


# --- the job -----------------------------------------------------------------------------------


async def stream_events(events: asyncio.Queue[Event]) -> AsyncIterator[Chunks | Finished | Failed]:
    """A started job's events as a stream sends them: each Chunks with every Chunks already
    queued behind it (a client that fell behind gets them in one event), then the last."""
    pending: Event | None = None
    while True:
        event = pending or await events.get()
        pending = None
        if isinstance(event, Chunks):
            steps = list(event.chunks)
            while not events.empty():
                queued = events.get_nowait()
                if not isinstance(queued, Chunks):
                    pending = queued
                    break
                steps += queued.chunks
            yield Chunks(steps)
        elif isinstance(event, Finished | Failed):
            yield event
            return


@dataclass(frozen=True)
class Started:
    queue_wait_s: float


@dataclass(frozen=True)
class Chunks:
    chunks: list[StepChunk]


@dataclass(frozen=True)
class Finished:
    stats: GenerationStats
    answer: str
    reasoning: str
    record: dict[str, Any]
    #: Each answer token's log-probability, when the request asked for them.
    logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass(frozen=True)
class Failed:
    error: ApiError


@dataclass(frozen=True)
class Gone:
    """The job was cancelled while it waited for the engine."""


Event = Started | Chunks | Finished | Failed | Gone


@dataclass
class AutoState:
    """The server's Auto policy: one conversation's worth of learning per model and device,
    shared by every client (requests are served one at a time, so turns are ordered)."""

    decoding: AutoDecoding = field(default_factory=AutoDecoding)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def plan(
        self,
        service: EngineService,
        settings: GenerationSettings,
        messages: Sequence[Message] = (),
    ) -> Turn:
        engine = service.engine
        loaded = engine.require_loaded()
        with self.lock:
            if not self.decoding.known(loaded.model_dir, loaded.device):
                found = AutoDecoding.lookup(loaded.model_dir, loaded.device)
                self.decoding.remember(loaded.model_dir, loaded.device, found)
            return self.decoding.plan_turn(
                (0, loaded.model_dir, loaded.device),
                settings,
                plain_ready=engine.plain_ready,
                load_s=loaded.load_s,
                history=messages,
            )

    def finish(self, turn: Turn, stats: GenerationStats, model_dir: Path | None) -> dict[str, Any]:
        with self.lock:
            return turn.finish(stats, model_dir)


def _ready_batches(generation: AnswerStream) -> Iterator[list[StepChunk]]:
    """The generation's chunks as they come, each batch holding every step that was ready
    when this thread woke: no added latency, and no more wake-ups than the consumer can take."""
    while True:
        try:
            batch = generation.next_chunks(None, within_s=READY_BATCH_S)
        except StopIteration:
            return
        if batch:
            yield batch


class TurnJob:
    """One request's turn; `start()` runs it on a daemon thread, events go to `emit`.
    `stream`: emit Chunks, batched by `stream_interval_s` (core.hosting.service.coalesced) or,
    at 0, as they come (`_ready_batches`)."""

    def __init__(
        self,
        service: EngineService,
        messages: Sequence[Message],
        settings: GenerationSettings,
        emit: Callable[[Event], None],
        *,
        auto: AutoState | None = None,
        stream: bool = False,
        stream_interval_s: float = 0.0,
        image_dir: Path | None = None,
        raw_prompt: str | None = None,
    ) -> None:
        """`raw_prompt`: answer this text as it is (/v1/completions: no chat template)."""
        self._service = service
        self._raw_prompt = raw_prompt
        self._messages = list(messages)
        self._settings = settings
        self._emit = emit
        self._auto = auto
        self._stream = stream
        self._interval = stream_interval_s
        self._image_dir = image_dir
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._generation: Any = None
        self._thread = threading.Thread(target=self._run, name="api-turn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Thread-safe; stops the job at once (waiting) or at its next step (running)."""
        with self._lock:
            self._cancel.set()
            if self._generation is not None:
                self._generation.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            final = self._turn()
        finally:
            self._remove_images()  # before the client hears the end: nothing is left behind
        self._emit(final)

    def _turn(self) -> Event:
        """Emits Started and Chunks; returns the last event (Finished, Failed or Gone)."""
        arrived = time.monotonic()
        try:
            turn = Turn(self._settings)
            if self._auto is not None:
                turn = self._auto.plan(self._service, self._settings, self._messages)
            with self._service.turn(
                self._messages,
                turn.settings,
                cancelled=self._cancel.is_set,
                raw_prompt=self._raw_prompt,
            ) as generation:
                with self._lock:
                    self._generation = generation
                    if self._cancel.is_set():
                        generation.cancel()
                self._emit(Started(time.monotonic() - arrived))
                if not self._stream:
                    generation.run_to_end()
                elif self._interval > 0:
                    for batch in coalesced(generation, self._interval):
                        self._emit(Chunks(batch))
                else:
                    for batch in _ready_batches(generation):
                        self._emit(Chunks(batch))
                stats = generation.stats
                assert stats is not None
                loaded = self._service.engine.loaded
                model_dir = loaded.model_dir if loaded is not None else None
                record = (
                    self._auto.finish(turn, stats, model_dir)
                    if self._auto is not None
                    else turn.finish(stats, model_dir)
                )
                return Finished(
                    stats, generation.answer, generation.reasoning, record, generation.logprobs
                )
        except WaitCancelledError:
            return Gone()
        except ApiError as exc:
            return Failed(exc)
        except EngineError as exc:
            return Failed(from_engine_error(exc))
        except Exception as exc:  # a bug: the client gets a message, the log the traceback
            log.exception("API request failed")
            return Failed(
                ApiError(
                    500,
                    f"Internal error ({type(exc).__name__}); details are in the app's log.",
                    type="server_error",
                    code="internal_error",
                )
            )

    def _remove_images(self) -> None:
        """Only when the job has ended: under `serve` the engine runs in its own process and
        reads the files when its turn starts there, after `service.turn()` has returned."""
        if self._image_dir is not None:
            shutil.rmtree(self._image_dir, ignore_errors=True)
            self._image_dir = None


def image_folder() -> Path:
    """A private folder for one request's images (removed when its job ends)."""
    return Path(tempfile.mkdtemp(prefix="qwen-mtp-api-"))
