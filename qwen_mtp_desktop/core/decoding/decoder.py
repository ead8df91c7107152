"""The app's own decoder for Qwen3.5 exports: plain decoding, MTP and prompt lookup, greedy or
sampled, on one model in memory, keeping each conversation's state between turns.

Why not openvino-genai's MTP: in 2026.4 it runs MTP only on its continuous-batching backend
(PagedAttention), slower per step than the stateful SDPA path plain decoding can use, and every
draft pays a full 248k-row vocabulary projection; measured on Qwen3.5-0.8B INT4 it reached about
1.04x the fastest plain decoding at 100 % acceptance (issue 14). This decoder runs the exported
IRs directly with OpenVINO (graph changes in core.decoding.graphs):

- the target (core.decoding.target) is stateful with SDPA attention like the fastest plain
  path; a step verifies its drafts in one call and projects only the positions it needs;
  rejected work is dropped without copies (double-buffered recurrent states, hidden cache
  entries);
- drafts come from the MTP head (core.decoding.mtp_head: a draft-vocabulary lm_head, the
  lowest token ids, which byte-level BPE gives to the most frequent tokens) or from prompt
  lookup (core.decoding.prompt_lookup: n-grams of the conversation, free to produce);
- a turn resumes from the longest state kept for its prompt (core.decoding.state_cache) and
  prefills only the rest.

Greedy output equals plain greedy decoding token for token: every emitted token is the target's
own argmax over the full vocabulary given the exact prefix (tests compare under exact numerics).
openvino-genai stays in charge of tokenizing, detokenizing and vision.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.choosers import Chooser, chooser_for
from qwen_mtp_desktop.core.decoding.continuation import CallCancelledError, ContinuationGraph
from qwen_mtp_desktop.core.decoding.grammar import GrammarState, GrammarVocabulary
from qwen_mtp_desktop.core.decoding.graphs import (
    DEFAULT_DRAFT_VOCAB,
    GraphError,
    lm_head_rows,
    make_kv_explicit,
    transform_draft,
    transform_target,
)
from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob, token_logprob
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, MethodError
from qwen_mtp_desktop.core.decoding.mtp_head import DraftOutput, MtpHead
from qwen_mtp_desktop.core.decoding.prefill_memory import (
    PrefillMemoryError,
    available_memory,
    check_prefill_fits,
)
from qwen_mtp_desktop.core.decoding.prompt_lookup import NgramIndex
from qwen_mtp_desktop.core.decoding.state_cache import (
    MIN_TAIL_WORTH_SAVING,
    MIN_TOKENS_WORTH_SAVING,
    SavedCaches,
    SequenceState,
    Snapshot,
    StateCache,
    resume_points,
)
from qwen_mtp_desktop.core.decoding.target import StepTiming, Target, TargetOutput
from qwen_mtp_desktop.core.errors import native_error_line

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

LANGUAGE_MODEL = "openvino_language_model"
MTP_MODEL = "openvino_mtp_model"
EMBEDDINGS_MODEL = "openvino_text_embeddings_model"
#: Confirmed tokens the target may re-process in one verification call; past this (after
#: many rejections in a row) a separate call brings its state up to date.
MAX_PENDING = 4
#: Forced tokens (a grammar's) verified in one call.
MAX_FORCED_DRAFTS = 32
#: Default state cache budget when the engine gives none (bytes).
DEFAULT_CACHE_BUDGET = 1 << 30


class DecoderUnavailableError(Exception):
    """The app's decoder cannot run this model; the message says why (shown to the user)."""


@dataclass(frozen=True)
class DecodedStep:
    """One decoding step: its tokens (accepted drafts, then the target's own token, or fewer at
    a stop), how many drafts the method proposed and how many of them were accepted, and how
    many tokens a grammar forced (verified in the same call, not counted as drafts: they are
    always accepted and would make the method's acceptance look better than it is)."""

    tokens: tuple[int, ...]
    drafted: int = 0
    accepted: int = 0
    forced: int = 0
    #: Each token's log-probability, when the turn asked for them (else empty).
    logprobs: tuple[TokenLogprob, ...] = ()


@dataclass(frozen=True)
class PrefillInfo:
    """How the last turn's prompt was processed: `reused` of `prompt_tokens` came from a kept
    state (the rest was prefilled), and where they came from."""

    prompt_tokens: int
    reused: int
    #: "live" (the request held them), "aside" (copied back in), "cold" (nothing kept).
    source: str
    seconds: float
    #: The seed the answer draws from (None: greedy decoding).
    seed: int | None = None


class AppDecoder:
    """Loads a model's target, draft and embedding IRs; decodes turns with any
    `DecodingMethod`; keeps conversation states. Not thread-safe: one thread calls
    `generate()` at a time (the engine's turn worker); `cache_report()` may be read anywhere."""

    def __init__(
        self,
        model_dir: Path,
        device: str = "CPU",
        properties: dict[str, Any] | None = None,
        *,
        draft_vocab: int = DEFAULT_DRAFT_VOCAB,
        special_ids: Sequence[int] = (),
        cache_budget: int = DEFAULT_CACHE_BUDGET,
        mtp: bool = True,
        continuation: bool = True,
    ) -> None:
        """`mtp` False (or a model without an MTP IR) loads no draft head: plain decoding
        and prompt lookup only. `continuation` False never builds the explicit-cache graphs
        for long follow-ups (core.decoding.continuation): every call stays stateful."""
        import numpy as np
        import openvino as ov

        properties = dict(properties or {})
        core = ov.Core()
        for name in (LANGUAGE_MODEL, EMBEDDINGS_MODEL):
            if not (model_dir / f"{name}.xml").is_file():
                raise DecoderUnavailableError(f"the model has no {name}.xml")
        mtp = mtp and (model_dir / f"{MTP_MODEL}.xml").is_file()
        try:
            compute_type = _inference_precision(core, device, properties)
            target_model = core.read_model(model_dir / f"{LANGUAGE_MODEL}.xml")
            graph = transform_target(target_model, compute_type)
            vocab = graph.vocab_size
            size = min(draft_vocab, vocab)
            ids = np.unique(
                np.concatenate(
                    [np.arange(size), np.asarray([i for i in special_ids if 0 <= i < vocab])]
                ).astype(np.int64)
            )
            compiled_draft = draft_continuation = None
            if mtp:
                rows = lm_head_rows(core, target_model, ids)
                draft_model = core.read_model(model_dir / f"{MTP_MODEL}.xml")
                transform_draft(draft_model, rows, compute_type)
                del rows
                compiled_draft = core.compile_model(draft_model, device, properties)
                if continuation:
                    draft_continuation = _continuation_graph(core, draft_model, device, properties)
            compiled_target = core.compile_model(target_model, device, properties)
            target_continuation = (
                _continuation_graph(core, target_model, device, properties)
                if continuation
                else None
            )
            # A lookup of a few rows: on one thread it runs in the caller, without waking the
            # device's thread pool (5-8 ms per call on a loaded 2-core machine otherwise).
            embed_properties = dict(properties)
            if device == "CPU":
                embed_properties["INFERENCE_NUM_THREADS"] = 1
            embed = core.compile_model(
                core.read_model(model_dir / f"{EMBEDDINGS_MODEL}.xml"), device, embed_properties
            )
        except GraphError as exc:
            raise DecoderUnavailableError(f"the model's IR is not as expected: {exc}") from exc
        except RuntimeError as exc:
            raise DecoderUnavailableError(
                f"OpenVINO could not prepare it: {native_error_line(exc)}"
            ) from exc
        self.hidden_size = graph.hidden_size
        self.vocab_size = vocab
        self.draft_vocab_size = len(ids)
        self._in_draft_vocab = np.zeros(vocab, dtype=bool)
        self._in_draft_vocab[ids] = True
        self._draft_ids = ids
        self._tokenizer_json = model_dir / "tokenizer.json"
        self._stop_ids = tuple(special_ids)
        self._grammar_vocabulary: GrammarVocabulary | None = None
        self.target = Target(
            compiled_target, graph.states, embed, compute_type, target_continuation
        )
        self._mtp = (
            MtpHead(compiled_draft, ids, self.target, self.target.timing, draft_continuation)
            if compiled_draft is not None
            else None
        )
        self.cache = StateCache(cache_budget)
        self.last_prefill: PrefillInfo | None = None
        # The live sequence: token ids the target's state holds (`_processed` of them) and the
        # final hidden state of every confirmed position (`_hidden_len` rows).
        self._ids = np.zeros(4096, dtype=np.int64)
        self._hidden: npt.NDArray[Any] = np.zeros((0, 0))
        self._processed = 0
        self._hidden_len = 0
        #: Prefill in calls of at most this many tokens (None: one call).
        self.prefill_chunk: int | None = None
        #: Free memory now, in bytes (None: unknown, no check); a prompt whose prefill would
        #: not fit is refused before any call (core.decoding.prefill_memory).
        self.available_memory: Callable[[], int | None] = available_memory
        #: Observation hook (tests, benchmarks/mtp_chain_check.py): when a list, every step
        #: that drafts with the MTP head appends (context length, drafts) before verifying
        #: them; the drafts propose the tokens at indices context length, +1, ... of prompt +
        #: answer. The caller owns and clears it; None (the default) costs one test per step.
        self.draft_log: list[tuple[int, tuple[int, ...]]] | None = None

    @property
    def timing(self) -> StepTiming:
        return self.target.timing

    @property
    def has_mtp(self) -> bool:
        return self._mtp is not None

    @property
    def mtp(self) -> MtpHead:
        if self._mtp is None:
            raise MethodError("this model was loaded without its MTP head")
        return self._mtp

    def _mtp_keep(self, positions: int) -> None:
        if self._mtp is not None:
            self._mtp.keep(positions)

    # --- the live sequence -------------------------------------------------------------------

    def _drop_live(self) -> None:
        """Forget the live state (after a failure mid-call, or a cold start)."""
        self.target.reset()
        if self._mtp is not None:
            self._mtp.reset()
        self._processed = self._hidden_len = 0
        self.cache.live = None

    def _set_ids(self, start: int, ids: Sequence[int] | npt.NDArray[np.int64]) -> None:
        import numpy as np

        end = start + len(ids)
        if end > len(self._ids):
            grown = np.zeros(max(end, 2 * len(self._ids)), dtype=np.int64)
            grown[:start] = self._ids[:start]
            self._ids = grown
        self._ids[start:end] = ids

    def _set_hidden(self, start: int, rows: npt.NDArray[Any]) -> None:
        import numpy as np

        end = start + len(rows)
        if self._hidden.ndim != 2 or self._hidden.dtype != rows.dtype or end > len(self._hidden):
            grown = np.zeros((max(end, 2 * len(self._hidden), 1024), rows.shape[1]), rows.dtype)
            if self._hidden.ndim == 2 and self._hidden.dtype == rows.dtype:
                grown[: self._hidden_len] = self._hidden[: self._hidden_len]
            self._hidden = grown
        self._hidden[start:end] = rows
        self._hidden_len = max(self._hidden_len, end) if start <= self._hidden_len else end

    def _live_state(self) -> SequenceState:
        """The live sequence as the cache sees it (views of the decoder's buffers)."""
        live = self.cache.live
        n = self._processed
        if live is None:
            live = SequenceState(self._ids[:n], self._hidden[: min(n, self._hidden_len)])
            self.cache.live = live
        live.ids = self._ids[:n]
        live.hidden = self._hidden[: min(n, self._hidden_len)]
        return live

    def _put_live_aside(self, *, keep_live: bool = False) -> SequenceState | None:
        """Copy the live sequence's caches out and keep the copy aside in the cache (returned;
        None when nothing was worth it); the live sequence stays live with `keep_live` (its
        tail is about to be dropped)."""
        import numpy as np

        live = self.cache.live
        if live is None or self._processed < MIN_TOKENS_WORTH_SAVING:
            return None
        live = self._live_state()
        started = time.perf_counter()
        head = self._mtp
        if head is not None:
            head.keep(head.positions)  # provisional chain entries are not part of it
        saved = SequenceState(
            np.array(live.ids),
            np.array(live.hidden),
            list(live.snapshots),
            SavedCaches(
                self.target.kv.save(),
                head.kv.save() if head is not None else [],
                head.positions if head is not None else 0,
            ),
        )
        self.cache.put_aside(saved)
        if not keep_live:
            self.cache.live = None
        log.info(
            "state cache: put aside %d tokens in %.0f ms",
            len(saved.ids),
            (time.perf_counter() - started) * 1000,
        )
        return saved

    def _snapshot(self, logits: npt.NDArray[np.float32] | None = None) -> Snapshot:
        return Snapshot(self._processed, self.target.recurrent.copy_out(), logits)

    def _resume(
        self, prompt: npt.NDArray[np.int64], points: Sequence[int] = ()
    ) -> tuple[int, Snapshot | None, str]:
        """Bring the state to the longest kept prefix of `prompt`: (tokens reused, the
        snapshot resumed from, where it came from). `points`: where the prefill stops to keep
        a snapshot (state_cache.resume_points), which bounds its first call."""
        live = self.cache.live
        if live is not None and self._processed > 0:
            live = self._live_state()
            if not live.snapshots or live.snapshots[-1].position != self._processed:
                live.add_snapshot(self._snapshot())  # the end of the last answer
        resume = self.cache.best_resume(prompt)
        if resume is None:
            self._put_live_aside()
            self._drop_live()
            return 0, None, "cold"
        position, snapshot = resume.position, resume.snapshot
        if resume.source is self.cache.live:
            aside = None
            if self._processed - position >= MIN_TAIL_WORTH_SAVING and _old_branch_may_return(
                resume.source, resume.common, len(prompt)
            ):
                aside = self._put_live_aside(keep_live=True)  # an edit far back: keep it
            try:
                if position != self._processed:
                    self.target.recurrent.copy_in(snapshot.recurrent)
            except ValueError as exc:
                log.warning("state cache: a snapshot does not fit (%s); discarded", exc)
                self._drop_live()
                return 0, None, "cold"
            first_call = self._first_prefill_call(len(prompt), position, points)
            continuation = self.target.continuation
            if (
                aside is not None
                and aside.caches is not None
                and continuation is not None
                and continuation.worth_it(first_call, position)
            ):
                # The copy just put aside feeds the continuation graph's first call as it is
                # (the entries after `position` hidden): reading the request's caches again
                # for that call would be a second copy of the whole conversation.
                self.target.kv.restore(aside.caches.target, position)
            else:
                self.target.kv.keep_positions(position)
            self._mtp_keep(position - 1)
            self._processed = position
            self._hidden_len = min(self._hidden_len, position)
            live = self._live_state()
            live.snapshots = [s for s in live.snapshots if s.position <= position]
            self.cache.touch(live)
            return position, snapshot, "live"
        source = resume.source
        self._put_live_aside()
        caches = source.caches
        assert caches is not None
        try:
            if len(source.hidden) < position or len(source.ids) < position:
                raise ValueError("the kept sequence is shorter than its snapshot")
            self.target.recurrent.copy_in(snapshot.recurrent)
            self.target.kv.restore(caches.target, position)
            head = self._mtp
            draft_positions = min(caches.draft_positions, position - 1)
            if head is not None and caches.draft and draft_positions > 0:
                head.kv.restore(caches.draft, draft_positions)
                head.positions = draft_positions
            elif head is not None:
                head.reset()
        except ValueError as exc:
            log.warning("state cache: a kept sequence does not fit (%s); discarded", exc)
            self.cache.drop(source)
            self._drop_live()
            return 0, None, "cold"
        self._set_ids(0, source.ids[:position])
        self._hidden_len = 0
        self._set_hidden(0, source.hidden[:position])
        self._processed = position
        live = self._live_state()
        live.snapshots = [s for s in source.snapshots if s.position <= position]
        self.cache.touch(source)
        self.cache.touch(live)
        return position, snapshot, "aside"

    def _first_prefill_call(self, total: int, position: int, points: Sequence[int]) -> int:
        """How many tokens the first prefill call after `position` processes (`_generate`
        stops at each resume point, `_prefill` splits into `prefill_chunk` calls)."""
        end = min((p for p in points if p > position), default=total)
        return min(end - position, self.prefill_chunk or end - position)

    def _check_memory(
        self, total: int, reused: int, points: Sequence[int], method: DecodingMethod
    ) -> None:
        """Refuse (PrefillMemoryError) a prefill whose longest call would not fit in the
        memory free now: the target's calls end at resume points and `prefill_chunk`, the MTP
        head catches up on every new position in one call."""
        if total <= reused:
            return
        bounds = [reused, *(p for p in points if reused < p < total), total]
        longest = max(b - a for a, b in itertools.pairwise(bounds))
        if self.prefill_chunk:
            longest = min(longest, self.prefill_chunk)
        if method.uses_mtp_head and self._mtp is not None:
            longest = max(longest, total - min(self._mtp.positions, reused))
        check_prefill_fits(
            longest, self.hidden_size, new_tokens=total - reused, available=self.available_memory
        )

    def _compact_caches(self) -> None:
        """Copy the live cache entries together once hidden ones pile up (kv_slots)."""
        self.target.kv.compact_if_worth_it()
        if self._mtp is not None:
            self._mtp.kv.compact_if_worth_it()

    def drop_states(self) -> None:
        """Forget every kept state (a model change, an eject, a budget of zero)."""
        self._drop_live()
        self.cache.clear()

    # --- decoding ------------------------------------------------------------------------------

    def decode(
        self,
        prompt_ids: Sequence[int],
        *,
        method: DecodingMethod,
        max_new_tokens: int,
        stop_ids: frozenset[int] | set[int],
        cancelled: Callable[[], bool] = lambda: False,
        ignore_eos: bool = False,
        keep_drafting: Callable[[], bool] | None = None,
        stable_prefix: int | None = None,
        message_starts: Sequence[int] = (),
        logprobs: int | None = None,
    ) -> Generator[DecodedStep, None, None]:
        """Yield each decoding step until a stop id (included), max_new_tokens or
        cancellation. A step proposes up to min(method.drafts, tokens left - 1) drafts.

        `keep_drafting` is asked after every step (Auto's within-turn fall back); once it says
        False the rest of the turn decodes plain (free here: no re-prefill, no second model).
        `stable_prefix`: how many leading prompt tokens the next turn's prompt will repeat
        (the chat template re-renders this turn's answer without the generation prompt's
        thinking block): the recurrent state is kept at that point too, so the next turn
        resumes there. `message_starts`: where the prompt's messages begin; the state is kept
        at some (state_cache.resume_points), so a new conversation that opens with the same
        messages (a system prompt, a tools block) resumes after them. After the first step,
        `last_prefill` says how much was reused.
        `logprobs`: report each token's log-probability with that many alternatives
        (core.decoding.logprobs); None reports none and costs nothing."""
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        method.check()
        if method.kind == "mtp" and self._mtp is None:
            raise MethodError("this model was loaded without its MTP head")
        outside = [t for t, _ in method.sampling.logit_bias if t >= self.vocab_size]
        if outside:
            raise MethodError(
                f"logit bias names token {outside[0]}, outside this model's vocabulary "
                f"(0 to {self.vocab_size - 1})"
            )
        self.target.timing = StepTiming()  # per turn
        self.last_prefill = None
        if self._mtp is not None:
            self._mtp.timing = self.target.timing
        try:
            yield from self._generate(
                prompt_ids,
                method,
                max_new_tokens,
                frozenset() if ignore_eos else frozenset(stop_ids),
                cancelled,
                keep_drafting,
                resume_points(
                    len(prompt_ids), stable_prefix=stable_prefix, message_starts=message_starts
                ),
                logprobs,
            )
        except (GeneratorExit, PrefillMemoryError):
            raise  # closed between steps, or refused before any call: the state is consistent
        except CallCancelledError as stopped:
            # Cancelled part-way through a long call (a prefill, the MTP head catching up):
            # the turn ends here, as a cancel between steps ends it.
            if not stopped.consistent:
                self._drop_live()
        except BaseException:
            # A failed or interrupted model call may leave the state half updated.
            self._drop_live()
            raise
        finally:
            self.cache.fit_budget()

    def _generate(
        self,
        prompt_ids: Sequence[int],
        method: DecodingMethod,
        max_new_tokens: int,
        stops: frozenset[int],
        cancelled: Callable[[], bool],
        keep_drafting: Callable[[], bool] | None,
        points: tuple[int, ...],
        top_logprobs: int | None,
    ) -> Generator[DecodedStep, None, None]:
        import numpy as np

        def scored(rows: npt.NDArray[np.float32], emitted: list[int]) -> tuple[TokenLogprob, ...]:
            """The emitted tokens' log-probabilities, from the rows that chose them (before
            `chooser.emitted`: the penalties and grammar state must be those they met)."""
            if top_logprobs is None:
                return ()
            return tuple(
                token_logprob(row, token, top_logprobs)
                for row, token in zip(chooser.processed(rows, emitted), emitted, strict=True)
            )

        began = time.perf_counter()
        prompt = np.asarray(prompt_ids, dtype=np.int64)
        total = len(prompt)
        reused, snapshot, source = self._resume(prompt, points)
        self._check_memory(total, reused, points, method)
        self._compact_caches()
        target = self.target
        grammar = None
        if method.constraint is not None:
            grammar = GrammarState(self.grammar_vocabulary(), method.constraint)
        chooser = chooser_for(
            method.sampling, self.vocab_size, prompt_ids, self._draft_ids, grammar
        )
        for point in points:
            if not reused < point < total:
                continue
            # Prefill up to a point a later prompt may part at, and keep the state there.
            # Each part takes the path its own length pays for (core.decoding.continuation):
            # the few tokens that open the answer stay on the stateful request, where a call
            # on the continuation graph would copy the whole kept cache out and back for them.
            self._prefill(prompt[self._processed : point].tolist(), cancelled)
            self._live_state().add_snapshot(self._snapshot())
        if self._processed < total:
            out = self._prefill(prompt[self._processed :].tolist(), cancelled)
            last_logits = out.logits()[-1]
            self._live_state().add_snapshot(self._snapshot(last_logits))
            first = chooser.first(last_logits, int(out.argmax[-1]))
        else:
            assert snapshot is not None and snapshot.logits is not None
            last_logits = snapshot.logits
            first = chooser.first(last_logits, None)
        first_scores = scored(last_logits[np.newaxis], [first])
        chooser.emitted([first])
        self.cache.record_turn(reused)
        self.last_prefill = PrefillInfo(
            total, reused, source, time.perf_counter() - began, chooser.seed
        )
        tokens = [*prompt.tolist(), first]
        yield DecodedStep((first,), logprobs=first_scores)
        produced = 1
        if first in stops or produced >= max_new_tokens:
            return
        drafting = method.kind != "plain"
        lookup = NgramIndex(method.ngram) if method.kind == "lookup" else None
        if lookup is not None:
            lookup.extend(tokens)
        while not cancelled():
            step_began = time.perf_counter()
            if drafting and keep_drafting is not None and not keep_drafting():
                drafting = False
            processed = self._processed
            if len(tokens) - processed > MAX_PENDING:
                # Many rejections in a row: bring the target up to all but the last confirmed
                # token in a call of its own, so verification calls stay short.
                catch = tokens[processed:-1]
                out = target.run(catch, processed, len(catch) - 1, in_place=True)
                self._set_hidden(processed, np.array(out.hidden))
                target.settle(len(catch), keep=True)
                self._set_ids(processed, catch)
                processed = self._processed = len(tokens) - 1
            pending = tokens[processed:]
            k = min(method.drafts, max_new_tokens - produced - 1) if drafting else 0
            drafts: list[int] = []
            forced = chooser.forced()[: max_new_tokens - produced - 1] if drafting else []
            if forced:
                # Tokens the grammar forces cost no draft call and are always accepted.
                drafts = forced[:MAX_FORCED_DRAFTS]
                chooser.lookup_drafts(drafts)
            elif k > 0 and lookup is not None:
                drafts = lookup.candidates(k)
                chooser.lookup_drafts(drafts)
            elif k > 0:
                drafts = self._mtp_drafts(tokens, k, chooser, cancelled)
            # Without drafts the call is kept whatever it returns: no second state buffer.
            out = target.run(pending + drafts, processed, len(pending) - 1, in_place=not drafts)
            accepted, own = chooser.verify(out, drafts)
            rows = out.logits() if top_logprobs is not None else None  # before the next call
            keep = accepted == len(drafts)
            confirmed = len(pending) + accepted  # positions whose hidden state is now known
            self._set_hidden(processed, np.array(out.hidden[:confirmed]))
            target.settle(len(pending) + len(drafts), keep=keep)
            if not keep:
                self._compact_caches()
            if keep:
                self._set_ids(processed, pending + drafts)
                self._processed = processed + len(pending) + len(drafts)
            else:
                target.timing.reprocessed_tokens += len(pending) - 1
                if method.kind == "mtp" and not self._in_draft_vocab[own]:
                    target.timing.out_of_draft_vocab += 1
            emitted = [*drafts[:accepted], own]
            for index, token in enumerate(emitted):
                if token in stops:
                    emitted = emitted[: index + 1]
                    break
            emitted = emitted[: max_new_tokens - produced]
            scores = scored(rows, emitted) if rows is not None else ()
            tokens.extend(emitted)
            chooser.emitted(emitted)
            if lookup is not None:
                lookup.extend(emitted)
            produced += len(emitted)
            if self._mtp is not None:
                self._mtp.release_buffers()  # after a long catch-up, its outputs read
            target.timing.steps.append(time.perf_counter() - step_began)
            if forced:
                yield DecodedStep(
                    tuple(emitted), forced=min(accepted, len(emitted)), logprobs=scores
                )
            else:
                yield DecodedStep(
                    tuple(emitted), len(drafts), min(accepted, len(emitted)), logprobs=scores
                )
            if emitted[-1] in stops or produced >= max_new_tokens:
                return

    def grammar_vocabulary(self) -> GrammarVocabulary:
        """The model's vocabulary for constrained output, built on the first constrained turn
        (about a second for 248k tokens)."""
        if self._grammar_vocabulary is None:
            self._grammar_vocabulary = GrammarVocabulary(
                self._tokenizer_json, self.vocab_size, self._stop_ids
            )
        return self._grammar_vocabulary

    def logits_after(self, token_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """The target's logits for the token that follows `token_ids` (a copy), computed like a
        turn's first token (kept states reused): what validation and exactness checks read."""
        import numpy as np

        if not token_ids:
            raise ValueError("the prompt is empty")
        prompt = np.asarray(token_ids, dtype=np.int64)
        try:
            _reused, snapshot, _source = self._resume(prompt)
            self._compact_caches()
            if self._processed < len(prompt):
                row = np.array(self._prefill(prompt[self._processed :].tolist()).logits()[-1])
                self._live_state().add_snapshot(self._snapshot(row))
                return row
        except BaseException:
            self._drop_live()
            raise
        finally:
            self.cache.fit_budget()
        assert snapshot is not None and snapshot.logits is not None
        return np.array(snapshot.logits)

    def _prefill(self, ids: list[int], cancelled: Callable[[], bool] | None = None) -> TargetOutput:
        """Process `ids` after the live sequence, in calls of at most `prefill_chunk` tokens;
        the last call's output (its last position projected). A call stops part-way when
        `cancelled()` turns true (CallCancelledError); the calls before it stay."""
        import numpy as np

        chunk = self.prefill_chunk or len(ids)
        out = None
        for begin in range(0, len(ids), chunk):
            part = ids[begin : begin + chunk]
            start = self._processed
            out = self.target.run(part, start, len(part) - 1, cancelled, in_place=True)
            self._set_ids(start, part)
            self._set_hidden(start, np.array(out.hidden))
            self.target.settle(len(part), keep=True)
            self._processed = start + len(part)
        assert out is not None
        return out

    def _mtp_drafts(
        self,
        tokens: list[int],
        k: int,
        chooser: Chooser,
        cancelled: Callable[[], bool] | None = None,
    ) -> list[int]:
        """k drafts from the MTP head: catch it up on every confirmed position (target hidden
        states), then chain on its own hidden state."""
        mtp = self.mtp
        start = mtp.positions
        end = len(tokens) - 1  # positions whose hidden state and next token are both known
        if self._hidden_len < end:
            raise RuntimeError("the MTP head is missing target hidden states")
        out: DraftOutput = mtp.catch_up(
            self._hidden[start:end], tokens[start + 1 : end + 1], cancelled
        )
        drafts = [chooser.draft(out, [])]
        for index in range(1, k):
            out = mtp.chain(out, drafts[-1], end + index - 1)
            drafts.append(chooser.draft(out, drafts))
        if self.draft_log is not None:
            self.draft_log.append((len(tokens), tuple(drafts)))
        return drafts

    def cache_report(self) -> Any:
        return self.cache.report()


def _old_branch_may_return(live: SequenceState, common: int, prompt_tokens: int) -> bool:
    """Whether a later prompt may hold the live sequence's tokens after `common` again, so
    they are worth a copy before a prompt that shares only `common` of them goes on. Not when
    this prompt holds the whole last prompt and goes on with other tokens: the template
    rendered the last answer differently (Qwen3.5's drops its thinking), and will every time.
    A regenerate (the prompt ends where the old answer began) or an edited message may come
    back to the old version."""
    prompt_end = max((s.position for s in live.snapshots if s.logits is not None), default=0)
    return not (0 < prompt_end <= common < prompt_tokens)


def _continuation_graph(
    core: Any, model: Any, device: str, properties: dict[str, Any]
) -> ContinuationGraph | None:
    """The explicit-cache twin of a transformed target or draft graph for long continuations
    (core.decoding.continuation), or None where the stateful graph has no single-token-kernel
    problem to avoid (not the CPU) or the twin cannot be built (then every call stays on the
    stateful request, as before)."""
    if device != "CPU":
        return None
    model = model.clone()  # shares the weights
    try:
        names = make_kv_explicit(model)
    except GraphError as exc:
        log.warning("no continuation graph: %s", exc)
        return None
    if not names:
        return None
    # Not from the model cache: a cached blob would bring its own copy of the weights.
    own = {k: v for k, v in properties.items() if k != "CACHE_DIR"}
    return ContinuationGraph(model, names, lambda m: core.compile_model(m, device, own))


def _inference_precision(core: Any, device: str, properties: dict[str, Any]) -> Any:
    """The element type the device computes in with these properties (bf16, f16 or f32)."""
    import openvino as ov

    hint = properties.get("INFERENCE_PRECISION_HINT")
    if hint is None:
        try:
            hint = core.get_property(device, "INFERENCE_PRECISION_HINT")
        except RuntimeError:
            return ov.Type.f32
    if isinstance(hint, ov.Type):
        return hint
    names = {"f32": ov.Type.f32, "bf16": ov.Type.bf16, "f16": ov.Type.f16}
    return names.get(str(hint).lower(), ov.Type.f32)
