"""Auto's test within a turn (core.auto.policy): should this MTP turn continue with plain
decoding? The engine asks it after every MTP step. No Qt, no OpenVINO."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from qwen_mtp_desktop.core.auto.turn_record import draft_trials, expected_tokens

#: A move needs a predicted gain of at least this much (the measurements are noisy).
SWITCH_MARGIN = 0.05
#: Cost of one draft relative to a plain step when nothing says otherwise (measured: demo model
#: 1.0, Qwen3.5-0.8B INT4 on CPU 0.9 at n=1 and less per extra draft).
PRIOR_DRAFT_COST = 0.75
#: Within a turn: decode steps to watch before a fall back, and the confidence it needs.
MIN_STEPS_BEFORE_SWITCH = 4
#: A within-turn switch must save this many times its estimated cost.
SWITCH_COST_FACTOR = 1.5


@dataclass
class WithinTurnCheck:
    """Should this MTP turn continue with plain decoding? Asked with the steps so far.

    It says yes when, at the acceptance this turn has shown (with a Beta(1, 1) prior, so four
    straight rejections read as 17 %, not 0 %), MTP is predicted slower than plain decoding by
    more than the margin, and the tokens still expected save more than the switch costs:
    re-prefilling the prompt and the answer so far (estimated from this turn's own time to first
    token) plus loading the plain pipeline if it is not loaded yet.
    """

    depth: int
    max_new_tokens: int
    plain_step_s: float | None
    draft_cost: float = PRIOR_DRAFT_COST
    expected_length: float | None = None
    plain_load_s: float = 0.0
    decided: bool = False
    # Running sums over the steps seen so far: the engine asks after every step on the
    # decoding thread, so each call only takes in the new steps (no re-scan of the turn).
    _seen: int = field(default=0, init=False, repr=False)
    _durations: list[float] = field(default_factory=list, init=False, repr=False)
    _trials: list[int] = field(default_factory=list, init=False, repr=False)
    _accepted: list[int] = field(default_factory=list, init=False, repr=False)
    _produced: int = field(default=0, init=False, repr=False)

    def __call__(
        self,
        sizes: Sequence[int],
        times: Sequence[float],
        prompt_tokens: int,
        reprefill: bool = True,
    ) -> bool:
        """`sizes`/`times`: this turn's steps so far (as in TurnSample); `prompt_tokens`: the
        prompt's length, to scale this turn's prefill time to the re-prefill's; `reprefill`:
        whether switching re-prefills prompt and answer (openvino-genai) or is free (the app's
        own decoder continues in the same state at depth 0)."""
        if self.decided or len(sizes) < MIN_STEPS_BEFORE_SWITCH + 1:
            return False
        self._take_in(sizes, times)
        durations = self._durations
        if not durations:
            return False
        mtp_step = durations[len(durations) // 2]  # the median: the first steps warm up
        plain_step = self.plain_step_s
        if plain_step is None:
            plain_step = mtp_step / (1 + self.depth * self.draft_cost)
        acceptance = [
            (a + 1.0) / (t + 2.0) if t else 0.0
            for t, a in zip(self._trials, self._accepted, strict=True)
        ]
        mtp_rate = expected_tokens(acceptance, self.depth) / mtp_step
        plain_rate = 1.0 / plain_step
        if mtp_rate * (1 + SWITCH_MARGIN) >= plain_rate:
            return False
        generated = self._produced
        remaining = float(self.max_new_tokens - generated)
        if self.expected_length is not None:
            remaining = min(remaining, max(self.expected_length - generated, 0.0))
        saving = remaining * (1.0 / mtp_rate - 1.0 / plain_rate)
        prefill = times[0] * (prompt_tokens + generated) / max(prompt_tokens, 1)
        cost = (prefill if reprefill else 0.0) + self.plain_load_s
        if saving <= cost * SWITCH_COST_FACTOR:
            return False
        self.decided = True
        return True

    def _take_in(self, sizes: Sequence[int], times: Sequence[float]) -> None:
        """Add the steps after the ones already seen: sorted step durations, and per-position
        draft trials exactly as `draft_trials` counts them."""
        if len(sizes) < self._seen:  # a new turn's steps: start over
            self._seen, self._produced = 0, 0
            self._durations.clear()
        if self._seen == 0:
            self._trials, self._accepted = [0] * self.depth, [0] * self.depth
        for index in range(self._seen, len(sizes)):
            size = sizes[index]
            if index > 0:
                bisect.insort(self._durations, times[index] - times[index - 1])
                new_trials, new_accepted = draft_trials(
                    (0, size), self.depth, self.max_new_tokens, generated=self._produced
                )
                for i in range(self.depth):
                    self._trials[i] += new_trials[i]
                    self._accepted[i] += new_accepted[i]
            self._produced += size
        self._seen = len(sizes)


__all__ = ["WithinTurnCheck"]
