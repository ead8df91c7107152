"""The app's own MTP decoder (core.decoding.decoder) against openvino-genai's plain decoding, with
exact numerics: identical tokens for generated prompts, draft depths and token budgets, on the
demo model, the MoE fixture and a copy whose MTP head is noise (rejections everywhere);
rollback after a rejection at every draft position; stop strings; cancellation; a model the
decoder cannot read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.engine import (
    EXACT_NUMERICS,
    Engine,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.devtools.mtp_head import make_broken_mtp_copy
from tests.demo_prompts import PROMPTS


@pytest.fixture(scope="module")
def broken_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_broken_mtp_copy(demo_model, tmp_path_factory.mktemp("fast") / "random head")


@pytest.fixture(scope="module", params=["demo", "moe", "broken head"])
def model(request: pytest.FixtureRequest) -> Path:
    fixture = {"demo": "demo_model", "moe": "moe_model", "broken head": "broken_model"}
    path: Path = request.getfixturevalue(fixture[request.param])
    return path


@pytest.fixture(scope="module")
def engines(model: Path) -> Iterator[tuple[Engine, Engine]]:
    """(openvino-genai plain decoding, the app's decoder), both with exact numerics."""
    plain, fast = Engine(), Engine()
    plain.load(model, LoadOptions(mtp=False, exact_numerics=True))
    loaded = fast.load(model, LoadOptions(mtp=True, exact_numerics=True))
    assert loaded.decoder == "app" and loaded.mtp, loaded.decoder_note
    yield plain, fast
    plain.unload()
    fast.unload()


def _ids(engine: Engine, prompt: str, settings: GenerationSettings) -> list[int]:
    generation = engine.generate([Message("user", prompt)], settings)
    stats = generation.run_to_end()
    assert sum(stats.chunk_sizes) == len(generation.token_ids)
    return list(generation.token_ids)


@pytest.mark.model
@pytest.mark.export
@given(prompt=PROMPTS, depth=st.integers(1, 4), budget=st.integers(1, 48))
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_output_equals_plain_decoding(
    engines: tuple[Engine, Engine], prompt: str, depth: int, budget: int
) -> None:
    plain, fast = engines
    reference = _ids(plain, prompt, GenerationSettings(budget))
    generation = fast.generate(
        [Message("user", prompt)], GenerationSettings(budget, method=DecodingMethod.mtp(depth))
    )
    stats = generation.run_to_end()
    assert stats.decoder == "app" and stats.method == DecodingMethod.mtp(depth)
    assert list(generation.token_ids) == reference
    assert stats.generated_tokens <= budget
    # Every decode step proposed min(depth, tokens left - 1) drafts: none is larger.
    assert all(size <= depth + 1 for size in stats.chunk_sizes)


def _rejections(sizes: list[int], depth: int, budget: int) -> set[int]:
    """Draft positions (1-based) at which a step's first rejection happened."""
    out, produced = set(), sizes[0]
    for size in sizes[1:]:
        proposed = min(depth, budget - produced - 1)
        if size - 1 < proposed:
            out.add(size)
        produced += size
    return out


@pytest.mark.model
def test_rollback_after_a_rejection_at_every_draft_position(
    demo_model: Path, broken_model: Path
) -> None:
    """Depth 4 on the demo model rejects drafts at every position somewhere; the noise head
    rejects nearly everything, so confirmed tokens pile up and are re-processed. Output stays
    plain decoding's in both, and the decoder's counters show the paths were taken."""
    seen: set[int] = set()
    for model_dir in (demo_model, broken_model):
        plain = Engine()
        plain.load(model_dir, LoadOptions(mtp=False, exact_numerics=True))
        decoder = AppDecoder(model_dir, "CPU", EXACT_NUMERICS)
        tokenizer = plain._tokenizer
        stop_ids = plain._stop_ids
        try:
            for text in ("Count from 1 to 20.", "Say 'we like apples' four times.", "Hi"):
                prompt = plain.render_prompt([Message("user", text)])
                prompt_ids = [int(i) for i in tokenizer.encode(prompt).input_ids.data[0]]
                reference = _ids(plain, text, GenerationSettings(60))
                steps = list(
                    decoder.decode(
                        prompt_ids,
                        method=DecodingMethod.mtp(4),
                        max_new_tokens=60,
                        stop_ids=stop_ids,
                    )
                )
                assert [t for step in steps for t in step.tokens] == reference
                seen |= _rejections([len(s.tokens) for s in steps], 4, 60)
                assert decoder.timing.target_calls >= 2
            if model_dir == broken_model:
                assert decoder.timing.rollbacks > 0 and decoder.timing.reprocessed_tokens > 0
        finally:
            plain.unload()
    assert seen >= {1, 2, 3, 4}


@pytest.mark.model
@pytest.mark.parametrize("stop", [" 7", "3 4", "\n", "zzz"])
def test_stop_strings_end_the_text_like_openvino_genai(
    demo_model: Path, broken_model: Path, stop: str
) -> None:
    for model_dir in (demo_model, broken_model):
        plain, fast = Engine(), Engine()
        plain.load(model_dir, LoadOptions(mtp=False, exact_numerics=True))
        fast.load(model_dir, LoadOptions(mtp=True, exact_numerics=True))
        try:
            results = []
            for engine, depth in ((plain, 1), (fast, 1), (fast, 3)):
                generation = engine.generate(
                    [Message("user", "Count from 1 to 20.")],
                    GenerationSettings(80, stop_strings=(stop,), method=DecodingMethod.mtp(depth)),
                )
                stats = generation.run_to_end()
                results.append((list(generation.token_ids), generation.answer, stats.finish_reason))
            assert results[1] == results[0] and results[2] == results[0]
            assert stop not in results[0][1]
        finally:
            plain.unload()
            fast.unload()


@pytest.mark.model
def test_cancel_mid_answer_keeps_a_prefix_and_the_engine_usable(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=True, exact_numerics=True))
    try:
        settings = GenerationSettings(200, method=DecodingMethod.mtp(2), ignore_eos=True)
        history = [Message("user", "Count from 1 to 20.")]
        reference = _ids(engine, history[0].content, settings)
        generation = engine.generate(history, settings)
        for index, _chunk in enumerate(generation):
            if index == 3:
                generation.cancel()
        stats = generation.stats
        assert stats is not None and stats.finish_reason == "cancelled"
        assert 4 <= len(generation.token_ids) < 200
        assert list(generation.token_ids) == reference[: len(generation.token_ids)]
        assert _ids(engine, history[0].content, settings) == reference
    finally:
        engine.unload()


@pytest.mark.model
def test_a_model_the_fast_decoder_cannot_read_falls_back_with_the_reason(
    demo_model: Path, tmp_path: Path
) -> None:
    """Logits scaled after the lm_head (Multiply after MatMul): the fast decoder needs the
    lm_head's input and says so; the model still loads and answers like plain decoding."""
    import shutil

    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    copy = tmp_path / "scaled logits"
    shutil.copytree(demo_model, copy)
    xml = copy / "openvino_language_model.xml"
    model = ov.Core().read_model(xml)
    result = next(r for r in model.get_results() if "logits" in r.output(0).get_names())
    scaled = ops.multiply(result.input_value(0), ops.constant(np.float32(1.0)))
    result.input(0).replace_source_output(scaled.output(0))
    staged = copy / "staged.xml"
    ov.save_model(model, staged, compress_to_fp16=False)
    staged.replace(xml)
    staged.with_suffix(".bin").replace(xml.with_suffix(".bin"))

    reference_engine = Engine()
    reference_engine.load(demo_model, LoadOptions(mtp=False, exact_numerics=True))
    reference = _ids(reference_engine, "Count from 1 to 9.", GenerationSettings(40))
    reference_engine.unload()

    engine = Engine()
    loaded = engine.load(copy, LoadOptions(mtp=True, exact_numerics=True))
    try:
        assert loaded.decoder == "genai"
        assert "logits" in loaded.decoder_note and "Multiply" in loaded.decoder_note
        assert loaded.decoder_note in loaded.warnings
        assert _ids(engine, "Count from 1 to 9.", GenerationSettings(40)) == reference
    finally:
        engine.unload()
