"""How a decoding step's cost grows with the conversation's length, for Auto (core.auto.policy).

A step attends to every token of the context in Qwen3.5's full-attention layers (its Gated
DeltaNet layers cost the same at any length). The CPU plugin runs a call that continues a
stateful cache on its single-token attention kernel (core.decoding.continuation), so an MTP
verification of k + 1 tokens pays that attention more than once, and the MTP head pays its own
in each draft call. Measured with benchmarks/context_steps.py on the 0.8B geometry (INT4, every
draft accepted, 3 interleaved rounds per length; the machine was shared, load average 2-4):

    context          plain    MTP n=1   n=2     n=3     (ms per step)
    1,024 tokens     76.5     108.2     136.4   174.2
    4,096 tokens     83.7     126.5     158.8   192.0
    16,384 tokens    179.7    617.6     784.0   629.8

From 4,096 to 16,384 tokens a plain step grew by 96 ms and an MTP step by 440-630 ms, 4.6-6.5
times as much (from 1,024 to 4,096: 2.6-3.1 times), and MTP n=1 fell from 1.58x plain decoding
to 0.90x. (A breakdown at 8,192 tokens put the growth in the target's verification call, not
in the draft calls.) So the step cost is modelled as a line in the context's length,
`seconds(L) = seconds(L0) + units x g x (L - L0)`, where `units` is the step's attention work
in plain steps' worth (1 for plain decoding, 1 + ATTENTION_PER_DRAFT x k for MTP at depth k)
and `g` the seconds a plain step's attention costs per context token. Auto keeps each method's
cost with the context it was measured at and moves it to the coming turn's context, so a cost
measured early in a chat is not compared as it was against one measured at 10,000 tokens, and
MTP loses its edge as a conversation grows, as measured.

`g` is learnt from the turns (`ContextGrowth`): a method measured at contexts far enough apart
has its own slope; otherwise the slope of all methods' costs against their contexts, pooled
(each keeps its own intercept); before the contexts spread, PRIOR_GROWTH of a plain step per
context token. The growth is not linear over such ranges (memory bandwidth once the cache
outgrows the caches), which is why measured slopes replace the prior as soon as there are any.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qwen_mtp_desktop.core.decoding.method import DecodingMethod

#: Attention work one draft adds to a step, in plain steps' worth: the table above's growth
#: ratios (2.6-6.5 for depths 1-3) fitted through 1 + a x k at the mean depth.
ATTENTION_PER_DRAFT = 2.2
#: Before the turns spread: a plain step grows by this share of its short-context cost per
#: context token (the table above, 1,024 to 16,384 tokens: +103 ms on a ~74 ms step).
PRIOR_GROWTH = 9.0e-5
#: The slope is learnt once the contexts a method was measured at spread this far (tokens).
MIN_SPREAD_TOKENS = 1_000
#: Per turn, older evidence keeps this weight (the machine's speed drifts).
DECAY = 0.8
#: The contexts' variance that MIN_SPREAD_TOKENS makes (two equal halves that far apart).
_MIN_VARIANCE = MIN_SPREAD_TOKENS**2 / 4


def attention_units(method: DecodingMethod) -> float:
    """Attention over the whole context in one step of `method`, in plain steps' worth."""
    return 1.0 + ATTENTION_PER_DRAFT * method.drafts if method.uses_mtp_head else 1.0


def context_of(prompt_tokens: int, generated_tokens: int) -> float:
    """The mean context length over a turn's decoding steps."""
    return max(prompt_tokens, 0) + max(generated_tokens, 0) / 2


@dataclass
class _Sums:
    """Decayed sums for one method's least-squares line of seconds per query against the
    context's tokens."""

    n: float = 0.0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    xy: float = 0.0

    def add(self, x: float, y: float, weight: float) -> None:
        self.n = self.n * DECAY + weight
        self.x = self.x * DECAY + weight * x
        self.y = self.y * DECAY + weight * y
        self.xx = self.xx * DECAY + weight * x * x
        self.xy = self.xy * DECAY + weight * x * y

    def centred(self) -> tuple[float, float]:
        """(sum of squared deviations of x, sum of cross deviations)."""
        if self.n <= 0:
            return 0.0, 0.0
        return self.xx - self.x * self.x / self.n, self.xy - self.x * self.y / self.n


@dataclass
class ContextGrowth:
    """The seconds a plain step's attention costs per context token, learnt from step costs
    measured at different context lengths."""

    _sums: dict[DecodingMethod, _Sums] = field(default_factory=dict)

    def observe(
        self, method: DecodingMethod, context: float, seconds: float, weight: float
    ) -> None:
        """One turn's step cost of `method` at mean context `context` (tokens)."""
        # Per unit of attention, each method's cost is a line of the same slope.
        per_query = seconds / attention_units(method)
        self._sums.setdefault(method.drafting, _Sums()).add(context, per_query, weight)

    def slope(self, method: DecodingMethod, plain_short_s: float | None) -> float:
        """Seconds per context token of a plain step's attention, for `method`'s costs: its
        own slope when its measured contexts spread enough, else the pooled within-method
        slope when theirs do, else PRIOR_GROWTH of `plain_short_s` (0 when unknown)."""
        own = self._sums.get(method.drafting)
        if own is not None:
            dx, dxy = own.centred()
            if own.n > 0 and dx / own.n >= _MIN_VARIANCE:
                return max(dxy / dx, 0.0)
        spread = cross = 0.0
        for sums in self._sums.values():
            dx, dxy = sums.centred()
            spread += dx
            cross += dxy
        weight = sum(s.n for s in self._sums.values())
        if weight > 0 and spread / weight >= _MIN_VARIANCE:
            return max(cross / spread, 0.0)
        return PRIOR_GROWTH * plain_short_s if plain_short_s else 0.0


def at_context(
    seconds: float, measured_at: float, context: float, method: DecodingMethod, slope: float
) -> float:
    """A step cost measured at `measured_at` context tokens, moved to `context`."""
    moved = seconds + attention_units(method) * slope * (context - measured_at)
    return max(moved, 0.1 * seconds)
