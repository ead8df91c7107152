"""Issue 43, item 4, the parts without a model: reasoning efforts mapped onto thinking and a
budget (server.generation.reasoning), the limit the engine enforces (core.engine.generation.
thinking_limit), a request's reasoning fields planned into engine settings, and
`max_tool_calls` applied to an answer's calls, whole and streamed."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings
from qwen_mtp_desktop.core.engine.generation import answer_seed, thinking_limit
from qwen_mtp_desktop.core.tools.calls import ArgumentsPiece, CallOpened, render_calls
from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.generation.planning import plan_settings
from qwen_mtp_desktop.server.generation.reasoning import (
    EFFORT_BUDGETS,
    UNBOUNDED,
    plan_thinking,
)
from qwen_mtp_desktop.server.generation.tool_output import ToolStream, read_answer
from qwen_mtp_desktop.server.generation.tools import plan_tools
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import ApiError

TOOL = {
    "type": "function",
    "function": {
        "name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
    },
}


def settings_of(defaults: TurnDefaults | None = None, **fields: Any) -> GenerationSettings:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}
    request = parse_request(json.dumps(body).encode())
    settings, _ = plan_settings(
        request, defaults or TurnDefaults(), mtp_loaded=True, tools=plan_tools(request)
    )
    return settings


@pytest.mark.parametrize(
    ("effort", "on", "budget"),
    [
        ("none", False, None),
        ("minimal", False, None),
        ("low", True, 512),
        ("medium", True, 2048),
        ("high", True, 8192),
        ("xhigh", True, 16384),
        ("max", True, UNBOUNDED),
    ],
)
def test_each_effort_maps_to_thinking_and_a_budget(
    effort: str, on: bool, budget: int | None
) -> None:
    for default in (False, True):
        settings = settings_of(TurnDefaults(thinking=default), reasoning_effort=effort)
        assert (settings.thinking, settings.thinking_budget) == (on, budget)
    assert set(EFFORT_BUDGETS) | {"none", "minimal"} == {
        "none",
        "minimal",
        "low",
        "medium",
        "high",
        "xhigh",
        "max",
    }


def test_budget_and_enable_thinking_combine_or_are_refused() -> None:
    assert plan_thinking(False, enable=True, budget=7) == plan_thinking(True, budget=7)
    assert plan_thinking(True, budget=7).budget == 7
    assert plan_thinking(False, effort="high", budget=9).budget == 9  # the explicit one wins
    assert plan_thinking(True).budget is None and plan_thinking(True).on
    assert not plan_thinking(True, enable=False).on
    with pytest.raises(ApiError) as caught:
        plan_thinking(False, enable=False, effort="low")
    assert caught.value.param == "reasoning_effort"
    with pytest.raises(ApiError) as caught:
        plan_thinking(False, enable=True, effort="none", effort_param="reasoning.effort")
    assert caught.value.param == "reasoning.effort"
    with pytest.raises(ApiError) as caught:
        plan_thinking(False, budget=5)
    assert caught.value.param == "thinking_token_budget"
    with pytest.raises(ApiError):
        settings_of(reasoning_effort="extreme")


def test_the_thinking_limit_keeps_room_for_the_answer() -> None:
    base = GenerationSettings(max_new_tokens=400, thinking=True)
    assert thinking_limit(base) is None  # no budget, no constraint: the model decides
    assert thinking_limit(replace(base, thinking_budget=50)) == 50
    assert thinking_limit(replace(base, thinking_budget=0)) == 0
    assert thinking_limit(replace(base, thinking_budget=10_000)) == 300  # a quarter kept
    big = replace(base, max_new_tokens=20_000, thinking_budget=UNBOUNDED)
    assert thinking_limit(big) == 20_000 - 1024  # at most 1,024 kept
    constrained = replace(base, method=settings_of(response_format={"type": "json_object"}).method)
    assert thinking_limit(constrained) == 300  # a constraint waits for the thinking to end
    for off in (
        replace(base, thinking=False, thinking_budget=5),
        replace(base, thinking_budget=5, raw_text=True),
    ):
        assert thinking_limit(off) is None
    assert thinking_limit(replace(base, thinking_budget=5, ignore_eos=True)) == 5
    with pytest.raises(EngineError):
        replace(base, thinking_budget=-1).check()


def test_a_forced_call_with_thinking_is_planned_not_refused() -> None:
    settings = settings_of(tools=[TOOL], tool_choice="required", reasoning_effort="low")
    assert settings.thinking and settings.thinking_budget == 512
    assert settings.method.constraint is not None and settings.method.constraint.kind == "lark"
    assert settings.method.kind == DecodingMethod.mtp(1).kind  # MTP stays on


def test_max_calls_bounds_the_calls_whole_and_streamed() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [TOOL]}
    plan = plan_tools(parse_request(json.dumps(body).encode()))
    assert plan is not None
    text = render_calls([("f", {"a": 1}), ("f", {"a": 2}), ("f", {"a": 3})])
    assert len(read_answer(text, plan).calls) == 3
    for limit in (1, 2):
        bounded = replace(plan, max_calls=limit)
        read = read_answer(text, bounded)
        assert [json.loads(c.arguments)["a"] for c in read.calls] == list(range(1, limit + 1))
        assert read.finish_reason == "tool_calls" and read.content is None
        stream = ToolStream(bounded)
        sent: list[Any] = []
        for at in range(0, len(text), 7):
            content, pieces = stream.feed(text[at : at + 7])
            assert content == ""
            sent += pieces
        _, last, final = stream.finish_read()
        sent += last
        assert {p.index for p in sent} == set(range(limit))
        opened = [p for p in sent if isinstance(p, CallOpened)]
        assert len(opened) == limit and len(final.calls) == limit
        for index, call in enumerate(final.calls):
            joined = "".join(
                p.text for p in sent if isinstance(p, ArgumentsPiece) and p.index == index
            )
            assert joined == call.arguments


def test_the_answer_phase_draws_from_a_seed_of_its_own() -> None:
    seeds = [0, 1, 7, 2**31, 2**63 - 1]
    derived = [answer_seed(seed) for seed in seeds]
    assert all(0 <= d <= 2**63 - 1 for d in derived)
    assert len(set(derived)) == len(seeds) and all(
        d != s for d, s in zip(derived, seeds, strict=True)
    )
    assert answer_seed(7) == answer_seed(7)  # reproducible


def test_a_prefill_names_the_grammar_it_cannot_take() -> None:
    """A trailing assistant message is continued; a grammar holds from an answer's first
    token, so the 400 names the field that asked for one."""
    begun = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]
    assert settings_of(messages=begun).continue_final
    cases = (
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tools": [TOOL], "tool_choice": "required"}, "tool_choice"),
        ({"tools": [TOOL], "response_format": {"type": "json_object"}}, "response_format"),
        ({"reasoning_effort": "low"}, "reasoning_effort"),
        ({"chat_template_kwargs": {"enable_thinking": True}}, "chat_template_kwargs"),
    )
    for fields, param in cases:
        with pytest.raises(ApiError) as caught:
            settings_of(messages=begun, **fields)
        assert caught.value.param == param, (fields, caught.value)
    # The server's default thinking is set aside for a prefill.
    assert not settings_of(TurnDefaults(thinking=True), messages=begun).thinking
