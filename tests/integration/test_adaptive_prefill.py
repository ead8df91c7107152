"""Auto pricing prefill on the real runtime (core.auto.policy with core.auto.turn_costs), demo model
and MoE fixture: what it learns from real turns of short and long prompts predicts the next long
turn's time to first token and its length in tokens; an image turn never runs prompt lookup
and says why; every answer equals plain decoding's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from qwen_mtp_desktop.core.auto.policy import TurnContext
from qwen_mtp_desktop.core.auto.turn_costs import path_of
from qwen_mtp_desktop.core.chat.turns import AutoDecoding
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

FILLER = "The committee met on Tuesday to review the budget. Each department presented its plan. "
COPYING = ["Say 'we like apples' four times.", "Say 'good morning' four times."]


def _engine(model: Path) -> Engine:
    engine = Engine()
    engine.load(model, LoadOptions(mtp=True))
    for settings in (
        GenerationSettings(4, method=PLAIN),
        GenerationSettings(4),
        GenerationSettings(4, method=DecodingMethod.lookup()),
    ):
        engine.generate([Message("user", "Count from 1 to 5.")], settings).run_to_end()
    return engine


@pytest.fixture(scope="module", params=["demo", "moe"])
def engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    model = request.getfixturevalue("demo_model" if request.param == "demo" else "moe_model")
    engine = _engine(model)
    yield engine
    engine.unload()


def _history(text: str, filler_repeats: int) -> list[Message]:
    system = [Message("system", FILLER * filler_repeats)] if filler_repeats else []
    return [*system, Message("user", text)]


@pytest.mark.model
@pytest.mark.export
def test_prefill_learned_from_real_turns_predicts_the_next_long_turn(engine: Engine) -> None:
    loaded = engine.loaded
    assert loaded is not None
    auto = AutoDecoding()
    auto.remember(loaded.model_dir, "CPU", None)
    key = (1, loaded.model_dir, "CPU")
    measured: list[tuple[str, int, float]] = []
    for index, repeats in enumerate((0, 40, 0, 80, 0, 40, 80)):
        history = _history(COPYING[index % 2], repeats)
        turn = auto.plan_turn(
            key,
            GenerationSettings(24),
            plain_ready=engine.plain_ready,
            load_s=loaded.load_s,
            history=history,
        )
        assert turn.decision is not None and turn.context is not None
        policy = auto.existing_policy(key)
        assert policy is not None
        if index >= 2:  # characters -> tokens, learned from the turns before
            stats_tokens = engine.generate(history, GenerationSettings(1, method=PLAIN))
            real = stats_tokens.run_to_end().prompt_tokens
            assert abs(policy.prompt_tokens(turn.context) - real) <= 0.2 * real
        engine.drop_states()  # a real prefill to learn from and predict
        generation = engine.generate(history, turn.settings)
        stats = generation.run_to_end()
        assert stats.reused_tokens == 0
        plain = engine.generate(history, GenerationSettings(24, method=PLAIN))
        plain.run_to_end()
        assert generation.token_ids == plain.token_ids
        path = path_of(stats.method, stats.decoder)
        if repeats == 80 and index > 3:  # predicted before learning from it
            predicted = policy._turn_costs.prefill_s(path, stats.prompt_tokens)
            assert predicted is not None
            assert 0.4 * stats.ttft_s <= predicted <= 2.5 * stats.ttft_s, (path, predicted, stats)
        measured.append((path, stats.prompt_tokens, stats.ttft_s))
        turn.finish(stats, loaded.model_dir)
    long_turns = [m for m in measured if m[1] > 500]
    assert long_turns, measured


@pytest.mark.model
@pytest.mark.export
def test_an_image_turn_under_auto_never_runs_prompt_lookup(engine: Engine, tmp_path: Path) -> None:
    loaded = engine.loaded
    assert loaded is not None
    auto = AutoDecoding()
    auto.remember(loaded.model_dir, "CPU", None)
    key = (2, loaded.model_dir, "CPU")
    image = tmp_path / "square.png"
    Image.new("RGB", (64, 64), (30, 160, 60)).save(image)
    for index in range(4):  # copying turns: lookup learns it would do well
        history = [Message("user", COPYING[index % 2])]
        turn = auto.plan_turn(key, GenerationSettings(24), plain_ready=engine.plain_ready,
                              load_s=loaded.load_s, history=history)  # fmt: skip
        turn.finish(engine.generate(history, turn.settings).run_to_end(), loaded.model_dir)
    history = [Message("user", COPYING[0], image=image)]
    turn = auto.plan_turn(key, GenerationSettings(24), plain_ready=engine.plain_ready,
                          load_s=loaded.load_s, history=history)  # fmt: skip
    assert turn.decision is not None and turn.context == TurnContext(
        prompt_chars=len(COPYING[0]),
        images=1,
        model_load_s=loaded.load_s,
        plain_load_s=turn.context.plain_load_s if turn.context else 0.0,
    )
    assert turn.decision.method.kind != "lookup" and turn.settings.method.kind != "lookup"
    assert "image turn (no prompt lookup)" in turn.decision.reason, turn.decision.summary()
    generation = engine.generate(history, turn.settings)
    stats = generation.run_to_end()
    assert stats.method.kind != "lookup" and stats.decoder == "genai"
    plain = engine.generate(history, GenerationSettings(24, method=PLAIN))
    plain.run_to_end()
    assert generation.token_ids == plain.token_ids
    record = turn.finish(stats, loaded.model_dir)
    assert record["auto"]["reason"].startswith("image turn")
