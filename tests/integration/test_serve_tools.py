"""Tool calling through a real `qwen-mtp-desktop serve` process and its engine process, with
the `openai` SDK and raw HTTP: tools rendered by the model's chat template, forced calls
(`tool_choice` "required" or a named function) decoded under a grammar with MTP on, calls
returned whole and streamed, a tool result sent back and answered, a call cut short returned
as text with `tool_call_error`, and bad shapes refused with a 400 naming the field.

The demo model was never trained to call a tool, so with `tool_choice: "auto"` it answers in
text; the calls here are forced by the grammar, which makes every one well formed. (The tool
model calls tools by itself: test_serve_tool_model.py.) The model is a copy of the
demo model in a folder of its own, so the server sends it the whole conversation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.remote_server import KEY
from tests.serve_fixtures import CHAT_MODEL, TIME, WEATHER

MODEL = CHAT_MODEL
QUESTION = {"role": "user", "content": "What is the weather in Paris?"}
TOOLS = [WEATHER, TIME]
NAMED = {"type": "function", "function": {"name": "get_time"}}
BUDGET = 300


@pytest.fixture(scope="module")
def url(chat_url: str) -> str:
    return chat_url


@pytest.fixture(scope="module")
def client(chat_client: openai.OpenAI) -> openai.OpenAI:
    return chat_client


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], **fields: Any) -> Any:
    fields.setdefault("max_tokens", BUDGET)
    return client.chat.completions.create(model=MODEL, messages=messages, **fields)  # type: ignore[call-overload]


def extra(response: Any) -> dict[str, Any]:
    return response.model_extra or {}


def check_weather_call(call: Any) -> dict[str, Any]:
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    arguments: dict[str, Any] = json.loads(call.function.arguments)
    assert isinstance(arguments["city"], str) and len(arguments["city"]) <= 12
    assert isinstance(arguments["days"], int) and 1 <= arguments["days"] <= 7
    return arguments


@pytest.mark.subprocess
def test_forced_calls_are_tool_calls_with_mtp_on(client: openai.OpenAI) -> None:
    required = ask(client, [QUESTION], tools=TOOLS, tool_choice="required")
    choice = required.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls and all(
        c.type == "function" for c in choice.message.tool_calls
    )
    mtp = extra(required)["mtp"]
    assert mtp["mode"] == "mtp" and mtp["drafted_tokens"] > 0
    assert mtp["method"]["constraint"] == {"kind": "lark", "name": "tool_choice"}
    named = ask(client, [QUESTION], tools=TOOLS, tool_choice=NAMED)
    (call,) = named.choices[0].message.tool_calls
    assert call.function.name == "get_time"
    assert json.loads(call.function.arguments)["zone"] in ("UTC", "CET")
    single = ask(
        client,
        [QUESTION],
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
    )
    (call,) = single.choices[0].message.tool_calls
    check_weather_call(call)
    assert "tool_call_error" not in extra(single)


NOTE: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "save_note",
        "description": "Save a note.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 40, "maxLength": 60},
                "pages": {"type": "integer", "minimum": 1, "maximum": 9},
            },
            "required": ["text", "pages"],
        },
    },
}


NAMED_NOTE = {"type": "function", "function": {"name": "save_note"}}


def streamed_calls(stream: Any) -> tuple[list[Any], list[Any], list[str | None], Any]:
    """(the deltas, their tool-call entries, the finish reasons, the usage) of a stream."""
    deltas, finishes, usage = [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            deltas.append(choice.delta)
            finishes.append(choice.finish_reason)
    entries = [c for d in deltas if d.tool_calls for c in d.tool_calls]
    return deltas, entries, finishes, usage


@pytest.mark.subprocess
@pytest.mark.parametrize("tool", [WEATHER, NOTE], ids=["weather", "note"])
def test_a_streamed_call_arrives_as_tool_call_deltas(client: openai.OpenAI, tool: Any) -> None:
    """The call's head (index, id, type, name, empty arguments) as soon as the name is read,
    then its arguments in pieces as the model writes them: joined, exactly the non-streamed
    arguments (greedy decoding: the same answer)."""
    fields = {"tools": [tool], "tool_choice": "required", "parallel_tool_calls": False}
    whole = ask(client, [QUESTION], **fields)
    stream = ask(client, [QUESTION], stream=True, stream_options={"include_usage": True}, **fields)
    deltas, entries, finishes, usage = streamed_calls(stream)
    assert finishes[-1] == "tool_calls" and not any(finishes[:-1])
    assert not any(d.content for d in deltas)  # nothing of the call leaks as text
    head, *pieces = entries
    assert head.index == 0 and head.id.startswith("call_") and head.type == "function"
    assert head.function.name == tool["function"]["name"] and head.function.arguments == ""
    assert pieces and all(p.index == 0 and p.id is None and p.function.name is None for p in pieces)
    (expected,) = whole.choices[0].message.tool_calls
    assert "".join(p.function.arguments for p in pieces) == expected.function.arguments
    if tool is NOTE:  # a 40-60 character value is not sent in one piece
        assert len(pieces) >= 2, [p.function.arguments for p in pieces]
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


@pytest.mark.subprocess
def test_a_streamed_responses_call_arrives_in_argument_deltas(url: str) -> None:
    """/v1/responses: the function_call item added with empty arguments, then
    `function_call_arguments.delta`s that join into `.done`'s arguments and the non-streamed
    call's."""
    tools = [{"type": "function", **NOTE["function"]}]
    body = {"model": MODEL, "input": "Save a note.", "tools": tools, "tool_choice": "required",
            "parallel_tool_calls": False, "max_output_tokens": BUDGET}  # fmt: skip
    headers = {"Authorization": f"Bearer {KEY}"}
    whole = httpx.post(f"{url}/responses", json=body, headers=headers, timeout=120).json()
    (expected,) = [item for item in whole["output"] if item["type"] == "function_call"]
    with httpx.stream(
        "POST", f"{url}/responses", json={**body, "stream": True}, headers=headers, timeout=120
    ) as response:
        events = [
            json.loads(line.removeprefix("data: "))
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    added = next(e for e in events if e["type"] == "response.output_item.added"
                 and e["item"]["type"] == "function_call")  # fmt: skip
    assert added["item"]["arguments"] == "" and added["item"]["name"] == "save_note"
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    (done,) = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert "".join(deltas) == done["arguments"] == expected["arguments"]
    assert len(deltas) >= 2
    final = events[-1]
    assert final["type"] == "response.completed"
    (call,) = [item for item in final["response"]["output"] if item["type"] == "function_call"]
    assert call["call_id"] == added["item"]["call_id"] and call["status"] == "completed"


@pytest.mark.subprocess
def test_a_tool_result_is_sent_back_and_answered(client: openai.OpenAI) -> None:
    """call -> tool message -> the model's answer, as an agent loop runs it."""
    first = ask(
        client, [QUESTION], tools=[WEATHER], tool_choice="required", parallel_tool_calls=False
    )
    message = first.choices[0].message
    (call,) = message.tool_calls
    arguments = check_weather_call(call)
    result = {"role": "tool", "tool_call_id": call.id, "content": f"Sunny in {arguments['city']}."}
    conversation = [QUESTION, message.model_dump(exclude_none=True), result]
    answer = ask(client, conversation, tools=[WEATHER])
    choice = answer.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert isinstance(choice.message.content, str) and choice.message.content
    # The whole exchange was rendered: the prompt holds the call and its result.
    assert answer.usage.prompt_tokens > first.usage.prompt_tokens + first.usage.completion_tokens
    # tool_choice "none": the tools are not shown (a shorter prompt); the exchange still is.
    plain = ask(client, conversation, tools=[WEATHER], tool_choice="none")
    assert plain.choices[0].message.tool_calls is None
    assert plain.usage.prompt_tokens < answer.usage.prompt_tokens
    without = ask(client, conversation)
    assert without.usage.prompt_tokens == plain.usage.prompt_tokens


@pytest.mark.subprocess
def test_auto_reads_the_answer_and_shows_the_tools(client: openai.OpenAI) -> None:
    offered = ask(client, [QUESTION], tools=TOOLS)
    bare = ask(client, [QUESTION])
    choice = offered.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert isinstance(choice.message.content, str) and "<tool_call>" not in choice.message.content
    assert offered.usage.prompt_tokens > bare.usage.prompt_tokens + 100  # the tools' prompt
    # The tools' lazy grammar rides along; the answer opened no call, so it never bound.
    assert extra(offered)["mtp"]["method"]["constraint"] == {
        "kind": "lark",
        "name": "tool_calls_auto",
    }


@pytest.mark.subprocess
def test_a_call_cut_short_comes_back_as_text_with_an_error(client: openai.OpenAI) -> None:
    cut = ask(client, [QUESTION], tools=TOOLS, tool_choice="required", max_tokens=12)
    choice = cut.choices[0]
    assert choice.finish_reason == "length" and choice.message.tool_calls is None
    assert choice.message.content and choice.message.content.startswith("<tool")
    error = extra(cut)["tool_call_error"]
    assert error["type"] == "malformed_tool_call" and "returned as content" in error["message"]
    stream = ask(
        client, [QUESTION], tools=TOOLS, tool_choice="required", max_tokens=12, stream=True
    )
    text, last, entries = "", None, []
    for chunk in stream:
        for delta_choice in chunk.choices:
            text += delta_choice.delta.content or ""
            entries += delta_choice.delta.tool_calls or []
            if delta_choice.finish_reason:
                last = chunk
    # The call's head went out as it was read; the end tells it was cut: the finish reason
    # is not "tool_calls", the error says why, and the call's text follows as content.
    assert text == choice.message.content
    assert last is not None and last.choices[0].finish_reason == "length"
    assert (last.model_extra or {})["tool_call_error"]["type"] == "malformed_tool_call"
    assert all(e.index == 0 for e in entries)


BROKEN = {"name": "f", "arguments": "{"}
CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "days": 2}'},
}


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("fields", "param", "needle"),
    [
        ({"tool_choice": "required"}, "tool_choice", "needs tools"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools[0].function.name", "required"),
        ({"tools": TOOLS, "tool_choice": {"type": "function"}}, "tool_choice", ""),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice.function.name",
            "not among the tools",
        ),
        (
            {"messages": [QUESTION, {"role": "tool", "content": "sunny"}]},
            "messages[1].tool_call_id",
            "tool_call_id",
        ),
        (
            {
                "messages": [
                    QUESTION,
                    {"role": "assistant", "tool_calls": [{**CALL, "function": BROKEN}]},
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
            "JSON object",
        ),
        (
            {
                "messages": [
                    QUESTION,
                    {"role": "assistant", "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "call_8", "content": "sunny"},
                ]
            },
            "messages[2].tool_call_id",
            "no call with that id",
        ),
    ],
)  # fmt: skip
def test_bad_tool_shapes_get_a_400_naming_the_field(
    url: str, fields: dict[str, Any], param: str, needle: str
) -> None:
    body = {"model": MODEL, "messages": [QUESTION], **fields}
    response = httpx.post(
        f"{url}/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"].startswith(param), error
    assert needle in error["message"] and "Traceback" not in response.text
    health = httpx.get(url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok"


@pytest.mark.model
def test_forced_calls_with_mtp_equal_plain_constrained_decoding(chat_model: Path) -> None:
    """MTP at depths 1 and 3 writes the same calls as plain constrained decoding (grammar
    masks on the target and the drafts), compared like with like: with exact CPU numerics.
    (With the default bf16 numerics the untrained model's first choice, get_time or
    get_weather, is a near-tie that a different verification batch can flip.)"""
    from qwen_mtp_desktop.core.decoding.method import DecodingMethod
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
    from qwen_mtp_desktop.server.app import parse_request
    from qwen_mtp_desktop.server.generation.tools import plan_tools

    engine = Engine()
    engine.load(chat_model, LoadOptions(exact_numerics=True))
    try:
        for choice in ("required", NAMED):
            body = {"model": MODEL, "messages": [QUESTION], "tools": TOOLS, "tool_choice": choice}
            plan = plan_tools(parse_request(json.dumps(body).encode()))
            assert plan is not None and plan.constraint is not None
            answers = []
            for method in (DecodingMethod.plain(), DecodingMethod.mtp(1), DecodingMethod.mtp(3)):
                settings = GenerationSettings(
                    max_new_tokens=BUDGET,
                    method=method.with_constraint(plan.constraint),
                    tools_json=plan.tools_json,
                )
                generation = engine.generate([Message("user", QUESTION["content"])], settings)
                generation.run_to_end()
                assert generation.stats is not None
                assert generation.stats.method.kind == method.kind
                answers.append(generation.answer)
            assert answers[0] == answers[1] == answers[2]
            assert answers[0].startswith("<tool_call>\n<function=")
    finally:
        engine.unload()


@pytest.mark.subprocess
def test_serve_without_mtp_forces_calls_too(
    client: openai.OpenAI, plain_chat_client: openai.OpenAI
) -> None:
    fields = {"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False}
    reference = ask(plain_chat_client, [QUESTION], **fields)
    assert extra(reference)["mtp"]["mode"] == "plain"
    (call,) = reference.choices[0].message.tool_calls
    check_weather_call(call)
    by_depth = []
    for depth in (1, 3):
        answer = ask(client, [QUESTION], extra_body={"num_assistant_tokens": depth}, **fields)
        assert extra(answer)["mtp"]["draft_tokens_per_step"] == depth
        by_depth.append([c.function.model_dump() for c in answer.choices[0].message.tool_calls])
    assert by_depth[0] == by_depth[1]


@pytest.mark.subprocess
def test_the_remote_client_reads_the_streamed_calls(client: openai.OpenAI, url: str) -> None:
    """core.remote.client (the chat's remote models) sends the tools and a named tool_choice,
    and joins the streamed call into the call the non-streamed API returns."""
    from qwen_mtp_desktop.core.engine import GenerationSettings, Message, ToolCallRecord
    from qwen_mtp_desktop.core.remote.client import RemoteAnswer
    from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint

    fields = {"tools": [NOTE], "tool_choice": NAMED_NOTE, "parallel_tool_calls": False}
    (expected,) = ask(client, [QUESTION], **fields).choices[0].message.tool_calls
    endpoint = RemoteEndpoint("t", "t", url, MODEL)
    settings = GenerationSettings(
        max_new_tokens=BUDGET, tools_json=json.dumps([NOTE]), tool_choice="save_note"
    )
    question = Message("user", QUESTION["content"])
    answer = RemoteAnswer(endpoint, KEY, [question], settings)
    stats = answer.run_to_end()
    assert stats.remote is not None
    (call,) = stats.remote["tool_calls"]
    assert call["name"] == "save_note" and call["id"].startswith("call_")
    assert call["arguments"] == expected.function.arguments
    # The call and its result go back; the server answers them.
    record = ToolCallRecord(call["id"], call["name"], call["arguments"])
    history = [question, Message("assistant", "", tool_calls=(record,)),
               Message("tool", "Saved.", tool_call_id=call["id"])]  # fmt: skip
    after = RemoteAnswer(endpoint, KEY, history, replace(settings, tool_choice=""))
    after_stats = after.run_to_end()
    assert after_stats.remote is not None and "tool_calls" not in after_stats.remote
    assert after.answer and after_stats.prompt_tokens > stats.prompt_tokens


@pytest.mark.subprocess
def test_a_responses_call_cut_short_ends_incomplete_with_its_text(url: str) -> None:
    """/v1/responses, a forced call cut by max_output_tokens after its item went out: the item
    ends "incomplete" with the arguments sent, the call's text follows in a message (as the
    non-streamed response's content), the response is incomplete with `tool_call_error`."""
    tools = [{"type": "function", **NOTE["function"]}]
    body = {"model": MODEL, "input": "Save a note.", "tools": tools, "tool_choice": "required",
            "max_output_tokens": 45}  # fmt: skip
    headers = {"Authorization": f"Bearer {KEY}"}
    whole = httpx.post(f"{url}/responses", json=body, headers=headers, timeout=120).json()
    assert whole["status"] == "incomplete" and whole["tool_call_error"]
    (text,) = [part["text"] for item in whole["output"] for part in item["content"]]
    assert "<parameter=text>" in text, text  # cut inside the call's first value
    with httpx.stream(
        "POST", f"{url}/responses", json={**body, "stream": True}, headers=headers, timeout=120
    ) as response:
        events = [
            json.loads(line.removeprefix("data: "))
            for line in response.iter_lines()
            if line.startswith("data: ")
        ]
    final = events[-1]
    assert final["type"] == "response.incomplete" and final["response"]["tool_call_error"]
    output = final["response"]["output"]
    calls = [item for item in output if item["type"] == "function_call"]
    assert [c["status"] for c in calls] == ["incomplete"] and calls[0]["name"] == "save_note"
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert calls[0]["arguments"] == "".join(deltas)
    messages = [item for item in output if item["type"] == "message"]
    said = [part["text"] for item in messages for part in item["content"]]
    assert "".join(said) == text and text.startswith("<tool_call>")
