"""Auto (core.auto.policy) judging turns with their prefill and pipeline loads
(core.auto.turn_costs), and running prompt lookup with the chat's own settings, on recorded
demo-model turns and on
prefill costs measured with benchmarks/prefill_costs.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, Decision, TurnContext, TurnSample
from qwen_mtp_desktop.core.auto.turn_costs import LOAD_SHARE, PRIOR_RATIO, TurnCosts, path_of
from qwen_mtp_desktop.core.auto.turns import policy_from_recommendation
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.chat.turns import AutoDecoding, Turn, generation_settings
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from tests.unit.test_adaptive_lookup import recorded

#: Time to first token per prompt token, demo model (benchmarks/prefill_costs.py, 32-2048
#: words, 3 interleaved rounds): the app's decoder, openvino-genai's prompt-lookup pipeline,
#: and openvino-genai's MTP and plain pipelines on image turns.
PREFILL_S_PER_TOKEN = {
    "app": 80.9e-6,
    "lookup": 107.2e-6,
    "genai-mtp+image": 125.2e-6,
    "genai-plain+image": 70.6e-6,
    "genai-plain": 69.1e-6,
}
#: Characters per token of the demo tokenizer on the benchmark's English text (about).
CHARS_PER_TOKEN = 3.0


def with_prefill(sample: TurnSample, decision: Decision, prompt_tokens: int) -> TurnSample:
    """The recorded turn as if its prompt had `prompt_tokens` tokens: its first step comes
    after the measured prefill for the path it ran on, the rest as recorded."""
    decoder = "app" if decision.method.uses_mtp_head else "genai"
    path = path_of(decision.method, decoder)
    prefill = PREFILL_S_PER_TOKEN[path] * prompt_tokens
    start = sample.step_times_s[0]
    times = tuple(prefill + t - start for t in sample.step_times_s)
    return replace(
        sample,
        step_times_s=times,
        decoder=decoder,
        prompt_tokens=prompt_tokens,
        prompt_chars=round(prompt_tokens * CHARS_PER_TOKEN),
    )


def converse(policy: AdaptivePolicy, turns: int, prompt_tokens: int) -> list[Decision]:
    context = TurnContext(prompt_chars=round(prompt_tokens * CHARS_PER_TOKEN), model_load_s=0.05)
    decisions = []
    for turn in range(turns):
        decision = policy.decide(context)
        decisions.append(decision)
        policy.observe(with_prefill(recorded("copy", decision, turn), decision, prompt_tokens))
    return decisions


def is_lookup(decision: Decision) -> bool:
    return decision.method.kind == "lookup"


def test_short_prompts_copying_goes_to_prompt_lookup_with_prefill_counted() -> None:
    policy = policy_from_recommendation(None, max_depth=2)
    decisions = converse(policy, 8, prompt_tokens=40)
    assert all(is_lookup(d) for d in decisions[3:]), [d.summary() for d in decisions]
    assert "K=4, n-gram 3 from the chat settings" in decisions[-1].reason


def test_a_long_prompt_makes_prompt_lookup_lose_and_the_reason_says_why() -> None:
    """The same copying conversation, but every prompt 12,000 tokens long: prompt lookup's
    pipeline prefills it 0.31 s slower than the app's decoder, more than its faster decoding
    of a ~16-token answer saves, so Auto stays off it and says so."""
    policy = policy_from_recommendation(None, max_depth=2)
    short = converse(policy, 6, prompt_tokens=40)
    assert is_lookup(short[-1])  # it had learned that lookup decodes this faster
    long_context = TurnContext(prompt_chars=round(12_000 * CHARS_PER_TOKEN), model_load_s=0.05)
    decision = policy.decide(long_context)
    assert not is_lookup(decision), decision.summary()
    assert "prompt lookup decodes faster, but its pipeline would take" in decision.reason
    assert "12,0" in decision.reason or "11,9" in decision.reason  # the prompt's ~tokens
    # The prefill it quotes is the measured line's: 12,000 x 107.2 us = 1.29 s.
    assert "1.2" in decision.reason or "1.3" in decision.reason, decision.reason


def test_prompt_tokens_are_learned_from_characters() -> None:
    policy = AdaptivePolicy()
    converse(policy, 3, prompt_tokens=500)
    assert policy.prompt_tokens(TurnContext(prompt_chars=3000)) == 1000


def test_image_turns_never_run_prompt_lookup_and_weigh_the_genai_prefills() -> None:
    """On a copying conversation prompt lookup wins text turns; an image turn cannot run it,
    and with a long prompt openvino-genai's plain pipeline (70.6 us a token) beats its MTP
    pipeline (125.2 us) although MTP decodes faster, once both were measured."""
    policy = policy_from_recommendation(DecodingMethod.mtp(1), speedup=1.3, acceptance=0.9)
    converse(policy, 6, prompt_tokens=40)
    image_context = TurnContext(prompt_chars=30_000, images=1, model_load_s=0.05)
    for path in ("genai-mtp+image", "genai-plain+image"):
        for tokens in (1_000, 10_000):
            policy._turn_costs.observe(path, tokens, PREFILL_S_PER_TOKEN[path] * tokens)
    decision = policy.decide(image_context)
    assert decision.reason.startswith("image turn (no prompt lookup)"), decision.reason
    assert decision.method == PLAIN, decision.summary()
    short_image = policy.decide(TurnContext(prompt_chars=30, images=1, model_load_s=0.05))
    assert not is_lookup(short_image) and "image turn" in short_image.reason


def test_a_never_loaded_lookup_pipeline_is_charged_its_load() -> None:
    """On a model only openvino-genai runs (its plain turns ran there), a model that took 30 s
    to load: opening prompt lookup's pipeline (0.3 of that, the measured share) for a short
    turn costs more than lookup saves over the next LOAD_TURNS turns, so Auto waits; a
    pipeline that already ran on this model costs nothing. (On the app's decoder every method
    runs on the one loaded model: nothing to load.)"""
    policy = policy_from_recommendation(None, max_depth=2)
    for turn in range(4):
        decision = Decision(PLAIN, "plain")
        policy.observe(with_prefill(recorded("copy", decision, turn), decision, 40))
    # A one-token prompt: prefill plays no part here, only the load does.
    cheap = policy.decide(TurnContext(prompt_chars=3, model_load_s=0.01))
    assert is_lookup(cheap), cheap.summary()
    slow = policy.decide(TurnContext(prompt_chars=3, model_load_s=30.0))
    assert not is_lookup(slow), slow.summary()
    assert "loading its pipeline takes ~9.0 s" in slow.reason, slow.summary()
    policy.share_loaded({"lookup"})
    loaded = policy.decide(TurnContext(prompt_chars=3, model_load_s=30.0))
    assert is_lookup(loaded), loaded.summary()


def test_the_chats_lookup_settings_are_used_and_named() -> None:
    policy = policy_from_recommendation(None, max_depth=2)
    auto = AutoDecoding()
    chat = ChatSettings(temperature=0.0, lookup_tokens=7, max_ngram_size=2)
    settings = generation_settings(chat)
    assert settings.replay_lookup == DecodingMethod.lookup(7, 2)
    from qwen_mtp_desktop.core.chat.turns import plan_auto_turn

    turn = Turn(settings)
    for index in range(6):
        turn = plan_auto_turn(
            policy, settings, plain_ready=True, load_s=0.1, history=[Message("user", "x" * 90)]
        )
        assert turn.decision is not None and turn.context is not None
        assert turn.context.prompt_chars == 90
        policy.observe(with_prefill(recorded("copy", turn.decision, index), turn.decision, 30))
    assert turn.decision is not None and is_lookup(turn.decision), turn.decision.summary()
    assert "K=7, n-gram 2 from the chat settings" in turn.decision.reason
    assert turn.settings.method == DecodingMethod.lookup(7, 2)
    assert auto.recommendation  # the session type is importable alongside


def test_changing_the_lookup_settings_drops_evidence_measured_with_others() -> None:
    policy = AdaptivePolicy()
    converse(policy, 3, prompt_tokens=40)
    assert policy.lookup_tokens_per_step() is not None
    policy.use_lookup_settings(DecodingMethod.lookup(4, 3))  # the same: kept
    assert policy.lookup_tokens_per_step() is not None
    policy.use_lookup_settings(DecodingMethod.lookup(2, 3))
    assert policy.lookup_tokens_per_step() is None and policy.lookup_step_cost() != 0
    assert policy.lookup == DecodingMethod.lookup(2, 3)
    off = AdaptivePolicy(lookup=None)
    off.use_lookup_settings(DecodingMethod.lookup(2, 3))  # not an option stays so
    assert off.lookup is None


def test_turn_record_keeps_the_context_and_teaches_prefill() -> None:
    policy = AdaptivePolicy()
    context = TurnContext(prompt_chars=900, images=0)
    stats = build_stats(
        method=DecodingMethod.mtp(1), device="CPU", prompt_tokens=300,
        chunk_sizes=[1, 2, 2, 1], chunk_times=[0.03, 0.032, 0.034, 0.036], total_s=0.04,
        reasoning_tokens=0, answer_tokens=6, finish_reason="eos", decoder="app",
    )  # fmt: skip
    turn = Turn(GenerationSettings(), policy, Decision(DecodingMethod.mtp(1), "x"), context)
    turn.finish(stats, None)
    assert policy.prompt_tokens(TurnContext(prompt_chars=1800)) == 600
    assert policy._turn_costs.prefill_s("app", 600) == pytest.approx(0.06)
    # Never measured: priced from the app's decoder by the measured ratio.
    assert policy._turn_costs.prefill_s("lookup", 600) == pytest.approx(
        0.06 * PRIOR_RATIO["lookup"]
    )


@given(
    a=st.floats(0.0, 0.5),
    b=st.floats(1e-6, 1e-3),
    lengths=st.lists(st.integers(10, 20_000), min_size=2, max_size=8, unique=True),
)
def test_the_prefill_line_recovers_exact_measurements(
    a: float, b: float, lengths: list[int]
) -> None:
    costs = TurnCosts()
    for tokens in lengths:
        costs.observe("app", tokens, a + b * tokens)
    for tokens in (lengths[0], 5_000):
        predicted = costs.prefill_s("app", tokens)
        assert predicted is not None
        spread = max(lengths) - min(lengths)
        if spread > 0.1 * (sum(lengths) / len(lengths)):
            assert predicted == pytest.approx(a + b * tokens, rel=1e-6, abs=1e-9)
        else:  # too alike to fit a slope: through the origin, still >= 0
            assert predicted >= 0


def test_load_is_charged_once_per_path() -> None:
    costs = TurnCosts()
    assert costs.load_s("lookup", 2.0) == pytest.approx(2.0 * LOAD_SHARE)
    assert costs.load_s("app", 2.0) == 0.0
    costs.observe("lookup", 100, 0.01)
    assert costs.load_s("lookup", 2.0) == 0.0
    assert costs.prefill_s("genai-mtp", 100) == pytest.approx(
        0.01 * PRIOR_RATIO["genai-mtp"] / PRIOR_RATIO["lookup"]
    )
