"""Issue 43, items 1 and 2, through the real decoder: the tool model (tests/tool-model) writes
forced calls under the grammar of generated schemas (`$ref` / `$defs`, `anyOf` / `oneOf`,
`enum`, `const`, nested shapes; hypothesis) and every answer's arguments validate against the
schema (jsonschema), with MTP on; greedy MTP writes plain decoding's answer, token for token
(exact CPU numerics). Then tools with a `response_format` in one request ("tool calls, or JSON
of the schema"), in the engine and through a real `serve` process: chat completions and the
Responses API (`text.format`), a call first and the JSON answer after its result."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.tools.calls import Calls, parse
from qwen_mtp_desktop.devtools.tool_corpus import BOTH_TOOLS, weather_report
from tests.models import TOOL_MODEL
from tests.unit.test_tool_schema_grammar import (
    function_tool,
    markup_free,
    tool_parameters,
    validate_arguments,
)

MODEL = "tool-model"
QUESTION = "What is the weather in Paris?"
BUDGET = 200
#: The answer the format asks for once the tool's result is in.
REPORT = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 20},
        "sunny": {"type": "boolean"},
        "degrees": {"type": "integer"},
    },
    "required": ["city", "sunny", "degrees"],
}
REPORT_FORMAT = {"type": "json_schema", "json_schema": {"name": "report", "schema": REPORT}}
TOOLS: list[dict[str, Any]] = [dict(tool) for tool in BOTH_TOOLS]
RESULT = weather_report("Paris")


def call_opening_token() -> int:
    """The first token of "<tool_call>" in the tool model's vocabulary. The tool model never
    learnt to answer JSON, so under "tool calls, or JSON" it calls again once it has the
    result; a logit bias against this token (as a client may send) takes the JSON way."""
    from llguidance import LLTokenizer

    vocabulary = LLTokenizer((TOOL_MODEL / "tokenizer.json").read_text(encoding="utf-8"))
    return int(vocabulary.tokenize_str("<tool_call>")[0])


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    from qwen_mtp_desktop.core.engine import Engine, LoadOptions

    loaded = Engine()
    loaded.load(TOOL_MODEL, LoadOptions(exact_numerics=True))
    try:
        yield loaded
    finally:
        loaded.unload()


def _plan(body: dict[str, Any]) -> Any:
    from qwen_mtp_desktop.server.app import parse_request
    from qwen_mtp_desktop.server.generation.tools import plan_tools

    request = {"model": MODEL, "messages": [{"role": "user", "content": QUESTION}], **body}
    plan = plan_tools(parse_request(json.dumps(request).encode()))
    assert plan is not None and plan.constraint is not None
    return plan


def _answer(engine: Any, plan: Any, method: Any, messages: list[Any] | None = None) -> str:
    from qwen_mtp_desktop.core.engine import GenerationSettings, Message

    settings = GenerationSettings(
        max_new_tokens=BUDGET,
        method=method.with_constraint(plan.constraint),
        tools_json=plan.tools_json,
    )
    generation = engine.generate(messages or [Message("user", QUESTION)], settings)
    generation.run_to_end()
    assert generation.stats is not None and generation.stats.method.kind == method.kind
    return str(generation.answer)


@pytest.mark.model
@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(parameters=tool_parameters(), strict=st.booleans(), seed=st.integers(0, 2**31))
def test_forced_calls_of_generated_schemas_validate_with_mtp_on(
    engine: Any, parameters: dict[str, Any], strict: bool, seed: int
) -> None:
    """Named calls of a generated schema: greedy MTP (depth 2) equals plain decoding, and the
    greedy and a sampled MTP answer validate against the schema."""
    from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling

    tool = function_tool(parameters, strict=strict)
    plan = _plan({"tools": [tool], "tool_choice": {"type": "function", "function": {"name": "f"}}})
    plain = _answer(engine, plan, DecodingMethod.plain())
    greedy = _answer(engine, plan, DecodingMethod.mtp(2))
    assert greedy == plain
    sampling = Sampling(temperature=1.5, top_p=1.0, top_k=0, seed=seed)
    sampled = _answer(engine, plan, DecodingMethod.mtp(2, sampling))
    for answer in (greedy, sampled):
        parsed = parse(answer, [tool])
        if not isinstance(parsed, Calls):  # only a call cut off by the token budget
            assert not answer.rstrip().endswith("</tool_call>"), (answer, parsed)
            event("a call ran past the token budget")
            continue
        event("a whole call")
        (call,) = parsed.calls
        arguments = json.loads(call.arguments)
        validate_arguments(arguments, parameters)
        assert markup_free(arguments, parameters)


@pytest.mark.model
def test_tools_or_json_with_mtp_equal_plain_decoding(engine: Any) -> None:
    """ "Tool calls, or JSON of the schema": the tool model asked about the weather calls its
    tool; given the result (and a bias against calling again) it answers JSON of the schema.
    MTP at depths 1 and 3 writes plain constrained decoding's answer each time."""
    from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
    from qwen_mtp_desktop.core.engine import Message, ToolCallRecord

    plan = _plan({"tools": TOOLS, "response_format": REPORT_FORMAT})
    assert not plan.forced and plan.constraint.name == "tools_or_response_format"
    methods = [DecodingMethod.plain(), DecodingMethod.mtp(1), DecodingMethod.mtp(3)]
    first = [_answer(engine, plan, method) for method in methods]
    assert first[0] == first[1] == first[2]
    parsed = parse(first[0], TOOLS)
    assert isinstance(parsed, Calls), first[0]
    (call,) = parsed.calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    history = [
        Message("user", QUESTION),
        Message("assistant", "", tool_calls=(ToolCallRecord("call_1", call.name, call.arguments),)),
        Message("tool", RESULT, tool_call_id="call_1"),
    ]
    biased = Sampling(logit_bias=((call_opening_token(), -100.0),))
    methods = [method.with_sampling(biased) for method in methods]
    second = [_answer(engine, plan, method, history) for method in methods]
    assert second[0] == second[1] == second[2]
    validate_arguments(json.loads(second[0]), REPORT)


@pytest.fixture(scope="module")
def client(tool_model_client: openai.OpenAI) -> openai.OpenAI:
    return tool_model_client


@pytest.mark.subprocess
def test_the_issue_reproduction_through_serve(client: openai.OpenAI) -> None:
    """A named tool_choice whose parameter is a `$ref` with no top-level type: its arguments
    are JSON of the definition, never markup, with MTP on."""
    parameters = {
        "$defs": {
            "Loc": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "maxLength": 16},
                    "zip": {"type": "integer"},
                },
                "required": ["city"],
            }
        },
        "properties": {"loc": {"$ref": "#/$defs/Loc"}, "b": {"type": "integer"}},
        "required": ["loc", "b"],
    }
    tool = {"type": "function", "function": {"name": "where", "parameters": parameters}}
    reply = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[tool],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "where"}},
        max_tokens=BUDGET,
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    (call,) = choice.message.tool_calls or []
    arguments = json.loads(call.function.arguments)
    validate_arguments(arguments, parameters)
    assert isinstance(arguments["loc"], dict) and set(arguments["loc"]) <= {"city", "zip"}
    mtp = (reply.model_extra or {})["mtp"]
    assert mtp["mode"] == "mtp" and mtp["method"]["constraint"]["name"] == "tool_choice"


@pytest.mark.subprocess
def test_tools_with_a_response_format_through_serve(client: openai.OpenAI) -> None:
    """Chat completions: tools and response_format in one request (a 400 before issue 43):
    a call, then, with its result, JSON of the schema; MTP on both times."""
    question = {"role": "user", "content": QUESTION}
    fields: dict[str, Any] = {
        "model": MODEL,
        "tools": TOOLS,
        "response_format": REPORT_FORMAT,
        "max_tokens": BUDGET,
    }
    first = client.chat.completions.create(messages=[question], **fields)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather"
    mtp = (first.model_extra or {})["mtp"]
    assert mtp["mode"] == "mtp" and mtp["draft_tokens_per_step"] > 0
    assert mtp["method"]["constraint"] == {"kind": "lark", "name": "tools_or_response_format"}
    result = {"role": "tool", "tool_call_id": call.id, "content": RESULT}
    conversation = [question, choice.message.model_dump(exclude_none=True), result]
    bias = {str(call_opening_token()): -100}  # call_opening_token says why
    second = client.chat.completions.create(messages=conversation, logit_bias=bias, **fields)
    final = second.choices[0]
    assert final.finish_reason == "stop" and not final.message.tool_calls
    assert final.message.content is not None
    validate_arguments(json.loads(final.message.content), REPORT)
    # Streamed, the JSON answer arrives as content deltas that join into the same text.
    stream = client.chat.completions.create(
        messages=conversation, logit_bias=bias, stream=True, **fields
    )
    deltas = [c for chunk in stream for c in chunk.choices]
    assert "".join(c.delta.content or "" for c in deltas) == final.message.content
    assert deltas[-1].finish_reason == "stop"
    assert not any(c.delta.tool_calls for c in deltas)


@pytest.mark.subprocess
def test_responses_tools_with_a_text_format_through_serve(client: openai.OpenAI) -> None:
    """The Responses API: `text.format` json_schema with function tools, a `function_call`
    item first, then the `output_text` JSON once its `function_call_output` is sent."""
    tools = [
        {
            "type": "function",
            "name": t["function"]["name"],
            "parameters": t["function"]["parameters"],
        }
        for t in TOOLS
    ]
    text = {"format": {"type": "json_schema", "name": "report", "schema": REPORT}}
    first = client.responses.create(
        model=MODEL,
        input=QUESTION,
        tools=tools,
        text=text,
        max_output_tokens=BUDGET,  # type: ignore[arg-type]
    )
    (item,) = [out for out in first.output if out.type == "function_call"]
    assert item.name == "get_weather" and json.loads(item.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        input=[
            {
                "type": "function_call_output",
                "call_id": item.call_id,
                "output": RESULT,
            }
        ],
        tools=tools,  # type: ignore[arg-type]
        text=text,  # type: ignore[arg-type]
        max_output_tokens=BUDGET,
        extra_body={"logit_bias": {str(call_opening_token()): -100}},
    )
    assert second.status == "completed"
    assert not [out for out in second.output if out.type == "function_call"]
    validate_arguments(json.loads(second.output_text), REPORT)
