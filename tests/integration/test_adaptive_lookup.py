"""Auto among plain, MTP and prompt lookup on the real runtime (demo model): on a conversation
whose answers copy the prompt it learns that prompt lookup would yield several tokens per step
and runs it, on a counting one it learns that lookup yields little and leaves it; the chat's
session records why, and every answer equals plain decoding's.

Whether lookup then keeps winning on the demo model is decided by the measured costs, and the
demo's answers are 5-8 lookup steps long, where one slow step on this shared machine (10 ms
against 1-2 ms) swings the verdict; the unit tests (tests/unit/test_adaptive_lookup.py) check
the choices themselves on recorded turns of these same conversations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.auto.policy import Decision
from qwen_mtp_desktop.core.chat.turns import AutoDecoding
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

pytestmark = pytest.mark.model

COPYING = [
    "Say 'we like apples' four times.",
    "Say 'good morning' four times.",
    "Repeat 'tea time' four times.",
    "Say 'blue' four times.",
    "Say 'hello' four times.",
    "Say 'we like apples' three times.",
    "Say 'good morning' three times.",
    "Repeat 'blue' four times.",
    "Say 'tea time' four times.",
    "Say 'good morning' three times.",
]
COUNTING = [
    "Count from 1 to 20.",
    "Count from 35 to 52.",
    "Count from 60 to 79.",
    "Count from 2 to 21.",
    "Count from 40 to 59.",
    "Count from 11 to 30.",
    "Count from 70 to 89.",
    "Count from 5 to 24.",
]


@pytest.fixture(scope="module")
def engine(demo_model: Path) -> Iterator[Engine]:
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=True))
    # As in a chat that has run before: each pipeline's first generation is several times
    # slower (allocation, warm-up) and would be one noisy turn more in a short conversation.
    for settings in (
        GenerationSettings(8, method=PLAIN),
        GenerationSettings(8),
        GenerationSettings(8, method=DecodingMethod.lookup()),
    ):
        engine.generate([Message("user", "Count from 1 to 5.")], settings).run_to_end()
    yield engine
    engine.unload()


def _conversation(
    engine: Engine, texts: list[str], key: int
) -> tuple[AutoDecoding, list[Decision], float]:
    """Each text as its own one-turn chat (the demo model answers one request), under one Auto
    policy, as the chat panel runs it; answers are checked against plain decoding. Returns the
    Auto state, its decisions and prompt lookup's replayed tokens per step over all turns."""
    assert engine.loaded is not None
    auto = AutoDecoding()
    auto.remember(engine.loaded.model_dir, "CPU", None)
    # As in a chat that has run before (the fixture ran every pipeline): none is to load.
    auto.pipelines_ran(engine.loaded.model_dir, "CPU").update({"lookup", "genai-plain"})
    decisions = []
    replayed = [0, 0]  # prompt lookup's replayed steps and tokens over the conversation
    for text in texts:
        history = [Message("user", text)]
        turn = auto.plan_turn(
            (key, engine.loaded.model_dir, "CPU"),
            GenerationSettings(48),
            plain_ready=engine.plain_ready,
            load_s=engine.loaded.load_s,
        )
        assert turn.decision is not None
        decisions.append(turn.decision)
        generation = engine.generate(history, turn.settings)
        stats = generation.run_to_end()
        record = turn.finish(stats, engine.loaded.model_dir)
        replayed[0] += record["lookup_replay"]["steps"]
        replayed[1] += record["lookup_replay"]["tokens"]
        assert record["decoding"] == "auto" and record["auto"]["choice"] == turn.decision.label
        assert stats.method == turn.decision.method
        assert record["method"] == stats.method.to_record()
        plain = engine.generate(history, GenerationSettings(48, method=PLAIN))
        plain.run_to_end()
        assert generation.token_ids == plain.token_ids
    return auto, decisions, replayed[1] / replayed[0]


def test_auto_tries_prompt_lookup_where_answers_copy(engine: Engine) -> None:
    auto, decisions, replayed_per_step = _conversation(engine, COPYING, 1)
    labels = [d.summary() for d in decisions]
    lookups = [d for d in decisions if d.method.kind == "lookup"]
    assert lookups and "the last answers repeat earlier text" in lookups[0].reason, labels
    assert replayed_per_step > 2.0
    policy = auto.existing_policy((1, engine.loaded.model_dir, "CPU"))  # type: ignore[union-attr]
    assert policy is not None and policy.lookup_step_cost() is not None


def test_auto_learns_that_counting_copies_little(engine: Engine) -> None:
    """Counting copies little (about 1.3 tokens per lookup step). On the demo model that makes
    prompt lookup and plain decoding a near-tie (recorded: 1.32 vs 1.37 tokens per ms), so
    which one runs is the measured noise's call; what Auto learned is not."""
    auto, decisions, replayed_per_step = _conversation(engine, COUNTING, 2)
    assert replayed_per_step < 1.5
    policy = auto.existing_policy((2, engine.loaded.model_dir, "CPU"))  # type: ignore[union-attr]
    assert policy is not None
    per_step = policy.lookup_tokens_per_step()
    assert per_step is not None and per_step < 1.6
    for decision in decisions:
        if decision.method.kind == "lookup":  # its reason quotes what it learned
            assert "(1." in decision.reason, decision.summary()
