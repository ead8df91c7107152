"""Auto MTP's policy (core.auto.policy) on recorded and synthetic step timings: no Qt, no
runtime."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.auto.policy import (
    FIRST_PROBE_AFTER,
    AdaptivePolicy,
    TurnSample,
    draft_trials,
    expected_tokens,
)
from qwen_mtp_desktop.core.auto.turns import policy_from_recommendation
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import build_stats

mtp = DecodingMethod.mtp

RECORDED = json.loads(
    (Path(__file__).parent / "data" / "adaptive_recorded_turns.json").read_text()
)["models"]

#: Qwen3.5-0.8B INT4 on this CPU (RUNTIME-NOTES): seconds per step, plain (0 drafts) and MTP
#: n=1..3 (verify k+1 tokens plus k draft calls).
FULLSIZE_STEP = {0: 0.100, 1: 0.161 + 0.030, 2: 0.206 + 0.060, 3: 0.228 + 0.090, 4: 0.26 + 0.12}


def synthetic_turn(
    method: DecodingMethod,
    acceptance: float,
    tokens: int = 64,
    seed: int = 0,
    jitter: float = 0.05,
) -> TurnSample:
    """A turn at `depth` where each draft is accepted with probability `acceptance` given the
    previous one was, stepping at the full-size model's measured costs (with some jitter)."""
    rng = random.Random(seed)
    depth = method.drafts
    sizes, times = [1], [0.3]
    while sum(sizes) < tokens:
        got = 0
        while got < depth and rng.random() < acceptance:
            got += 1
        sizes.append(1 + got)
        times.append(times[-1] + FULLSIZE_STEP[depth] * (1 + rng.uniform(-jitter, jitter)))
    return TurnSample(method, tuple(sizes), tuple(times), max_new_tokens=512)


def recorded_turn(model: str, method: DecodingMethod, index: int) -> TurnSample:
    # The recording names turns by MTP depth, "None" for plain decoding.
    runs = RECORDED[model][str(method.drafts or None)]
    run = runs[index % len(runs)]
    return TurnSample(method, tuple(run["sizes"]), tuple(run["times"]), max_new_tokens=48)


def converse(policy: AdaptivePolicy, turns: int, make: object) -> list[DecodingMethod]:
    """Ask, run the turn `make(choice, turn)` returns, observe; the choices made."""
    choices = []
    for turn in range(turns):
        choice = policy.decide().method
        choices.append(choice)
        policy.observe(make(choice, turn))  # type: ignore[operator]
    return choices


# --- the arithmetic ------------------------------------------------------------------------


def test_draft_trials_count_each_position_until_the_first_rejection() -> None:
    # prefill 1; step accepted 2 of 2; accepted 0 (rejected at 1); accepted 1 (rejected at 2)
    trials, accepted = draft_trials([1, 3, 1, 2], depth=2)
    assert trials == [3, 2] and accepted == [2, 1]


def test_draft_trials_ignore_drafts_the_token_budget_did_not_allow() -> None:
    # 5 tokens max: after 4 generated only 0 drafts can be proposed, so the last step is none.
    trials, accepted = draft_trials([1, 3, 1], depth=2, max_new_tokens=5)
    assert trials == [1, 1] and accepted == [1, 1]


def test_expected_tokens() -> None:
    assert expected_tokens([1.0, 1.0], 2) == 3
    assert expected_tokens([0.5, 0.5], 2) == pytest.approx(1.75)
    assert expected_tokens([0.8], 3) == pytest.approx(1.8)  # unknown positions accept nothing


def test_turn_sample_from_stats_keeps_the_switch_point() -> None:
    stats = build_stats(
        method=mtp(1),
        device="CPU",
        prompt_tokens=10,
        chunk_sizes=[1, 1, 1, 1, 1, 1, 1, 1],
        chunk_times=[0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.75, 0.8],
        total_s=0.8,
        reasoning_tokens=0,
        answer_tokens=8,
        finish_reason="length",
        switched_to_plain_at=5,
    )
    assert stats.drafted_tokens == 4  # only the MTP part's steps drafted
    sample = TurnSample.from_stats(stats)
    assert sample.method == mtp(1) and sample.switched_at == 5
    assert sample.mtp_part()[0] == (1, 1, 1, 1, 1)
    assert sample.plain_part()[1] == (0.7, 0.75, 0.8)
    with pytest.raises(ValueError, match="same length"):
        TurnSample(mtp(1), (1, 2), (0.1,))
    with pytest.raises(ValueError, match="MTP needs 1 to"):
        TurnSample(mtp(0), (1, 2), (0.1, 0.2))


# --- between turns --------------------------------------------------------------------------


def test_predictable_content_climbs_to_the_fastest_depth_and_stays_on_mtp() -> None:
    policy = AdaptivePolicy()
    choices = converse(policy, 12, lambda c, t: synthetic_turn(c, 1.0, seed=t))
    assert choices[0] == mtp(1)
    # At 100 % acceptance n=3 is the fastest measured full-size depth (1.31x); n=4 would be
    # 1.4x with the extrapolated cost, so either is right; plain is checked at most once.
    assert choices[-1] in (mtp(3), mtp(4))
    assert choices.count(PLAIN) <= 1
    decision = policy.decide()
    assert decision.method in (mtp(3), mtp(4))
    assert "100% accepted" in decision.reason and "x" in decision.reason
    assert decision.predicted_speedup is not None and decision.predicted_speedup > 1.2


def test_rejected_drafts_fall_back_to_plain_with_a_reason() -> None:
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(mtp(1), 0.0))
    decision = policy.decide()
    assert decision.method == PLAIN
    assert decision.summary().startswith("plain: drafts rejected, MTP would be 0.")
    assert decision.predicted_speedup == 1.0


def test_probes_mtp_again_and_backs_off_while_it_keeps_losing() -> None:
    policy = AdaptivePolicy()
    choices = converse(policy, 200, lambda c, t: synthetic_turn(c, 0.0, seed=t))
    probes = [i for i, c in enumerate(choices) if c != PLAIN]
    assert probes[0] == 0  # the cold start
    gaps = [b - a for a, b in itertools.pairwise(probes)]
    assert len(gaps) >= 2
    assert gaps[0] >= FIRST_PROBE_AFTER
    assert all(later >= earlier for earlier, later in itertools.pairwise(gaps))
    assert gaps[1] > gaps[0]
    # MTP turns here cost ~1.9x a plain turn; probes stay a small share of all turns.
    assert len(probes) / len(choices) < 0.06


def test_a_conversation_that_turns_predictable_wins_again() -> None:
    policy = AdaptivePolicy()

    def content(choice: DecodingMethod, turn: int) -> TurnSample:
        return synthetic_turn(choice, 0.0 if turn < 10 else 1.0, seed=turn)

    choices = converse(policy, 60, content)
    assert choices[1:10] == [PLAIN] * 9
    assert all(c != PLAIN for c in choices[-10:])
    probe = next(i for i, c in enumerate(choices) if i >= 10 and c != PLAIN)
    # MTP cost ~1.9x here, so within the 3 % probe budget the wait is about 30 turns.
    assert probe <= 10 + 32


def test_a_short_turn_moves_the_estimates_less() -> None:
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(mtp(1), 1.0, tokens=64))
    before = policy.step_cost(mtp(1))
    short = TurnSample(mtp(1), (1, 2, 2), (0.3, 1.3, 2.3))  # two 1 s steps: an outlier
    policy.observe(short)
    after = policy.step_cost(mtp(1))
    assert before is not None and after is not None
    assert after < before + 0.5 * (1.0 - before)


def test_recorded_demo_turns_broken_head_goes_plain() -> None:
    policy = AdaptivePolicy()
    choices = converse(policy, 10, lambda c, t: recorded_turn("broken", c, t))
    assert choices[0] == mtp(1) and choices[1:] == [PLAIN] * 9


def test_recorded_demo_turns_pick_the_measured_faster_mode() -> None:
    """On the tiny demo model a decoding step is pipeline overhead, so plain decoding is about
    as fast as MTP n=1 even at 96 % acceptance: Auto measures both and keeps the faster."""
    policy = AdaptivePolicy()
    choices = converse(policy, 12, lambda c, t: recorded_turn("demo", c, t))
    assert PLAIN in choices  # plain was measured once at least
    rates = {c: policy.predicted_rate(c) for c in (PLAIN, mtp(1), mtp(2), mtp(3))}
    best = max(rates, key=lambda c: rates[c] or 0.0)
    final = policy.decide().method
    assert rates[final] is not None and rates[best] is not None
    assert rates[final] >= 0.9 * rates[best]


def test_seeded_by_the_benchmark() -> None:
    seeded = policy_from_recommendation(mtp(2), speedup=1.3, acceptance=0.8)
    first = seeded.decide()
    assert first.method == mtp(2) and first.reason == "benchmark: 1.30x"
    plain = policy_from_recommendation(PLAIN, speedup=0.5, acceptance=0.1)
    first = plain.decide()
    assert first.method == PLAIN and "0.50x" in first.reason
    # MTP lost 2x in the benchmark: probing it costs a whole turn, so it waits long.
    choices = converse(plain, 40, lambda c, t: synthetic_turn(c, 0.0, seed=t))
    assert choices[:33] == [PLAIN] * 33
    cold = policy_from_recommendation(None)
    assert cold.decide().method == mtp(1)
    assert "not benchmarked" in cold.last_decision.reason  # type: ignore[union-attr]


# --- within a turn --------------------------------------------------------------------------


def test_within_turn_switches_when_drafts_are_rejected_and_the_answer_is_long() -> None:
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(PLAIN, 0.0, tokens=200))  # plain cost known, long turns
    check = policy.within_turn_check(1, 512)
    turn = synthetic_turn(mtp(1), 0.0, tokens=40)
    answers = [
        check(turn.step_sizes[:n], turn.step_times_s[:n], 30)
        for n in range(1, len(turn.step_sizes) + 1)
    ]
    assert True in answers
    assert answers.index(True) <= 6  # after a handful of rejected drafts
    assert answers.count(True) == 1  # it decides once


def test_within_turn_keeps_mtp_when_drafts_are_accepted() -> None:
    policy = AdaptivePolicy()
    check = policy.within_turn_check(2, 512)
    turn = synthetic_turn(mtp(2), 0.95, tokens=60)
    n = len(turn.step_sizes)
    assert not any(check(turn.step_sizes[:i], turn.step_times_s[:i], 30) for i in range(1, n))


def test_within_turn_does_not_switch_when_the_re_prefill_costs_more() -> None:
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(PLAIN, 0.0, tokens=20))  # short turns: little left to save
    check = policy.within_turn_check(1, 512)
    sizes = (1, 1, 1, 1, 1, 1, 1)
    slow_prefill = (5.0, 5.19, 5.38, 5.57, 5.76, 5.95, 6.14)  # 5 s to the first token
    assert not check(sizes, slow_prefill, 2000)


def test_within_turn_check_taking_steps_in_one_by_one_equals_a_fresh_look() -> None:
    """The engine asks after every step; the running sums must give the answer a check that
    sees the whole prefix at once gives (up to its one decision)."""
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(PLAIN, 0.0, tokens=200))
    for depth, acceptance in ((1, 0.0), (2, 0.3), (3, 0.95)):
        turn = synthetic_turn(mtp(depth), acceptance, tokens=80)
        running = policy.within_turn_check(depth, 90)
        for n in range(1, len(turn.step_sizes) + 1):
            sizes, times = turn.step_sizes[:n], turn.step_times_s[:n]
            expected = policy.within_turn_check(depth, 90)(sizes, times, 30)
            assert running(sizes, times, 30) == expected, (depth, n)
            if expected:
                break
