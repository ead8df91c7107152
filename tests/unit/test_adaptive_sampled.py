"""Auto for sampled turns (issue 26 item 4): sampled turns are learnt and decided by their own
temperature band's measurements (core.auto.sampling_bands), never by greedy turns', and the reason
says so. Recorded-shape step sizes and times; no Qt, no runtime."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, Decision, TurnContext, TurnSample
from qwen_mtp_desktop.core.auto.sampling_bands import BAND_EDGES, SamplingBand, band_of
from qwen_mtp_desktop.core.auto.turns import policy_from_recommendation, turn_settings
from qwen_mtp_desktop.core.decoding.method import GREEDY, PLAIN, DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import GenerationSettings

mtp = DecodingMethod.mtp
QWEN = Sampling(temperature=0.7, top_p=0.8, top_k=20)
#: Seconds per step, plain (0) and MTP n=1..4: a draft costs a fifth of a plain step (a model
#: whose verify batches well); sampled steps 15 % dearer (core.decoding.sampling's processing).
GREEDY_STEP = {0: 0.100, 1: 0.120, 2: 0.140, 3: 0.160, 4: 0.180}
SAMPLED_STEP = {depth: seconds * 1.15 for depth, seconds in GREEDY_STEP.items()}


def turn(
    method: DecodingMethod,
    acceptance: float,
    sampling: Sampling = GREEDY,
    seed: int = 0,
    tokens: int = 64,
) -> TurnSample:
    """A turn where each draft is accepted with probability `acceptance` given the previous
    one was, at the step costs of its sampling (with 5 % jitter)."""
    rng = random.Random(seed)
    costs = GREEDY_STEP if sampling.greedy else SAMPLED_STEP
    sizes, times = [1], [0.3]
    while sum(sizes) < tokens:
        got = 0
        while got < method.drafts and rng.random() < acceptance:
            got += 1
        sizes.append(1 + got)
        times.append(times[-1] + costs[method.drafts] * rng.uniform(0.95, 1.05))
    return TurnSample(method, tuple(sizes), tuple(times), max_new_tokens=512, sampling=sampling)


def decide(policy: AdaptivePolicy, sampling: Sampling = GREEDY) -> Decision:
    return policy.decide(TurnContext(sampling=sampling))


def test_bands_split_by_temperature_and_greedy_has_none() -> None:
    assert band_of(GREEDY) is None
    assert band_of(Sampling(temperature=0.6)) == band_of(QWEN) == SamplingBand(0.5, 0.9)
    assert band_of(Sampling(temperature=BAND_EDGES[0])) == SamplingBand(0.0, 0.5)
    assert band_of(Sampling(temperature=1.31)) == SamplingBand(1.3, None)
    assert band_of(Sampling(temperature=100.0)) == SamplingBand(1.3, None)
    assert band_of(QWEN) is not None
    assert band_of(QWEN).label(0.7) == "sampled at temperature 0.7 (band 0.5-0.9)"  # type: ignore[union-attr]
    assert SamplingBand(1.3, None).label() == "sampled, temperature above 1.3"


def test_sampled_turns_are_decided_by_their_own_low_acceptance() -> None:
    """Greedy drafts are accepted 90 % (MTP wins), sampled ones at T 0.7 only 10 % (MTP
    loses): in one conversation the greedy turns stay on MTP and the sampled turns go plain,
    each for its own band's reason."""
    policy = policy_from_recommendation(mtp(2), speedup=1.6, acceptance=0.9)
    greedy_choices, sampled_choices = [], []
    for index in range(12):
        greedy = decide(policy)
        greedy_choices.append(greedy.method)
        assert "sampled" not in greedy.reason
        policy.observe(turn(greedy.method, 0.9, seed=index))
        sampled = decide(policy, QWEN)
        sampled_choices.append(sampled.method)
        label = "sampled at temperature 0.7 (band 0.5-0.9)"
        turns = f", from this band's {index} turn{'s' * (index > 1)}: " if index else ": "
        assert sampled.reason.startswith(label + turns), sampled.reason
        assert policy.last_decision == sampled
        policy.observe(turn(sampled.method, 0.1, QWEN, seed=100 + index))
    # Greedy: MTP throughout, but for one plain turn measured to compare with.
    assert sum(m.is_plain for m in greedy_choices) <= 1, greedy_choices
    assert all(m.uses_mtp_head for m in greedy_choices[-4:]), greedy_choices
    assert sampled_choices[0] == mtp(2)  # the benchmark's start, measured first
    assert all(m.is_plain for m in sampled_choices[3:]), sampled_choices
    band = policy.for_sampling(QWEN)
    assert band is not policy and band.band == SamplingBand(0.5, 0.9)
    last = decide(policy, QWEN)
    assert last.method.is_plain and "drafts rejected" in last.reason, last.reason


def test_the_first_sampled_turn_says_it_measures() -> None:
    policy = policy_from_recommendation(mtp(3), speedup=2.0, acceptance=0.95)
    first = decide(policy, QWEN)
    assert first.method == mtp(3)
    assert first.reason == (
        "sampled at temperature 0.7 (band 0.5-0.9): first turn in this band; measuring MTP"
    )
    plain_start = policy_from_recommendation(PLAIN, speedup=0.8)
    assert decide(plain_start, QWEN).method.is_plain
    assert "measuring plain decoding" in decide(plain_start, Sampling(temperature=1.0)).reason


def test_step_costs_and_acceptance_are_per_band() -> None:
    """A sampled band's plain and MTP step costs are its own measurements, not greedy's."""
    policy = AdaptivePolicy()
    for index in range(3):
        policy.observe(turn(PLAIN, 0.0, seed=index))
        policy.observe(turn(mtp(1), 0.8, seed=index))
        policy.observe(turn(PLAIN, 0.0, QWEN, seed=index))
        policy.observe(turn(mtp(1), 0.3, QWEN, seed=index))
    band = policy.for_sampling(QWEN)
    assert policy.step_cost(PLAIN) == pytest.approx(GREEDY_STEP[0], rel=0.06)
    assert band.step_cost(PLAIN) == pytest.approx(SAMPLED_STEP[0], rel=0.06)
    assert band.step_cost(mtp(1)) == pytest.approx(SAMPLED_STEP[1], rel=0.06)
    assert policy.turns == 6 and band.turns == 6
    # Another band has learnt nothing; the same band is returned for any temperature in it.
    hot = policy.for_sampling(Sampling(temperature=1.5))
    assert hot is not band and hot.step_cost(PLAIN) is None and hot.acceptance_rate() is None
    assert policy.for_sampling(Sampling(temperature=0.6, top_k=40)) is band
    assert band.for_sampling(GREEDY) is band  # a band never nests


def test_a_sampled_turns_within_turn_check_uses_the_bands_plain_cost() -> None:
    policy = AdaptivePolicy()
    policy.observe(turn(PLAIN, 0.0))
    policy.observe(turn(PLAIN, 0.0, QWEN))
    sampled = GenerationSettings(64, method=PLAIN.with_sampling(QWEN))
    settings = turn_settings(Decision(mtp(2), ""), sampled, policy)
    assert settings.method == mtp(2, QWEN)
    check = settings.within_turn
    assert check is not None and check.plain_step_s == pytest.approx(SAMPLED_STEP[0], rel=0.06)
    greedy = turn_settings(Decision(mtp(2), ""), GenerationSettings(64), policy).within_turn
    assert greedy is not None and greedy.plain_step_s == pytest.approx(GREEDY_STEP[0], rel=0.06)


def test_a_turns_stats_carry_its_sampling_to_auto() -> None:
    """`TurnSample.from_stats` keeps the sampling that ran, so `observe` routes by it."""
    stats = build_stats(
        method=mtp(1, replace(QWEN, seed=42)),
        device="CPU",
        prompt_tokens=10,
        chunk_sizes=[1, 2, 1, 1, 2],
        chunk_times=[0.1, 0.2, 0.3, 0.4, 0.5],
        total_s=0.5,
        reasoning_tokens=0,
        answer_tokens=7,
        finish_reason="length",
        max_new_tokens=7,
    )
    sample = TurnSample.from_stats(stats, 7)
    assert sample.method == mtp(1) and sample.sampling == replace(QWEN, seed=42)
    policy = AdaptivePolicy()
    policy.observe(sample)
    assert policy.turns == 0 and policy.acceptance_rate() is None
    assert policy.for_sampling(QWEN).acceptance_rate() == pytest.approx(2 / 4)


@given(
    plan=st.lists(
        st.tuples(
            st.sampled_from([0.0, 0.3, 0.7, 1.0, 2.0]),
            st.floats(min_value=0.0, max_value=1.0),
            st.integers(min_value=0, max_value=1000),
        ),
        max_size=14,
    )
)
def test_sampled_turns_never_change_greedy_decisions(
    plan: list[tuple[float, float, int]],
) -> None:
    """Generated conversations mixing greedy and sampled turns at random temperatures and
    acceptances: the greedy turns' decisions are exactly those of a policy that saw only the
    greedy turns, and each band's decisions those of a band that saw only its own turns."""
    mixed = policy_from_recommendation(mtp(2), speedup=1.5, acceptance=0.7)
    alone: dict[SamplingBand | None, AdaptivePolicy] = {}
    for temperature, acceptance, seed in plan:
        sampling = Sampling(temperature=temperature)
        band = band_of(sampling)
        own = alone.setdefault(
            band, policy_from_recommendation(mtp(2), speedup=1.5, acceptance=0.7)
        )
        got = decide(mixed, sampling)
        expected = decide(own, sampling)
        assert got.method == expected.method
        assert got.reason.endswith(expected.reason) if band else got == expected
        mixed.observe(turn(got.method, acceptance, sampling, seed=seed, tokens=24))
        own.observe(turn(expected.method, acceptance, sampling, seed=seed, tokens=24))


def test_sampled_turns_decode_plain_where_openvino_genai_runs_the_text_turns() -> None:
    """openvino-genai's MTP decodes greedily: once a text turn ran on its pipelines (the app's
    decoder cannot run the model), sampled turns are decided plain; greedy ones are not."""
    policy = AdaptivePolicy()
    policy.observe(replace(turn(mtp(1), 0.8), decoder="genai", prompt_tokens=20))
    sampled = decide(policy, QWEN)
    assert sampled.method.is_plain
    assert sampled.reason.endswith("openvino-genai runs this model; its MTP decodes greedily")
    assert "openvino-genai" not in decide(policy).reason  # greedy: by its measurements
    on_app = AdaptivePolicy()
    on_app.observe(replace(turn(mtp(1), 0.8), decoder="app", prompt_tokens=20))
    assert decide(on_app, QWEN).method.uses_mtp_head
