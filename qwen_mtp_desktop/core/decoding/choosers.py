"""How the app's decoder picks tokens: greedily from the argmax the target graph computes, or
by exact speculative sampling over the logits (core.decoding.sampling), optionally masked by a
grammar (core.decoding.grammar). The decoding loop asks a `Chooser` for the first token, for
each draft the MTP head proposes, and for the verdict on a verification; everything about
randomness, penalties and grammars stays here.

Under a grammar every distribution is masked at the grammar state its position would have:
the target's p_i after the drafts before it, the draft head's q_i likewise, so drafts are
always allowed and the output is plain constrained decoding's. Tokens the grammar forces are
offered to the loop as free drafts (`forced()`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from qwen_mtp_desktop.core.decoding.grammar import GrammarState, masked
from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.decoding.mtp_head import DraftOutput
from qwen_mtp_desktop.core.decoding.sampling import (
    Distribution,
    PenaltyHistory,
    fresh_seed,
    make_generator,
    penalised_logits,
    process_logits,
    sample_draft,
    verify_drafts,
)
from qwen_mtp_desktop.core.decoding.target import TargetOutput

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class Chooser(Protocol):
    #: The seed the answer draws from (None for greedy decoding).
    seed: int | None

    def first(self, logits: npt.NDArray[np.float32], argmax: int | None) -> int:
        """The answer's first token from the prompt's last logits row (or its argmax)."""

    def draft(self, output: DraftOutput, drafts: Sequence[int]) -> int:
        """The next MTP draft, after `drafts` of this step."""

    def lookup_drafts(self, drafts: Sequence[int]) -> None:
        """Prompt lookup proposed these (deterministic) drafts for this step."""

    def verify(self, output: TargetOutput, drafts: Sequence[int]) -> tuple[int, int]:
        """(drafts accepted, the next token) for a verification of this step's drafts."""

    def emitted(self, tokens: Sequence[int]) -> None:
        """These tokens joined the answer."""

    def forced(self) -> list[int]:
        """Tokens a grammar allows as the only continuation (free drafts); [] without one."""

    def processed(
        self, rows: npt.NDArray[np.float32], tokens: Sequence[int]
    ) -> list[npt.NDArray[np.float32]]:
        """Before `emitted(tokens)`: the processed logits each of `tokens` was chosen from
        (row i for tokens[i], after tokens[:i]), for its log-probability
        (core.decoding.logprobs says which processing)."""


class GreedyChooser:
    """Temperature 0, no penalties: the target's argmax, computed in the graph (the lowest id
    on ties); a draft is accepted when it equals it."""

    seed: int | None = None

    def first(self, logits: npt.NDArray[np.float32], argmax: int | None) -> int:
        import numpy as np

        return int(np.argmax(logits)) if argmax is None else argmax

    def draft(self, output: DraftOutput, drafts: Sequence[int]) -> int:
        return output.token

    def lookup_drafts(self, drafts: Sequence[int]) -> None:
        pass

    def verify(self, output: TargetOutput, drafts: Sequence[int]) -> tuple[int, int]:
        argmax = output.argmax
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == int(argmax[accepted]):
            accepted += 1
        return accepted, int(argmax[accepted])

    def emitted(self, tokens: Sequence[int]) -> None:
        pass

    def forced(self) -> list[int]:
        return []

    def processed(
        self, rows: npt.NDArray[np.float32], tokens: Sequence[int]
    ) -> list[npt.NDArray[np.float32]]:
        return [rows[index] for index in range(len(tokens))]


class SamplingChooser:
    """Sampling (or greedy decoding with penalties): every distribution goes through
    core.decoding.sampling's one processing; drafts are accepted by the exact speculative rule,
    so the answer is distributed as plain sampling's. One generator per answer, seeded with the
    given seed or a fresh one (reported, so the answer can be reproduced)."""

    def __init__(
        self,
        sampling: Sampling,
        vocab_size: int,
        prompt_ids: Sequence[int],
        draft_ids: npt.NDArray[np.int64],
        grammar: GrammarState | None = None,
    ) -> None:
        self.seed: int | None = None
        if not sampling.greedy:
            self.seed = sampling.seed if sampling.seed is not None else fresh_seed()
        self._sampling = sampling
        self._rng = make_generator(self.seed or 0)
        self._history = PenaltyHistory(vocab_size, prompt_ids) if sampling.penalised else None
        self._draft_ids = draft_ids
        self._q: list[Distribution] = []
        self._grammar = grammar
        #: Drafts consumed by the grammar while drafting (taken back before verification).
        self._provisional = 0

    def _mask(
        self, logits: npt.NDArray[np.float32], ids: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.float32]:
        """The row masked by the grammar's current state (`ids`: the row's token ids)."""
        if self._grammar is None:
            return logits
        allowed = self._grammar.allowed()
        return masked(logits, allowed if ids is None else allowed[ids])

    def first(self, logits: npt.NDArray[np.float32], argmax: int | None) -> int:
        row = self._mask(logits)
        return process_logits(row, self._sampling, self._history).sample(self._rng)

    def draft(self, output: DraftOutput, drafts: Sequence[int]) -> int:
        if not drafts:
            self._q = []
        token, q = sample_draft(
            self._mask(output.logits, self._draft_ids),
            self._sampling,
            self._rng,
            self._history,
            drafts,
            ids=self._draft_ids,
        )
        self._q.append(q)
        if self._grammar is not None:
            self._provisional += self._grammar.consume([token])
        return token

    def lookup_drafts(self, drafts: Sequence[int]) -> None:
        self._q = [Distribution.point(token) for token in drafts]

    def verify(self, output: TargetOutput, drafts: Sequence[int]) -> tuple[int, int]:
        rows = output.logits()
        sampling, history, grammar = self._sampling, self._history, self._grammar
        if grammar is not None:
            grammar.rollback(self._provisional)
            self._provisional = 0
        consumed = [0]  # drafts consumed by the grammar for the position being scored

        def target(index: int) -> Distribution:
            row = rows[index]
            if grammar is not None:
                # The grammar state at this position: after the drafts before it. A draft the
                # grammar refuses has p = 0, so no later position is ever asked for.
                consumed[0] += grammar.consume(drafts[consumed[0] : index])
                row = masked(row, grammar.allowed())
            return process_logits(row, sampling, history, drafts[:index])

        verdict = verify_drafts(drafts, self._q[: len(drafts)], target, self._rng)
        if grammar is not None:
            grammar.rollback(consumed[0])  # emitted() consumes what was accepted
        self._q = []
        return verdict.accepted, verdict.token

    def emitted(self, tokens: Sequence[int]) -> None:
        if self._history is not None:
            self._history.extend(tokens)
        if self._grammar is not None:
            self._grammar.consume(tokens)

    def forced(self) -> list[int]:
        return self._grammar.forced() if self._grammar is not None else []

    def processed(
        self, rows: npt.NDArray[np.float32], tokens: Sequence[int]
    ) -> list[npt.NDArray[np.float32]]:
        sampling, grammar = self._sampling, self._grammar
        result = []
        consumed = 0
        for index in range(len(tokens)):
            row = rows[index]
            if grammar is not None:
                consumed += grammar.consume(tokens[consumed:index])
                row = masked(row, grammar.allowed())
            row = penalised_logits(row, sampling, self._history, tokens[:index])
            if not sampling.greedy:
                row = row / float(sampling.temperature)
            result.append(row)
        if grammar is not None:
            grammar.rollback(consumed)
        return result


def chooser_for(
    sampling: Sampling,
    vocab_size: int,
    prompt_ids: Sequence[int],
    draft_ids: npt.NDArray[np.int64],
    grammar: GrammarState | None = None,
) -> Chooser:
    if sampling.greedy and not sampling.penalised and grammar is None:
        return GreedyChooser()
    return SamplingChooser(sampling, vocab_size, prompt_ids, draft_ids, grammar)
