"""Auto choosing among plain decoding, MTP depths and prompt lookup (core.auto.policy), on real
demo-model turns recorded in every mode and on the full-size model's measured step costs."""

from __future__ import annotations

import json
import random
from pathlib import Path

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, Decision, TurnSample
from qwen_mtp_desktop.core.auto.turns import auto_summary, policy_from_recommendation, turn_settings
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import StepDrafts, build_stats
from qwen_mtp_desktop.core.engine import GenerationSettings

mtp = DecodingMethod.mtp
LOOKUP = DecodingMethod.lookup()

RECORDED = json.loads(
    (Path(__file__).parent / "data" / "adaptive_lookup_recorded.json").read_text()
)["conversations"]

#: Qwen3.5-0.8B INT4 on this CPU (RUNTIME-NOTES, README): seconds per step. Plain on
#: openvino-genai's SDPA pipeline (17.4 tok/s); MTP n=k on the app's decoder (a (k+1)-token
#: verification, 60-70 ms, plus k draft calls of about 5 ms with the 32k-row draft head);
#: prompt lookup at K=4 on openvino-genai's continuous-batching pipeline (plain there ran at
#: 14.3 tok/s, 70 ms, plus a 5-token verification instead of 1).
FULLSIZE_STEP = {
    PLAIN: 0.057,
    mtp(1): 0.065,
    mtp(2): 0.073,
    mtp(3): 0.081,
    mtp(4): 0.090,
    LOOKUP: 0.078,
}


def recorded(conversation: str, decision: Decision, turn: int) -> TurnSample:
    """The recorded turn of `conversation` with the method `decision` chose (the recording
    has plain, prompt lookup, MTP n=1 and n=2: deeper reads as n=2)."""
    method = decision.method
    mode = {"lookup": "lookup", "plain": "plain"}.get(method.kind, str(min(method.drafts, 2)))
    runs = RECORDED[conversation][mode]
    run = runs[turn % len(runs)]
    return TurnSample(
        method,
        tuple(run["sizes"]),
        tuple(run["times"]),
        max_new_tokens=48,
        lookup_replay=(run["replay"][0], run["replay"][1]),
    )


def fullsize(decision: Decision, acceptance: float, copy_per_step: float, seed: int) -> TurnSample:
    """A 96-token turn at the full-size model's step costs; `copy_per_step` is prompt lookup's
    replayed tokens per step on this content."""
    rng = random.Random(seed)
    method = decision.method
    depth = method.drafts if method.uses_mtp_head else 0
    sizes, times = [1], [0.3]
    while sum(sizes) < 96:
        got = 0
        if method.kind == "lookup":
            got = min(4, int(copy_per_step - 1 + rng.random()))
        while got < depth and rng.random() < acceptance:
            got += 1
        sizes.append(1 + got)
        times.append(times[-1] + FULLSIZE_STEP[method] * (1 + rng.uniform(-0.05, 0.05)))
    steps = round(95 / copy_per_step)
    return TurnSample(
        method, tuple(sizes), tuple(times), max_new_tokens=512, lookup_replay=(steps, 95)
    )


def is_lookup(decision: Decision) -> bool:
    return decision.method.kind == "lookup"


def converse(policy: AdaptivePolicy, turns: int, make: object) -> list[Decision]:
    decisions = []
    for turn in range(turns):
        decision = policy.decide()
        decisions.append(decision)
        policy.observe(make(decision, turn))  # type: ignore[operator]
    return decisions


def test_recorded_copying_conversation_goes_to_prompt_lookup() -> None:
    policy = policy_from_recommendation(None, max_depth=2)
    decisions = converse(policy, 8, lambda d, t: recorded("copy", d, t))
    assert not is_lookup(decisions[0])  # nothing replayed yet
    assert all(d.method == LOOKUP for d in decisions[2:]), [d.summary() for d in decisions]
    assert "the last answers repeat earlier text" in decisions[-1].reason
    # What it learned is what the recording says: about 2.5 tokens per lookup step.
    per_step = policy.lookup_tokens_per_step()
    assert per_step is not None and 2.2 < per_step < 2.8


def _rate(samples: list[TurnSample]) -> float:
    """Decode tokens per second over turns (the prefill's token and time excluded)."""
    tokens = sum(sum(s.step_sizes[1:]) for s in samples)
    seconds = sum(s.step_times_s[-1] - s.step_times_s[0] for s in samples)
    return tokens / seconds


def test_recorded_counting_conversation_is_decoded_near_the_best_fixed_mode() -> None:
    """Counting copies little (1.3 tokens per lookup step) and on the demo model MTP loses to
    plain decoding (overhead-bound), so plain and prompt lookup are within noise of each
    other here: Auto may alternate between them, but must decode about as fast as the best
    fixed mode, and the MTP it tried first must not come back."""
    policy = policy_from_recommendation(None, max_depth=2)
    samples: list[TurnSample] = []
    decisions = []
    for turn in range(12):
        decision = policy.decide()
        decisions.append(decision)
        samples.append(recorded("count", decision, turn))
        policy.observe(samples[-1])
    fixed = {
        # Each fixed mode over the same turns (the same recorded runs) as Auto's.
        mode: _rate([recorded("count", decision, t) for t in range(3, 12)])
        for mode, decision in (
            ("plain", Decision(PLAIN, "")),
            ("mtp", Decision(mtp(1), "")),
            ("lookup", Decision(LOOKUP, "")),
        )
    }
    assert fixed["mtp"] < min(fixed["plain"], fixed["lookup"])  # the recording says so
    assert _rate(samples[3:]) >= 0.9 * max(fixed.values()), (
        fixed,
        [d.summary() for d in decisions],
    )
    assert all(not d.method.uses_mtp_head or d.probe for d in decisions[3:])


def test_fullsize_costs_counting_picks_mtp_and_copying_picks_prompt_lookup() -> None:
    counting = policy_from_recommendation(mtp(2), speedup=1.6, acceptance=0.9)
    decisions = converse(counting, 12, lambda d, t: fullsize(d, 0.9, 1.28, t))
    assert all(d.method.uses_mtp_head for d in decisions), [d.summary() for d in decisions]
    copying = policy_from_recommendation(mtp(2), speedup=1.6, acceptance=0.9)
    decisions = converse(copying, 12, lambda d, t: fullsize(d, 0.6, 3.6, 100 + t))
    assert all(is_lookup(d) for d in decisions[2:]), [d.summary() for d in decisions]
    speedup = decisions[-1].predicted_speedup
    assert speedup is not None and speedup > 1.2


def test_lookup_off_and_the_settings_and_record_of_a_lookup_turn() -> None:
    policy = AdaptivePolicy(start=mtp(1), lookup=None)
    decisions = converse(policy, 6, lambda d, t: recorded("copy", d, t))
    assert not any(is_lookup(d) for d in decisions)

    decision = Decision(LOOKUP, "answers copy the conversation", 1.8)
    penalty = Sampling(repetition_penalty=1.1)
    base = GenerationSettings(64, method=DecodingMethod.mtp(3, penalty))
    settings = turn_settings(decision, base, AdaptivePolicy())
    # The decision's method with the settings' own (greedy) sampling; no within-turn test.
    assert settings.method == DecodingMethod.lookup(4, 3, penalty)
    assert settings.within_turn is None
    plain = turn_settings(Decision(PLAIN, ""), base, AdaptivePolicy())
    assert plain.method == DecodingMethod.plain(penalty) and plain.within_turn is None
    deeper = turn_settings(Decision(mtp(2), ""), base, AdaptivePolicy())
    assert deeper.method == DecodingMethod.mtp(2, penalty) and deeper.within_turn is not None
    stats = build_stats(
        method=LOOKUP, device="CPU", prompt_tokens=10,
        chunk_sizes=[1, 3, 1], chunk_times=[0.1, 0.11, 0.12], total_s=0.12,
        reasoning_tokens=0, answer_tokens=5, finish_reason="eos",
        drafts=[StepDrafts(0, 0), StepDrafts(4, 2), StepDrafts(0, 0)],
    )  # fmt: skip
    stats.lookup_replay = {"steps": 2, "tokens": 4}  # type: ignore[assignment]
    sample = TurnSample.from_stats(stats, 64)
    assert sample.method == LOOKUP and sample.lookup_replay == (2, 4)
    record = auto_summary(decision, stats)
    assert record["method"] == LOOKUP.to_record() and record["choice"] == "lookup K=4"
    assert record["summary"] == "lookup K=4: answers copy the conversation"
