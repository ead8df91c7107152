"""The private protocol between the app's window and its engine host process.

Frames are a 4-byte big-endian length and a pickle of one message below, sent over the host's
stdin (requests) and a private copy of its stdout (events). Pickle is safe here: both ends are
this app, started by this app, over anonymous pipes no other process holds; it carries the
engine's own dataclasses (settings, chunks, stats, errors) without a second schema, and
measures cheaper per chunk than JSON (benchmarks/engine_process.py).

The same program runs the Benchmark panel's validations and benchmarks (`Measure`): the window
starts a host of its own for each run (workers.bench_job), so OpenVINO and the run's two extra
copies of the model never live in the window's process, and a crash or a kill during a run
ends that host alone. `ListDevices` asks a host for OpenVINO's devices, for the same reason.

Why not the OpenAI-compatible HTTP API the host can also serve: the window needs what that API
has no words for (load and unload with options, drafted-text spans per step, Auto's mid-turn
test, cancel by request id), and a pipe needs no port, no key and no event loop.
"""

from __future__ import annotations

import pickle
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.errors import UserFacingError

_HEADER = struct.Struct(">I")
#: A frame larger than this is a protocol error, not a message (a long chat is ~1 MB).
MAX_FRAME_BYTES = 256 * 1024 * 1024


class ProtocolError(Exception):
    """The other end sent something that is not a frame of this protocol."""


# --- requests: window -> host ----------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    model_dir: Path
    options: LoadOptions


@dataclass(frozen=True)
class Unload:
    pass


@dataclass(frozen=True)
class Generate:
    request_id: int
    #: The conversation, tool calls and tool results included (Message.tool_calls,
    #: Message.tool_call_id); the tools on offer travel in `settings.tools_json`.
    messages: tuple[Message, ...]
    settings: GenerationSettings
    coalesce_s: float
    #: A prompt already rendered (the API's /v1/completions: raw text, no chat template);
    #: when set, `messages` is empty.
    raw_prompt: str | None = None


@dataclass(frozen=True)
class Cancel:
    #: None: whatever is running.
    request_id: int | None


@dataclass(frozen=True)
class Shutdown:
    pass


@dataclass(frozen=True)
class ServeApi:
    """Run the local API server on the host's engine (None: stop it)."""

    host: str | None
    port: int = 0
    api_key: str | None = None


@dataclass(frozen=True)
class StateCacheQuery:
    """What the engine keeps of conversations between turns (answered by `StateCacheState`
    in its turn after the requests before it, so it never reads a cache a turn is using)."""


# --- events: host -> window ------------------------------------------------------------------


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Loading:
    model_dir: Path


@dataclass(frozen=True)
class Loaded:
    model: LoadedModel
    plain_ready: bool


@dataclass(frozen=True)
class LoadFailed:
    error: EngineError


@dataclass(frozen=True)
class Unloaded:
    pass


# One `Generate` request's answer: AnswerStarted, AnswerChunks..., then AnswerFinished or
# AnswerFailed (the API server's own job events, server.generation.turns, are another thing).


@dataclass(frozen=True)
class AnswerStarted:
    request_id: int


@dataclass(frozen=True)
class AnswerChunks:
    request_id: int
    chunks: list[StepChunk]
    #: time.time() when the host sent the batch (the window measures the hop).
    sent_at: float


@dataclass(frozen=True)
class AnswerFinished:
    request_id: int
    stats: GenerationStats
    plain_ready: bool


@dataclass(frozen=True)
class AnswerFailed:
    request_id: int
    error: EngineError


@dataclass(frozen=True)
class ApiState:
    """The local API server: its URL while it runs, else None; the error that stopped it."""

    url: str | None
    error: EngineError | None = None
    #: Where other computers reach it, when it listens on every address.
    network_urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiRequest:
    """One request the local API server answered: what the app's "Recent requests" list
    shows. No prompt, answer, key or client address (see server.http.request_log)."""

    #: time.time() when it arrived.
    at: float
    method: str
    path: str
    status: int
    #: The answer's completion tokens (chat completions), else None.
    tokens: int | None
    #: Seconds to the response's last byte.
    duration_s: float


@dataclass(frozen=True)
class StateCacheState:
    """The answer to `StateCacheQuery`: None when no model with the app's decoder is loaded
    (nothing can be kept)."""

    report: CacheReport | None


# --- the Benchmark panel's runs and the device list (issue 25): window -> host, then host ->
# window. A run goes to an engine host of its own (workers.bench_job), never the chat's.


@dataclass(frozen=True)
class Measure:
    """Validate a drafting method against plain decoding (kind "validate", core.measure.validate) or
    benchmark every decoding path (kind "bench", core.measure.bench) on `model_dir`. The host loads
    its own plain and MTP engines for it and answers with `MeasureProgress` events, then
    `Measured` (the report, not saved: the window saves it) or `MeasureFailed`. `Cancel`
    with its id stops it at the run's next step (the window ends a host that takes longer)."""

    request_id: int
    kind: Literal["validate", "bench"]
    model_dir: Path
    #: Built-in prompt set names or prompt files (validate takes the first).
    prompt_sets: tuple[str | Path, ...]
    device: str = "CPU"
    max_new_tokens: int | None = None
    #: validate: the drafting method checked (MTP at a depth, prompt lookup).
    method: DecodingMethod | None = None
    #: bench: the MTP depths, rounds and warm-ups; prompt lookup's method (None: left out).
    depths: tuple[int, ...] = (1, 2, 3, 4)
    runs: int = 3
    warmup: int = 1
    lookup: DecodingMethod | None = None
    exact_numerics: bool = False
    cache_dir: Path | None = None


@dataclass(frozen=True)
class ListDevices:
    """Which OpenVINO devices are present (answered with `Devices`)."""


@dataclass(frozen=True)
class MeasureProgress:
    """A step of a `Measure` began or ended: `done` of `total` units, what runs now."""

    request_id: int
    done: int
    total: int
    message: str


@dataclass(frozen=True)
class Measured:
    """A `Measure` ended with its report (a core.measure.records.Report; this layer cannot name
    it, so the window reads it with core.measure.reports.checked_report)."""

    request_id: int
    report: Mapping[str, object]


@dataclass(frozen=True)
class MeasureFailed:
    """A `Measure` could not run or was cancelled (code CANCELLED). The error is always a plain
    UserFacingError (its subclasses do not all survive pickling), with the code kept."""

    request_id: int
    error: UserFacingError


@dataclass(frozen=True)
class Devices:
    """OpenVINO's devices ("CPU", "GPU.0", ...); `error` when the runtime could not be asked."""

    names: tuple[str, ...]
    error: str | None = None


MeasureRequest = Measure | ListDevices
MeasureEvent = MeasureProgress | Measured | MeasureFailed | Devices


Request = Load | Unload | Generate | Cancel | Shutdown | ServeApi | StateCacheQuery | MeasureRequest
Event = (
    Ready
    | Loading
    | Loaded
    | LoadFailed
    | Unloaded
    | AnswerStarted
    | AnswerChunks
    | AnswerFinished
    | AnswerFailed
    | ApiState
    | ApiRequest
    | StateCacheState
    | MeasureEvent
)


class FrameWriter:
    """Writes frames to a binary stream; thread-safe (several host threads send events)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: object) -> None:
        """Raises OSError (e.g. BrokenPipeError) when the other end is gone."""
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._stream.closed:
                raise BrokenPipeError("the protocol stream is closed")
            self._stream.write(_HEADER.pack(len(payload)) + payload)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            self._stream.close()


def read_frame(stream: IO[bytes]) -> object | None:
    """The next message, or None at a clean end of stream (the other end closed or died).
    ProtocolError for a truncated or malformed frame."""
    header = _read_exactly(stream, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {size} bytes is over the limit")
    payload = _read_exactly(stream, size)
    if payload is None:
        raise ProtocolError("the stream ended inside a frame")
    try:
        message: object = pickle.loads(payload)
    except Exception as exc:  # pickle raises many kinds for damaged data
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}") from exc
    return message


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    parts: list[bytes] = []
    remaining = size
    while remaining:
        part = stream.read(remaining)
        if not part:
            if remaining == size:
                return None
            raise ProtocolError("the stream ended inside a frame")
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)
