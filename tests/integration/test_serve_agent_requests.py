"""The request shapes agent clients send (issue 43, items 4 and 6), through a real `serve`
process and its engine process: the reasoning controls (`reasoning_effort`, Responses
`reasoning.effort`, `thinking_token_budget`) as thinking and a thinking budget the engine
enforces by closing the thinking block itself, with MTP on and plain decoding's answer;
`include` values that mean nothing here; `max_tool_calls`; a forced tool call with thinking on
(it thinks, then calls); assistant prefill; `n` > 1 refused naming the limit; and raw responses
validated against the installed openai SDK's models (`cache_write_tokens`).

The model is a copy of the demo model in a folder of its own, so the server sends it the whole
conversation. Its thinking is short ("The user wants me to count from 1 to 20.") and its answer
counts, so a budget that cuts the reasoning short shows in both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response, ResponseCompletedEvent, ResponseStreamEvent
from pydantic import TypeAdapter

from tests.remote_server import KEY, raw_http
from tests.serve_fixtures import CHAT_MODEL, TIME, described, flat

pytestmark = pytest.mark.subprocess

MODEL = CHAT_MODEL
COUNT = [{"role": "user", "content": "Count from 1 to 20."}]
THINK = {"chat_template_kwargs": {"enable_thinking": True}}
TIME_TOOL = described(TIME, "The time in a zone.")
#: The same tool in the Responses shape (flat).
FLAT_TIME = flat(TIME_TOOL)
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)


@pytest.fixture(scope="module")
def url(chat_url: str) -> str:
    return chat_url


@pytest.fixture(scope="module")
def client(chat_client: openai.OpenAI) -> openai.OpenAI:
    return chat_client


@pytest.fixture(scope="module")
def http(client: openai.OpenAI) -> Iterator[httpx.Client]:
    with raw_http(client) as http:
        yield http


def chat(http: httpx.Client, **body: Any) -> dict[str, Any]:
    """A chat completion's raw body, checked against the openai SDK's model."""
    response = http.post("/v1/chat/completions", json={"model": MODEL, **body})
    assert response.status_code == 200, response.text
    raw: dict[str, Any] = response.json()
    ChatCompletion.model_validate(raw)
    return raw


def respond(http: httpx.Client, **body: Any) -> dict[str, Any]:
    """A Response's raw body, checked against the openai SDK's model (strictly: every field
    the SDK requires, `cache_write_tokens` included)."""
    response = http.post("/v1/responses", json={"model": MODEL, **body})
    assert response.status_code == 200, response.text
    raw: dict[str, Any] = response.json()
    Response.model_validate(raw)
    return raw


def refused(http: httpx.Client, path: str, body: dict[str, Any], param: str) -> str:
    response = http.post(path, json={"model": MODEL, **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    message: str = error["message"]
    return message


def reasoning_tokens(raw: dict[str, Any]) -> int:
    count: int = raw["usage"]["completion_tokens_details"]["reasoning_tokens"]
    return count


# --- the SDK's models ---------------------------------------------------------------------------


def test_raw_responses_and_their_events_validate_against_the_sdk(http: httpx.Client) -> None:
    """openai 3.63's models require `input_tokens_details.cache_write_tokens`: without it
    `Response.model_validate` failed on every response and on `response.completed`."""
    raw = respond(http, input="Count from 1 to 5.", max_output_tokens=12)
    details = raw["usage"]["input_tokens_details"]
    assert details["cache_write_tokens"] == 0 and details["cached_tokens"] >= 0
    body = {"model": MODEL, "input": "Count from 1 to 5.", "max_output_tokens": 12, "stream": True}
    with http.stream("POST", "/v1/responses", json=body) as response:
        assert response.status_code == 200
        text = response.read().decode()
    events = [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]
    assert events and events[-1]["type"] in ("response.completed", "response.incomplete")
    for event in events:
        EVENTS.validate_python(event)  # every event, as the SDK's stream reads it
    completed = ResponseCompletedEvent.model_validate({**events[-1], "type": "response.completed"})
    assert completed.response.usage is not None
    assert completed.response.usage.input_tokens_details.cache_write_tokens == 0


# --- reasoning controls -------------------------------------------------------------------------


def test_reasoning_effort_maps_onto_thinking(http: httpx.Client) -> None:
    off = chat(http, messages=COUNT, max_tokens=40, reasoning_effort="none")
    minimal = chat(http, messages=COUNT, max_tokens=40, reasoning_effort="minimal")
    plain = chat(http, messages=COUNT, max_tokens=40)
    for raw in (off, minimal):
        assert reasoning_tokens(raw) == 0 and not raw["choices"][0]["message"].get(
            "reasoning_content"
        )
        assert raw["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    low = chat(http, messages=COUNT, max_tokens=40, reasoning_effort="low")
    thinks = chat(http, messages=COUNT, max_tokens=40, **THINK)
    # low's budget (512) is far above this answer's thinking: the same answer as thinking on.
    assert low["choices"][0]["message"] == thinks["choices"][0]["message"]
    assert low["choices"][0]["message"]["reasoning_content"].startswith("The user wants")
    assert reasoning_tokens(low) > 5


def test_a_thinking_budget_closes_the_thinking_and_leaves_the_answer(http: httpx.Client) -> None:
    full = chat(http, messages=COUNT, max_tokens=60, **THINK)["choices"][0]["message"]
    cut = chat(http, messages=COUNT, max_tokens=60, thinking_token_budget=4, **THINK)
    message = cut["choices"][0]["message"]
    # At most the budget, then the engine's "\n</think>" (2 tokens more in the count).
    assert reasoning_tokens(cut) <= 4 + 2
    assert full["reasoning_content"].startswith(message["reasoning_content"].rstrip("\n"))
    assert len(message["reasoning_content"]) < len(full["reasoning_content"])
    assert message["content"].startswith("1 2 3 4 5")
    # An effort's budget is capped so the answer keeps a quarter of max_tokens: "high" (8,192)
    # with 24 tokens thinks at most 18, and an answer comes.
    high = chat(http, messages=COUNT, max_tokens=24, reasoning_effort="high")
    assert reasoning_tokens(high) <= 18 + 2
    assert high["choices"][0]["message"]["content"].startswith("1 2")
    assert high["usage"]["completion_tokens"] == 24


def test_the_thinking_budget_keeps_mtp_exact(
    http: httpx.Client, plain_chat_client: openai.OpenAI
) -> None:
    """MTP at depths 1 and 3, with the budget closing the thinking, writes what a `--no-mtp`
    server writes: each phase is exact decoding of its own prompt."""
    fields: dict[str, Any] = {"messages": COUNT, "max_tokens": 48, "thinking_token_budget": 6}
    fields |= THINK
    with raw_http(plain_chat_client) as plain_http:
        reference = chat(plain_http, **fields)
    assert reference["mtp"]["mode"] == "plain"
    for depth in (1, 3):
        answer = chat(http, num_assistant_tokens=depth, **fields)
        assert answer["mtp"]["mode"] == "mtp" and answer["mtp"]["draft_tokens_per_step"] == depth
        assert answer["choices"][0]["message"] == reference["choices"][0]["message"]
        assert answer["usage"]["completion_tokens"] == reference["usage"]["completion_tokens"]


def test_responses_reasoning_effort_include_and_summary(http: httpx.Client) -> None:
    """Codex-style requests: `reasoning: {effort, summary}` and
    `include: ["reasoning.encrypted_content"]` are answered (the include means nothing here)."""
    raw = respond(
        http,
        input="Count from 1 to 20.",
        max_output_tokens=40,
        reasoning={"effort": "low", "summary": "auto"},
        include=["reasoning.encrypted_content", "message.input_image.image_url"],
    )
    kinds = [item["type"] for item in raw["output"]]
    assert kinds == ["reasoning", "message"]
    assert raw["output"][0]["content"][0]["text"].startswith("The user wants")
    assert "encrypted_content" not in raw["output"][0] or not raw["output"][0]["encrypted_content"]
    assert raw["reasoning"]["effort"] == "low"
    assert "logprobs" not in json.dumps(raw["output"][1]["content"][0]) or not raw["output"][1][
        "content"
    ][0].get("logprobs")
    budget = respond(
        http,
        input="Count from 1 to 20.",
        max_output_tokens=40,
        reasoning={"effort": "low"},
        thinking_token_budget=3,
    )
    assert budget["usage"]["output_tokens_details"]["reasoning_tokens"] <= 3 + 2
    off = respond(http, input="Count from 1 to 20.", reasoning={"effort": "none"})
    assert [item["type"] for item in off["output"]] == ["message"]
    message = refused(
        http,
        "/v1/responses",
        {
            "input": "x",
            "reasoning": {"effort": "high"},
            "chat_template_kwargs": {"enable_thinking": False},
        },
        "reasoning.effort",
    )
    assert "'high'" in message and "enable_thinking" in message


def test_contradicting_reasoning_fields_are_refused(http: httpx.Client) -> None:
    body = {"messages": COUNT, "reasoning_effort": "none", **THINK}
    assert "send one of them" in refused(http, "/v1/chat/completions", body, "reasoning_effort")
    body = {"messages": COUNT, "thinking_token_budget": 5, "reasoning_effort": "none"}
    refused(http, "/v1/chat/completions", body, "thinking_token_budget")
    body = {"messages": COUNT, "thinking_token_budget": -1, **THINK}
    refused(http, "/v1/chat/completions", body, "thinking_token_budget")


# --- tools --------------------------------------------------------------------------------------


def test_a_forced_call_with_thinking_thinks_then_calls(http: httpx.Client) -> None:
    """Was a 400: the grammar would have constrained the reasoning. Now the engine thinks
    unconstrained, then writes the call under the grammar (MTP on), whole and streamed."""
    question = [{"role": "user", "content": "What time is it in Paris?"}]
    for choice in ("required", {"type": "function", "function": {"name": "get_time"}}):
        raw = chat(
            http, messages=question, tools=[TIME_TOOL], tool_choice=choice, max_tokens=120, **THINK
        )
        choice_out = raw["choices"][0]
        assert choice_out["finish_reason"] == "tool_calls", raw
        assert choice_out["message"]["reasoning_content"]
        (call,) = choice_out["message"]["tool_calls"]
        assert call["function"]["name"] == "get_time"
        assert json.loads(call["function"]["arguments"])["zone"] in ("UTC", "CET")
        assert raw["mtp"]["mode"] == "mtp" and raw["mtp"]["method"]["constraint"]["kind"] == "lark"
        assert reasoning_tokens(raw) > 0
    streamed = client_stream(http, messages=question, tools=[TIME_TOOL], tool_choice="required")
    assert streamed["finish_reason"] == "tool_calls" and streamed["reasoning"]
    assert streamed["arguments"] == call["function"]["arguments"]
    raw = respond(
        http,
        input="What time is it in Paris?",
        tools=[FLAT_TIME],
        tool_choice="required",
        reasoning={"effort": "medium"},
        max_output_tokens=120,
    )
    assert [item["type"] for item in raw["output"]] == ["reasoning", "function_call"]
    # Streamed: the reasoning item, then the call's, each event as the SDK reads it.
    body = {
        "model": MODEL,
        "input": "What time is it in Paris?",
        "tools": [FLAT_TIME],
        "tool_choice": "required",
        "reasoning": {"effort": "medium"},
        "max_output_tokens": 120,
        "stream": True,
    }
    with http.stream("POST", "/v1/responses", json=body) as response:
        assert response.status_code == 200
        lines = response.read().decode().split("\n")
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    for event in events:
        EVENTS.validate_python(event)
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added == ["reasoning", "function_call"]
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed" and final.output[1].type == "function_call"
    assert final.output[1].arguments == raw["output"][1]["arguments"]


def test_structured_output_with_thinking_thinks_then_answers_in_json(http: httpx.Client) -> None:
    """Was a 400 too: with thinking on, the schema holds from the answer's first token."""
    schema = {
        "type": "object",
        "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
        "required": ["zone"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "zone", "schema": schema}}
    raw = chat(
        http,
        messages=[{"role": "user", "content": "Which zone is Paris in?"}],
        response_format=fmt,
        max_tokens=120,
        **THINK,
    )
    message = raw["choices"][0]["message"]
    assert message["reasoning_content"] and reasoning_tokens(raw) > 0
    assert json.loads(message["content"])["zone"] in ("UTC", "CET")
    assert raw["mtp"]["method"]["constraint"]["kind"] == "json_schema"
    # A budget ends the thinking sooner; the answer is still JSON of the schema.
    cut = chat(
        http,
        messages=[{"role": "user", "content": "Which zone is Paris in?"}],
        response_format=fmt,
        max_tokens=120,
        thinking_token_budget=2,
        **THINK,
    )
    assert reasoning_tokens(cut) <= 2 + 2
    assert json.loads(cut["choices"][0]["message"]["content"])["zone"] in ("UTC", "CET")


def client_stream(http: httpx.Client, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL, "stream": True, "max_tokens": 120, **THINK, **body}
    with http.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        lines = response.read().decode().split("\n")
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    reasoning = arguments = ""
    finish = None
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or ():
                arguments += call["function"].get("arguments", "")
            finish = choice.get("finish_reason") or finish
    return {"reasoning": reasoning, "arguments": arguments, "finish_reason": finish}


def test_max_tool_calls_bounds_the_calls(http: httpx.Client) -> None:
    """Responses `max_tool_calls` (was a 400): at most that many calls in the answer."""
    weather = {
        "type": "function",
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
            "required": ["city"],
        },
    }
    fields = {
        "input": "Weather and time?",
        "tools": [FLAT_TIME, weather],
        "tool_choice": "required",
        "max_output_tokens": 200,
    }
    one = respond(http, max_tool_calls=1, **fields)
    assert one["max_tool_calls"] == 1
    assert [item["type"] for item in one["output"]] == ["function_call"]
    two = respond(http, max_tool_calls=2, **fields)
    calls = [item for item in two["output"] if item["type"] == "function_call"]
    assert 1 <= len(calls) <= 2 and two["max_tool_calls"] == 2
    # Streamed: no item is sent for a call past the limit.
    body = {"model": MODEL, "stream": True, "max_tool_calls": 1, **fields}
    with http.stream("POST", "/v1/responses", json=body) as response:
        assert response.status_code == 200
        lines = response.read().decode().split("\n")
    events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    added = [e["item"]["type"] for e in events if e["type"] == "response.output_item.added"]
    assert added == ["function_call"]
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["function_call"]
    assert final["output"][0]["arguments"] == one["output"][0]["arguments"]


# --- n, prefill ---------------------------------------------------------------------------------


def test_n_above_one_names_the_limit(http: httpx.Client) -> None:
    message = refused(http, "/v1/chat/completions", {"messages": COUNT, "n": 3}, "n")
    assert "n is 3" in message and "n at most 1" in message


def test_a_trailing_assistant_message_is_continued(http: httpx.Client) -> None:
    """Assistant prefill: the answer goes on from the text the client began, in its stead."""
    whole = chat(http, messages=COUNT, max_tokens=30)["choices"][0]["message"]["content"]
    begun = "1 2 3 4 5 6"
    assert whole.startswith(begun)
    messages = [*COUNT, {"role": "assistant", "content": begun}]
    for fields in ({}, {"continue_final_message": True}):
        raw = chat(http, messages=messages, max_tokens=12, **fields)
        rest = raw["choices"][0]["message"]["content"]
        assert rest.startswith(" 7 8 9"), rest
        assert whole.startswith(begun + rest[:8]), (whole, rest)
    # Streamed, the same continuation.
    body = {"model": MODEL, "messages": messages, "max_tokens": 12, "stream": True}
    with http.stream("POST", "/v1/chat/completions", json=body) as response:
        lines = response.read().decode().split("\n")
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == rest
    # The Responses API continues a trailing assistant message too.
    raw = respond(
        http,
        input=[
            {"role": "user", "content": "Count from 1 to 20."},
            {"role": "assistant", "content": begun},
        ],
        max_output_tokens=12,
    )
    assert raw["output"][0]["content"][0]["text"] == rest
    # Chained, the stored turn is the whole answer (begun + continued), one assistant message.
    stored = http.get(f"/v1/responses/{raw['id']}")
    assert stored.status_code == 200
    follow = respond(
        http, previous_response_id=raw["id"], input="Count from 1 to 20.", max_output_tokens=8
    )
    fresh = respond(
        http,
        input=[
            {"role": "user", "content": "Count from 1 to 20."},
            {"role": "assistant", "content": begun + rest},
            {"role": "user", "content": "Count from 1 to 20."},
        ],
        max_output_tokens=8,
    )
    assert follow["output"][0]["content"][0]["text"] == fresh["output"][0]["content"][0]["text"]
    assert follow["usage"]["input_tokens"] == fresh["usage"]["input_tokens"]
    # Text the prefill cannot be: thinking first, or a request that says otherwise.
    refused(http, "/v1/chat/completions", {"messages": messages, **THINK}, "chat_template_kwargs")
    refused(
        http,
        "/v1/chat/completions",
        {"messages": messages, "continue_final_message": False},
        "continue_final_message",
    )
    refused(
        http,
        "/v1/chat/completions",
        {"messages": COUNT, "continue_final_message": True},
        "continue_final_message",
    )


def test_the_chats_remote_client_sends_the_budget(http: httpx.Client, url: str) -> None:
    """The chat window's remote models (core.remote.client) send the thinking budget as
    thinking_token_budget; `serve` honours it as it does a client's."""
    from qwen_mtp_desktop.core.engine import GenerationSettings, Message
    from qwen_mtp_desktop.core.remote.client import RemoteAnswer
    from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint

    endpoint = RemoteEndpoint("t", "t", url, MODEL)
    expected = chat(http, messages=COUNT, max_tokens=40, thinking_token_budget=3, **THINK)
    settings = GenerationSettings(max_new_tokens=40, thinking=True, thinking_budget=3)
    answer = RemoteAnswer(endpoint, KEY, [Message("user", COUNT[0]["content"])], settings)
    answer.run_to_end()
    message = expected["choices"][0]["message"]
    assert answer.reasoning == message["reasoning_content"]
    assert answer.answer == message["content"] and answer.answer.startswith("1 2 3")


def test_a_call_cut_after_a_closed_value_says_where_it_stops(http: httpx.Client) -> None:
    """A forced call cut off by max_tokens just after a parameter's value closed: the
    tool_call_error names where the call stops, not that parameter as unclosed."""
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "enum": ["Paris", "Rome"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7},
                },
                "required": ["city", "days"],
            },
        },
    }
    fields = {
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [weather],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "logprobs": True,
    }
    whole = chat(http, max_tokens=120, **fields)
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    texts = [entry["token"] for entry in whole["choices"][0]["logprobs"]["content"]]
    # The first value is closed after `count` tokens: cut the answer there.
    prefixes = ["".join(texts[:n]) for n in range(1, len(texts) + 1)]
    count = next(n for n, text in enumerate(prefixes, 1) if text.endswith("</parameter>\n"))
    written = prefixes[count - 1]
    cut = chat(http, max_tokens=count, **fields)
    choice = cut["choices"][0]
    assert choice["finish_reason"] == "length" and not choice["message"].get("tool_calls")
    assert choice["message"]["content"] == written
    key = "city" if "<parameter=city>" in written else "days"
    message = cut["tool_call_error"]["message"]
    assert f"stops after parameter {key!r}" in message, message
    assert "not closed" not in message
