"""The engine's vocabulary: what callers send (messages, generation and load settings) and
what they get back (the loaded model, step chunks, a running answer's interface, errors). No
OpenVINO."""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from qwen_mtp_desktop.core.decoding.graphs import DEFAULT_DRAFT_VOCAB
from qwen_mtp_desktop.core.decoding.prompt_lookup import (
    DEFAULT_LOOKUP_TOKENS,
    DEFAULT_MAX_NGRAM_SIZE,
    MAX_LOOKUP_TOKENS,
    MAX_NGRAM_SIZE,
)
from qwen_mtp_desktop.core.decoding.stats import GenerationStats, Mode
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.prompt_guards import text_problem


class EngineError(UserFacingError):
    """A model could not be loaded or a generation failed; `code` says which case."""


Role = Literal["system", "user", "assistant"]
#: Asked after every MTP step with (step sizes, step times, prompt tokens, whether switching
#: needs a re-prefill); True = go plain. The fast decoder switches for free (False).
WithinTurnTest = Callable[[Sequence[int], Sequence[float], int, bool], bool]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    image: Path | None = None


@dataclass(frozen=True)
class GenerationSettings:
    max_new_tokens: int = 512
    do_sample: bool = False
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 20
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop_strings: tuple[str, ...] = ()
    #: Draft tokens the MTP head proposes per step (ignored in baseline mode).
    num_assistant_tokens: int = 1
    thinking: bool = False
    #: Decode without MTP even though the MTP pipeline is loaded (Auto's plain turns); the
    #: engine loads a plain pipeline of the same model the first time.
    plain: bool = False
    #: Auto's within-turn test (see the module docstring); ignored for turns with images.
    within_turn: WithinTurnTest | None = None
    #: Decode exactly max_new_tokens, past end-of-text (benchmarks: equal-length runs).
    ignore_eos: bool = False
    #: Draft by prompt lookup (n-grams of prompt and answer, core.decoding.prompt_lookup) instead of
    #: the MTP head, on openvino-genai's prompt-lookup pipeline (opened on first use);
    #: num_assistant_tokens is then the drafts per step.
    prompt_lookup: bool = False
    #: Prompt lookup's longest n-gram searched.
    max_ngram_size: int = DEFAULT_MAX_NGRAM_SIZE
    #: Prompt lookup's drafts per step for the replay a turn of another method records (the
    #: chat's setting, so Auto judges lookup as the chat would run it).
    lookup_tokens: int = DEFAULT_LOOKUP_TOKENS

    def validate(self) -> None:
        if self.max_new_tokens < 1:
            raise EngineError("max new tokens must be at least 1.", code="BAD_SETTINGS")
        if self.num_assistant_tokens < 1 and not self.plain:
            raise EngineError(
                "num_assistant_tokens must be at least 1 in MTP mode.",
                "Turn MTP off for plain decoding instead.",
                code="BAD_SETTINGS",
            )
        for stop in self.stop_strings:
            problem = text_problem(stop)
            if problem is not None:
                raise EngineError(
                    f"A stop string is not valid text: {problem}.", code="BAD_SETTINGS"
                )
        if self.prompt_lookup:
            self._validate_lookup()
        if self.do_sample and self.temperature <= 0:
            raise EngineError("temperature must be above 0 when sampling.", code="BAD_SETTINGS")
        if not 0 < self.top_p <= 1:
            raise EngineError("top-p must be in (0, 1].", code="BAD_SETTINGS")
        if self.top_k < 0 or self.repetition_penalty <= 0:
            raise EngineError("top-k must be >= 0 and repetition penalty > 0.", code="BAD_SETTINGS")

    def _validate_lookup(self) -> None:
        if self.plain:
            raise EngineError(
                "Prompt lookup and plain decoding were both asked for.",
                "Choose one decoding method.",
                code="BAD_SETTINGS",
            )
        if not 1 <= self.num_assistant_tokens <= MAX_LOOKUP_TOKENS:
            raise EngineError(
                f"Prompt lookup needs 1 to {MAX_LOOKUP_TOKENS} draft tokens per step.",
                code="BAD_SETTINGS",
            )
        if not 1 <= self.max_ngram_size <= MAX_NGRAM_SIZE:
            raise EngineError(
                f"The n-gram size for prompt lookup must be 1 to {MAX_NGRAM_SIZE}.",
                code="BAD_SETTINGS",
            )
        if self.do_sample:
            raise EngineError(
                "Prompt lookup decodes greedily here (temperature 0), so its output equals "
                "plain decoding.",
                "Set temperature to 0, or choose plain decoding to sample.",
                code="LOOKUP_NEEDS_GREEDY",
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
    fast_decoder: bool = True
    #: Rows of the fast decoder's draft vocabulary (core.decoding.graphs.DEFAULT_DRAFT_VOCAB).
    draft_vocab: int = DEFAULT_DRAFT_VOCAB
    #: What decodes plain turns beside the fast decoder: openvino-genai's stateful SDPA
    #: pipeline (measured 1.06-1.23x the fast decoder at depth 0 on Qwen3.5-0.8B INT4 here,
    #: whose explicit Gated DeltaNet states cost a little per step; opened on the first plain
    #: turn) or the fast decoder itself ("fast": no second model in memory).
    plain_decoder: Decoding = "genai"


Decoding = Literal["fast", "genai"]


@dataclass(frozen=True)
class LoadedModel:
    model_dir: Path
    device: str
    mode: Mode
    model_type: str
    load_s: float
    warnings: tuple[str, ...] = ()
    #: What decodes text turns: the app's own decoder or openvino-genai's pipeline.
    decoder: Decoding = "genai"
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
        return chunk
