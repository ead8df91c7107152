"""What a turn is, for Auto (core.auto.policy): what it measured (`TurnSample`: every step's size
and time, what ran it, its prompt), what is known before it runs (`TurnContext`), and what its
step sizes say (`draft_trials` per draft position, `expected_tokens` per MTP step, the median
step cost). No Qt, no OpenVINO."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from qwen_mtp_desktop.core.decoding.method import GREEDY, DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import GenerationStats


def expected_tokens(acceptance: Sequence[float], depth: int) -> float:
    """Tokens an MTP step at `depth` yields: 1 + p1 + p1 p2 + ... (per-draft acceptances)."""
    total, run = 1.0, 1.0
    for i in range(depth):
        run *= acceptance[i] if i < len(acceptance) else 0.0
        total += run
    return total


@dataclass(frozen=True)
class TurnSample:
    """What one generation measured: the size of every streamed step (the first is the
    prefill's token) and when it arrived (seconds since the request started).

    `method` is what the turn started with, without its sampling (an MTP turn may have fallen
    back to plain decoding: `switched_at` is then the index of the first step decoded plain;
    that step includes the re-prefill, so it counts for neither method's step cost);
    `sampling` is how it chose tokens (Auto learns sampled turns apart, core.auto.sampling_bands).
    """

    method: DecodingMethod
    step_sizes: tuple[int, ...]
    step_times_s: tuple[float, ...]
    max_new_tokens: int | None = None
    switched_at: int | None = None
    #: Prompt lookup's replay over this answer: (decode steps, tokens); None when unknown.
    lookup_replay: tuple[int, int] | None = None
    #: What decoded it (GenerationStats.decoder; "" for a sample made by hand, whose prefill
    #: is not learnt), the prompt's tokens, and what the caller knew before: the prompt's
    #: characters and images (core.auto.turn_costs).
    decoder: str = ""
    prompt_tokens: int = 0
    prompt_chars: int = 0
    images: int = 0
    #: Prompt tokens whose state was kept from an earlier turn (not prefilled).
    reused_tokens: int = 0
    sampling: Sampling = GREEDY

    def __post_init__(self) -> None:
        if len(self.step_sizes) != len(self.step_times_s):
            raise ValueError("step_sizes and step_times_s must have the same length")
        self.method.check()

    @classmethod
    def from_stats(
        cls,
        stats: GenerationStats,
        max_new_tokens: int | None = None,
        context: TurnContext | None = None,
    ) -> TurnSample:
        replay = stats.lookup_replay
        context = context or TurnContext()
        return cls(
            method=stats.method.drafting,
            step_sizes=tuple(stats.chunk_sizes),
            step_times_s=tuple(stats.chunk_times),
            max_new_tokens=max_new_tokens,
            switched_at=stats.switched_to_plain_at,
            lookup_replay=(replay["steps"], replay["tokens"]) if replay else None,
            decoder=stats.decoder,
            prompt_tokens=stats.prompt_tokens,
            prompt_chars=context.prompt_chars,
            images=context.images,
            reused_tokens=stats.reused_tokens,
            sampling=stats.method.sampling,
        )

    @property
    def generated_tokens(self) -> int:
        return sum(self.step_sizes)

    def mtp_part(self) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """The steps the MTP head drafted for (none when it did not run)."""
        end = len(self.step_sizes) if self.switched_at is None else self.switched_at
        if not self.method.uses_mtp_head:
            end = 0
        return self.step_sizes[:end], self.step_times_s[:end]

    def plain_part(self) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """Plain decoding's steps, each preceded by the step it is timed from."""
        if self.method.is_plain:
            return self.step_sizes, self.step_times_s
        if not self.method.uses_mtp_head:
            return (), ()
        if self.switched_at is None:
            return (), ()
        return self.step_sizes[self.switched_at :], self.step_times_s[self.switched_at :]


def step_cost(times: Sequence[float]) -> tuple[float, int] | None:
    """(seconds per decode step, decode steps) from step arrival times; the first time is the
    prefill's. The median step, not the mean: a pipeline's first generations after loading
    have steps many times slower (allocation, warm-up) that say nothing about the next turn."""
    steps = len(times) - 1
    if steps < 1:
        return None
    durations = sorted(b - a for a, b in itertools.pairwise(times))
    middle = len(durations) // 2
    median = (
        durations[middle] if len(durations) % 2 else (durations[middle - 1] + durations[middle]) / 2
    )
    if median <= 0:
        return None
    return median, steps


def draft_trials(
    sizes: Sequence[int], depth: int, max_new_tokens: int | None = None, generated: int = 0
) -> tuple[list[int], list[int]]:
    """Per draft position i (0-based): (trials, accepted). A step that proposed d drafts and
    wrote 1 + a tokens accepted positions 1..a and, if a < d, rejected position a + 1; later
    positions were not tried. The first size is the prefill's token and drafts nothing."""
    trials, accepted = [0] * depth, [0] * depth
    if not sizes:
        return trials, accepted
    produced = generated + sizes[0]
    for size in sizes[1:]:
        proposed = depth
        if max_new_tokens is not None:
            proposed = max(min(depth, max_new_tokens - produced - 1), 0)
        got = min(max(size - 1, 0), proposed)
        for i in range(got):
            trials[i] += 1
            accepted[i] += 1
        if got < proposed:
            trials[got] += 1
        produced += size
    return trials, accepted


@dataclass(frozen=True)
class TurnContext:
    """What Auto knows about the coming turn before it runs: the rendered conversation's
    length in characters (0: unknown, then prefill is not compared), its images, the model's
    load time (what opening a pipeline not loaded yet costs), what switching to plain
    decoding would load now (0 when the plain pipeline is ready) and the turn's sampling
    (a sampled turn is decided by sampled turns' measurements, core.auto.sampling_bands)."""

    prompt_chars: int = 0
    images: int = 0
    model_load_s: float | None = None
    plain_load_s: float = 0.0
    sampling: Sampling = GREEDY


__all__ = ["TurnContext", "TurnSample", "draft_trials", "expected_tokens", "step_cost"]
