"""The thinking budget on the engine (issue 43, item 4), with exact CPU numerics: the engine
closes the thinking block itself when the budget is spent, and the answer that follows is plain
decoding's token for token with MTP at depths 1 and 3 (each phase is exact decoding of its own
prompt); a constraint (a forced tool call) holds only after the thinking; logprobs and stop
strings see the whole turn. Through `serve`: tests/integration/test_serve_agent_requests.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.generation.tools import plan_tools
from tests.serve_fixtures import TIME

pytestmark = pytest.mark.model

COUNT = [Message("user", "Count from 1 to 20.")]
METHODS = (DecodingMethod.plain(), DecodingMethod.mtp(1), DecodingMethod.mtp(3))


@pytest.fixture(scope="module")
def engine(demo_model: Path) -> Iterator[Engine]:
    engine = Engine()
    engine.load(demo_model, LoadOptions(exact_numerics=True))
    yield engine
    engine.unload()


def run(engine: Engine, messages: list[Message], settings: GenerationSettings) -> tuple:
    generation = engine.generate(messages, settings)
    generation.run_to_end()
    stats = generation.stats
    assert stats is not None
    return generation.token_ids, generation.reasoning, generation.answer, stats


@pytest.mark.parametrize("budget", [0, 1, 5, 9])
def test_the_budget_closes_the_thinking_and_mtp_stays_exact(engine: Engine, budget: int) -> None:
    free = run(engine, COUNT, GenerationSettings(max_new_tokens=40, thinking=True))
    assert free[3].reasoning_tokens > budget + 2  # the model would think longer
    results = []
    for method in METHODS:
        settings = GenerationSettings(
            max_new_tokens=40, thinking=True, thinking_budget=budget, method=method
        )
        ids, reasoning, answer, stats = run(engine, COUNT, settings)
        assert stats.method.kind == method.kind
        assert stats.generated_tokens == len(ids) <= 40
        # The budget's tokens, then "\n" and </think> (the engine's), then the answer.
        assert stats.reasoning_tokens == budget + 2
        assert free[1].startswith(reasoning.rstrip("\n"))
        assert answer.startswith("1 2 3")
        results.append((ids, reasoning, answer))
    assert results[0] == results[1] == results[2]


def test_a_budget_the_model_stays_under_changes_nothing(engine: Engine) -> None:
    free = run(engine, COUNT, GenerationSettings(max_new_tokens=40, thinking=True))
    for method in METHODS:
        settings = GenerationSettings(
            max_new_tokens=40, thinking=True, thinking_budget=25, method=method
        )
        assert run(engine, COUNT, settings)[:3] == free[:3]


def test_stop_strings_and_logprobs_span_both_phases(engine: Engine) -> None:
    settings = GenerationSettings(
        max_new_tokens=40, thinking=True, thinking_budget=4, stop_strings=(" 5",), logprobs=2
    )
    generation = engine.generate(COUNT, settings)
    generation.run_to_end()
    stats = generation.stats
    assert stats is not None and stats.finish_reason == "stop_string"
    assert generation.answer == "1 2 3 4" and stats.reasoning_tokens == 4 + 2
    # Every decoded token has its log-probability, in order; the three the engine wrote
    # ("\n", </think>, "\n\n": tokens 5 to 7) have none.
    ids = generation.token_ids
    scored = [entry.chosen.token_id for entry in generation.logprobs]
    assert scored == ids[:4] + ids[7:], (ids, scored)
    assert generation.reasoning.endswith("\n") and "</think>" not in generation.reasoning


def test_a_forced_call_with_thinking_thinks_then_calls(engine: Engine) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [TIME]}
    plan = plan_tools(parse_request(json.dumps({**body, "tool_choice": "required"}).encode()))
    assert plan is not None and plan.constraint is not None
    question = [Message("user", "What time is it in Paris?")]
    answers = []
    for method in METHODS:
        for budget in (None, 6):
            settings = GenerationSettings(
                max_new_tokens=120,
                thinking=True,
                thinking_budget=budget,
                method=method.with_constraint(plan.constraint),
                tools_json=plan.tools_json,
            )
            _, reasoning, answer, stats = run(engine, question, settings)
            assert reasoning and stats.reasoning_tokens > 0
            assert answer.startswith("<tool_call>\n<function=get_time>\n<parameter=zone>\n")
            assert answer.endswith("</tool_call>")
            answers.append((budget, reasoning, answer))
    by_budget = {budget: [a for a in answers if a[0] == budget] for budget in (None, 6)}
    for same in by_budget.values():
        assert same[0] == same[1] == same[2]
    assert len(by_budget[6][0][1]) < len(by_budget[None][0][1])


def test_the_budget_holds_on_a_turn_with_an_image(engine: Engine, tmp_path: Path) -> None:
    """Image turns run on openvino-genai's pipeline: the engine stops it at the budget and
    answers in a second generation from the text so far and the close."""
    from PIL import Image

    image = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (200, 40, 40)).save(image)
    question = [Message("user", "Count from 1 to 20.", image)]
    free = run(engine, question, GenerationSettings(max_new_tokens=40, thinking=True))
    assert free[3].decoder == "genai" and free[3].reasoning_tokens > 5
    for budget in (0, 3):
        settings = GenerationSettings(max_new_tokens=40, thinking=True, thinking_budget=budget)
        _, reasoning, answer, stats = run(engine, question, settings)
        assert stats.decoder == "genai" and stats.reasoning_tokens == budget + 2
        assert free[1].startswith(reasoning.rstrip("\n"))
        assert answer.startswith("1 2 3") and stats.generated_tokens == 40


def test_the_budget_holds_with_ignore_eos(engine: Engine) -> None:
    """ignore_eos (benchmarks' equal-length runs): the thinking still ends at the budget or
    at </think>, and the turn runs to max_new_tokens, MTP as plain decoding."""
    results = []
    for method in METHODS:
        settings = GenerationSettings(
            max_new_tokens=48, thinking=True, thinking_budget=4, ignore_eos=True, method=method
        )
        ids, reasoning, answer, stats = run(engine, COUNT, settings)
        assert stats.generated_tokens == 48 and stats.reasoning_tokens == 4 + 2
        assert answer.startswith("1 2 3")
        results.append((ids, reasoning, answer))
    assert results[0] == results[1] == results[2]


def test_a_sampled_turn_with_a_budget_is_reproduced_by_its_seed(engine: Engine) -> None:
    """The reported seed reproduces both phases (the answer's draws from a seed derived from
    it), with MTP as with plain decoding."""
    from qwen_mtp_desktop.core.decoding.method import Sampling

    hot = Sampling(temperature=2.0, top_p=1.0, top_k=0)
    for method in (DecodingMethod.plain(hot), DecodingMethod.mtp(2, hot)):
        settings = GenerationSettings(
            max_new_tokens=40, thinking=True, thinking_budget=5, method=method
        )
        first = run(engine, COUNT, settings)
        seed = first[3].method.sampling.seed
        assert seed is not None and first[3].reasoning_tokens <= 5 + 2
        seeded = method.with_sampling(Sampling(temperature=2.0, top_p=1.0, top_k=0, seed=seed))
        again = run(engine, COUNT, GenerationSettings(
            max_new_tokens=40, thinking=True, thinking_budget=5, method=seeded
        ))  # fmt: skip
        assert again[:3] == first[:3]
        assert again[3].method.sampling.seed == seed
