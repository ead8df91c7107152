"""Auto MTP on the real runtime: the demo model (its head predicts counting) and a copy whose MTP
head has random weights. Auto must keep MTP where drafts are accepted, fall back to plain decoding
where they are rejected, and never change the greedy output."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, TurnSample
from qwen_mtp_desktop.core.auto.turns import turn_settings
from qwen_mtp_desktop.core.decoding.method import PLAIN
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
from qwen_mtp_desktop.devtools.mtp_head import make_broken_mtp_copy

pytestmark = pytest.mark.model

TURNS = ["Count from 1 to 20.", "Count from 35 to 52.", "Count down from 60 to 45."]


@pytest.fixture(scope="module")
def broken_head(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_broken_mtp_copy(demo_model, tmp_path_factory.mktemp("adaptive") / "random head")


def _engine(model: Path, *, fast: bool = True) -> Engine:
    engine = Engine()
    engine.load(model, LoadOptions(mtp=True, exact_numerics=True, app_decoder=fast))
    return engine


@pytest.fixture(scope="module")
def demo_engine(demo_model: Path) -> Iterator[Engine]:
    engine = _engine(demo_model)
    yield engine
    engine.unload()


@pytest.fixture(scope="module")
def broken_engine(broken_head: Path) -> Iterator[Engine]:
    engine = _engine(broken_head)
    yield engine
    engine.unload()


@pytest.fixture(scope="module", params=["app", "genai"])
def broken_engines(broken_head: Path, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The broken-head model on each decoder: the app's own and openvino-genai's."""
    engine = _engine(broken_head, fast=request.param == "app")
    assert engine.loaded is not None and engine.loaded.decoder == request.param
    yield engine
    engine.unload()


def _plain_ids(engine: Engine, history: Sequence[Message], max_new_tokens: int) -> list[int]:
    generation = engine.generate(history, GenerationSettings(max_new_tokens, method=PLAIN))
    generation.run_to_end()
    return list(generation.token_ids)


def _auto_conversation(engine: Engine, max_new_tokens: int = 60) -> list[tuple[str, str]]:
    """Three Auto turns; every answer is checked against plain decoding of the same history.
    Returns (choice, reason) per turn plus the decision for a fourth. Prompt lookup is left
    out: these tests pin Auto's MTP-or-plain part (tests/integration/test_adaptive_lookup.py
    covers the third option; later counts copy the earlier ones, so it would join in here)."""
    policy = AdaptivePolicy(lookup=None)
    history: list[Message] = []
    decisions = []
    for text in TURNS:
        history.append(Message("user", text))
        decision = policy.decide()
        decisions.append((decision.label, decision.reason))
        settings = turn_settings(decision, GenerationSettings(max_new_tokens), policy)
        generation = engine.generate(history, settings)
        stats = generation.run_to_end()
        assert list(generation.token_ids) == _plain_ids(engine, history, max_new_tokens)
        assert stats.method == decision.method
        policy.observe(TurnSample.from_stats(stats, max_new_tokens))
        history.append(Message("assistant", generation.answer))
    following = policy.decide()
    decisions.append((following.label, following.reason))
    return decisions


def test_auto_keeps_mtp_where_the_head_predicts(demo_engine: Engine) -> None:
    decisions = _auto_conversation(demo_engine)
    assert decisions[0][0] == "MTP n=1"
    # Drafts are accepted, so MTP is never abandoned for rejection; Auto may spend one turn
    # measuring plain decoding to compare (the tiny model's steps are all overhead).
    # Plain decoding is chosen only on measured speed (on a model this tiny a step is mostly
    # pipeline overhead, so plain and MTP n=1 are close), never because drafts were rejected.
    for _label, reason in decisions:
        assert "rejected" not in reason, decisions
    assert "100% accepted" in decisions[1][1] or "9" in decisions[1][1].split("%")[0], decisions


def test_auto_goes_plain_where_the_drafts_are_rejected(broken_engine: Engine) -> None:
    decisions = _auto_conversation(broken_engine)
    assert decisions[0][0] == "MTP n=1"
    assert [label for label, _ in decisions[1:]] == ["plain"] * 3, decisions
    assert "drafts rejected" in decisions[1][1] and "MTP would be 0." in decisions[1][1]


def test_within_turn_switch_continues_with_plain_decoding_exactly(
    broken_engines: Engine,
) -> None:
    engine = broken_engines
    history = [Message("user", "Count from 1 to 30.")]
    reference = _plain_ids(engine, history, 80)
    asked: list[int] = []
    reprefills: set[bool] = set()

    def after_five_steps(
        sizes: Sequence[int], times: Sequence[float], prompt: int, reprefill: bool
    ) -> bool:
        asked.append(len(sizes))
        reprefills.add(reprefill)
        assert prompt > 5 and len(times) == len(sizes)
        return len(sizes) >= 5

    settings = GenerationSettings(80, within_turn=after_five_steps)
    generation = engine.generate(history, settings)
    chunks = list(generation)
    stats = generation.stats
    assert stats is not None
    assert stats.switched_to_plain_at == 5
    assert asked == [1, 2, 3, 4, 5]  # not asked again once switched
    assert list(generation.token_ids) == reference
    assert generation.answer.split()[:5] == ["1", "2", "3", "4", "5"]
    assert sum(len(c.token_ids) for c in chunks) == stats.generated_tokens
    # Acceptance counts only the MTP part; the plain part's steps carry one token each.
    assert stats.drafted_tokens == 4
    assert all(size == 1 for size in stats.chunk_sizes[5:])
    # openvino-genai re-prefills on a switch; the app's decoder continues in the same state.
    assert reprefills == {stats.decoder == "genai"}


def test_plain_decoding_beside_mtp(demo_model: Path) -> None:
    """Plain turns run on openvino-genai's SDPA pipeline (the fastest plain path), opened on
    first use, whichever decoder runs MTP; or, asked for, on the app's decoder at depth 0
    with nothing more to load."""
    for fast, plain_decoder in ((True, "genai"), (False, "genai"), (True, "app")):
        engine = Engine()
        engine.load(
            demo_model,
            LoadOptions(
                mtp=True, exact_numerics=True, app_decoder=fast, plain_decoder=plain_decoder
            ),
        )
        on_fast = fast and plain_decoder == "app"
        try:
            assert engine.plain_ready == on_fast and engine.plain_load_s is None
            generation = engine.generate(
                [Message("user", "Count from 1 to 5.")], GenerationSettings(20, method=PLAIN)
            )
            stats = generation.run_to_end()
            assert stats.method == PLAIN and stats.drafted_tokens == 0
            assert stats.decoder == ("app" if on_fast else "genai")
            assert engine.plain_ready and (engine.plain_load_s is None) == on_fast
            assert engine.load_plain() == 0.0
            assert engine.loaded is not None and engine.loaded.mtp
        finally:
            engine.unload()
        assert not engine.plain_ready


def test_generate_cli_auto(demo_model: Path, broken_head: Path) -> None:
    def run(model: Path) -> dict[str, object]:
        result = subprocess.run(
            [sys.executable, "-m", "qwen_mtp_desktop", "generate", str(model),
             "Count from 1 to 8.", "--num-assistant-tokens", "auto", "--max-new-tokens", "30",
             "--json"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "Auto: MTP n=1" in result.stderr
        payload: dict[str, object] = json.loads(result.stdout)
        return payload

    payload = run(demo_model)
    auto = payload["auto"]
    assert isinstance(auto, dict)
    assert auto["choice"] == "MTP n=1" and "not benchmarked" in auto["reason"]
    text = payload["text"]
    assert isinstance(text, str) and text.split()[:3] == ["1", "2", "3"]
