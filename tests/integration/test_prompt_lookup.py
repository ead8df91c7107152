"""Prompt lookup (n-gram drafting on the app's decoder) against openvino-genai's plain
decoding, with exact numerics: identical tokens for generated prompts, draft counts, n-gram
sizes and token budgets on the demo model and the MoE fixture; stop strings; and the drafts the
stats count are the decoder's own (the accepted tokens of every step are a prefix of the
candidates an independent n-gram index proposes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.prompt_lookup import NgramIndex
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
from tests.demo_prompts import PROMPTS


@pytest.fixture(scope="module", params=["demo", "moe"])
def engines(request: pytest.FixtureRequest) -> Iterator[tuple[Engine, Engine]]:
    """(openvino-genai's plain decoding, an engine that runs prompt lookup on the app's
    decoder), both with exact numerics."""
    model: Path = request.getfixturevalue({"demo": "demo_model", "moe": "moe_model"}[request.param])
    plain, lookup = Engine(), Engine()
    plain.load(model, LoadOptions(mtp=False, exact_numerics=True, plain_decoder="genai"))
    lookup.load(model, LoadOptions(mtp=True, exact_numerics=True))
    yield plain, lookup
    plain.unload()
    lookup.unload()


def _run(
    engine: Engine, prompt: str, settings: GenerationSettings
) -> tuple[list[int], GenerationStats]:
    generation = engine.generate([Message("user", prompt)], settings)
    stats = generation.run_to_end()
    return list(generation.token_ids), stats


def _check_drafts(
    engine: Engine,
    prompt: str,
    ids: Sequence[int],
    stats: GenerationStats,
    k: int,
    n: int,
    budget: int,
) -> None:
    """The drafts the stats count are the runtime's: every step's accepted tokens are the
    replayed candidates' prefix, a step that took fewer than were proposed ended on a token
    that is not the next candidate (or on an accepted end-of-text draft, after which the
    runtime adds nothing), and the counts add up."""
    sizes = stats.chunk_sizes
    drafted = accepted_eos = 0
    rendered = engine.render_prompt([Message("user", prompt)])
    index = NgramIndex(n)
    index.extend([int(i) for i in engine._tokenizer.encode(rendered).input_ids.data[0]])
    eos = engine._tokenizer.get_eos_token_id()
    at = 0
    for i, size in enumerate(sizes):
        step = list(ids[at : at + size])
        if i > 0:
            candidates = index.candidates(min(k, budget - at - 1))
            accepted = step[:-1]
            assert accepted == candidates[: len(accepted)], (i, candidates, step)
            if len(accepted) < len(candidates) and step[-1] == candidates[len(accepted)]:
                assert (step[-1], i, stats.finish_reason) == (eos, len(sizes) - 1, "eos")
                accepted_eos = 1
            drafted += len(candidates)
        index.extend(step)
        at += size
    assert at == len(ids)
    assert stats.drafted_tokens == drafted
    assert stats.accepted_tokens == sum(size - 1 for size in sizes[1:]) + accepted_eos


@pytest.mark.model
@pytest.mark.export
@given(
    prompt=PROMPTS,
    k=st.integers(1, 6),
    n=st.integers(1, 4),
    budget=st.integers(1, 48),
)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(prompt="0a", k=1, n=1, budget=7)  # ends on an accepted end-of-text draft (demo)
def test_output_equals_plain_decoding(
    engines: tuple[Engine, Engine], prompt: str, k: int, n: int, budget: int
) -> None:
    plain, lookup = engines
    reference, _ = _run(plain, prompt, GenerationSettings(budget))
    method = DecodingMethod.lookup(k, n)
    ids, stats = _run(lookup, prompt, GenerationSettings(budget, method=method))
    assert ids == reference
    assert stats.method == method and stats.decoder == "app"
    assert stats.generated_tokens <= budget
    assert all(size <= k + 1 for size in stats.chunk_sizes)
    _check_drafts(lookup, prompt, ids, stats, k, n, budget)


@pytest.mark.model
@pytest.mark.export
@pytest.mark.parametrize("stop", [" 7", "3 4", "\n", "zzz"])
def test_stop_strings_end_the_text_like_plain_decoding(
    engines: tuple[Engine, Engine], stop: str
) -> None:
    plain, lookup = engines
    results = []
    for engine, method in ((plain, PLAIN), (lookup, DecodingMethod.lookup(3))):
        settings = GenerationSettings(80, stop_strings=(stop,), method=method)
        generation = engine.generate([Message("user", "Count from 1 to 20.")], settings)
        stats = generation.run_to_end()
        results.append((list(generation.token_ids), generation.answer, stats.finish_reason))
    assert results[1] == results[0]
    assert stop not in results[0][1]


@pytest.mark.model
@pytest.mark.export
@pytest.mark.parametrize("budget", [1, 2, 3, 5, 9, 17, 33])
def test_token_budget_boundaries(engines: tuple[Engine, Engine], budget: int) -> None:
    """Near max_new_tokens the runtime drafts only what can still be used; output and counts
    stay exact at every boundary, including a copy that would run past it."""
    plain, lookup = engines
    prompt = "Say 'we like apples' four times."
    reference, _ = _run(plain, prompt, GenerationSettings(budget))
    settings = GenerationSettings(budget, method=DecodingMethod.lookup(5))
    ids, stats = _run(lookup, prompt, settings)
    assert ids == reference and stats.generated_tokens == len(ids) <= budget
    _check_drafts(lookup, prompt, ids, stats, 5, settings.method.ngram, budget)


@pytest.mark.model
def test_copying_answers_accept_drafts_and_a_plain_model_can_look_up(demo_model: Path) -> None:
    """A repeating answer copies from itself, so drafts are accepted; a model loaded without
    its MTP head runs prompt lookup too (it needs no head)."""
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=False))
    try:
        settings = GenerationSettings(60, method=DecodingMethod.lookup(4, 3))
        _, stats = _run(engine, "Say 'we like apples' four times.", settings)
        assert stats.method == DecodingMethod.lookup(4, 3)
        assert stats.accepted_tokens >= 6 and 0 < stats.acceptance_rate <= 1
    finally:
        engine.unload()


@pytest.mark.model
def test_an_image_turn_decodes_without_prompt_lookup(demo_model: Path, tmp_path: Path) -> None:
    """The runtime's image tokens are invisible to the draft count, so lookup steps aside."""
    from PIL import Image

    image = tmp_path / "red square.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    messages = [Message("user", "Count from 1 to 5.", image=image)]
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=False, exact_numerics=True))
    try:
        plain = engine.generate(messages, GenerationSettings(20))
        plain.run_to_end()
        lookup = GenerationSettings(20, method=DecodingMethod.lookup())
        generation = engine.generate(messages, lookup)
        stats = generation.run_to_end()
        assert stats.method == PLAIN and stats.lookup_replay is None
        assert generation.token_ids == plain.token_ids and generation.token_ids
    finally:
        engine.unload()
