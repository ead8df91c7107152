"""Auto: between turns, choose plain decoding, an MTP draft depth or prompt lookup from what
earlier turns measured, and within a turn fall back to plain decoding when the MTP drafts keep
being rejected.

Why a model and not a bandit over tokens/s: this machine's speed drifts (RUNTIME-NOTES: up to 2x
between runs), so comparing one turn's tok/s with another's says little. The policy splits what
it measures into two parts that do not drift together:

- the cost of a decoding step in each mode (seconds per step: plain, MTP n=1, n=2, ...), a
  property of model and device, smoothed over turns;
- the per-draft acceptance at each draft position (draft i accepted given drafts 1..i-1 were), a
  property of the content, shared by all depths and weighted towards recent turns.

At per-draft acceptances p1, p2, ... an MTP step at depth k yields 1 + p1 + p1 p2 + ... tokens,
so its predicted rate is that over its step cost; plain decoding yields one token per step.
Depth moves by one per turn (a neighbour that was never measured is tried when its prediction is
close); plain decoding is chosen when it is predicted faster; after a fall back MTP is probed
again after `FIRST_PROBE_AFTER` plain turns, twice as long after each failed probe, so a
conversation that turns predictable (code, lists) wins again. A probe costs little: the engine
asks `WithinTurnCheck` after every MTP step and continues the turn with plain decoding once the
drafts clearly lose (see Engine for how, and docs/decoding-and-auto.md for what that switch costs).

Prompt lookup (core.decoding.prompt_lookup) is the third option. Its drafts are n-grams of the
conversation, so how well it would do on an answer is known exactly after the fact, whatever
decoded it: every greedy text turn's stats carry a replay of prompt lookup over the answer
(`GenerationStats.lookup_replay`: its steps and tokens). Auto keeps the tokens per lookup step
(weighted towards recent turns, like acceptance) and the measured cost of a lookup step (a
prior of LOOKUP_STEP_PRIOR plain steps until one ran), and runs prompt lookup for the next
turn when its predicted rate beats the plain-or-MTP choice by the switch margin. A copy-heavy
conversation (editing, quoting, repeating) goes to prompt lookup; a free or counting one stays
with MTP or plain decoding. Lookup turns do not change the MTP/plain state.

What a turn costs before it decodes counts too (core.auto.turn_costs: each path's prefill by the
tokens it prefills, a pipeline's first load): `decide()` takes the coming turn's `TurnContext`
and compares options by predicted turn time, so a long prompt can make prompt lookup lose
although it decodes faster, and an image turn (which prompt lookup cannot run) chooses between
openvino-genai's MTP and plain pipelines by their own prefill.

Step costs depend on the conversation's length (core.auto.step_context): each is kept with the
context it was measured at and moved to the coming turn's, so costs measured early in a long
chat are compared fairly with recent ones, and deep drafts, whose verifications attend to the
whole context once per drafted token, lose their edge as a conversation grows.

Sampled turns are decided by their own measurements (core.auto.sampling_bands): acceptance falls as
the temperature rises and a sampled step costs more, so each temperature band has its own
policy (`for_sampling`: acceptance, step costs, depth and probes of its own; prefill and loads
shared, being the same for greedy and sampled turns), and its reasons say which band decided.
Prompt lookup is not offered for sampled turns (its replay counts greedy matches).

What a turn measured and what is known before it (`TurnSample`, `TurnContext`) are in
core.auto.turn_record, the within-turn test (`WithinTurnCheck`) in core.auto.within_turn; both are
re-exported here. No Qt, no OpenVINO: everything here runs on recorded step sizes and times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from qwen_mtp_desktop.core.auto.lookup_evidence import (
    LookupEvidence,
)
from qwen_mtp_desktop.core.auto.sampling_bands import SamplingBand, band_of
from qwen_mtp_desktop.core.auto.step_context import ContextGrowth, at_context, context_of
from qwen_mtp_desktop.core.auto.turn_costs import TurnCosts, path_of, text_path
from qwen_mtp_desktop.core.auto.turn_record import (
    TurnContext,
    TurnSample,
    draft_trials,
    expected_tokens,
)
from qwen_mtp_desktop.core.auto.turn_record import step_cost as _step_cost
from qwen_mtp_desktop.core.auto.within_turn import PRIOR_DRAFT_COST, SWITCH_MARGIN, WithinTurnCheck
from qwen_mtp_desktop.core.decoding.method import (
    DEFAULT_LOOKUP,
    DEFAULT_MTP,
    PLAIN,
    DecodingMethod,
    Sampling,
)

MAX_DEPTH = 4
#: Where Auto starts on a model never benchmarked on this device.
UNBENCHMARKED_START = DEFAULT_MTP
#: Decode steps a turn needs before its numbers count fully (fewer count proportionally less).
FULL_WEIGHT_STEPS = 8
#: Weight of the newest turn in the smoothed step costs.
COST_ALPHA = 0.5
#: Per turn (plain turns too), older acceptance evidence keeps this weight: content changes.
ACCEPTANCE_DECAY = 0.5
#: An option never measured is tried when its prediction is within this band of the current.
EXPLORE_BAND = 0.10
#: Acceptance of a draft position never observed: the previous position's, times this.
POSITION_DECAY = 0.9
#: While plain decoding was never measured, MTP predicted below this speed-up (from the prior
#: step cost, which can be far off) is checked against one plain turn.
CHECK_PLAIN_BELOW = 1.5
FIRST_PROBE_AFTER = 8
MAX_PROBE_INTERVAL = 64
#: Probes may cost at most this share of decoding time: a probe that cost a fraction x of a
#: plain turn is repeated no sooner than x / PROBE_BUDGET turns later.
PROBE_BUDGET = 0.03
#: Answer length (tokens) assumed before a turn measured one.
DEFAULT_TURN_TOKENS = 64.0
#: A pipeline's one-off load is charged to this many turns (it stays loaded for the next
#: ones; a guess at how many more turns a conversation has).
LOAD_TURNS = 8
#: Prefill is named in a reason when it is at least this share of the chosen turn's time.
PREFILL_NOTE_SHARE = 0.15


def _seconds(value: float) -> str:
    """A duration for a reason: "1.3 s", "0.25 s", "8 ms"."""
    if value >= 1:
        return f"{value:.1f} s"
    return f"{value:.2f} s" if value >= 0.01 else f"{value * 1000:.0f} ms"


def _mtp(depth: int) -> DecodingMethod:
    return DecodingMethod.mtp(depth)


@dataclass(frozen=True)
class Decision:
    """What Auto runs for the next turn (a greedy method: plain, MTP n=k or prompt lookup),
    and why, in words for the chat."""

    method: DecodingMethod
    reason: str
    #: Predicted speed relative to plain decoding (None when nothing is known yet).
    predicted_speedup: float | None = None
    #: A turn run to measure an option: MTP again after plain turns, prompt lookup untimed.
    probe: bool = False
    mtp_speedup: float | None = None  # plain chosen: MTP's predicted speed relative to plain

    @property
    def label(self) -> str:
        return self.method.short_label

    def summary(self) -> str:
        """E.g. "MTP n=2: 78 % accepted, 1.3x" or "plain: drafts rejected, MTP would be 0.6x"."""
        return f"{self.label}: {self.reason}"


@dataclass
class _Cost:
    seconds: float
    weight: float
    #: The context (tokens) the steps were measured at, smoothed as `seconds` is.
    context: float = 0.0


@dataclass
class AdaptivePolicy:
    """Decides plain vs MTP depth vs prompt lookup turn by turn. Feed it every turn with
    `observe()`, ask it with `decide()` before the next; `within_turn_check()` gives the engine
    its mid-turn test.

    `start` is where it begins (the benchmark's recommendation: plain decoding or an MTP
    depth; MTP n=1 when there is none); `start_speedup` / `start_acceptance` are that
    benchmark's figures, used as priors. Every method it compares is greedy
    (`DecodingMethod.drafting`); the turn's own sampling is added by
    `core.auto.turns.turn_settings`.
    """

    start: DecodingMethod = UNBENCHMARKED_START
    start_speedup: float | None = None
    start_acceptance: float | None = None
    benchmarked: bool = False
    max_depth: int = MAX_DEPTH
    first_probe_after: int = FIRST_PROBE_AFTER
    #: Prompt lookup as Auto runs it (the chat's drafts per step and n-gram size, see
    #: `use_lookup_settings`); None: prompt lookup is not an option.
    lookup: DecodingMethod | None = DEFAULT_LOOKUP
    #: The sampled turns this policy decides (None: greedy turns, the root policy).
    band: SamplingBand | None = None
    #: The root's policy per sampled band (`for_sampling`), made on first use.
    _bands: dict[SamplingBand, AdaptivePolicy] = field(default_factory=dict, init=False)
    _lookup: LookupEvidence = field(
        default_factory=lambda: LookupEvidence(ACCEPTANCE_DECAY, COST_ALPHA, FULL_WEIGHT_STEPS),
        init=False,
    )
    #: Prefill and load costs per decoding path, and the path each text method last took.
    _turn_costs: TurnCosts = field(default_factory=TurnCosts, init=False)
    _text_paths: dict[str, str] = field(default_factory=dict, init=False)
    #: Measured seconds per step of plain decoding and of MTP per depth.
    _costs: dict[DecodingMethod, _Cost] = field(default_factory=dict, init=False)
    #: How step costs grow with the context, and the context the coming turn decodes at
    #: (set by `decide`; None: unknown, costs are compared as measured).
    _growth: ContextGrowth = field(default_factory=ContextGrowth, init=False)
    _coming_context: float | None = field(default=None, init=False)
    _trials: list[float] = field(default_factory=list, init=False)
    _accepted: list[float] = field(default_factory=list, init=False)
    _turn_length: float | None = field(default=None, init=False)
    _current: DecodingMethod = field(default=PLAIN, init=False)
    _turns: int = field(default=0, init=False)
    _plain_turns: int = field(default=0, init=False)
    _mtp_turns_in_stint: int = field(default=0, init=False)
    _probe_interval: int = field(default=FIRST_PROBE_AFTER, init=False)
    _last: Decision | None = field(default=None, init=False)
    _draft_cost_prior: float = field(default=PRIOR_DRAFT_COST, init=False)
    _failures: int = field(default=0, init=False)
    #: The MTP method that ran last (None: none yet).
    _last_mtp: DecodingMethod | None = field(default=None, init=False)
    _plain: Decision | None = field(default=None, init=False)  # this stint of plain turns
    _last_mtp_loss: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if not (self.start.is_plain or self.start.uses_mtp_head):
            raise ValueError(f"Auto starts from plain decoding or an MTP depth, not {self.start}")
        self.start = self.start.drafting
        if self.start.uses_mtp_head:
            self.start = _mtp(max(1, min(self.start.drafts, self.max_depth)))
        if self.lookup is not None:
            self.lookup = self.lookup.drafting
        self._current = self.start
        self._probe_interval = self.first_probe_after
        if self.start_acceptance is not None:
            # The benchmark's acceptance as weak evidence for the first position.
            self._trials = [2.0]
            self._accepted = [2.0 * self.start_acceptance]
            if self.start_speedup and self.start_speedup > 0:
                depth = self.start.drafts or 1
                ratio = expected_tokens([self.start_acceptance] * depth, depth) / (
                    self.start_speedup
                )
                self._draft_cost_prior = max((ratio - 1) / depth, 0.05)
        if self.start.is_plain and self.start_speedup:
            # Plain from the start: probing costs what the benchmark measured MTP to lose.
            self._last_mtp_loss = max(1 / self.start_speedup - 1, 0.0)
            budget = math.ceil(self._last_mtp_loss / PROBE_BUDGET)
            self._probe_interval = min(max(self.first_probe_after, budget), MAX_PROBE_INTERVAL)

    # --- what is known ------------------------------------------------------------------

    @property
    def current(self) -> DecodingMethod:
        return self._current

    @property
    def last_decision(self) -> Decision | None:
        return self._last

    @property
    def turns(self) -> int:
        return self._turns

    def acceptance(self) -> list[float]:
        """Per-draft acceptance estimates for positions 1..max_depth."""
        out: list[float] = []
        previous = 0.5 if self.start_acceptance is None else self.start_acceptance
        for i in range(self.max_depth):
            trials = self._trials[i] if i < len(self._trials) else 0.0
            if trials >= 0.5:
                # Beta(1, 1) prior: a few rejections do not read as 0 % forever.
                value = (self._accepted[i] + 1.0) / (trials + 2.0)
                if i > 0:
                    value = min(value, 1.0)
            else:
                value = previous * POSITION_DECAY if i > 0 else previous
            out.append(value)
            previous = value
        return out

    def acceptance_rate(self) -> float | None:
        """Accepted drafts over drafts tried, from the recent evidence (None: no drafts yet)."""
        trials = sum(self._trials)
        return sum(self._accepted) / trials if trials >= 0.5 else None

    def step_cost(self, method: DecodingMethod) -> float | None:
        """Seconds per decoding step of plain decoding or MTP at a depth, at the coming turn's
        context: measured, or estimated from what was."""
        known = self._measured(method.drafting)
        if known is not None:
            return known
        plain = self._measured(PLAIN)
        measured = sorted(m.drafts for m in self._costs if m.uses_mtp_head)
        if method.is_plain:
            if not measured:
                return None
            depth = measured[0]
            cost = self._measured(_mtp(depth))
            assert cost is not None
            return cost / (1 + depth * self._draft_cost_prior)
        base = plain if plain is not None else self.step_cost(PLAIN)
        if base is None:
            return None
        depth = method.drafts
        per_draft = self._draft_cost_prior
        if measured:
            nearest = min(measured, key=lambda d: abs(d - depth))
            nearest_s = self._measured(_mtp(nearest))
            assert nearest_s is not None
            if plain is not None:
                per_draft = max((nearest_s / base - 1) / nearest, 0.0)
            if nearest < depth:
                # Beyond the measured depths: the nearest cost plus the per-draft slope.
                return nearest_s + (depth - nearest) * per_draft * base
        return base * (1 + depth * per_draft)

    def measured_step_cost(self, method: DecodingMethod) -> float | None:
        """`method`'s smoothed step cost as measured, at the contexts it ran at (None when it
        never ran); `step_cost` moves it to the coming turn's context."""
        known = self._costs.get(method.drafting)
        return known.seconds if known is not None else None

    def _measured(self, method: DecodingMethod) -> float | None:
        """`method`'s measured step cost moved to the coming turn's context (as measured when
        that is unknown); None when it never ran."""
        known = self._costs.get(method)
        if known is None:
            return None
        if self._coming_context is None:
            return known.seconds
        slope = self._growth_slope(method)
        return at_context(known.seconds, known.context, self._coming_context, method, slope)

    def _growth_slope(self, method: DecodingMethod) -> float:
        """Seconds per context token of a plain step's attention for `method`'s costs
        (core.auto.step_context), its prior scaled by a plain step's cost as measured."""
        plain = self._costs.get(PLAIN)
        if plain is not None:
            short = plain.seconds
        else:
            mtp_costs = [(m, c) for m, c in self._costs.items() if m.uses_mtp_head]
            short = (
                min(c.seconds / (1 + m.drafts * self._draft_cost_prior) for m, c in mtp_costs)
                if mtp_costs
                else 0.0
            )
        return self._growth.slope(method, short or None)

    def predicted_rate(self, method: DecodingMethod) -> float | None:
        """Tokens per second predicted for plain decoding or MTP at a depth."""
        cost = self.step_cost(method)
        if cost is None or cost <= 0:
            return None
        if method.is_plain:
            return 1.0 / cost
        return expected_tokens(self.acceptance(), method.drafts) / cost

    def predicted_speedup(self, method: DecodingMethod) -> float | None:
        rate, plain = self.predicted_rate(method), self.predicted_rate(PLAIN)
        if rate is None or plain is None:
            return None
        return rate / plain

    def lookup_tokens_per_step(self) -> float | None:
        """Tokens a prompt-lookup step would yield on this conversation (recent turns weigh
        more); None before any answer was replayed."""
        return self._lookup.tokens_per_step()

    def lookup_step_cost(self) -> float | None:
        """Seconds per prompt-lookup step: measured, else LOOKUP_STEP_PRIOR plain steps."""
        return self._lookup.step_cost(self.step_cost(PLAIN))

    def predicted_lookup_rate(self) -> float | None:
        """Tokens per second of a prompt-lookup turn of the usual length."""
        if not self.lookup:
            return None
        return self._lookup.rate(self.step_cost(PLAIN), self._turn_length or DEFAULT_TURN_TOKENS)

    # --- learning -----------------------------------------------------------------------

    def observe(self, sample: TurnSample) -> None:
        """Learn from a finished turn (cancelled and short turns count for what they hold); a
        sampled turn teaches its band's policy only."""
        policy = self.for_sampling(sample.sampling)
        if policy is not self:
            policy.observe(sample)
            return
        self._turns += 1
        self._learn_turn_cost(sample)
        self._trials = [t * ACCEPTANCE_DECAY for t in self._trials]
        self._accepted = [a * ACCEPTANCE_DECAY for a in self._accepted]
        self._lookup.learn(sample)
        method = sample.method.drafting
        if method.kind == "lookup":
            return  # a lookup turn says nothing about MTP or plain decoding
        mtp = method if method.uses_mtp_head else None
        context = context_of(sample.prompt_tokens, sample.generated_tokens)
        if mtp is not None:
            sizes, times = sample.mtp_part()
            self._learn_cost(mtp, times, context)
            trials, accepted = draft_trials(sizes, mtp.drafts, sample.max_new_tokens)
            if sum(trials):
                self._learn_acceptance(trials, accepted)
        _plain_sizes, plain_times = sample.plain_part()
        if mtp is None:
            self._learn_cost(PLAIN, plain_times, context)
        elif len(plain_times) > 2:
            self._learn_cost(PLAIN, plain_times[1:], context)  # the first is the re-prefill
        generated = sample.generated_tokens
        if generated:
            self._turn_length = (
                float(generated)
                if self._turn_length is None
                else 0.5 * self._turn_length + 0.5 * generated
            )
        if mtp is not None:
            self._last_mtp_loss = self._turn_loss(sample)
            self._last_mtp = mtp
        ran_mtp = mtp is not None and sample.switched_at is None
        if ran_mtp:
            self._plain_turns = 0
            self._mtp_turns_in_stint += 1
        else:
            self._plain_turns += 1
            if mtp is not None:  # fell back within the turn
                self._mtp_turns_in_stint += 1
                self._current = PLAIN
                self._end_mtp_stint()

    def _learn_turn_cost(self, sample: TurnSample) -> None:
        """The turn's prefill on the path it ran (core.auto.turn_costs)."""
        if not sample.decoder:
            return  # a sample made by hand, without what ran it
        path = path_of(sample.method, sample.decoder, sample.images)
        if not sample.images:
            self._text_paths[sample.method.kind] = path
        ttft = sample.step_times_s[0] if sample.step_times_s else None
        self._turn_costs.observe(
            path, sample.prompt_tokens, ttft, sample.prompt_chars, sample.reused_tokens
        )

    def _learn_cost(self, method: DecodingMethod, times: Sequence[float], context: float) -> None:
        measured = _step_cost(times)
        if measured is None:
            return
        seconds, steps = measured
        weight = min(steps / FULL_WEIGHT_STEPS, 1.0)
        self._growth.observe(method, context, seconds, weight)
        known = self._costs.get(method)
        if known is None:
            self._costs[method] = _Cost(seconds, weight, context)
            return
        alpha = COST_ALPHA * weight
        known.seconds = (1 - alpha) * known.seconds + alpha * seconds
        known.context = (1 - alpha) * known.context + alpha * context
        known.weight = min(known.weight + weight, 10.0)

    def _learn_acceptance(self, trials: Sequence[int], accepted: Sequence[int]) -> None:
        size = max(len(trials), len(self._trials))
        self._trials += [0.0] * (size - len(self._trials))
        self._accepted += [0.0] * (size - len(self._accepted))
        for i, (t, a) in enumerate(zip(trials, accepted, strict=True)):
            self._trials[i] += t
            self._accepted[i] += a

    def _turn_loss(self, sample: TurnSample) -> float:
        """How much longer this turn's decoding took than plain decoding would have, as a
        fraction of the plain time (0 when it was faster or plain's cost is unknown)."""
        plain = self.step_cost(PLAIN)
        tokens = sample.generated_tokens - (sample.step_sizes[0] if sample.step_sizes else 0)
        if plain is None or tokens <= 0 or len(sample.step_times_s) < 2:
            return 0.0
        span = sample.step_times_s[-1] - sample.step_times_s[0]
        return max(span / (tokens * plain) - 1.0, 0.0)

    def _end_mtp_stint(self) -> None:
        """MTP just lost to plain decoding: when to probe it again. A stint of one turn was a
        failed probe, so the wait doubles; the wait also keeps probes within PROBE_BUDGET."""
        if self._mtp_turns_in_stint > 1:
            self._failures = 0
        else:
            self._failures += 1
        budget = math.ceil(self._last_mtp_loss / PROBE_BUDGET)
        interval = max(self.first_probe_after, budget) * 2 ** max(self._failures - 1, 0)
        self._probe_interval = min(interval, MAX_PROBE_INTERVAL)
        self._mtp_turns_in_stint = 0

    # --- deciding -----------------------------------------------------------------------

    def decide(self, context: TurnContext | None = None) -> Decision:
        """What the next turn runs, with the reason in words. With a `context` the options
        are compared by predicted turn time, prefill and pipeline loads included."""
        context = context or TurnContext()
        policy = self.for_sampling(context.sampling)
        tokens = self.prompt_tokens(context)
        policy._coming_context = (
            context_of(tokens, round(self.expected_turn_tokens())) if tokens else None
        )
        if policy is not self:
            decision = policy.decide(context)
            if self._text_paths and "app" not in self._text_paths.values():
                # openvino-genai runs this model's text turns, and its MTP decodes greedily.
                why = "openvino-genai runs this model; its MTP decodes greedily"
                decision = Decision(PLAIN, why, predicted_speedup=1.0)
            label = policy.band.label(context.sampling.temperature) if policy.band else ""
            if policy.turns:  # e.g. "..., from this band's 3 turns: 18% accepted, 0.9x"
                label += f", from this band's {policy.turns} turn{'s' * (policy.turns > 1)}"
            self._last = replace(decision, reason=f"{label}: {decision.reason}")
            return self._last
        decision = self._first_decision() if self._turns == 0 else self._next_decision()
        if decision.method.is_plain and not self._current.is_plain:
            self._end_mtp_stint()
        self._current = decision.method
        if context.images:
            # A detour: the MTP/plain state above stays as text turns left it.
            decision = self._image_turn(decision, context)
        else:
            decision = self._maybe_lookup(decision, context)
        self._last = decision
        return decision

    def for_sampling(self, sampling: Sampling) -> AdaptivePolicy:
        """The policy that learns and decides turns with `sampling`: this one for greedy
        turns, else its band's (made on first use from the benchmark's start, with no
        acceptance or step cost carried over: a sampled turn measures its own)."""
        band = band_of(sampling)
        if band is None or self.band is not None:
            return self
        policy = self._bands.get(band)
        if policy is None:
            policy = AdaptivePolicy(
                start=self.start,
                max_depth=self.max_depth,
                first_probe_after=self.first_probe_after,
                lookup=None,
                band=band,
            )
            policy._draft_cost_prior = self._draft_cost_prior  # a device property
            policy._turn_costs, policy._text_paths = self._turn_costs, self._text_paths
            self._bands[band] = policy
        return policy

    def use_lookup_settings(self, lookup: DecodingMethod) -> None:
        """Run prompt lookup with the chat's drafts per step and n-gram size (when it is an
        option). Evidence gathered with other settings (tokens per step, step cost) is
        dropped: both change."""
        lookup = lookup.drafting
        if self.lookup is None or lookup == self.lookup:
            return
        self.lookup = lookup
        self._lookup = LookupEvidence(ACCEPTANCE_DECAY, COST_ALPHA, FULL_WEIGHT_STEPS)

    def share_loaded(self, paths: set[str]) -> None:
        """Use `paths` as the record of which pipelines have run (and are loaded) on this
        model: conversations on one model share it, so a pipeline's load is charged once."""
        self._turn_costs.ran = paths

    def lookup_settings_text(self) -> str:
        lookup = self.lookup or DecodingMethod.lookup()
        return f"K={lookup.drafts}, n-gram {lookup.ngram} from the chat settings"

    def expected_turn_tokens(self) -> float:
        return self._turn_length or DEFAULT_TURN_TOKENS

    def prompt_tokens(self, context: TurnContext) -> int:
        """The coming prompt's length in tokens (estimated from its characters)."""
        return self._turn_costs.tokens_for(context.prompt_chars) if context.prompt_chars else 0

    def turn_time(
        self, rate: float, path: str, context: TurnContext, load_s: float = 0.0
    ) -> tuple[float, float]:
        """(predicted seconds for the coming turn on `path` decoding at `rate` tokens/s,
        the prefill's part of it); `load_s` is a pipeline's one-off load, charged to
        LOAD_TURNS turns."""
        tokens = self.prompt_tokens(context)
        prefill = (self._turn_costs.prefill_s(path, tokens) or 0.0) if tokens else 0.0
        return prefill + load_s / LOAD_TURNS + self.expected_turn_tokens() / rate, prefill

    def _text_path(self, method: DecodingMethod) -> str:
        """The path a text turn of `method` would take: where it ran before, else where the
        model's other text turns ran (the app's decoder runs every method; a model only
        openvino-genai runs has a pipeline per method)."""
        if method.kind in self._text_paths:
            return self._text_paths[method.kind]
        learned = set(self._text_paths.values())
        return text_path(method, fast="app" in learned or not learned)

    def _maybe_lookup(self, base: Decision, context: TurnContext) -> Decision:
        """Prompt lookup instead of `base` (plain or MTP) when its turn is predicted faster by
        the switch margin, prefill and its pipeline's first load included (never measured:
        tried when within the exploration band)."""
        lookup_rate, lookup = self.predicted_lookup_rate(), self.lookup
        # It must beat every option, not only this turn's (which may be a measuring turn).
        options = (base.method, PLAIN, *(_mtp(d) for d in range(1, self.max_depth + 1)))
        rates = {m: r for m in options if (r := self.predicted_rate(m)) is not None}
        if lookup_rate is None or lookup is None or not rates:
            return base
        best = max(rates, key=lambda c: rates[c])
        base_rate = rates[best]
        # Tentative until a full turn's worth of steps was measured: tried like a new option.
        measured = self._lookup.measured
        bonus = 1.0 if measured else 1 + EXPLORE_BAND
        costs = self._turn_costs
        lookup_path = self._text_path(lookup)
        load = costs.load_s(lookup_path, context.model_load_s)
        lookup_time, lookup_prefill = self.turn_time(lookup_rate, lookup_path, context, load)
        base_path = self._text_path(best)
        base_time, base_prefill = self.turn_time(base_rate, base_path, context)
        decodes_faster = lookup_rate * bonus > base_rate * (1 + SWITCH_MARGIN)
        if base_time <= lookup_time / bonus * (1 + SWITCH_MARGIN):
            if not decodes_faster:
                return base
            # Faster decoding, but the prompt's prefill (or the load) eats the gain: say so.
            tokens = self.prompt_tokens(context)
            parts = []
            if lookup_prefill > base_prefill:
                parts.append(
                    f"its pipeline would take {_seconds(lookup_prefill)} to prefill this "
                    f"~{tokens:,}-token prompt against {_seconds(base_prefill)} for "
                    f"{best.short_label}"
                )
            if load:
                parts.append(f"loading its pipeline takes ~{_seconds(load)}")
            why = "; prompt lookup decodes faster, but " + " and ".join(parts or ["not enough"])
            return replace(base, reason=base.reason + why)
        per_step = self.lookup_tokens_per_step()
        assert per_step is not None
        plain = self.predicted_rate(PLAIN)
        speedup = lookup_rate / plain if plain else None
        ratio = f", {speedup:.1f}x" if speedup is not None else ""
        note = "" if measured else " (trying it)"
        extra = ""
        if lookup_prefill >= max(PREFILL_NOTE_SHARE * lookup_time, 0.01):
            extra = (
                f"; with prefill ({lookup_prefill:.2f} s vs {base_prefill:.2f} s) the turn "
                f"is {lookup_time:.2f} s vs {base_time:.2f} s"
            )
        return Decision(
            lookup,
            f"the last answers repeat earlier text ({per_step:.1f} tokens per step replayed, "
            f"{self.lookup_settings_text()}){ratio}, beats {base.label}{note}{extra}",
            predicted_speedup=speedup,
            probe=not measured,
        )

    def _image_turn(self, base: Decision, context: TurnContext) -> Decision:
        """A turn with images runs on openvino-genai's MTP or plain pipeline (prompt lookup
        cannot read images): the one predicted faster with its own prefill and load."""
        mtp = base.method
        if not mtp.uses_mtp_head:
            mtp = max(
                (_mtp(d) for d in range(1, self.max_depth + 1)),
                key=lambda m: self.predicted_rate(m) or 0.0,
            )
        mtp_rate, plain_rate = self.predicted_rate(mtp), self.predicted_rate(PLAIN)
        if mtp_rate is None or plain_rate is None:
            return replace(base, reason=base.reason + "; image turn (no prompt lookup)")
        costs = self._turn_costs
        mtp_load = costs.load_s("genai-mtp", context.model_load_s)
        mtp_time, mtp_prefill = self.turn_time(mtp_rate, "genai-mtp+image", context, mtp_load)
        plain_time, plain_prefill = self.turn_time(
            plain_rate, "genai-plain+image", context, context.plain_load_s
        )
        margin = (1 + SWITCH_MARGIN) if base.method.is_plain else 1.0
        # From plain decoding, MTP must be clearly faster.
        chosen = mtp if mtp_time * margin < plain_time else PLAIN
        ran_mtp = not chosen.is_plain
        winner, other = (mtp_time, plain_time) if ran_mtp else (plain_time, mtp_time)
        prefill = mtp_prefill if ran_mtp else plain_prefill
        what = "MTP" if ran_mtp else "plain decoding"
        return Decision(
            chosen,
            f"image turn (no prompt lookup): {what} predicted {winner:.2f} s with "
            f"{prefill:.2f} s prefill, against {other:.2f} s",
            predicted_speedup=(mtp_rate / plain_rate) if ran_mtp else 1.0,
        )

    def _first_decision(self) -> Decision:
        if self.band is not None:
            what = "MTP" if self.start.uses_mtp_head else "plain decoding"
            return Decision(self.start, f"first turn in this band; measuring {what}")
        if self.start.is_plain:
            speed = f", MTP was {self.start_speedup:.2f}x" if self.start_speedup else ""
            return Decision(PLAIN, f"benchmark found plain decoding faster{speed}")
        if not self.benchmarked:
            return Decision(self.start, "not benchmarked on this device yet; measuring")
        speed = f"{self.start_speedup:.2f}x" if self.start_speedup else "fastest"
        return Decision(self.start, f"benchmark: {speed}", predicted_speedup=self.start_speedup)

    def _next_decision(self) -> Decision:
        current = self._current
        if current.is_plain:
            return self._from_plain()
        options = [current, PLAIN]
        if current.drafts > 1:
            options.append(_mtp(current.drafts - 1))
        if current.drafts < self.max_depth:
            options.append(_mtp(current.drafts + 1))
        scores = self._scores(options)
        if current not in scores:
            return Decision(current, "measuring", predicted_speedup=None)
        best = max(scores, key=lambda option: scores[option])
        choice = current
        if best != current and scores[best] > scores[current] * (1 + SWITCH_MARGIN):
            choice = best
        speedup = self.predicted_speedup(choice) if not choice.is_plain else None
        if PLAIN not in self._costs and speedup is not None and speedup < CHECK_PLAIN_BELOW:
            # Plain decoding's cost is only a guess so far: measure it once.
            rate = self.acceptance_rate()
            seen = f"{rate:.0%} accepted; " if rate is not None else ""
            return Decision(PLAIN, f"{seen}one plain turn to compare with {choice.short_label}")
        return self._explain(choice, explore=choice not in self._costs)

    def _from_plain(self) -> Decision:
        self_plain_turns = self._plain_turns
        if self_plain_turns >= self._probe_interval:
            self._plain_turns = 0
            probe = _mtp(1)
            rate = self.acceptance_rate()
            seen = f"; last {rate:.0%} accepted" if rate is not None else ""
            return Decision(
                probe,
                f"trying MTP again after {self_plain_turns} plain turns{seen}",
                predicted_speedup=self.predicted_speedup(probe),
                probe=True,
            )
        plain_rate = self.predicted_rate(PLAIN)
        if self_plain_turns <= 1 and self._last_mtp is not None and plain_rate:
            # Right after MTP ran its acceptance is fresh: go back if it (or a neighbour not
            # measured yet) is predicted faster.
            last = self._last_mtp.drafts
            scores = self._scores(
                [_mtp(d) for d in (last - 1, last, last + 1) if 1 <= d <= self.max_depth]
            )
            if scores:
                best = max(scores, key=lambda d: scores[d])
                if scores[best] > plain_rate * (1 + SWITCH_MARGIN):
                    self._plain_turns = 0
                    return self._explain(best, explore=best not in self._costs)
        return self._explain(PLAIN)

    def _scores(self, options: Sequence[DecodingMethod]) -> dict[DecodingMethod, float]:
        """Predicted rates, with a bonus for options never measured (worth a turn to see)."""
        scores: dict[DecodingMethod, float] = {}
        for option in options:
            rate = self.predicted_rate(option)
            if rate is None:
                continue
            if option not in self._costs:
                rate *= 1 + EXPLORE_BAND
            scores[option] = rate
        return scores

    def _explain(self, choice: DecodingMethod, explore: bool = False) -> Decision:
        rate = self.acceptance_rate()
        accepted = f"{rate:.0%} accepted" if rate is not None else "no drafts yet"
        if choice.is_plain and self._current.is_plain and self._plain is not None:
            return self._plain  # same stint
        if choice.is_plain:
            depths = [_mtp(d) for d in range(1, self.max_depth + 1)]
            best = max(depths, key=lambda m: self.predicted_rate(m) or 0.0)
            speedup = self.predicted_speedup(best)
            would = f", MTP would be {speedup:.1f}x" if speedup is not None else ""
            what = "drafts rejected" if rate is None or rate < 0.5 else accepted
            why = f"{what}{would}{self._length_note(best, speedup)}"
            self._plain = Decision(PLAIN, why, predicted_speedup=1.0, mtp_speedup=speedup)
            return self._plain
        self._plain = None
        speedup = self.predicted_speedup(choice)
        ratio = f", {speedup:.1f}x" if speedup is not None and math.isfinite(speedup) else ""
        note = " (trying this depth)" if explore else ""
        return Decision(choice, f"{accepted}{ratio}{note}", predicted_speedup=speedup)

    def _length_note(self, best: DecodingMethod, speedup: float | None) -> str:
        """ " at this conversation's length (~N tokens)" when the coming turn's context is what
        makes `best` lose: at the contexts its costs were measured at it would win."""
        coming = self._coming_context
        if coming is None or speedup is None or speedup >= 1.0:
            return ""
        self._coming_context = None
        try:
            as_measured = self.predicted_speedup(best)
        finally:
            self._coming_context = coming
        if as_measured is None or as_measured <= 1.0 + SWITCH_MARGIN:
            return ""
        return f" at this conversation's length (~{round(coming, -2):,.0f} tokens)"

    # --- within a turn ------------------------------------------------------------------

    def within_turn_check(
        self, depth: int, max_new_tokens: int, *, plain_load_s: float = 0.0
    ) -> WithinTurnCheck:
        """The engine's test, asked after every MTP step of a turn at `depth`."""
        plain = self.step_cost(PLAIN)
        return WithinTurnCheck(
            depth=depth,
            max_new_tokens=max_new_tokens,
            plain_step_s=plain,
            draft_cost=self._draft_cost_prior,
            expected_length=self._turn_length,
            plain_load_s=plain_load_s,
        )


__all__ = [
    "UNBENCHMARKED_START",
    "AdaptivePolicy",
    "Decision",
    "TurnContext",
    "TurnSample",
    "WithinTurnCheck",
    "draft_trials",
    "expected_tokens",
]
