"""Auto's choice in one plain sentence, and what decoded an answer (core.chat.decoding_words), on
the decisions the real policy makes; the full-size figures the demo's MTP results are read with."""

from __future__ import annotations

import re
from pathlib import Path

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy
from qwen_mtp_desktop.core.auto.turns import policy_from_recommendation
from qwen_mtp_desktop.core.chat.decoding_words import auto_sentence, ran_text
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats, StepDrafts, build_stats
from qwen_mtp_desktop.core.measure.fullsize_figures import (
    FULL_SIZE,
    demo_mtp_note,
    full_size_details,
)
from tests.unit.test_adaptive import converse, synthetic_turn
from tests.unit.test_adaptive_lookup import converse as converse_decisions
from tests.unit.test_adaptive_lookup import recorded

mtp = DecodingMethod.mtp
RESULTS = Path(__file__).parents[2] / "benchmarks" / "results" / "fullsize.md"


def _plain_words(sentence: str) -> None:
    """One sentence, no jargon of the technical reason (percentages, ratios, seconds)."""
    assert sentence and "\n" not in sentence and not sentence.endswith(".")
    assert not re.search(r"\d+(\.\d+)?x|\d+%|\d+\.\d+ s", sentence), sentence


def test_rejected_drafts_read_as_mtp_was_slower() -> None:
    policy = AdaptivePolicy()
    policy.observe(synthetic_turn(mtp(1), 0.0))
    decision = policy.decide()
    assert decision.method == PLAIN and "MTP would be 0." in decision.reason
    sentence = auto_sentence(decision)
    assert sentence == "Plain decoding: MTP was slower on this model in the last turns"
    _plain_words(sentence)


def test_every_decision_of_a_conversation_has_a_plain_sentence() -> None:
    """Cold start, measuring, plain comparison turns, probes, deeper depths: each decision the
    policy makes over conversations that win and lose reads as one plain sentence whose
    method is the one that runs."""
    for acceptance in (0.0, 0.5, 1.0):
        policy = AdaptivePolicy()
        seen: list[str] = []

        def turn(
            choice: DecodingMethod,
            t: int,
            a: float = acceptance,
            policy: AdaptivePolicy = policy,
            seen: list[str] = seen,
        ) -> object:
            decision = policy.last_decision
            assert decision is not None
            seen.append(auto_sentence(decision))
            return synthetic_turn(choice, a, seed=t)

        choices = converse(policy, 60, turn)
        for choice, sentence in zip(choices, seen, strict=True):
            _plain_words(sentence)
            name = "Plain decoding" if choice.is_plain else choice.label
            assert sentence.startswith(name), (choice, sentence)
            # "Method: why", so the answer's figures see the method named and name it once.
            assert sentence.partition(":")[0] in (name, choice.label), sentence
        assert any("trying MTP again" in s for s in seen) or acceptance > 0


def test_benchmark_starts_say_so() -> None:
    plain = policy_from_recommendation(PLAIN, speedup=0.5, acceptance=0.1).decide()
    assert auto_sentence(plain) == "Plain decoding: the benchmark found MTP slower on this model"
    seeded = policy_from_recommendation(mtp(2), speedup=1.3, acceptance=0.8).decide()
    assert auto_sentence(seeded) == "MTP n=2: the benchmark found it fastest on this model"
    cold = policy_from_recommendation(None).decide()
    assert auto_sentence(cold) == "MTP n=1: measuring whether MTP pays on this model"


def _lookup_turn(drafted: int, accepted: int) -> GenerationStats:
    """A finished prompt-lookup answer of 12 tokens with these drafts."""
    stats = build_stats(
        method=DecodingMethod.lookup(), device="CPU", prompt_tokens=10,
        chunk_sizes=[1, 5, 1, 5], chunk_times=[0.1, 0.11, 0.12, 0.13], total_s=0.13,
        reasoning_tokens=0, answer_tokens=12, finish_reason="eos",
        drafts=[StepDrafts(0, 0), StepDrafts(4, 4), StepDrafts(0, 0), StepDrafts(4, 4)],
    )  # fmt: skip
    stats.drafted_tokens, stats.accepted_tokens = drafted, accepted
    return stats


def test_prompt_lookup_says_what_auto_measured_and_what_the_answer_found() -> None:
    """Auto's prompt lookup sentence speaks of what it measured (the last answers replayed,
    repeating earlier text), never of "the conversation" (the demo model is sent only the last
    message), says a first turn is a trial, and once the turn ran says when its answer
    repeated little, so it does not stand beside a low acceptance as if copying paid."""
    policy = policy_from_recommendation(None, max_depth=2)
    decisions = converse_decisions(policy, 8, lambda d, t: recorded("copy", d, t))
    first = next(d for d in decisions if d.method.kind == "lookup")
    assert first.probe and "(trying it)" in first.reason
    assert "the last answers repeat earlier text" in first.reason
    trial = auto_sentence(first)
    assert trial == "Prompt lookup: trying it, as the last answers repeated earlier text"
    later = decisions[-1]
    assert later.method.kind == "lookup" and not later.probe
    assert (later.predicted_speedup or 0) > 1.0
    assert auto_sentence(later) == (
        "Prompt lookup: faster than plain decoding, as the last answers repeated earlier text"
    )
    # The turn's own result: 9 % of drafts accepted reads "little of this answer did"; most
    # accepted adds nothing; an MTP turn's stats never touch a lookup sentence.
    low, high = _lookup_turn(drafted=44, accepted=4), _lookup_turn(drafted=8, accepted=8)
    assert auto_sentence(first, low) == trial + "; little of this answer did"
    assert auto_sentence(first, _lookup_turn(drafted=0, accepted=0)).endswith("this answer did")
    assert auto_sentence(first, high) == trial
    for decision in decisions:
        for ran in (None, low, high):
            sentence = auto_sentence(decision, ran)
            _plain_words(sentence)
            assert "conversation" not in sentence and "copy" not in sentence


def test_ran_text_says_what_decoded_an_answer() -> None:
    method = mtp(2).to_record()
    assert (
        ran_text({"method": method, "drafted_tokens": 20, "accepted_tokens": 17})
        == "MTP n=2, 85% of drafts accepted"
    )
    assert ran_text({"method": PLAIN.to_record()}) == "plain decoding"
    switched = {
        "method": mtp(1).to_record(),
        "drafted_tokens": 4,
        "accepted_tokens": 0,
        "auto": {"switched_to_plain_after_tokens": 8},
    }
    assert ran_text(switched) == (
        "MTP n=1, 0% of drafts accepted, then plain decoding after 8 tokens"
    )
    lookup = DecodingMethod.lookup(4, 3).to_record()
    assert ran_text({"method": lookup, "drafted_tokens": 0, "accepted_tokens": 0}) == (
        "prompt lookup K=4, n-gram 3, no match found"
    )
    # Older rows say "baseline"; shown as plain decoding.
    assert ran_text({"mode": "baseline"}) == "plain decoding"
    # A server that reports no method: nothing is guessed.
    assert ran_text({"remote": {"endpoint": "pc"}, "method": method}) == ""
    assert ran_text({}) == ""


def test_full_size_figures_are_the_benchmark_results() -> None:
    """The one data place quotes benchmarks/results/fullsize.md's table: each figure is there."""
    date = FULL_SIZE.source.rsplit(", ", 1)[-1]
    assert "benchmarks/fullsize.py" in FULL_SIZE.source
    results = RESULTS.read_text(encoding="utf-8")
    # The first section of that date, from its heading to the next one; its first table is the run.
    section = results.split(f"({date})\n", 1)[1].split("\n## ", 1)[0]
    lines = section.splitlines()
    row = next(line for line in lines if line.startswith("| agree (100 %)"))
    assert all(f"{v:.2f}x" in row for v in FULL_SIZE.all_accepted)
    row = next(line for line in lines if line.startswith("| random (0 %)"))
    assert all(f"{v:.2f}x" in row for v in FULL_SIZE.none_accepted)
    row = next(line for line in lines if line.startswith("| bigram"))
    low, high = FULL_SIZE.realistic_rounds
    assert f"{FULL_SIZE.realistic_best:.2f}x ({low:.2f}-{high:.2f})" in row
    assert f"({FULL_SIZE.realistic_acceptance * 100:.0f} / " in row  # acceptance at n=1
    note = demo_mtp_note()
    assert "too small for MTP to win" in note and "benchmark figures from benchmarks/" in note
    assert FULL_SIZE.machine in note and FULL_SIZE.model in full_size_details()
