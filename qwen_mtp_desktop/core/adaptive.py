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
drafts clearly lose (see Engine for how, and the README for what that switch costs).

Prompt lookup (core.decoding.prompt_lookup) is the third option. Its drafts are n-grams of the
conversation, so how well it would do on an answer is known exactly after the fact, whatever
decoded it: every greedy text turn's stats carry a replay of prompt lookup over the answer
(`GenerationStats.lookup_replay`: its steps and tokens). Auto keeps the tokens per lookup step
(weighted towards recent turns, like acceptance) and the measured cost of a lookup step (a
prior of LOOKUP_STEP_PRIOR plain steps until one ran), and runs prompt lookup for the next
turn when its predicted rate beats the plain-or-MTP choice by the switch margin. A copy-heavy
conversation (editing, quoting, repeating) goes to prompt lookup; a free or counting one stays
with MTP or plain decoding. Lookup turns do not change the MTP/plain state.

What a turn costs before it decodes counts too (core.turn_costs): each path's prefill as a
function of the prompt's length (prompt lookup and image turns run on openvino-genai pipelines
that prefill slower or faster than the app's decoder), and loading a pipeline on its first turn.
`decide()` takes the coming turn's `TurnContext` (prompt length, images) and compares the
options by predicted turn time, prefill included: a long prompt can make prompt lookup lose
although it decodes faster, and an image turn (which prompt lookup cannot run) chooses between
openvino-genai's MTP and plain pipelines by their own prefill. Prompt lookup runs with the
chat's own drafts per step and n-gram size (`use_lookup_settings`), named in the reason.

What a turn measured and what is known before it (`TurnSample`, `TurnContext`) are in
core.turn_record, the within-turn test (`WithinTurnCheck`) in core.within_turn; both are
re-exported here. No Qt, no OpenVINO: everything here runs on recorded step sizes and times.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from qwen_mtp_desktop.core.decoding.prompt_lookup import (
    DEFAULT_LOOKUP_TOKENS,
    DEFAULT_MAX_NGRAM_SIZE,
)
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import GenerationSettings
from qwen_mtp_desktop.core.turn_costs import TurnCosts, path_of, text_path
from qwen_mtp_desktop.core.turn_record import (
    Choice,
    TurnContext,
    TurnSample,
    draft_trials,
    expected_tokens,
)
from qwen_mtp_desktop.core.turn_record import step_cost as _step_cost
from qwen_mtp_desktop.core.within_turn import PRIOR_DRAFT_COST, SWITCH_MARGIN, WithinTurnCheck

MAX_DEPTH = 4
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
#: Cost of a prompt-lookup step in plain steps until one was measured (it runs on
#: openvino-genai's continuous-batching pipeline and verifies K + 1 tokens; measured on the
#: demo model 1.1-1.4x a plain step).
LOOKUP_STEP_PRIOR = 1.3
#: Replayed lookup steps a turn needs before its tokens-per-step counts fully.
LOOKUP_FULL_WEIGHT_STEPS = 8
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


def choice_label(choice: Choice) -> str:
    return "plain" if choice is None else f"MTP n={choice}"


@dataclass(frozen=True)
class Decision:
    """What Auto runs for the next turn, and why, in words for the chat."""

    choice: Choice
    reason: str
    #: Predicted speed relative to plain decoding (None when nothing is known yet).
    predicted_speedup: float | None = None
    probe: bool = False
    #: Run prompt lookup (then `choice` is None).
    lookup: bool = False

    @property
    def label(self) -> str:
        return "prompt lookup" if self.lookup else choice_label(self.choice)

    @property
    def depth(self) -> int | None:
        return self.choice

    def summary(self) -> str:
        """E.g. "MTP n=2: 78 % accepted, 1.3x" or "plain: drafts rejected, MTP would be 0.6x"."""
        return f"{self.label}: {self.reason}"


@dataclass
class _Cost:
    seconds: float
    weight: float


@dataclass
class AdaptivePolicy:
    """Decides plain vs MTP depth turn by turn. Feed it every turn with `observe()`, ask it with
    `decide()` before the next; `within_turn_check()` gives the engine its mid-turn test.

    `start` is where it begins (the benchmark's recommendation, or 1 when there is none);
    `start_speedup` / `start_acceptance` are that benchmark's figures, used as priors.
    """

    start: Choice = 1
    start_speedup: float | None = None
    start_acceptance: float | None = None
    benchmarked: bool = False
    max_depth: int = MAX_DEPTH
    first_probe_after: int = FIRST_PROBE_AFTER
    #: Whether prompt lookup is an option, and its drafts per step.
    lookup: bool = True
    lookup_tokens: int = DEFAULT_LOOKUP_TOKENS
    max_ngram_size: int = DEFAULT_MAX_NGRAM_SIZE
    _lookup_cost: _Cost | None = field(default=None, init=False)
    #: Seconds a lookup turn's first decode step costs beyond the others.
    _lookup_extra: float = field(default=0.0, init=False)
    _lookup_steps: float = field(default=0.0, init=False)
    _lookup_tokens: float = field(default=0.0, init=False)
    #: Prefill and load costs per decoding path, and the path each text method last took.
    _turn_costs: TurnCosts = field(default_factory=TurnCosts, init=False)
    _text_paths: dict[str, str] = field(default_factory=dict, init=False)
    _costs: dict[Choice, _Cost] = field(default_factory=dict, init=False)
    _trials: list[float] = field(default_factory=list, init=False)
    _accepted: list[float] = field(default_factory=list, init=False)
    _turn_length: float | None = field(default=None, init=False)
    _current: Choice = field(default=None, init=False)
    _turns: int = field(default=0, init=False)
    _plain_turns: int = field(default=0, init=False)
    _mtp_turns_in_stint: int = field(default=0, init=False)
    _probe_interval: int = field(default=FIRST_PROBE_AFTER, init=False)
    _last: Decision | None = field(default=None, init=False)
    _draft_cost_prior: float = field(default=PRIOR_DRAFT_COST, init=False)
    _failures: int = field(default=0, init=False)
    _last_depth: int | None = field(default=None, init=False)
    _plain_reason: str | None = field(default=None, init=False)
    _last_mtp_loss: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        if self.start is not None:
            self.start = max(1, min(self.start, self.max_depth))
        self._current = self.start
        self._probe_interval = self.first_probe_after
        if self.start_acceptance is not None:
            # The benchmark's acceptance as weak evidence for the first position.
            self._trials = [2.0]
            self._accepted = [2.0 * self.start_acceptance]
            if self.start_speedup and self.start_speedup > 0:
                depth = self.start or 1
                ratio = expected_tokens([self.start_acceptance] * depth, depth) / (
                    self.start_speedup
                )
                self._draft_cost_prior = max((ratio - 1) / depth, 0.05)
        if self.start is None and self.start_speedup:
            # Plain from the start: probing costs what the benchmark measured MTP to lose.
            self._last_mtp_loss = max(1 / self.start_speedup - 1, 0.0)
            budget = math.ceil(self._last_mtp_loss / PROBE_BUDGET)
            self._probe_interval = min(max(self.first_probe_after, budget), MAX_PROBE_INTERVAL)

    # --- what is known ------------------------------------------------------------------

    @property
    def current(self) -> Choice:
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

    def step_cost(self, choice: Choice) -> float | None:
        """Seconds per decoding step in `choice`: measured, or estimated from what was."""
        known = self._costs.get(choice)
        if known is not None:
            return known.seconds
        plain = self._costs.get(None)
        measured = sorted(c for c in self._costs if c is not None)
        if choice is None:
            if not measured:
                return None
            depth = measured[0]
            return self._costs[depth].seconds / (1 + depth * self._draft_cost_prior)
        base = plain.seconds if plain is not None else self.step_cost(None)
        if base is None:
            return None
        per_draft = self._draft_cost_prior
        if measured:
            nearest = min(measured, key=lambda d: abs(d - choice))
            if plain is not None:
                per_draft = max((self._costs[nearest].seconds / base - 1) / nearest, 0.0)
            if nearest < choice:
                # Beyond the measured depths: the nearest cost plus the per-draft slope.
                return self._costs[nearest].seconds + (choice - nearest) * per_draft * base
        return base * (1 + choice * per_draft)

    def predicted_rate(self, choice: Choice) -> float | None:
        """Tokens per second predicted for `choice`."""
        cost = self.step_cost(choice)
        if cost is None or cost <= 0:
            return None
        if choice is None:
            return 1.0 / cost
        return expected_tokens(self.acceptance(), choice) / cost

    def predicted_speedup(self, choice: Choice) -> float | None:
        rate, plain = self.predicted_rate(choice), self.predicted_rate(None)
        if rate is None or plain is None:
            return None
        return rate / plain

    def lookup_tokens_per_step(self) -> float | None:
        """Tokens a prompt-lookup step would yield on this conversation (recent turns weigh
        more); None before any answer was replayed."""
        if self._lookup_steps < 0.5:
            return None
        return self._lookup_tokens / self._lookup_steps

    def lookup_step_cost(self) -> float | None:
        """Seconds per prompt-lookup step: measured, else LOOKUP_STEP_PRIOR plain steps."""
        if self._lookup_cost is not None:
            return self._lookup_cost.seconds
        plain = self.step_cost(None)
        return plain * LOOKUP_STEP_PRIOR if plain is not None else None

    def predicted_lookup_rate(self) -> float | None:
        """Tokens per second of a prompt-lookup turn of the usual length (its first step's
        extra cost spread over the turn's steps)."""
        per_step, cost = self.lookup_tokens_per_step(), self.lookup_step_cost()
        if not self.lookup or per_step is None or cost is None or cost <= 0:
            return None
        steps = max((self._turn_length or 64.0) / per_step, 1.0)
        return per_step / (cost + self._lookup_extra / steps)

    # --- learning -----------------------------------------------------------------------

    def observe(self, sample: TurnSample) -> None:
        """Learn from a finished turn (cancelled and short turns count for what they hold)."""
        self._turns += 1
        self._learn_turn_cost(sample)
        self._trials = [t * ACCEPTANCE_DECAY for t in self._trials]
        self._accepted = [a * ACCEPTANCE_DECAY for a in self._accepted]
        self._learn_lookup(sample)
        if sample.lookup:
            return  # a lookup turn says nothing about MTP or plain decoding
        if sample.depth is not None:
            sizes, times = sample.mtp_part()
            self._learn_cost(sample.depth, times)
            trials, accepted = draft_trials(sizes, sample.depth, sample.max_new_tokens)
            if sum(trials):
                self._learn_acceptance(trials, accepted)
        _plain_sizes, plain_times = sample.plain_part()
        if sample.depth is None:
            self._learn_cost(None, plain_times)
        elif len(plain_times) > 2:
            self._learn_cost(None, plain_times[1:])  # the first is the re-prefill
        generated = sample.generated_tokens
        if generated:
            self._turn_length = (
                float(generated)
                if self._turn_length is None
                else 0.5 * self._turn_length + 0.5 * generated
            )
        if sample.depth is not None:
            self._last_mtp_loss = self._turn_loss(sample)
            self._last_depth = sample.depth
        ran_mtp = sample.depth is not None and sample.switched_at is None
        if ran_mtp:
            self._plain_turns = 0
            self._mtp_turns_in_stint += 1
        else:
            self._plain_turns += 1
            if sample.depth is not None:  # fell back within the turn
                self._mtp_turns_in_stint += 1
                self._current = None
                self._end_mtp_stint()

    def _learn_turn_cost(self, sample: TurnSample) -> None:
        """The turn's prefill on the path it ran (core.turn_costs)."""
        if not sample.mode:
            return  # a sample made by hand, without what ran it
        path = path_of(sample.mode, sample.decoder, sample.images)
        if not sample.images:
            method = "lookup" if sample.lookup else "plain" if sample.depth is None else "mtp"
            self._text_paths[method] = path
        ttft = sample.step_times_s[0] if sample.step_times_s else None
        self._turn_costs.observe(path, sample.prompt_tokens, ttft, sample.prompt_chars)

    def _learn_lookup(self, sample: TurnSample) -> None:
        """Prompt lookup's tokens per step from the turn's replay, and its step cost from a
        turn that ran it."""
        self._lookup_steps *= ACCEPTANCE_DECAY
        self._lookup_tokens *= ACCEPTANCE_DECAY
        if sample.lookup_replay is not None and sample.lookup_replay[0] > 0:
            steps, tokens = sample.lookup_replay
            weight = min(steps / LOOKUP_FULL_WEIGHT_STEPS, 1.0) / steps
            self._lookup_steps += steps * weight
            self._lookup_tokens += tokens * weight
        times = sample.step_times_s
        if not sample.lookup or len(times) < 3 or times[-1] <= times[1]:
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
        steps = len(durations)
        seconds = sum(durations) / steps
        extra = max(times[1] - times[0] - seconds, 0.0)
        weight = min(steps / FULL_WEIGHT_STEPS, 1.0)
        if self._lookup_cost is None:
            self._lookup_cost = _Cost(seconds, weight)
            self._lookup_extra = extra
        else:
            alpha = COST_ALPHA * weight
            cost = self._lookup_cost
            cost.seconds = (1 - alpha) * cost.seconds + alpha * seconds
            cost.weight = min(cost.weight + weight, 10.0)
            self._lookup_extra = (1 - alpha) * self._lookup_extra + alpha * extra

    def _learn_cost(self, choice: Choice, times: Sequence[float]) -> None:
        measured = _step_cost(times)
        if measured is None:
            return
        seconds, steps = measured
        weight = min(steps / FULL_WEIGHT_STEPS, 1.0)
        known = self._costs.get(choice)
        if known is None:
            self._costs[choice] = _Cost(seconds, weight)
            return
        alpha = COST_ALPHA * weight
        known.seconds = (1 - alpha) * known.seconds + alpha * seconds
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
        plain = self.step_cost(None)
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
        decision = self._first_decision() if self._turns == 0 else self._next_decision()
        if decision.choice is None and self._current is not None:
            self._end_mtp_stint()
        self._current = decision.choice
        if context.images:
            # A detour: the MTP/plain state above stays as text turns left it.
            decision = self._image_turn(decision, context)
        else:
            decision = self._maybe_lookup(decision, context)
        self._last = decision
        return decision

    def use_lookup_settings(self, lookup_tokens: int, max_ngram_size: int) -> None:
        """Run prompt lookup with the chat's drafts per step and n-gram size. Evidence
        gathered with other settings (tokens per step, step cost) is dropped: both change."""
        if (lookup_tokens, max_ngram_size) == (self.lookup_tokens, self.max_ngram_size):
            return
        self.lookup_tokens, self.max_ngram_size = lookup_tokens, max_ngram_size
        self._lookup_cost, self._lookup_extra = None, 0.0
        self._lookup_steps = self._lookup_tokens = 0.0

    def share_loaded(self, paths: set[str]) -> None:
        """Use `paths` as the record of which pipelines have run (and are loaded) on this
        model: conversations on one model share it, so a pipeline's load is charged once."""
        self._turn_costs.ran = paths

    def lookup_settings_text(self) -> str:
        return f"K={self.lookup_tokens}, n-gram {self.max_ngram_size} from the chat settings"

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

    def _text_path(self, method: str) -> str:
        return self._text_paths.get(method, text_path(method, fast=True))

    def _maybe_lookup(self, base: Decision, context: TurnContext) -> Decision:
        """Prompt lookup instead of `base` (plain or MTP) when its turn is predicted faster by
        the switch margin, prefill and its pipeline's first load included (never measured:
        tried when within the exploration band)."""
        lookup_rate = self.predicted_lookup_rate()
        # It must beat every option, not only this turn's (which may be a measuring turn).
        options = (base.choice, None, *range(1, self.max_depth + 1))
        rates = {c: r for c in options if (r := self.predicted_rate(c)) is not None}
        if lookup_rate is None or not rates:
            return base
        best = max(rates, key=lambda c: rates[c])
        base_rate = rates[best]
        # Tentative until a full turn's worth of steps was measured: tried like a new option.
        measured = self._lookup_cost is not None and self._lookup_cost.weight >= 1.0
        bonus = 1.0 if measured else 1 + EXPLORE_BAND
        costs = self._turn_costs
        load = costs.load_s("lookup", context.model_load_s)
        lookup_time, lookup_prefill = self.turn_time(lookup_rate, "lookup", context, load)
        base_path = self._text_path("plain" if best is None else "mtp")
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
                    f"{choice_label(best)}"
                )
            if load:
                parts.append(f"loading its pipeline takes ~{_seconds(load)}")
            why = "; prompt lookup decodes faster, but " + " and ".join(parts or ["not enough"])
            return replace(base, reason=base.reason + why)
        per_step = self.lookup_tokens_per_step()
        assert per_step is not None
        plain = self.predicted_rate(None)
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
            None,
            f"answers copy the conversation ({per_step:.1f} tokens per step, "
            f"{self.lookup_settings_text()}){ratio}, beats {base.label}{note}{extra}",
            predicted_speedup=speedup,
            lookup=True,
        )

    def _image_turn(self, base: Decision, context: TurnContext) -> Decision:
        """A turn with images runs on openvino-genai's MTP or plain pipeline (prompt lookup
        cannot read images): the one predicted faster with its own prefill and load."""
        depth = base.choice or max(
            range(1, self.max_depth + 1), key=lambda d: self.predicted_rate(d) or 0.0
        )
        mtp_rate, plain_rate = self.predicted_rate(depth), self.predicted_rate(None)
        if mtp_rate is None or plain_rate is None:
            return replace(base, reason=base.reason + "; image turn (no prompt lookup)")
        costs = self._turn_costs
        mtp_load = costs.load_s("genai-mtp", context.model_load_s)
        mtp_time, mtp_prefill = self.turn_time(mtp_rate, "genai-mtp+image", context, mtp_load)
        plain_time, plain_prefill = self.turn_time(
            plain_rate, "genai-plain+image", context, context.plain_load_s
        )
        choice: Choice = depth if mtp_time < plain_time else None
        if base.choice is None and choice is not None:
            # Stay with plain unless MTP is clearly faster.
            choice = depth if mtp_time * (1 + SWITCH_MARGIN) < plain_time else None
        winner, other = (mtp_time, plain_time) if choice is not None else (plain_time, mtp_time)
        prefill = mtp_prefill if choice is not None else plain_prefill
        what = "MTP" if choice is not None else "plain decoding"
        return Decision(
            choice,
            f"image turn (no prompt lookup): {what} predicted {winner:.2f} s with "
            f"{prefill:.2f} s prefill, against {other:.2f} s",
            predicted_speedup=(mtp_rate / plain_rate) if choice is not None else 1.0,
        )

    def _first_decision(self) -> Decision:
        if self.start is None:
            speed = f", MTP was {self.start_speedup:.2f}x" if self.start_speedup else ""
            return Decision(None, f"benchmark found plain decoding faster{speed}")
        if not self.benchmarked:
            return Decision(self.start, "not benchmarked on this device yet; measuring")
        speed = f"{self.start_speedup:.2f}x" if self.start_speedup else "fastest"
        return Decision(self.start, f"benchmark: {speed}", predicted_speedup=self.start_speedup)

    def _next_decision(self) -> Decision:
        current = self._current
        if current is None:
            return self._from_plain()
        options: list[Choice] = [current, None]
        if current > 1:
            options.append(current - 1)
        if current < self.max_depth:
            options.append(current + 1)
        scores = self._scores(options)
        if current not in scores:
            return Decision(current, "measuring", predicted_speedup=None)
        best = max(scores, key=lambda option: scores[option])
        choice: Choice = current
        if best != current and scores[best] > scores[current] * (1 + SWITCH_MARGIN):
            choice = best
        speedup = self.predicted_speedup(choice) if choice is not None else None
        if None not in self._costs and speedup is not None and speedup < CHECK_PLAIN_BELOW:
            # Plain decoding's cost is only a guess so far: measure it once.
            rate = self.acceptance_rate()
            seen = f"{rate:.0%} accepted; " if rate is not None else ""
            return Decision(None, f"{seen}one plain turn to compare with MTP n={choice}")
        return self._explain(choice, explore=choice not in self._costs)

    def _from_plain(self) -> Decision:
        self_plain_turns = self._plain_turns
        if self_plain_turns >= self._probe_interval:
            self._plain_turns = 0
            depth = 1
            rate = self.acceptance_rate()
            seen = f"; last {rate:.0%} accepted" if rate is not None else ""
            return Decision(
                depth,
                f"trying MTP again after {self_plain_turns} plain turns{seen}",
                predicted_speedup=self.predicted_speedup(depth),
                probe=True,
            )
        plain_rate = self.predicted_rate(None)
        if self_plain_turns <= 1 and self._last_depth is not None and plain_rate:
            # Right after MTP ran its acceptance is fresh: go back if it (or a neighbour not
            # measured yet) is predicted faster.
            last = self._last_depth
            scores = self._scores(
                [d for d in (last - 1, last, last + 1) if 1 <= d <= self.max_depth]
            )
            if scores:
                best = max(scores, key=lambda d: scores[d])
                if scores[best] > plain_rate * (1 + SWITCH_MARGIN):
                    self._plain_turns = 0
                    return self._explain(best, explore=best not in self._costs)
        return self._explain(None)

    def _scores(self, options: Sequence[Choice]) -> dict[Choice, float]:
        """Predicted rates, with a bonus for options never measured (worth a turn to see)."""
        scores: dict[Choice, float] = {}
        for option in options:
            rate = self.predicted_rate(option)
            if rate is None:
                continue
            if option not in self._costs:
                rate *= 1 + EXPLORE_BAND
            scores[option] = rate
        return scores

    def _explain(self, choice: Choice, explore: bool = False) -> Decision:
        rate = self.acceptance_rate()
        accepted = f"{rate:.0%} accepted" if rate is not None else "no drafts yet"
        if choice is None and self._current is None and self._plain_reason:
            return Decision(None, self._plain_reason, predicted_speedup=1.0)  # same stint
        if choice is None:
            best = max(
                (d for d in range(1, self.max_depth + 1)),
                key=lambda d: self.predicted_rate(d) or 0.0,
            )
            speedup = self.predicted_speedup(best)
            would = f", MTP would be {speedup:.1f}x" if speedup is not None else ""
            what = "drafts rejected" if rate is None or rate < 0.5 else accepted
            self._plain_reason = f"{what}{would}"
            return Decision(None, self._plain_reason, predicted_speedup=1.0)
        self._plain_reason = None
        speedup = self.predicted_speedup(choice)
        ratio = f", {speedup:.1f}x" if speedup is not None and math.isfinite(speedup) else ""
        note = " (trying this depth)" if explore else ""
        return Decision(choice, f"{accepted}{ratio}{note}", predicted_speedup=speedup)

    # --- within a turn ------------------------------------------------------------------

    def within_turn_check(
        self, depth: int, max_new_tokens: int, *, plain_load_s: float = 0.0
    ) -> WithinTurnCheck:
        """The engine's test, asked after every MTP step of a turn at `depth`."""
        plain = self.step_cost(None)
        return WithinTurnCheck(
            depth=depth,
            max_new_tokens=max_new_tokens,
            plain_step_s=plain,
            draft_cost=self._draft_cost_prior,
            expected_length=self._turn_length,
            plain_load_s=plain_load_s,
        )


def policy_from_recommendation(
    depth: int | None,
    *,
    benchmarked: bool,
    speedup: float | None = None,
    acceptance: float | None = None,
    max_depth: int = MAX_DEPTH,
) -> AdaptivePolicy:
    """A policy starting from a benchmark's verdict (`benchmarked=False`: none, start at n=1)."""
    if not benchmarked:
        return AdaptivePolicy(start=1, max_depth=max_depth)
    return AdaptivePolicy(
        start=depth,
        start_speedup=speedup,
        start_acceptance=acceptance,
        benchmarked=True,
        max_depth=max(max_depth, depth or 1),
    )


__all__ = [
    "AdaptivePolicy",
    "Choice",
    "Decision",
    "TurnContext",
    "TurnSample",
    "WithinTurnCheck",
    "auto_summary",
    "choice_label",
    "draft_trials",
    "expected_tokens",
    "policy_from_recommendation",
    "turn_settings",
]


def turn_settings(
    decision: Decision,
    settings: GenerationSettings,
    policy: AdaptivePolicy,
    *,
    plain_load_s: float = 0.0,
) -> GenerationSettings:
    """`settings` for the turn `decision` chose: plain decoding, or MTP at its depth with the
    policy's within-turn fall back (`plain_load_s`: what loading the plain pipeline would cost
    now, 0 when it is loaded)."""
    if decision.lookup:
        return replace(
            settings,
            plain=False,
            prompt_lookup=True,
            num_assistant_tokens=policy.lookup_tokens,
            max_ngram_size=policy.max_ngram_size,
            within_turn=None,
        )
    if decision.choice is None:
        return replace(settings, plain=True, within_turn=None)
    check = policy.within_turn_check(
        decision.choice, settings.max_new_tokens, plain_load_s=plain_load_s
    )
    return replace(settings, plain=False, num_assistant_tokens=decision.choice, within_turn=check)


def auto_summary(decision: Decision, stats: GenerationStats) -> dict[str, object]:
    """What a message's stored stats keep about Auto: its choice, why, and a mid-turn switch."""
    record: dict[str, object] = {
        "choice": decision.label,
        "depth": decision.choice,
        "reason": decision.reason,
        "probe": decision.probe,
        "method": "lookup" if decision.lookup else "plain" if decision.choice is None else "mtp",
        "summary": decision.summary(),
    }
    if stats.switched_to_plain_at is not None:
        tokens = sum(stats.chunk_sizes[: stats.switched_to_plain_at])
        record["switched_to_plain_after_tokens"] = tokens
    return record
