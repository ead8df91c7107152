"""The engine's vocabulary: what callers send (messages, generation and load settings) and
what they get back (the loaded model, step chunks, a running answer's interface, errors). No
OpenVINO."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from qwen_mtp_desktop.core.decoding.graphs import DEFAULT_DRAFT_VOCAB
from qwen_mtp_desktop.core.decoding.logprobs import MAX_TOP_LOGPROBS, TokenLogprob
from qwen_mtp_desktop.core.decoding.method import (
    DEFAULT_LOOKUP,
    DEFAULT_MTP,
    DecodingMethod,
    MethodError,
)
from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.prompt.context_limit import OVERFLOW_POLICIES, OverflowPolicy
from qwen_mtp_desktop.core.prompt.guards import text_problem


class EngineError(UserFacingError):
    """A model could not be loaded or a generation failed; `code` says which case."""


Role = Literal["system", "user", "assistant"]
#: A message's role in a turn sent to the engine: the chat's roles, and "tool" (a tool's result,
#: from API clients).
MessageRole = Literal["system", "user", "assistant", "tool"]
#: Asked after every MTP step with (step sizes, step times, prompt tokens, whether switching
#: needs a re-prefill); True = go plain. The fast decoder switches for free (False).
WithinTurnTest = Callable[[Sequence[int], Sequence[float], int, bool], bool]


@dataclass(frozen=True)
class ToolCallRecord:
    """A tool call an earlier assistant message made: `arguments` is a JSON object's text
    (OpenAI's `function.arguments`), `id` what the tool message answering it names."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    role: MessageRole
    content: str
    image: Path | None = None
    #: An assistant message's tool calls (rendered by the model's chat template).
    tool_calls: tuple[ToolCallRecord, ...] = ()
    #: A tool message: the id of the call it answers.
    tool_call_id: str | None = None
    #: More images after `image`, for a message that holds several (API clients); each is read
    #: in order, all before the message's text.
    more_images: tuple[Path, ...] = ()

    @property
    def images(self) -> tuple[Path, ...]:
        return ((self.image,) if self.image is not None else ()) + self.more_images


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 512
    #: How to decode (core.decoding.method): plain, MTP at a depth or prompt lookup, each
    #: greedy or sampled. On a model loaded without its MTP head an MTP method decodes plain.
    method: DecodingMethod = DEFAULT_MTP
    stop_strings: tuple[str, ...] = ()
    thinking: bool = False
    #: With thinking on, the most reasoning tokens before the engine closes the thinking block
    #: itself (`</think>`) and the model answers (core.engine.generation, "thinking budget");
    #: None: the model thinks as long as it likes. The answer keeps room either way
    #: (`thinking_limit`).
    thinking_budget: int | None = None
    #: Auto's within-turn test (see the module docstring); ignored for turns with images.
    within_turn: WithinTurnTest | None = None
    #: Decode exactly max_new_tokens, past end-of-text (benchmarks: equal-length runs).
    ignore_eos: bool = False
    #: Prompt lookup's settings for the replay every greedy text turn records, whatever decoded
    #: it (the chat's own, so Auto judges lookup as the chat would run it).
    replay_lookup: DecodingMethod = DEFAULT_LOOKUP
    #: The tools the model may call, as OpenAI's `tools` list in JSON text, rendered by the
    #: model's chat template ("" = none). Text, so settings stay hashable and cheap to send.
    tools_json: str = ""
    #: A function of `tools_json` the answer must call, for a server that forces calls itself
    #: (a remote one: OpenAI's named `tool_choice`); "" = the model decides. The local engine
    #: forces a call with the grammar in `method.constraint` instead.
    tool_choice: str = ""
    #: Report each answer token's log-probability with this many alternatives (0 to 20;
    #: core.decoding.logprobs); None reports none. Only the app's decoder reports them.
    logprobs: int | None = None
    #: The text exactly as decoded (the API's /v1/completions): no reasoning split, no blank
    #: lines trimmed from the answer's start.
    raw_text: bool = False
    #: Continue the conversation's last message, an assistant's answer begun by the caller
    #: (the API's assistant prefill, `continue_final_message`), instead of starting a new one:
    #: the model writes what follows its text, with thinking off.
    continue_final: bool = False
    #: When the conversation does not fit the model's context: refuse ("stop"), or leave out
    #: whole earlier turns (core.prompt.context_limit.overflow_views); the answer's stats say
    #: how many messages were left out.
    context_overflow: OverflowPolicy = "stop"

    def check(self) -> None:
        """EngineError for settings no turn can run with."""
        if self.max_new_tokens < 1:
            raise EngineError("max new tokens must be at least 1.", code="BAD_SETTINGS")
        if self.thinking_budget is not None and self.thinking_budget < 0:
            raise EngineError(
                f"A thinking budget is 0 tokens or more, not {self.thinking_budget}.",
                code="BAD_SETTINGS",
            )
        if self.context_overflow not in OVERFLOW_POLICIES:
            raise EngineError(
                f"Unknown context overflow policy {self.context_overflow!r}: one of "
                f"{', '.join(OVERFLOW_POLICIES)}.",
                code="BAD_SETTINGS",
            )
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise EngineError(
                f"Log-probabilities come with 0 to {MAX_TOP_LOGPROBS} alternatives per token, "
                f"not {self.logprobs}.",
                code="BAD_SETTINGS",
            )
        try:
            self.method.check()
            self.replay_lookup.check()
        except MethodError as exc:
            raise EngineError(str(exc), code="BAD_SETTINGS") from exc
        if self.replay_lookup.kind != "lookup":
            raise EngineError(
                f"The lookup replay needs prompt lookup's settings, not {self.replay_lookup}.",
                code="BAD_SETTINGS",
            )
        for stop in self.stop_strings:
            problem = text_problem(stop)
            if problem is not None:
                raise EngineError(
                    f"A stop string is not valid text: {problem}.", code="BAD_SETTINGS"
                )


@dataclass(frozen=True)
class LoadOptions:
    device: str = "CPU"
    #: Use the MTP head when the model has one; False loads plain decoding.
    mtp: bool = True
    #: OpenVINO's compiled-model cache folder (faster second load); None disables it.
    cache_dir: Path | None = None
    #: f32 inference without dynamic quantization, for output-equality checks.
    exact_numerics: bool = False
    #: Decode text turns with the app's own decoder (core.decoding.decoder) when the model allows.
    app_decoder: bool = True
    #: Rows of the fast decoder's draft vocabulary (core.decoding.graphs.DEFAULT_DRAFT_VOCAB).
    draft_vocab: int = DEFAULT_DRAFT_VOCAB
    #: What decodes plain text turns when the app's decoder is loaded: the app's decoder
    #: ("app": one decoder for every text turn, so a conversation's kept state carries
    #: across Auto's switches between plain and MTP, with no second model in memory) or
    #: openvino-genai's stateful SDPA pipeline ("genai", opened on the first plain turn; the
    #: benchmark's "fastest plain path" comparison uses it).
    plain_decoder: DecoderName = "app"
    #: Bytes of conversation states the app's decoder keeps between turns
    #: (core.decoding.state_cache); None: the default for this computer's memory
    #: (core.system.state_budget.automatic_bytes); 0 keeps nothing.
    state_cache_bytes: int | None = None


DecoderName = Literal["app", "genai"]


@dataclass(frozen=True)
class LoadedModel:
    model_dir: Path
    device: str
    #: Whether the MTP head is loaded (False: MTP methods decode plain).
    mtp: bool
    model_type: str
    load_s: float
    warnings: tuple[str, ...] = ()
    #: What decodes text turns: the app's own decoder or openvino-genai's pipeline.
    decoder: DecoderName = "genai"
    #: Why the fast decoder is not used (empty when it is, or when it was not asked for).
    decoder_note: str = ""


@dataclass(frozen=True)
class StepChunk:
    """One decoding step: its token ids and the text they added to each section."""

    token_ids: tuple[int, ...]
    reasoning: str
    answer: str
    #: Seconds since generate() was called.
    elapsed_s: float
    #: How many leading characters of `answer` came from accepted MTP drafts (the rest is the
    #: target's own token), so the UI can show where MTP helped.
    drafted_answer_chars: int = 0
    #: The log-probability of each of `token_ids` that is part of the text (an end-of-turn
    #: token is not), when the turn asked for them (GenerationSettings.logprobs).
    logprobs: tuple[TokenLogprob, ...] = ()

    @property
    def accepted_drafts(self) -> int:
        return max(len(self.token_ids) - 1, 0)


class AnswerStream(Iterator[StepChunk]):
    """A running answer, wherever it runs (core.engine.generation in this process,
    core.hosting.client in an engine process): iterate it for step chunks; `stats` is set
    once it is exhausted; the text and ids so far accumulate as the chunks are taken.

    `cancel()` is thread-safe and stops the answer at its next step; the chunks produced so far
    stay, and the stats say finish_reason="cancelled"."""

    def __init__(self) -> None:
        self.stats: GenerationStats | None = None
        self.reasoning = ""
        self.answer = ""
        self.token_ids: list[int] = []
        #: Every chunk's log-probabilities so far (when the turn asked for them).
        self.logprobs: list[TokenLogprob] = []
        self._finished = False

    @abstractmethod
    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        """The next step chunk; None if `timeout` seconds passed without one; StopIteration
        at the end; EngineError if the answer failed."""

    @abstractmethod
    def cancel(self) -> None: ...

    @property
    @abstractmethod
    def cancelled(self) -> bool: ...

    def __iter__(self) -> AnswerStream:
        return self

    def __next__(self) -> StepChunk:
        chunk = self.next_chunk()
        assert chunk is not None
        return chunk

    def next_chunks(
        self, timeout: float | None = None, *, within_s: float | None = None
    ) -> list[StepChunk]:
        """The chunks that are ready, waiting up to `timeout` seconds for the first (an empty
        list when none came) and taking more for at most `within_s` seconds (a consumer that
        fell behind still sends text regularly); StopIteration at the end. One wake-up per
        batch instead of per step keeps a consumer from competing with the decoding loop for
        the interpreter."""
        first = self.next_chunk(timeout)
        if first is None:
            return []
        chunks = [first]
        deadline = None if within_s is None else time.monotonic() + within_s
        while deadline is None or time.monotonic() < deadline:
            try:
                chunk = self.next_chunk(0)
            except StopIteration:
                break
            if chunk is None:
                break
            chunks.append(chunk)
        return chunks

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
        while not self._finished:
            try:
                next(self)
            except (StopIteration, EngineError):
                break

    def _take(self, chunk: StepChunk) -> StepChunk:
        self.reasoning += chunk.reasoning
        self.answer += chunk.answer
        self.token_ids.extend(chunk.token_ids)
        self.logprobs.extend(chunk.logprobs)
        return chunk


class EngineInterface(Protocol):
    """What every front end may call on an engine, wherever it runs: `core.engine.Engine` in
    this process, or `core.hosting.client.HostedEngine` with the engine in a host process. Both
    satisfy it (checked by mypy in core.hosting.service); code that takes either names this."""

    @property
    def loaded(self) -> LoadedModel | None: ...

    @property
    def plain_ready(self) -> bool: ...

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> LoadedModel: ...

    def unload(self) -> None: ...

    def require_loaded(self) -> LoadedModel: ...

    def generate(
        self, messages: Sequence[Message], settings: GenerationSettings | None = None
    ) -> AnswerStream: ...

    def generate_raw(
        self, prompt: str, settings: GenerationSettings | None = None
    ) -> AnswerStream: ...

    def state_cache_report(self) -> CacheReport | None: ...
