"""How the app's decoder picks tokens: greedily from the argmax the target graph computes, or
by exact speculative sampling over the logits (core.decoding.sampling). The decoding loop asks
a `Chooser` for the first token, for each draft the MTP head proposes, and for the verdict on a
verification; everything about randomness and penalties stays here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.decoding.mtp_head import DraftOutput
from qwen_mtp_desktop.core.decoding.sampling import (
    Distribution,
    PenaltyHistory,
    fresh_seed,
    make_generator,
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
    ) -> None:
        self.seed: int | None = sampling.seed if sampling.seed is not None else fresh_seed()
        self._sampling = sampling
        self._rng = make_generator(self.seed)
        self._history = PenaltyHistory(vocab_size, prompt_ids) if sampling.penalised else None
        self._draft_ids = draft_ids
        self._q: list[Distribution] = []

    def first(self, logits: npt.NDArray[np.float32], argmax: int | None) -> int:
        return process_logits(logits, self._sampling, self._history).sample(self._rng)

    def draft(self, output: DraftOutput, drafts: Sequence[int]) -> int:
        if not drafts:
            self._q = []
        token, q = sample_draft(
            output.logits,
            self._sampling,
            self._rng,
            self._history,
            drafts,
            ids=self._draft_ids,
        )
        self._q.append(q)
        return token

    def lookup_drafts(self, drafts: Sequence[int]) -> None:
        self._q = [Distribution.point(token) for token in drafts]

    def verify(self, output: TargetOutput, drafts: Sequence[int]) -> tuple[int, int]:
        rows = output.logits()
        sampling, history = self._sampling, self._history

        def target(index: int) -> Distribution:
            return process_logits(rows[index], sampling, history, drafts[:index])

        verdict = verify_drafts(drafts, self._q[: len(drafts)], target, self._rng)
        self._q = []
        return verdict.accepted, verdict.token

    def emitted(self, tokens: Sequence[int]) -> None:
        if self._history is not None:
            self._history.extend(tokens)


def chooser_for(
    sampling: Sampling,
    vocab_size: int,
    prompt_ids: Sequence[int],
    draft_ids: npt.NDArray[np.int64],
) -> Chooser:
    if sampling.greedy and not sampling.penalised:
        return GreedyChooser()
    return SamplingChooser(sampling, vocab_size, prompt_ids, draft_ids)
