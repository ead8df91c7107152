"""What Auto (core.auto.policy) knows about prompt lookup on one conversation: the tokens a lookup
step would yield (from every greedy answer's replay of prompt lookup, `TurnSample.
lookup_replay`, recent turns weighing more) and the cost of a lookup step (measured on turns
that ran it; LOOKUP_STEP_PRIOR plain steps before). No Qt, no OpenVINO."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from qwen_mtp_desktop.core.auto.turn_record import TurnSample

#: Cost of a prompt-lookup step in plain steps until one was measured (it runs on
#: openvino-genai's continuous-batching pipeline and verifies K + 1 tokens; measured on the
#: demo model 1.1-1.4x a plain step).
LOOKUP_STEP_PRIOR = 1.3
#: Replayed lookup steps a turn needs before its tokens-per-step counts fully.
LOOKUP_FULL_WEIGHT_STEPS = 8


@dataclass
class LookupEvidence:
    """Decayed sums of replayed lookup steps and tokens, and the smoothed step cost. `decay`,
    `alpha` and `full_weight_steps` are Auto's own (core.auto.policy) so lookup evidence ages
    and counts as MTP's does."""

    decay: float
    alpha: float
    full_weight_steps: int
    #: Measured seconds per lookup step (None: never ran), and how much evidence it holds.
    seconds: float | None = None
    weight: float = 0.0
    #: Seconds a lookup turn's first decode step costs beyond the others.
    extra: float = 0.0
    steps: float = 0.0
    tokens: float = 0.0

    @property
    def measured(self) -> bool:
        """A full turn's worth of lookup steps was timed."""
        return self.seconds is not None and self.weight >= 1.0

    def tokens_per_step(self) -> float | None:
        """None before any answer was replayed."""
        return self.tokens / self.steps if self.steps >= 0.5 else None

    def step_cost(self, plain_step_s: float | None) -> float | None:
        """Seconds per lookup step: measured, else LOOKUP_STEP_PRIOR plain steps."""
        if self.seconds is not None:
            return self.seconds
        return plain_step_s * LOOKUP_STEP_PRIOR if plain_step_s is not None else None

    def rate(self, plain_step_s: float | None, turn_tokens: float) -> float | None:
        """Tokens per second of a lookup turn of `turn_tokens` (its first step's extra cost
        spread over the turn's steps)."""
        per_step, cost = self.tokens_per_step(), self.step_cost(plain_step_s)
        if per_step is None or cost is None or cost <= 0:
            return None
        steps = max(turn_tokens / per_step, 1.0)
        return per_step / (cost + self.extra / steps)

    def learn(self, sample: TurnSample) -> None:
        """Tokens per step from the turn's replay, and the step cost from a turn that ran it."""
        self.steps *= self.decay
        self.tokens *= self.decay
        if sample.lookup_replay is not None and sample.lookup_replay[0] > 0:
            steps, tokens = sample.lookup_replay
            weight = min(steps / LOOKUP_FULL_WEIGHT_STEPS, 1.0) / steps
            self.steps += steps * weight
            self.tokens += tokens * weight
        times = sample.step_times_s
        if sample.method.kind != "lookup" or len(times) < 3 or times[-1] <= times[1]:
            return
        # The mean step, not the median: lookup's steps are bimodal (a 1-token step where no
        # n-gram matched, a (K+1)-token verification where one did) and heavy-tailed, so the
        # median (and a trimmed mean) missed real cost: on the demo model they read 1.1-1.2x
        # plain where lookup decoded at 0.8x. The first decode step is learned apart: it
        # carries the request's scheduling (12-20 ms there against 1-4 ms for the others), a
        # cost per turn that short answers feel.
        durations = [b - a for a, b in itertools.pairwise(times[1:])]
        if not durations:
            return
        count = len(durations)
        seconds = sum(durations) / count
        extra = max(times[1] - times[0] - seconds, 0.0)
        weight = min(count / self.full_weight_steps, 1.0)
        if self.seconds is None:
            self.seconds, self.weight, self.extra = seconds, weight, extra
            return
        alpha = self.alpha * weight
        self.seconds = (1 - alpha) * self.seconds + alpha * seconds
        self.weight = min(self.weight + weight, 10.0)
        self.extra = (1 - alpha) * self.extra + alpha * extra


__all__ = ["LOOKUP_FULL_WEIGHT_STEPS", "LOOKUP_STEP_PRIOR", "LookupEvidence"]
