"""A long prompt's prefill memory (core.decoding.prefill_memory, issue 41 item 4): a prompt
whose prefill would not fit in the memory free now is refused before any model call, with the
figures, and loses nothing of the conversation; after a long catch-up the MTP head's buffers are
given back (the target keeps its own: OpenVINO 2026.4's Gated DeltaNet node fails after a
release, see core.decoding.prefill_memory) and every later answer is still a cold engine's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.prefill_memory import (
    BYTES_PER_TOKEN_PER_HIDDEN,
    HEADROOM_BYTES,
    RELEASE_AFTER_TOKENS,
)
from qwen_mtp_desktop.core.engine import (
    EXACT_NUMERICS,
    Engine,
    EngineError,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.server.http.errors import from_engine_error

pytestmark = pytest.mark.model

TEXT = "The committee met on Tuesday to review the budget and the travel plans. "


@pytest.fixture(scope="module")
def engine(demo_model: Path) -> Iterator[Engine]:
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=True, exact_numerics=True))
    yield engine
    engine.unload()


def _decoder(engine: Engine) -> AppDecoder:
    decoder = engine._fast
    assert decoder is not None, "the demo model runs on the app's decoder"
    return decoder


def _answer(engine: Engine, history: list[Message], method: DecodingMethod = PLAIN) -> Any:
    generation = engine.generate(history, GenerationSettings(16, method=method))
    stats = generation.run_to_end()
    return generation.answer, stats


def test_a_prefill_that_cannot_fit_is_refused_up_front_and_loses_nothing(engine: Engine) -> None:
    decoder = _decoder(engine)
    engine.drop_states()
    first = [Message("user", "Count from 1 to 20.")]
    text, _ = _answer(engine, first)
    follow_up = [*first, Message("assistant", text), Message("user", TEXT * 30)]
    # Free memory: enough for a short prefill, not for this one.
    free = HEADROOM_BYTES + BYTES_PER_TOKEN_PER_HIDDEN * decoder.hidden_size * 40
    decoder.available_memory = lambda: free
    try:
        with pytest.raises(EngineError) as refused:
            _answer(engine, follow_up)
        error = refused.value
        assert error.code == "NOT_ENOUGH_MEMORY"
        assert "new tokens needs about" in error.message and "free" in error.message
        counted = error.message.split("conversation's ")[1].split(" new")[0]
        new_tokens = int(counted.replace(",", ""))
        assert "Close other programs" in error.fix
        api = from_engine_error(error)
        assert (api.status, api.code) == (400, "context_length_exceeded")
        # A short follow-up still fits: the refused turn changed nothing it resumes from.
        short = [*first, Message("assistant", text), Message("user", "Count to 5.")]
        _answer(engine, short)
        prefill = decoder.last_prefill
        assert prefill is not None and prefill.reused > 0
    finally:
        decoder.available_memory = lambda: None
    # Memory back: the long follow-up runs and answers as a cold engine does. The refusal
    # counted its new tokens only (a few more are shared with the short follow-up by now).
    long_text, _ = _answer(engine, follow_up)
    prefill = decoder.last_prefill
    assert prefill is not None and prefill.reused > 0
    assert abs(new_tokens - (prefill.prompt_tokens - prefill.reused)) <= 8
    engine.drop_states()
    assert _answer(engine, follow_up)[0] == long_text


def test_unknown_free_memory_checks_nothing(engine: Engine) -> None:
    decoder = _decoder(engine)
    decoder.available_memory = lambda: None
    text, _ = _answer(engine, [Message("user", TEXT * 10)])
    assert text


class _CountingModel:
    """A compiled model that counts release_memory() calls (the rest goes to the real one)."""

    def __init__(self, compiled: Any) -> None:
        self._compiled = compiled
        self.releases = 0

    def release_memory(self) -> None:
        self.releases += 1
        self._compiled.release_memory()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


@pytest.fixture(scope="module")
def cold(demo_model: Path) -> AppDecoder:
    """A decoder that keeps no state: every answer from a cold prefill."""
    return AppDecoder(demo_model, "CPU", EXACT_NUMERICS, cache_budget=0)


@pytest.mark.parametrize("method", [DecodingMethod.mtp(1), DecodingMethod.mtp(2)])
def test_buffers_are_given_back_after_a_long_call_and_answers_stay_exact(
    demo_model: Path, cold: AppDecoder, method: DecodingMethod
) -> None:
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(demo_model))
    ids = [int(i) for i in tokenizer.encode(TEXT * 120, add_special_tokens=False).input_ids.data[0]]
    assert len(ids) > RELEASE_AFTER_TOKENS
    stops: frozenset[int] = frozenset()

    def answer(decoder: AppDecoder, prompt: list[int]) -> list[int]:
        steps = decoder.decode(prompt, method=method, max_new_tokens=12, stop_ids=stops)
        return [t for step in steps for t in step.tokens]

    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    head = None
    if method.uses_mtp_head:
        head = _CountingModel(decoder.mtp.compiled)
        decoder.mtp.compiled = head
    first = answer(decoder, ids)
    assert first == answer(cold, ids)
    if head is not None:  # once, after it caught up on the prompt
        assert head.releases == 1, "released once, after the head caught up on the prompt"
    # The same shapes again after the release (a fresh prefill), then a follow-up on the kept
    # state and a short one: each answer is a cold engine's.
    decoder.drop_states()
    assert answer(decoder, ids) == first
    follow = [*ids, *first, *ids[:200]]
    assert answer(decoder, follow) == answer(cold, follow)
    short = [*follow, *ids[:5]]
    assert answer(decoder, short) == answer(cold, short)
    if head is not None:
        assert head.releases == 2, "the follow-up's catch-up was short: nothing more to give"
