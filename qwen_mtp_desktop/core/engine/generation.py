"""One running turn: `Generation`, an iterator of `StepChunk`s (one per decoding step, so an
MTP step that had k drafts accepted carries k + 1 tokens) that ends with `stats`. The OpenVINO
call blocks, so it runs on a short-lived worker thread and hands each step over a queue;
cancelling takes effect at the next step and keeps the partial answer.

A turn runs on the app's own decoder (core.decoding.decoder) or on an openvino-genai pipeline that
the engine hands over in a `TurnResources` (core.engine.runtime opens them).

With openvino-genai, within a turn the runtime cannot hand a generation from one pipeline to
the other: `generate()` takes a text prompt and prefills it from scratch (prefix caching is off
with MTP, and the pipelines share no KV or linear-attention state). So a within-turn fall back
(`GenerationSettings.within_turn`) stops the MTP generation at a step boundary and continues with
the plain pipeline on prompt + answer so far: a full re-prefill, done only when the answer's
text re-tokenizes to exactly the generated ids (so greedy output stays plain decoding's) and the
policy predicts the saving exceeds the re-prefill.

Prompt lookup drafts per step vary, so the stats replay the runtime's candidate search
(core.decoding.prompt_lookup) to count them.

A thinking budget (`GenerationSettings.thinking_budget`) ends the reasoning for the model: on the
app's decoder the turn decodes the reasoning up to the limit (`thinking_limit`, which keeps room
for the answer), then adds `</think>` itself and decodes the answer from there, as Qwen's own
guidance for a thinking budget does. A constraint (a JSON schema, a forced tool call) holds from
the answer's first token, so with thinking on the reasoning is decoded first without it. Both
phases are exact decoding of their prompts: MTP's answer is plain decoding's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder, PrefillInfo
from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, MethodError
from qwen_mtp_desktop.core.decoding.prompt_lookup import (
    LookupRecorder,
    replay_lookup,
)
from qwen_mtp_desktop.core.decoding.stats import FinishReason, StepDrafts, build_stats
from qwen_mtp_desktop.core.decoding.text import (
    ByteLevelVocab,
    ByteStreamDecoder,
    IncrementalDecoder,
    StopStringFilter,
    ThinkingSplitter,
)
from qwen_mtp_desktop.core.engine.types import (
    AnswerStream,
    DecoderName,
    EngineError,
    GenerationSettings,
    LoadedModel,
    StepChunk,
)
from qwen_mtp_desktop.core.errors import UserFacingError, native_error_line
from qwen_mtp_desktop.core.system.logs import log_conversation

if TYPE_CHECKING:
    import openvino_genai


log = logging.getLogger(__name__)


MTP_UNVALIDATED_NOTE = (
    "More than one draft token per step is not validated for every model and device; "
    "check with `qwen-mtp-desktop validate`."
)


@dataclass(frozen=True)
class _RawStep:
    """What the streamer callback hands over: ids and time only. Decoding them to text happens
    on the consumer's thread, so the native decoding loop waits for as little Python as
    possible (at thousands of tokens/s two detokenizer calls per step cost 10-30 % speed)."""

    token_ids: tuple[int, ...]
    elapsed_s: float
    #: The text tokens' log-probabilities, when asked for (ids only: bytes are added on the
    #: consumer's thread).
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class _Ended:
    chunk_sizes: list[int]
    chunk_times: list[float]
    total_s: float
    prompt_tokens: int
    finish_reason: FinishReason
    warnings: list[str]
    max_new_tokens: int
    switched_to_plain_at: int | None = None
    #: Drafts proposed and accepted per chunk: known exactly on the app's decoder; replayed
    #: for openvino-genai's prompt lookup (core.decoding.prompt_lookup); None otherwise.
    drafts: list[StepDrafts] | None = None
    #: The prompt's ids for a greedy text turn (prompt lookup's replay), else None.
    prompt_ids: list[int] | None = None
    #: Prompt tokens reused from a kept conversation state (the app's decoder).
    reused_tokens: int = 0
    #: The seed the answer drew from, when it was sampled.
    seed: int | None = None


@dataclass(frozen=True)
class TurnResources:
    """What a turn needs from the engine that started it (core.engine.runtime)."""

    loaded: LoadedModel
    tokenizer: Any
    #: The byte-level vocabulary that streams text exactly (None: the detokenizer does).
    vocab: ByteLevelVocab | None
    think_start: int | None
    think_end: int | None
    stop_ids: frozenset[int]
    #: The openvino-genai pipeline that runs the turn; None runs it on `app_decoder`.
    pipeline: Any
    app_decoder: AppDecoder | None
    #: The prompt's token ids (the app's decoder decodes from them).
    prompt_ids: list[int] | None
    #: How many leading prompt tokens the next turn's prompt repeats (the state kept there
    #: lets that turn resume), when known.
    stable_prefix: int | None
    #: Where the prompt's messages begin (its message-start token's positions): the decoder
    #: keeps the state at some, so a new conversation with the same opening resumes there.
    message_starts: tuple[int, ...]
    #: For a within-turn switch to plain decoding: the plain pipeline (opened on first use)
    #: and its generation config for these settings.
    open_plain: Callable[[GenerationSettings], tuple[Any, openvino_genai.GenerationConfig]]
    #: Called on the worker thread when the turn has ended, however it ended.
    on_finished: Callable[[Generation], None]


class _StepDecoder:
    """Turns step token ids into a `StepChunk`: routes reasoning vs answer, detokenizes
    incrementally and counts how many answer characters came from accepted drafts."""

    def __init__(self, context: TurnResources, thinking: bool, raw: bool = False) -> None:
        """`raw`: every token is answer text, kept as decoded (GenerationSettings.raw_text)."""
        tokenizer = context.tokenizer
        assert tokenizer is not None
        if raw:
            self.splitter = ThinkingSplitter(None, None, False)
        else:
            self.splitter = ThinkingSplitter(context.think_start, context.think_end, thinking)
        vocab = context.vocab
        self._reasoning: IncrementalDecoder | ByteStreamDecoder
        self._answer: IncrementalDecoder | ByteStreamDecoder
        if vocab is not None:
            self._reasoning, self._answer = ByteStreamDecoder(vocab), ByteStreamDecoder(vocab)
        else:
            self._reasoning = IncrementalDecoder(lambda ids: tokenizer.decode(ids))
            self._answer = IncrementalDecoder(lambda ids: tokenizer.decode(ids))
        self._answer_started = raw  # a raw answer keeps its leading blank lines
        self._vocab = vocab
        self._tokenizer = tokenizer

    def token_bytes(self, token_id: int) -> bytes:
        """One token's own bytes (part of a character, for some): what `logprobs` report."""
        if self._vocab is not None:
            found = self._vocab.decode_bytes([token_id])
            if found:
                return found
        # A special token (no text in the answer) is shown by its name, as OpenAI does.
        return str(self._tokenizer.decode([token_id], skip_special_tokens=False)).encode("utf-8")

    def step(self, token_ids: tuple[int, ...], elapsed_s: float, final: bool = False) -> StepChunk:
        # In a step of k + 1 tokens the first k are accepted drafts, the last the target's.
        drafted_reasoning_ids, drafted_answer_ids = self.splitter.split(token_ids[:-1])
        own_reasoning_ids, own_answer_ids = self.splitter.split(token_ids[-1:])
        if drafted_reasoning_ids or own_reasoning_ids:
            reasoning = self._reasoning.push(drafted_reasoning_ids + own_reasoning_ids)
        else:
            reasoning = ""
        if drafted_answer_ids:
            drafted_answer = self._answer.push(drafted_answer_ids)
            answer = drafted_answer + self._answer.push(own_answer_ids)
        else:
            drafted_answer = ""
            answer = self._answer.push(own_answer_ids)
        if final:
            reasoning += self._reasoning.flush()
            answer += self._answer.flush()
        drafted_chars = len(drafted_answer)
        if not self._answer_started and answer:
            # Qwen3.5 puts blank lines between </think> and the answer.
            stripped = answer.lstrip("\n")
            drafted_chars = max(drafted_chars - (len(answer) - len(stripped)), 0)
            answer = stripped
            self._answer_started = bool(answer)
        return StepChunk(token_ids, reasoning, answer, elapsed_s, drafted_chars)


class Generation(AnswerStream):
    """A running turn in this process, on a worker thread (the module docstring)."""

    def __init__(
        self,
        context: TurnResources,
        prompt: str,
        config: openvino_genai.GenerationConfig | None,
        settings: GenerationSettings,
        images: list[Any],
    ) -> None:
        """`config` None runs the turn on the fast decoder."""
        super().__init__()
        self._context = context
        self._settings = settings
        method = settings.method
        if method.uses_mtp_head and not context.loaded.mtp:
            method = DecodingMethod.plain(method.sampling)  # no MTP head loaded
        #: The method that runs (and the stats report).
        self._method = method
        self._decoding: DecoderName = "app" if config is None else "genai"
        self._device = context.loaded.device
        self._decoder = _StepDecoder(context, settings.thinking, settings.raw_text)
        self._queue: queue.SimpleQueue[_RawStep | _Ended | BaseException] = queue.SimpleQueue()
        self._cancel = threading.Event()
        #: Earlier messages the conversation's overflow policy left out (the stats say so).
        self.left_out_messages = 0
        if config is None:
            body: Callable[[], _Ended] = lambda: self._run_fast(prompt)  # noqa: E731
        else:
            body = lambda: self._run(prompt, config, images)  # noqa: E731
        self._thread = threading.Thread(
            target=self._work, args=(body,), name="ov-generate", daemon=True
        )
        self._thread.start()

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        if self._finished:
            raise StopIteration
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, _RawStep):
            chunk = self._decoder.step(item.token_ids, item.elapsed_s)
            if item.logprobs:
                scores = tuple(s.with_bytes(self._decoder.token_bytes) for s in item.logprobs)
                chunk = replace(chunk, logprobs=scores)
            return self._take(chunk)
        self._finished = True
        self._thread.join()
        if isinstance(item, BaseException):
            raise item
        # The held-back tail of a character split over tokens, if any, ends the answer.
        last = self._decoder.step((), item.total_s, final=True)
        method = self._method
        if item.seed is not None:
            method = method.with_sampling(replace(method.sampling, seed=item.seed))
        self.stats = build_stats(
            method=method,
            device=self._device,
            prompt_tokens=item.prompt_tokens,
            chunk_sizes=item.chunk_sizes,
            chunk_times=item.chunk_times,
            total_s=item.total_s,
            reasoning_tokens=self._decoder.splitter.reasoning_tokens,
            answer_tokens=self._decoder.splitter.answer_tokens,
            finish_reason=item.finish_reason,
            warnings=item.warnings,
            max_new_tokens=item.max_new_tokens,
            switched_to_plain_at=item.switched_to_plain_at,
            decoder=self._decoding,
            drafts=item.drafts,
        )
        self.stats.reused_tokens = item.reused_tokens
        self.stats.left_out_messages = self.left_out_messages
        if item.prompt_ids is not None and self._method.sampling.greedy:
            lookup = self._method if self._method.kind == "lookup" else self._settings.replay_lookup
            replay = replay_lookup(item.prompt_ids, self.token_ids, lookup.drafts, lookup.ngram)
            self.stats.lookup_replay = replay.to_json_dict()
        log_conversation("answer", self.answer + last.answer)  # only with debug logging on
        if last.reasoning or last.answer:
            return self._take(last)
        raise StopIteration

    def _run(
        self, prompt: str, config: openvino_genai.GenerationConfig, images: list[Any]
    ) -> _Ended:
        """The turn on an openvino-genai pipeline."""
        import openvino_genai

        context = self._context
        loaded, tokenizer, pipeline = context.loaded, context.tokenizer, context.pipeline
        assert tokenizer is not None and pipeline is not None
        use_mtp = self._method.uses_mtp_head
        lookup = self._method.kind == "lookup"
        within_turn = self._settings.within_turn if use_mtp and not images else None
        prompt_ids: list[int] = []
        if not images:  # also for prompt lookup's replay (Generation.next_chunk)
            prompt_ids = [int(i) for i in encode_ids(tokenizer, prompt)]
        recorder = None
        if lookup:
            recorder = LookupRecorder(
                prompt_ids,
                config.num_assistant_tokens,
                config.max_ngram_size,
                config.max_new_tokens,
                StopStringFilter(
                    lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False)),
                    self._settings.stop_strings,
                ),
            )
        switch_prompt: list[str] = []
        # The thinking budget (`thinking_limit`; not for prompt lookup's replayed steps).
        think_end = context.think_end if context.think_end is not None else -1
        limit = thinking_limit(self._settings) if think_end >= 0 and recorder is None else None
        thought: list[bool] = []  # set once the thinking has ended
        sizes: list[int] = []
        times: list[float] = []
        all_ids: list[int] = []
        clock = time.perf_counter
        started = clock()
        cancel = self._cancel
        out = self._queue
        running = openvino_genai.StreamingStatus.RUNNING
        stop = openvino_genai.StreamingStatus.STOP

        def switch_to_plain() -> bool:
            """Ask Auto; if it says so and the answer so far re-tokenizes to exactly the ids
            generated, keep the continuation prompt and stop the MTP generation."""
            assert within_turn is not None
            if switch_prompt or not within_turn(sizes, times, len(prompt_ids), True):
                return False
            text = prompt + tokenizer.decode(all_ids, skip_special_tokens=False)
            if [int(i) for i in encode_ids(tokenizer, text)] != prompt_ids + all_ids:
                log.info("within-turn switch skipped: the answer does not re-tokenize exactly")
                return False
            switch_prompt.append(text)
            return True

        class Streamer(openvino_genai.StreamerBase):  # type: ignore[misc]
            # Called by the native loop once per step, which waits for it: keep it minimal.
            def write(self, token: Any) -> openvino_genai.StreamingStatus:
                elapsed = clock() - started
                ids = (token,) if isinstance(token, int) else tuple(token)
                if recorder is not None:
                    ids = tuple(recorder.step(ids, elapsed))
                    if recorder.stopped or cancel.is_set():
                        if ids:
                            all_ids.extend(ids)
                            out.put(_RawStep(ids, elapsed))
                        return stop
                    if not ids:
                        return running
                over = False
                if limit is not None and not thought:
                    if think_end in ids:
                        thought.append(True)  # the model ended its thinking itself
                    elif len(all_ids) + len(ids) >= limit:
                        ids, over = ids[: limit - len(all_ids)], True  # the budget is spent
                        if not ids:
                            return stop
                sizes.append(len(ids))
                times.append(elapsed)
                all_ids.extend(ids)
                out.put(_RawStep(ids, elapsed))
                if cancel.is_set() or over:
                    return stop
                if within_turn is not None and switch_to_plain():
                    return stop
                return running

            def end(self) -> None:
                pass

        def generate(text: str) -> None:
            if images:
                pipeline.generate(
                    text, images=images, generation_config=config, streamer=Streamer()
                )
            else:
                pipeline.generate(text, generation_config=config, streamer=Streamer())

        generate(prompt)
        if limit is not None and not thought and len(all_ids) >= limit and not cancel.is_set():
            # The thinking budget is spent: end the thinking for the model and answer from
            # there, in a generation of its own (a full re-prefill, images included).
            forced = (*self._ids("\n"), think_end, *self._ids("\n\n"))
            most = config.max_new_tokens
            if most - len(all_ids) > len(forced):
                thought.append(True)
                sizes.append(len(forced))
                times.append(clock() - started)
                all_ids.extend(forced)
                out.put(_RawStep(forced, clock() - started))
                config.max_new_tokens = most - len(all_ids)
                generate(prompt + tokenizer.decode(all_ids, skip_special_tokens=False))
                config.max_new_tokens = most
        switched_at: int | None = None
        remaining = config.max_new_tokens - len(all_ids)
        ended_early = all_ids and all_ids[-1] in config_stop_ids(config)
        if switch_prompt and not cancel.is_set() and remaining > 0 and not ended_early:
            # Continue with plain decoding: a full re-prefill (module docstring).
            switched_at = len(sizes)
            within_turn = None
            plain, plain_config = context.open_plain(self._settings)
            plain_config.max_new_tokens = remaining
            plain.generate(switch_prompt[0], generation_config=plain_config, streamer=Streamer())
        drafts = None
        finish = self._finish_reason(all_ids, config_stop_ids(config), config.max_new_tokens)
        if recorder is not None:
            rest = recorder.flush() if not cancel.is_set() else []
            if rest:
                all_ids.extend(rest)
                out.put(_RawStep(tuple(rest), clock() - started))
            sizes, times, drafts = recorder.step_record()
            if recorder.stopped:
                finish = "stop_string"
            elif finish == "stop_string":  # the runtime saw no stop string: it ended
                finish = "eos"
        total = clock() - started
        prompt_tokens = len(prompt_ids) if prompt_ids else len(encode_ids(tokenizer, prompt))
        return _Ended(
            sizes,
            times,
            total,
            prompt_tokens,
            finish,
            self._turn_warnings(loaded, use_mtp),
            config.max_new_tokens,
            switched_at,
            drafts,
            prompt_ids if not images else None,
        )

    def _run_fast(self, prompt: str) -> _Ended:
        """The turn on the app's own decoder (core.decoding.decoder), any method, greedy,
        sampled or constrained; same queue protocol as `_run`. Stop strings are applied here:
        tokens that may begin one are held back, and the ones that form it are dropped, as
        openvino-genai does.

        With thinking on and a thinking budget or a constraint, the turn runs in two phases
        (the module docstring's "thinking budget"): the reasoning, unconstrained, until the
        model closes it or the limit (`thinking_limit`); then, from the prompt, the reasoning
        and the close (`</think>`, forced when the limit ended it), the answer under the
        constraint. Each phase is exact decoding of its own prompt, so MTP gives plain
        decoding's answer."""
        context = self._context
        loaded, decoder, tokenizer = context.loaded, context.app_decoder, context.tokenizer
        assert decoder is not None and tokenizer is not None
        settings = self._settings
        method = self._method
        within_turn = settings.within_turn if method.uses_mtp_head else None
        sizes: list[int] = []
        times: list[float] = []
        drafts: list[StepDrafts] = []
        emitted: list[int] = []
        clock = time.perf_counter
        started = clock()
        out = self._queue
        switched_at: list[int] = []
        stopped = False
        held = StepDrafts(0, 0)  # drafts of steps whose tokens a stop string holds back
        # Log-probabilities of the tokens decoded and not yet emitted, in order (a stop
        # string holds tokens back; an end-of-turn token is not text and has none; a token
        # the engine forced, closing the thinking, has none either: None).
        scores: deque[TokenLogprob | None] = deque()

        def keep_drafting() -> bool:
            if switched_at:
                return False
            if within_turn is not None and within_turn(sizes, times, len(prompt_ids), False):
                switched_at.append(len(sizes))
                return False
            return True

        def emit(ids: Sequence[int], step: StepDrafts) -> None:
            elapsed = clock() - started
            sizes.append(len(ids))
            times.append(elapsed)
            drafts.append(step)
            emitted.extend(ids)
            taken = tuple(scores.popleft() for _ in ids) if settings.logprobs is not None else ()
            text_scores = tuple(
                s for s in taken if s is not None and s.chosen.token_id not in context.stop_ids
            )
            out.put(_RawStep(tuple(ids), elapsed, text_scores))

        prompt_ids: list[int] = (
            context.prompt_ids
            if context.prompt_ids is not None
            else [int(i) for i in encode_ids(tokenizer, prompt)]
        )
        stops = StopStringFilter(
            lambda ids: str(tokenizer.decode(list(ids), skip_special_tokens=False)),
            settings.stop_strings,
        )
        think_end = context.think_end if context.think_end is not None else -1
        limit = thinking_limit(settings) if think_end >= 0 else None
        decoded: list[int] = []  # every token of the answer so far, forced ones included
        # The thinking phase decodes without the constraint and ends at `</think>`.
        phase_method = method.with_constraint(None) if limit is not None else method
        # With ignore_eos the end of text stops neither phase; `</think>` ends the thinking.
        ends = frozenset() if settings.ignore_eos else context.stop_ids
        phase_stops = ends | {think_end} if limit is not None else context.stop_ids
        phase_budget = limit if limit is not None else settings.max_new_tokens
        # A lazy grammar (tool_choice auto) asks for no answer: the model may end in its
        # reasoning, and what follows its `</think>` is its own.
        constrained = method.constraint is not None and not method.constraint.lazy
        turn: PrefillInfo | None = None
        while True:
            if phase_budget > 0:
                steps = decoder.decode(
                    prompt_ids + decoded,
                    method=phase_method,
                    max_new_tokens=phase_budget,
                    stop_ids=phase_stops,
                    cancelled=self._cancel.is_set,
                    ignore_eos=settings.ignore_eos and limit is None,
                    keep_drafting=keep_drafting if within_turn is not None else None,
                    stable_prefix=context.stable_prefix,
                    message_starts=context.message_starts,
                    logprobs=settings.logprobs,
                )
                for step in steps:
                    tokens, logprobs = step.tokens, step.logprobs
                    if limit is not None and constrained and tokens[-1] in ends:
                        # The turn ended while thinking, but a constrained answer must come:
                        # the engine closes the thinking in the end's stead (below).
                        tokens, logprobs = tokens[:-1], logprobs[:-1]
                    decoded.extend(tokens)
                    if settings.logprobs is not None:
                        scores.extend(logprobs)
                    ready, stopped = stops.push(tokens)
                    held = StepDrafts(held.proposed + step.drafted, held.accepted + step.accepted)
                    if ready:
                        emit(ready, held)
                        held = StepDrafts(0, 0)
                    if stopped:
                        steps.close()
                        break
                if turn is None:
                    turn = decoder.last_prefill
            if limit is None or stopped or self._cancel.is_set():
                break
            # The thinking phase ended: at `</think>`, at the limit, or at the end of text.
            limit = None
            if decoded and decoded[-1] in ends:
                break
            if decoded and decoded[-1] == think_end:
                # Closed by the model: the constraint holds from the answer's first token.
                forced = self._ids("\n\n") if constrained else []
            else:
                forced = [*self._ids("\n"), think_end, *self._ids("\n\n")]
            room = settings.max_new_tokens - len(decoded)
            if room <= len(forced):
                break
            decoded.extend(forced)
            if settings.logprobs is not None:
                scores.extend((None,) * len(forced))
            ready, stopped = stops.push(forced)
            if ready:
                emit(ready, held)
                held = StepDrafts(0, 0)
            if stopped:
                break
            phase_method = method
            if turn is not None and turn.seed is not None:
                # The answer draws from a seed derived from the reasoning's, so the reported
                # seed reproduces the turn and the two phases' draws are not the same numbers.
                sampling = replace(method.sampling, seed=answer_seed(turn.seed))
                phase_method = method.with_sampling(sampling)
            phase_stops = context.stop_ids
            phase_budget = room - len(forced)
        if not stopped and not self._cancel.is_set():
            rest = stops.flush()
            if rest:
                emit(rest, held)
        return _Ended(
            sizes,
            times,
            clock() - started,
            len(prompt_ids),
            "stop_string"
            if stopped
            else self._finish_reason(emitted, context.stop_ids, settings.max_new_tokens),
            self._turn_warnings(loaded, method.uses_mtp_head),
            settings.max_new_tokens,
            switched_at[0] if switched_at else None,
            drafts,
            prompt_ids,
            min(turn.reused, len(prompt_ids)) if turn is not None else 0,
            turn.seed if turn is not None else None,
        )

    def _ids(self, text: str) -> list[int]:
        return [int(i) for i in encode_ids(self._context.tokenizer, text)]

    def _work(self, body: Callable[[], _Ended]) -> None:
        """The worker thread: run the turn, hand its end (or its error) to the consumer."""
        try:
            self._queue.put(body())
        except UserFacingError as exc:  # refused before any call (a prefill too big to fit)
            log.info("generation refused: %s", exc)
            self._queue.put(EngineError(exc.message, exc.fix, code=exc.code))
        except MethodError as exc:  # a grammar the engine cannot enforce: the request's fault
            log.info("generation refused: %s", exc)
            self._queue.put(
                EngineError(
                    str(exc).rstrip(".") + ".",
                    "Ask without structured output.",
                    code="BAD_SETTINGS",
                )
            )
        except Exception as exc:  # the native side raises RuntimeError for everything
            log.exception("generation failed")
            self._queue.put(
                EngineError(
                    f"Generation failed: {native_error_line(exc)}",
                    "Try a shorter conversation or reload the model; details are in the log.",
                    code="GENERATION_FAILED",
                )
            )
        finally:
            self._context.on_finished(self)

    def _turn_warnings(self, loaded: LoadedModel, use_mtp: bool) -> list[str]:
        warnings = list(loaded.warnings)
        if use_mtp and self._method.drafts > 1:
            warnings.append(MTP_UNVALIDATED_NOTE)
        return warnings

    def _finish_reason(
        self, token_ids: list[int], stop_ids: set[int] | frozenset[int], max_new_tokens: int
    ) -> FinishReason:
        if self._cancel.is_set():
            return "cancelled"
        if token_ids and token_ids[-1] in stop_ids:
            return "eos"
        if len(token_ids) >= max_new_tokens:
            return "length"
        return "stop_string" if self._settings.stop_strings else "eos"


def encode_ids(tokenizer: Any, text: str) -> Sequence[int]:
    ids: Sequence[int] = tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]
    return ids


def config_stop_ids(config: openvino_genai.GenerationConfig) -> set[int]:
    return set(config.stop_token_ids) | {config.eos_token_id}


def answer_seed(seed: int) -> int:
    """The seed of a turn's answer phase, from its reasoning's (0 to 2^63 - 1, as seeds are):
    one step of a 64-bit linear congruential generator, its top 63 bits."""
    return ((seed * 6364136223846793005 + 1442695040888963407) % 2**64) >> 1


#: The share of `max_new_tokens` a thinking limit keeps for the answer, and its most.
ANSWER_ROOM_SHARE = 4
MAX_ANSWER_ROOM = 1024


def thinking_limit(settings: GenerationSettings) -> int | None:
    """The reasoning tokens a turn may write before the engine closes its thinking block
    (None: the model closes it, or never): with thinking on and a thinking budget, or a
    constraint (which holds from the answer's first token, after the thinking). The limit
    leaves the answer room: a quarter of `max_new_tokens`, at most 1,024 tokens. A lazy
    grammar alone (tool_choice auto) keeps none: the reasoning may run to `max_new_tokens`
    as without it, and is decoded without the grammar, so a "<tool_call>" in it opens no
    call."""
    if not settings.thinking or settings.raw_text:
        return None
    budget = settings.thinking_budget
    constraint = settings.method.constraint
    if budget is None and constraint is None:
        return None
    total = settings.max_new_tokens
    if budget is None and constraint is not None and constraint.lazy:
        return total
    room = min(total // ANSWER_ROOM_SHARE, MAX_ANSWER_ROOM)
    return min(total - room, budget if budget is not None else total)
