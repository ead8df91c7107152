"""Tool calling in the API, without a model: requests checked (server.generation.tools), the
forced-call grammar (core.tools.grammar) against the parser, and answers read whole or streamed
(server.generation.tool_output). The grammar runs in llguidance over the demo model's real
vocabulary."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.turns import single_turn
from qwen_mtp_desktop.core.decoding.grammar import SILENT_INTEGER_BOUND
from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.tools.calls import Calls, parse, render_calls
from qwen_mtp_desktop.core.tools.grammar import MARKUP, tool_call_grammar
from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.generation.planning import plan_messages, plan_settings
from qwen_mtp_desktop.server.generation.tool_output import (
    MALFORMED,
    ToolStream,
    read_for_completion,
)
from qwen_mtp_desktop.server.generation.tools import plan_tools
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import ApiError
from tests.unit.test_tool_calls import content_text, tools_and_calls

USER = {"role": "user", "content": "What is the weather in Paris?"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
PING_NAME = {"name": "ping"}
PING = {"type": "function", "function": PING_NAME}
ARRAY_PARAMETERS = {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}
UNSATISFIABLE = {"type": "integer", "minimum": 5, "maximum": 1}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}


def request(**fields: Any) -> Any:
    body = {"model": "m", "messages": [USER], **fields}
    return parse_request(json.dumps(body).encode())


def refused(**fields: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        body = request(**fields)
        plan = plan_tools(body)
        plan_messages(body, vision=False, image_dir=lambda: Path("/nonexistent"))
        plan_settings(body, TurnDefaults(), mtp_loaded=True, tools=plan)
    assert caught.value.status == 400
    return caught.value


# --- requests ----------------------------------------------------------------------------------


def test_tool_choice_variants_plan_as_documented() -> None:
    auto = plan_tools(request(tools=[WEATHER, PING]))
    assert auto is not None and auto.choice == "auto" and not auto.forced
    # auto: the lazy grammar (free text until a call opens), Auto still deciding the method.
    assert auto.constraint is not None and auto.constraint.lazy and not auto.calls_or_json
    assert auto.constraint.name == "tool_calls_auto" and auto.max_calls is None
    assert json.loads(auto.tools_json) == [WEATHER, PING]
    auto_settings, auto_decides = plan_settings(
        request(tools=[WEATHER, PING]), TurnDefaults(depth="auto"), mtp_loaded=True, tools=auto
    )
    assert auto_settings.method.constraint == auto.constraint and auto_decides
    assert plan_tools(request(tools=[WEATHER], tool_choice="none")) is None
    assert plan_tools(request()) is None
    required = plan_tools(request(tools=[WEATHER, PING], tool_choice="required"))
    assert required is not None and required.constraint is not None
    assert required.constraint.kind == "lark" and "call_1" in required.constraint.source
    named = plan_tools(
        request(tools=[WEATHER, PING], tool_choice={"type": "function", "function": PING_NAME})
    )
    assert named is not None and named.function == "ping" and named.constraint is not None
    assert "get_weather" not in named.constraint.source
    settings, auto_decides = plan_settings(
        request(tools=[WEATHER], tool_choice="required"),
        TurnDefaults(),
        mtp_loaded=True,
        tools=required,
    )
    # MTP stays on under the grammar, as for structured output.
    assert settings.method.kind == "mtp" and settings.method.constraint == required.constraint
    assert settings.tools_json == required.tools_json and not auto_decides


@pytest.mark.parametrize(
    ("fields", "param", "needle"),
    [
        ({"tool_choice": "auto"}, "tool_choice", "needs tools"),
        ({"tool_choice": "required", "tools": []}, "tool_choice", "needs tools"),
        ({"parallel_tool_calls": False}, "parallel_tool_calls", "needs tools"),
        ({"tools": [{"type": "function"}]}, "tools[0].function", "Field required"),
        ({"tools": [{"type": "retrieval", "function": PING["function"]}]}, "tools[0].type", ""),
        ({"tools": [{"type": "function", "function": {"name": "a b"}}]}, "tools[0]", "pattern"),
        ({"tools": [{**PING, "functoin": {}}]}, "tools[0].functoin", "Extra inputs"),
        ({"tools": [PING, PING]}, "tools[1].function.name", "Two tools"),
        (
            {"tools": [ARRAY_PARAMETERS]},
            "tools[0].function.parameters",
            "object",
        ),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice", ""),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice.function.name",
            "not among the tools",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {"type": "object", "properties": {"a<b": {}}},
                        },
                    }
                ],
                "tool_choice": "required",
            },
            "tools",
            "cannot be written",
        ),
        (
            {
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "f",
                            "parameters": {
                                "type": "object",
                                "properties": {"n": UNSATISFIABLE},
                            },
                        },
                    }
                ],
                "tool_choice": "required",
            },
            "tools",
            "cannot be enforced",
        ),
        (
            {"messages": [USER, {"role": "tool", "content": "sunny"}]},
            "messages[1].tool_call_id",
            "without tool_call_id",
        ),
        (
            {"messages": [USER, {"role": "tool", "content": "sunny", "tool_call_id": "x"}]},
            "messages[1].tool_call_id",
            "made no call with that id",
        ),
        (
            {"messages": [{**USER, "tool_calls": [CALL]}]},
            "messages[0].tool_calls",
            "only assistant messages",
        ),
        (
            {"messages": [{**USER, "tool_call_id": "call_1"}]},
            "messages[0].tool_call_id",
            "only tool messages",
        ),
        (
            {
                "messages": [
                    USER,
                    {
                        "role": "assistant",
                        "tool_calls": [{**CALL, "function": {"name": "f", "arguments": "[1]"}}],
                    },
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
            "JSON object",
        ),
        (
            {
                "messages": [
                    USER,
                    {"role": "assistant", "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "call_1"},
                ]
            },
            "messages[2].content",
            "no content",
        ),
    ],
)
def test_bad_tool_requests_name_the_field(fields: dict[str, Any], param: str, needle: str) -> None:
    error = refused(**fields)
    assert error.param is not None and error.param.startswith(param), (error.param, error.message)
    assert needle in error.message


ANSWER_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "answer",
        "schema": {
            "type": "object",
            "properties": {"answer": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["answer"],
        },
    },
}


def test_tools_with_a_response_format_ask_for_calls_or_json(vocabulary: Any) -> None:
    """Issue 43, item 2: tools and response_format in one request (OpenAI accepts it): with
    tool_choice auto the answer is tool calls or JSON of the format, one grammar with MTP
    kept on; a forced call stays a call; tool_choice none leaves the format alone."""
    for fmt, json_answer in (
        (ANSWER_FORMAT, '{"answer": "Sunny", "n": 3}'),
        ({"type": "json_object"}, '{"free": [1, 2]}'),
    ):
        body = request(tools=[WEATHER, PING], response_format=fmt)
        plan = plan_tools(body)
        assert plan is not None and plan.choice == "auto" and not plan.forced
        settings, auto = plan_settings(body, TurnDefaults(), mtp_loaded=True, tools=plan)
        constraint = settings.method.constraint
        assert constraint is not None and constraint.kind == "lark"
        assert constraint.name == "tools_or_response_format"
        assert settings.method.uses_mtp_head and not auto
        call = render_calls([("get_weather", {"city": "Paris", "days": 2})])
        assert accepts(vocabulary, constraint.source, call)
        assert accepts(vocabulary, constraint.source, call + "\n" + render_calls([("ping", {})]))
        assert accepts(vocabulary, constraint.source, json_answer)
        for text in ("Sunny.", '{"answer": 3}', "[1]", '{"answer": "a", "extra": 1}'):
            if fmt is ANSWER_FORMAT or text in ("Sunny.", "[1]"):
                assert not accepts(vocabulary, constraint.source, text), text
        message, finish, extra = read_for_completion(json_answer, plan, "stop")
        assert message == {"content": json_answer} and finish == "stop" and not extra
    forced = plan_tools(
        request(tools=[WEATHER], tool_choice="required", response_format=ANSWER_FORMAT)
    )
    assert forced is not None and forced.forced and forced.constraint is not None
    assert forced.constraint.name == "tool_choice"
    none = request(tools=[WEATHER], tool_choice="none", response_format=ANSWER_FORMAT)
    assert plan_tools(none) is None
    settings, _ = plan_settings(none, TurnDefaults(), mtp_loaded=True, tools=None)
    assert settings.method.constraint is not None
    assert settings.method.constraint.kind == "json_schema"
    # A JSON answer whose string holds the call's opening tag is JSON, whole and streamed.
    plan = plan_tools(request(tools=[WEATHER], response_format={"type": "json_object"}))
    assert plan is not None and plan.constraint is not None and plan.calls_or_json
    tricky = '{"note": "write <tool_call> to call"}'
    assert accepts(vocabulary, plan.constraint.source, tricky)
    message, finish, extra = read_for_completion(tricky, plan, "stop")
    assert message == {"content": tricky} and finish == "stop" and not extra
    stream, sent = ToolStream(plan), []
    for piece in (tricky[:1], tricky[1:14], tricky[14:22], tricky[22:]):
        text, pieces = stream.feed(piece)
        sent.append(text)
        assert not pieces
    assert sent[0] == "{"  # sent as it comes, nothing held back for a call
    deltas, finish, extra = stream.finish("stop")
    assert "".join(sent) == tricky and deltas == [] and finish == "stop" and not extra
    # Parallel calls off: one call, or the JSON.
    single = request(
        tools=[WEATHER, PING], response_format=ANSWER_FORMAT, parallel_tool_calls=False
    )
    plan = plan_tools(single)
    assert plan is not None and plan.constraint is not None
    two = render_calls([("ping", {}), ("ping", {})])
    assert not accepts(vocabulary, plan.constraint.source, two)
    assert accepts(vocabulary, plan.constraint.source, render_calls([("ping", {})]))


def test_tool_messages_reach_the_engine_with_their_calls() -> None:
    body = request(
        tools=[WEATHER],
        messages=[
            USER,
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 21 C"},
        ],
    )
    messages = plan_messages(body, vision=False, image_dir=lambda: Path("/nonexistent"))
    assert messages[1].tool_calls[0].name == "get_weather"
    assert json.loads(messages[1].tool_calls[0].arguments) == {"city": "Paris"}
    assert messages[2] == Message("tool", "Sunny, 21 C", tool_call_id="call_1")
    # The demo model reads the latest request alone, with its tool calls and results.
    history = [Message("system", "s"), Message("user", "old"), Message("assistant", "a"), *messages]
    assert single_turn(history) == [history[0], *messages]


# --- the grammar against the parser ------------------------------------------------------------


@pytest.fixture(scope="module")
def vocabulary() -> Any:
    from llguidance import LLTokenizer

    return LLTokenizer((demo_model_dir() / "tokenizer.json").read_text(encoding="utf-8"))


def matcher(vocabulary: Any, grammar: str) -> Any:
    from llguidance import LLMatcher

    return LLMatcher(vocabulary, LLMatcher.grammar_from_lark(grammar))


def accepts(vocabulary: Any, grammar: str, text: str) -> bool:
    m = matcher(vocabulary, grammar)
    ids = vocabulary.tokenize_str(text)
    return bool(m.validate_tokens(ids) == len(ids) and m.consume_tokens(ids) and m.is_accepting())


def _in_schema_order(tools: list[dict[str, Any]], calls: list[tuple[str, dict]]) -> list[Any]:
    order = {t["function"]["name"]: list(t["function"]["parameters"]["properties"]) for t in tools}
    return [(name, {k: args[k] for k in order[name] if k in args}) for name, args in calls]


def _admitted(arguments: dict[str, Any]) -> bool:
    """Whether the grammar admits these top-level values (tools_and_calls' schemas are one
    bare type each): text without the call's markup, numbers within the bounds a silent
    schema gets (core.decoding.grammar.bounded_schema: no exponent, at most 9 decimals)."""
    for value in arguments.values():
        if isinstance(value, str) and any(tag in value for tag in MARKUP):
            return False
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if is_int and abs(value) > SILENT_INTEGER_BOUND:
            return False
        if isinstance(value, float):
            written = json.dumps(value)
            decimals = written.split(".")[1] if "." in written else ""
            if "e" in written or abs(value) > 1e15 or len(decimals) > 9 or written == "-0.0":
                return False  # (llguidance writes no negative zero)
    return True


@settings(max_examples=150, deadline=None)
@given(case=tools_and_calls())
def test_the_grammar_admits_well_formed_calls(vocabulary: Any, case: Any) -> None:
    """Calls written as the chat template writes them (parameters in schema order, values
    that do not hold the end-of-value text) are admitted by the forced-call grammar."""
    tools, calls = case
    calls = _in_schema_order(tools, calls)
    text = render_calls(calls)
    if "\x7f" in text:
        return  # llguidance writes DEL escaped in JSON strings (a JSON value's quirk)
    if all(_admitted(args) for _, args in calls):
        assert accepts(vocabulary, tool_call_grammar(tools), text), text
    else:  # markup in a text value, or a number past the bounds of a silent schema
        assert not accepts(vocabulary, tool_call_grammar(tools), text), text
    (name, arguments) = calls[0]
    if _admitted(arguments):
        assert accepts(vocabulary, tool_call_grammar(tools, only=name), render_calls(calls[:1]))
    if len(calls) > 1:  # one call only, when named or not parallel
        assert not accepts(vocabulary, tool_call_grammar(tools, parallel=False), text)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), parallel=st.booleans())
def test_everything_the_grammar_lets_a_model_write_parses_into_calls(
    vocabulary: Any, seed: int, parallel: bool
) -> None:
    """A random walk through the grammar (a 'model' picking any allowed token) always ends in
    text the parser reads as calls of offered tools, with arguments of the schema's types."""
    import numpy as np

    rng = random.Random(seed)
    tools = [WEATHER, PING]
    m = matcher(vocabulary, tool_call_grammar(tools, parallel=parallel))
    ids: list[int] = []
    for _ in range(400):
        if m.is_stopped() or (m.is_accepting() and rng.random() < 0.3):
            break
        bits = np.unpackbits(np.frombuffer(m.compute_bitmask(), dtype=np.uint8), bitorder="little")
        ids_allowed = np.flatnonzero(bits[: vocabulary.vocab_size])
        allowed = [i for i in ids_allowed if i != vocabulary.eos_token]
        if not allowed:
            break
        token = int(rng.choice(allowed))
        assert m.consume_tokens([token])
        ids.append(token)
    event(f"walk ended {'in' if m.is_accepting() else 'outside'} an accepted answer")
    if not m.is_accepting():
        return  # the walk ran out of steps mid-call (a long value): nothing to read
    text = vocabulary.decode_str(ids)
    parsed = parse(text, tools)
    assert isinstance(parsed, Calls), (text, parsed)
    assert parallel or len(parsed.calls) == 1
    for call in parsed.calls:
        arguments = json.loads(call.arguments)
        if call.name == "get_weather":
            assert isinstance(arguments["city"], str) and len(arguments["city"]) <= 12
            assert arguments.get("unit", "celsius") in ("celsius", "fahrenheit")
            days = arguments.get("days", 1)
            assert isinstance(days, int) and 1 <= days <= 7
        else:
            assert arguments == {}


# --- answers read, whole and streamed ----------------------------------------------------------


def _plan() -> Any:
    plan = plan_tools(request(tools=[WEATHER, PING]))
    assert plan is not None
    return plan


def test_answers_are_read_as_openai_sends_them() -> None:
    plan = _plan()
    text = render_calls([("get_weather", {"city": "Paris", "days": 2})], "Let me look.")
    fields, finish, extra = read_for_completion(text, plan, "stop")
    assert finish == "tool_calls" and extra == {} and fields["content"] == "Let me look."
    (call,) = fields["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "days": 2}
    fields, finish, extra = read_for_completion(render_calls([("ping", {})]), plan, "stop")
    assert fields["content"] is None and finish == "tool_calls"
    fields, finish, extra = read_for_completion("Just text.", plan, "stop")
    assert fields == {"content": "Just text."} and finish == "stop" and extra == {}
    broken = "<tool_call>\n<function=launch>\n</function>\n</tool_call>"
    fields, finish, extra = read_for_completion(broken, plan, "stop")
    assert fields == {"content": broken} and finish == "stop"
    assert extra["tool_call_error"]["type"] == MALFORMED
    assert "'launch'" in extra["tool_call_error"]["message"]


@settings(max_examples=300, deadline=None)
@given(
    case=tools_and_calls(),
    content=content_text,
    cut=st.floats(0, 1),
    splits=st.lists(st.integers(0, 400), max_size=12),
)
def test_a_streamed_answer_says_what_the_whole_answer_says(
    case: Any, content: str, cut: float, splits: list[int]
) -> None:
    """However the text arrives (any split into steps), the streamed content and calls equal
    the non-streamed answer's: each call's head comes first (index, id, type, name, empty
    arguments), its argument deltas join into exactly the non-streamed arguments, and nothing
    of a call is ever sent as content (a malformed call's text is, at the end)."""
    tools, calls = case
    full = render_calls(calls, content)
    text = full[: int(len(full) * cut)] if cut < 1 else full
    plan = plan_tools(request(tools=tools)) if tools else None
    assert plan is not None
    stream = ToolStream(plan)
    content_sent: list[str] = []
    deltas: list[dict[str, Any]] = []
    bounds = sorted({0, len(text), *(s for s in splits if s < len(text))})
    for start, end in itertools.pairwise(bounds):
        sent, pieces = stream.feed(text[start:end])
        content_sent.append(sent)
        deltas += stream.call_deltas(pieces)
    last, finish, extra = stream.finish("stop")
    content_sent += [d.get("content", "") for d in last]
    deltas += [d for d in last if "tool_calls" in d]
    fields, whole_finish, whole_extra = read_for_completion(text, plan, "stop")
    streamed = "".join(content_sent)
    assert streamed == (fields["content"] or "")
    assert finish == whole_finish and extra.keys() == whole_extra.keys()
    entries = [d["tool_calls"][0] for d in deltas]
    heads = [e for e in entries if "id" in e]
    assert [h["index"] for h in heads] == list(range(len(heads)))
    assert all(h["function"]["arguments"] == "" and h["type"] == "function" for h in heads)
    arguments = ["".join(e["function"]["arguments"] for e in entries if e["index"] == h["index"])
                 for h in heads]  # fmt: skip
    for entry in entries:  # every piece follows its call's head
        assert entry["index"] < len(heads)
    expected = fields.get("tool_calls", [])
    if expected:
        assert [h["function"]["name"] for h in heads] == [c["function"]["name"] for c in expected]
        assert arguments == [c["function"]["arguments"] for c in expected]
        assert stream.ids == [h["id"] for h in heads]
        assert "<tool_call>" not in streamed
    else:  # what was sent of a call is a prefix of the whole answer's (uncut) call
        whole = read_for_completion(full, plan, "stop")[0]["tool_calls"]
        for head, sent in zip(heads, arguments, strict=False):
            assert whole[head["index"]]["function"]["arguments"].startswith(sent)
