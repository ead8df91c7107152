"""tool_choice auto's lazy grammar through a real `serve` process and its engine process (issue
43, item 3), on the tool model (tests/tool-model), nothing forced and no logit bias: offered
`get_forecast(city, days)` instead of the `get_weather(city)` it was trained on, the model opens
a call by itself and, by habit, names get_weather. Without the grammar that came back as
`content` holding raw `<tool_call>` markup plus a `tool_call_error`; with it, from the tag on
only calls of the offered tools can be written, so the answer is a call of get_forecast whose
arguments match its schema, read into `tool_calls`, whole and streamed. MTP stays on, and its
answers are plain decoding's (`serve --no-mtp`) under the same grammar, token for token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import openai
import pytest

from qwen_mtp_desktop.devtools.tool_corpus import ADD_TOOL
from tests.models import TOOL_MODEL
from tests.remote_server import serving_client

pytestmark = pytest.mark.subprocess

MODEL = "tool-model"
FORECAST_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "days"],
}
FORECAST: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_forecast",
        "description": "The weather forecast in a city.",
        "parameters": FORECAST_PARAMETERS,
    },
}
TOOLS = [ADD_TOOL, FORECAST]
QUESTIONS = ("What is the weather in Paris?", "Weather in Oslo?", "Add 12 and 30.", "Hello there")


@pytest.fixture(scope="module")
def client(tool_model_client: openai.OpenAI) -> openai.OpenAI:
    return tool_model_client


@pytest.fixture(scope="module")
def plain_client() -> Iterator[openai.OpenAI]:
    with serving_client(TOOL_MODEL, "--no-mtp") as client:
        yield client


def ask(client: openai.OpenAI, question: str, **fields: Any) -> Any:
    return client.chat.completions.create(  # type: ignore[call-overload]
        model=MODEL,
        messages=[{"role": "user", "content": question}],
        tools=TOOLS,
        max_tokens=80,
        **fields,
    )


def test_a_call_the_model_opens_follows_the_offered_tools(client: openai.OpenAI) -> None:
    response = ask(client, "What is the weather in Paris?")
    choice = response.choices[0]
    extra = response.model_extra or {}
    assert "tool_call_error" not in extra, extra.get("tool_call_error")
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_forecast"  # never the get_weather it was trained on
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, FORECAST_PARAMETERS)
    assert arguments["city"] == "Paris"
    mtp = extra["mtp"]
    assert mtp["mode"] == "mtp" and mtp["drafted_tokens"] > 0
    assert mtp["method"]["constraint"] == {"kind": "lark", "name": "tool_calls_auto"}

    stream = ask(client, "What is the weather in Paris?", stream=True)
    text, entries, finishes = "", [], []
    for chunk in stream:
        for delta_choice in chunk.choices:
            text += delta_choice.delta.content or ""
            entries += delta_choice.delta.tool_calls or []
            finishes.append(delta_choice.finish_reason)
    assert text == "" and finishes[-1] == "tool_calls"  # no markup leaks as text
    assert entries[0].function.name == "get_forecast"
    assert "".join(e.function.arguments or "" for e in entries) == call.function.arguments


def test_text_answers_and_known_calls_are_untouched(client: openai.OpenAI) -> None:
    hello = ask(client, "Hello there").choices[0]
    assert hello.finish_reason == "stop" and hello.message.tool_calls is None
    assert hello.message.content == "Hello! I can check the weather and add numbers."
    add = ask(client, "Add 12 and 30.").choices[0]
    (call,) = add.message.tool_calls
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 12, "b": 30}


def test_responses_with_one_call_at_most(client: openai.OpenAI) -> None:
    for fields in ({"max_tool_calls": 1}, {"parallel_tool_calls": False}, {"max_tool_calls": 2}):
        response = client.responses.create(  # type: ignore[call-overload]
            model=MODEL,
            input="Weather in Oslo?",
            tools=[{"type": "function", **FORECAST["function"]}],
            max_output_tokens=80,
            **fields,
        )
        calls = [item for item in response.output if item.type == "function_call"]
        assert len(calls) == 1 and calls[0].name == "get_forecast", fields
        jsonschema.validate(json.loads(calls[0].arguments), FORECAST_PARAMETERS)
        assert not [item for item in response.output if item.type == "message"]


def test_mtp_answers_are_plain_decodings_under_the_grammar(
    client: openai.OpenAI, plain_client: openai.OpenAI
) -> None:
    for question in QUESTIONS:
        plain = ask(plain_client, question)
        assert (plain.model_extra or {})["mtp"]["mode"] == "plain"
        expected = plain.choices[0].message.model_dump()
        for depth in (1, 3):
            answer = ask(client, question, extra_body={"num_assistant_tokens": depth})
            got = answer.choices[0].message.model_dump()
            for message in (got, expected):
                for call in message.get("tool_calls") or ():
                    call["id"] = "call"  # fresh per answer
            assert got == expected, (question, depth)
            assert answer.usage.completion_tokens == plain.usage.completion_tokens
            assert (answer.model_extra or {})["mtp"]["drafted_tokens"] > 0
