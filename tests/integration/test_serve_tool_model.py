"""Issue 27's end-to-end target through the API: the tool model (tests/tool-model, a tiny
Qwen3.5 + MTP that `make tool-model` trains to call tools) behind a real `qwen-mtp-desktop
serve` process and its engine process, MTP on, nothing forced: with `tool_choice: "auto"` the
model itself decides to call, the server reads its call into `tool_calls` (whole and streamed
as deltas), the client sends the tool's result back and the model answers with it, and a
question no tool answers gets text. The questions are ones training never saw
(`tool_corpus.is_held_out`)."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from qwen_mtp_desktop.devtools.tool_corpus import (
    BOTH_TOOLS,
    add_report,
    is_held_out,
    weather_report,
)

pytestmark = pytest.mark.subprocess

MODEL = "tool-model"
TOOLS: list[dict[str, Any]] = [dict(tool) for tool in BOTH_TOOLS]


@pytest.fixture(scope="module")
def client(tool_model_client: openai.OpenAI) -> openai.OpenAI:
    return tool_model_client


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], **fields: Any) -> Any:
    return client.chat.completions.create(  # type: ignore[call-overload]
        model=MODEL, messages=messages, tools=TOOLS, tool_choice="auto", **fields
    )


def user(text: str) -> dict[str, Any]:
    assert is_held_out(text), f"{text!r} was in the training data"
    return {"role": "user", "content": text}


def weather_answer(city: str) -> str:
    condition, temperature = weather_report(city).split(": ")[1].removesuffix(" C").split(", ")
    return f"It is {condition} and {temperature} C in {city}."


@pytest.mark.parametrize(
    ("question", "name", "arguments", "result", "answer"),
    [
        ("What is the weather in Paris?", "get_weather", {"city": "Paris"},
         weather_report("Paris"), weather_answer("Paris")),
        ("Add 12 and 30.", "add", {"a": 12, "b": 30},
         add_report(12, 30), "The sum of 12 and 30 is 42."),
    ],
    ids=["weather", "add"],
)  # fmt: skip
def test_the_model_calls_a_tool_by_itself_then_answers_its_result(
    client: openai.OpenAI,
    question: str,
    name: str,
    arguments: dict[str, Any],
    result: str,
    answer: str,
) -> None:
    first = ask(client, [user(question)])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice.message.content
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == name
    assert json.loads(call.function.arguments) == arguments
    mtp = (first.model_extra or {})["mtp"]
    assert mtp["mode"] == "mtp" and mtp["drafted_tokens"] > 0 and mtp["accepted_tokens"] > 0
    # The model opened the call itself; from its tag on, the tools' lazy grammar held it.
    assert mtp["method"]["constraint"] == {"kind": "lark", "name": "tool_calls_auto"}
    assert "tool_call_error" not in (first.model_extra or {})

    reply = {"role": "tool", "tool_call_id": call.id, "content": result}
    conversation = [user(question), choice.message.model_dump(exclude_none=True), reply]
    second = ask(client, conversation)
    final = second.choices[0]
    assert final.finish_reason == "stop" and final.message.tool_calls is None
    assert final.message.content == answer
    assert second.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens


def test_a_streamed_call_arrives_as_deltas_that_join_into_the_whole_call(
    client: openai.OpenAI,
) -> None:
    messages = [user("What is the weather in Dublin?")]
    whole = ask(client, messages).choices[0].message.tool_calls
    stream = ask(client, messages, stream=True, stream_options={"include_usage": True})
    deltas, finishes, usage = [], [], None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            deltas.append(choice.delta)
            finishes.append(choice.finish_reason)
    assert finishes[-1] == "tool_calls" and not any(finishes[:-1])
    assert not any(delta.content for delta in deltas)  # no markup leaks as text
    head, *pieces = [entry for delta in deltas for entry in delta.tool_calls or []]
    assert head.index == 0 and head.id.startswith("call_") and head.type == "function"
    assert head.function.name == "get_weather" and head.function.arguments == ""
    assert pieces and all(piece.index == 0 and piece.id is None for piece in pieces)
    arguments = "".join(piece.function.arguments for piece in pieces)
    assert json.loads(arguments) == {"city": "Dublin"}
    assert arguments == whole[0].function.arguments
    assert usage is not None and usage.completion_tokens > 10


def test_a_question_no_tool_answers_gets_text(client: openai.OpenAI) -> None:
    for question, answer in (
        ("Hello there", "Hello! I can check the weather and add numbers."),
        ("Tell me a story.", "Sorry, I can only check the weather and add numbers."),
    ):
        choice = ask(client, [user(question)]).choices[0]
        assert choice.finish_reason == "stop" and choice.message.tool_calls is None
        assert choice.message.content == answer


def test_with_thinking_on_it_reasons_then_calls(client: openai.OpenAI) -> None:
    response = ask(
        client,
        [user("What is 36 + 65?")],
        extra_body={"chat_template_kwargs": {"enable_thinking": True}},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 36, "b": 65}
    reasoning = (choice.message.model_extra or {}).get("reasoning_content")
    assert reasoning and "36" in reasoning
