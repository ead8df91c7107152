"""A conversation longer than the model's context, under each overflow policy (Chat options ›
When too long), on the demo model with its context cut to 400 tokens in config.json (where
the app reads it): "stop" refuses with the count; the others leave out the fewest earlier turns
that fit, say how many, and answer exactly as the model answers the shortened conversation
sent as it is. Through the engine in this process and through the engine host."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.engine import (
    Engine,
    EngineError,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.engine.types import Role
from qwen_mtp_desktop.core.hosting.client import HostedEngine
from tests.models import short_context_copy

pytestmark = pytest.mark.model

CONTEXT = 400
SYSTEM = Message("system", "You count and repeat.")
TURNS = [
    ("Count from 1 to 20.", " ".join(str(n) for n in range(1, 21))),
    ("Repeat 'tea time' three times.", "tea time tea time tea time"),
    ("List the numbers from 40 to 52.", " ".join(str(n) for n in range(40, 53))),
] * 5


@pytest.fixture(scope="module")
def short_context_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model with max_position_embeddings 400 (every other file linked)."""
    return short_context_copy(
        demo_model, tmp_path_factory.mktemp("short-context") / "demo-400", CONTEXT
    )


@pytest.fixture(scope="module")
def engine(short_context_model: Path) -> Iterator[Engine]:
    engine = Engine()
    engine.load(short_context_model, LoadOptions(mtp=True, exact_numerics=True))
    yield engine
    engine.unload()


def _conversation() -> list[Message]:
    messages = [SYSTEM]
    for question, answer in TURNS:
        messages += [Message("user", question), Message("assistant", answer)]
    return [*messages, Message("user", "Count from 1 to 5.")]


def _roles(messages: list[Message]) -> list[Role]:
    return [m.role for m in messages]


def test_stop_refuses_with_the_count(engine: Engine) -> None:
    with pytest.raises(EngineError) as refused:
        engine.generate(_conversation(), GenerationSettings(24)).run_to_end()
    assert refused.value.code == "CONTEXT_TOO_LONG"
    assert f"reads at most {CONTEXT}" in refused.value.message


@pytest.mark.parametrize("policy", ["rolling_window", "truncate_middle"])
def test_earlier_turns_are_left_out_until_it_fits(engine: Engine, policy: str) -> None:
    conversation = _conversation()
    settings = GenerationSettings(24, context_overflow=policy)  # type: ignore[arg-type]
    generation = engine.generate(conversation, settings)
    stats = generation.run_to_end()
    left_out = stats.left_out_messages
    assert left_out > 0 and left_out % 2 == 0, "whole turns: a question with its answer"
    assert stats.prompt_tokens + 24 <= CONTEXT
    # What the model read: the system prompt, (the first exchange), the latest exchanges.
    kept = [SYSTEM]
    first = 1 if policy == "truncate_middle" else 0
    kept += conversation[1 : 1 + 2 * first]
    kept += conversation[1 + 2 * first + left_out :]
    assert len(kept) == len(conversation) - left_out
    again = engine.generate(kept, GenerationSettings(24))
    again.run_to_end()
    assert again.answer == generation.answer
    # One turn more would not have fitted: the fewest were left out.
    more = [*kept[: 1 + 2 * first], *conversation[1 + 2 * first + left_out - 2 :]]
    try:
        tokens = engine.generate(more, GenerationSettings(1)).run_to_end().prompt_tokens
    except EngineError as exc:  # longer than the whole context
        assert exc.code == "CONTEXT_TOO_LONG"
    else:
        assert tokens + 24 > CONTEXT


def test_a_conversation_that_fits_is_read_whole(engine: Engine) -> None:
    short = _conversation()[-5:]
    stats = engine.generate(short, GenerationSettings(12, context_overflow="rolling_window"))
    assert stats.run_to_end().left_out_messages == 0


@pytest.mark.subprocess
def test_the_policy_and_its_count_cross_the_engine_host(short_context_model: Path) -> None:
    engine = HostedEngine()
    try:
        engine.load(short_context_model, LoadOptions(mtp=True, exact_numerics=True))
        settings = GenerationSettings(24, context_overflow="rolling_window")
        stats = engine.generate(_conversation(), settings).run_to_end()
        assert stats.left_out_messages > 0 and stats.prompt_tokens + 24 <= CONTEXT
        with pytest.raises(EngineError) as refused:
            engine.generate(_conversation(), GenerationSettings(24)).run_to_end()
        assert refused.value.code == "CONTEXT_TOO_LONG"
    finally:
        engine.close()
