"""Step costs against the conversation's length (core.auto.step_context) and Auto deciding with the
coming turn's context (core.auto.policy), on step costs shaped like benchmarks/context_steps.py's
0.8B measurements."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, TurnContext, TurnSample
from qwen_mtp_desktop.core.auto.step_context import (
    DECAY,
    MIN_SPREAD_TOKENS,
    PRIOR_GROWTH,
    ContextGrowth,
    at_context,
    attention_units,
)
from qwen_mtp_desktop.core.chat.decoding_words import auto_sentence
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod

mtp = DecodingMethod.mtp
#: Seconds per step at an empty context (0.8B geometry, benchmarks/context_steps.py at 1k
#: tokens less 1,024 tokens of growth) and seconds per context token of a plain step's
#: attention (that table's 1k to 16k growth).
SHORT_S = {0: 0.0690, 1: 0.0900, 2: 0.1100, 3: 0.1350}
SLOPE = 7.0e-6
CHARS_PER_TOKEN = 3.0


def step_s(method: DecodingMethod, context: float, slope: float = SLOPE) -> float:
    return SHORT_S[method.drafts] + attention_units(method) * slope * context


def turn(
    method: DecodingMethod,
    context_tokens: int,
    acceptance: float,
    seed: int,
    slope: float = SLOPE,
) -> TurnSample:
    """A 64-token turn after `context_tokens` of prompt, each draft accepted with probability
    `acceptance` given the previous one was, stepping at the modelled cost."""
    rng = random.Random(seed)
    sizes, times = [1], [0.5]
    while sum(sizes) < 64:
        got = 0
        while got < method.drafts and rng.random() < acceptance:
            got += 1
        sizes.append(1 + got)
        times.append(times[-1] + step_s(method, context_tokens + sum(sizes), slope))
    return TurnSample(
        method,
        tuple(sizes),
        tuple(times),
        max_new_tokens=512,
        decoder="app",
        prompt_tokens=context_tokens,
        prompt_chars=round(context_tokens * CHARS_PER_TOKEN),
    )


def test_attention_units_grow_with_depth() -> None:
    assert attention_units(PLAIN) == 1.0
    units = [attention_units(mtp(k)) for k in range(1, 5)]
    assert units == sorted(units) and units[0] > 2.0
    # Prompt lookup verifies with the target only: no MTP head calls.
    assert attention_units(DecodingMethod.lookup(4, 3)) == 1.0


@given(
    slope=st.floats(1e-7, 1e-5),
    intercepts=st.lists(st.floats(0.01, 0.5), min_size=2, max_size=4),
    contexts=st.lists(st.integers(0, 30_000), min_size=2, max_size=6, unique=True),
)
def test_the_slope_is_learnt_from_each_methods_own_line(
    slope: float, intercepts: list[float], contexts: list[int]
) -> None:
    """Methods with different costs at an empty context, measured at the same contexts: the
    pooled within-method slope is the one that made them (exact on noiseless costs)."""
    methods = [PLAIN, *(mtp(k) for k in range(1, len(intercepts)))]
    growth = ContextGrowth()
    for context in contexts:
        for method, intercept in zip(methods, intercepts, strict=False):
            seconds = intercept + attention_units(method) * slope * context
            growth.observe(method, context, seconds, weight=1.0)
    # The rule: a slope is learnt once the contexts' variance, older turns weighted DECAY less
    # each, reaches that of two equal halves MIN_SPREAD_TOKENS apart. A spread of exactly
    # MIN_SPREAD_TOKENS with the older half decayed falls short: it still needs the prior.
    weights = [DECAY ** (len(contexts) - 1 - i) for i in range(len(contexts))]
    mean = sum(w * c for w, c in zip(weights, contexts, strict=True)) / sum(weights)
    variance = sum(w * (c - mean) ** 2 for w, c in zip(weights, contexts, strict=True))
    learnt = variance / sum(weights) >= MIN_SPREAD_TOKENS**2 / 4
    for method in methods:
        if learnt:
            assert growth.slope(method, 0.1) == pytest.approx(slope, rel=1e-6)
        else:
            assert growth.slope(method, 0.1) == pytest.approx(PRIOR_GROWTH * 0.1)
    if max(contexts) - min(contexts) < MIN_SPREAD_TOKENS:
        assert not learnt  # never learnt from less than the spread the rule names


def test_alike_contexts_use_the_prior_scaled_by_a_plain_step() -> None:
    growth = ContextGrowth()
    for context in (1_000, 1_200, 1_100):
        growth.observe(PLAIN, context, 0.08 + context * 1e-6, weight=1.0)
    assert growth.slope(PLAIN, 0.08) == pytest.approx(PRIOR_GROWTH * 0.08)
    assert ContextGrowth().slope(PLAIN, None) == 0.0


def test_a_method_measured_far_apart_keeps_its_own_slope() -> None:
    """Plain decoding measured at 1,000 and 9,000 tokens, MTP n=2 only at 1,000: plain has its
    own slope, and MTP (no spread of its own) takes the pooled one, which is plain's."""
    growth = ContextGrowth()
    for context in (1_000, 9_000):
        growth.observe(PLAIN, context, 0.07 + 3e-6 * context, weight=1.0)

    def mtp_s(context: int) -> float:
        return 0.2 + attention_units(mtp(2)) * 1e-5 * context

    growth.observe(mtp(2), 1_000, mtp_s(1_000), weight=1.0)
    assert growth.slope(PLAIN, 0.07) == pytest.approx(3e-6)
    assert growth.slope(mtp(2), 0.07) == pytest.approx(3e-6)
    growth.observe(mtp(2), 9_000, mtp_s(9_000), weight=1.0)
    assert growth.slope(mtp(2), 0.07) == pytest.approx(1e-5)
    assert growth.slope(PLAIN, 0.07) == pytest.approx(3e-6)


def test_a_cost_moves_with_the_context_and_never_below_a_tenth() -> None:
    assert at_context(0.1, 1_000, 5_000, PLAIN, 1e-6) == pytest.approx(0.104)
    deeper = at_context(0.1, 1_000, 5_000, mtp(3), 1e-6)
    assert deeper == pytest.approx(0.1 + attention_units(mtp(3)) * 0.004)
    assert at_context(0.1, 50_000, 0, mtp(3), 1e-5) == pytest.approx(0.01)


def learnt_policy(context_tokens: int) -> AdaptivePolicy:
    """Every option measured on a short conversation (plain, MTP n=1..3, 90 % acceptance)."""
    policy = AdaptivePolicy(start=mtp(1), max_depth=3)
    for seed, method in enumerate((PLAIN, mtp(1), mtp(2), mtp(3)) * 2):
        policy.observe(turn(method, context_tokens, 0.9, seed))
    return policy


def test_deep_drafts_lose_their_edge_in_a_long_conversation() -> None:
    """Costs measured at 1,000 tokens, asked about a 16,000-token turn: every step costs more
    and MTP at depth 3 (4.5 queries of attention per step) loses more than depth 1, as the
    model of benchmarks/context_steps.py says; the speed-ups follow."""
    policy = learnt_policy(1_000)
    short = TurnContext(prompt_chars=round(1_000 * CHARS_PER_TOKEN))
    long = TurnContext(prompt_chars=round(16_000 * CHARS_PER_TOKEN))
    policy.decide(short)
    near = {k: policy.predicted_speedup(mtp(k)) for k in (1, 2, 3)}
    plain_near = policy.step_cost(PLAIN)
    policy.decide(long)
    far = {k: policy.predicted_speedup(mtp(k)) for k in (1, 2, 3)}
    plain_far = policy.step_cost(PLAIN)
    assert plain_near is not None and plain_far is not None
    # The plain step at 16k is what the cost model makes it (within the turns' jitter).
    assert plain_far == pytest.approx(step_s(PLAIN, 16_032), rel=0.08)
    assert plain_far > plain_near
    for k in (1, 2, 3):
        assert far[k] is not None and near[k] is not None and far[k] < near[k]
    assert near[3] > near[1]  # short: the deepest drafts pay most ...
    assert far[3] / far[1] < near[3] / near[1]  # ... and their edge shrinks with the context
    policy.decide(TurnContext(prompt_chars=round(40_000 * CHARS_PER_TOKEN)))
    farthest = {k: policy.predicted_speedup(mtp(k)) or 0.0 for k in (1, 3)}
    assert farthest[1] > farthest[3]  # until the shallowest pay most


def test_costs_measured_at_different_lengths_are_compared_at_the_coming_one() -> None:
    """Plain decoding measured early (500 tokens), MTP n=1 late (12,000): at a 12,000-token
    turn the stale plain cost is moved up, so MTP's speed-up is not overstated."""
    policy = AdaptivePolicy(start=mtp(1), max_depth=1)
    policy.observe(turn(PLAIN, 500, 0.8, 1))
    policy.observe(turn(mtp(1), 12_000, 0.8, 2))
    policy.decide(TurnContext(prompt_chars=round(12_000 * CHARS_PER_TOKEN)))
    moved = policy.predicted_speedup(mtp(1))
    true_speedup = (step_s(PLAIN, 12_032) / step_s(mtp(1), 12_032)) * (1 + 0.8)
    assert moved is not None
    stale = AdaptivePolicy(start=mtp(1), max_depth=1)
    stale.observe(turn(PLAIN, 500, 0.8, 1))
    stale.observe(turn(mtp(1), 12_000, 0.8, 2))
    as_measured = stale.predicted_speedup(mtp(1))  # no coming context: costs as measured
    assert as_measured is not None
    assert abs(moved - true_speedup) < abs(as_measured - true_speedup)
    assert moved == pytest.approx(true_speedup, rel=0.1)


def test_a_slope_unlike_the_prior_is_learnt_from_the_turns() -> None:
    """A model whose attention costs 4x the prior's per token (e.g. more attention layers):
    once plain and MTP turns ran at 1,000 and 9,000 tokens, the policy predicts a 20,000-token
    turn's steps with the slope it measured, not the prior."""
    steep = 4 * SLOPE
    policy = AdaptivePolicy(start=mtp(1), max_depth=2)
    for seed, (method, context) in enumerate(
        [(PLAIN, 1_000), (mtp(1), 1_000), (PLAIN, 9_000), (mtp(1), 9_000)]
    ):
        policy.observe(turn(method, context, 0.8, seed, slope=steep))
    policy.decide(TurnContext(prompt_chars=round(20_000 * CHARS_PER_TOKEN)))
    for method in (PLAIN, mtp(1)):
        predicted = policy.step_cost(method)
        assert predicted == pytest.approx(step_s(method, 20_032, steep), rel=0.05), method


def test_a_long_conversation_turns_auto_plain_and_says_why() -> None:
    """MTP n=1 won on a short conversation (80 % accepted); at 40,000 tokens its predicted
    rate falls below plain decoding's: Auto decodes plain and the reason (and its plain
    sentence) name the conversation's length."""
    policy = AdaptivePolicy(start=mtp(1), max_depth=1)
    for seed, method in enumerate((PLAIN, mtp(1)) * 2):
        policy.observe(turn(method, 500, 0.8, seed))
    short = policy.decide(TurnContext(prompt_chars=round(500 * CHARS_PER_TOKEN)))
    assert short.method == mtp(1), short.summary()
    decision = policy.decide(TurnContext(prompt_chars=round(40_000 * CHARS_PER_TOKEN)))
    assert decision.method == PLAIN, decision.summary()
    assert "at this conversation's length (~40,000 tokens)" in decision.reason
    assert "MTP would be 0." in decision.reason
    assert "this long" in auto_sentence(decision)
