"""Conformance of the local API with OpenAI's, through a real `serve` process and its engine
process, over raw HTTP and the `openai` SDK: every endpoint (models, chat completions,
completions, responses and its stored responses), SSE framing (`data: ...` events, `[DONE]`
for chat and completions, none for responses; the Responses event sequence), usage with
`include_usage` and in the Responses shape, error bodies in OpenAI's shape (unknown model,
malformed JSON, missing fields, wrong types, unknown fields, per-message fields), and junk
bodies on /v1/responses (hypothesis)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.remote_server import raw_http
from tests.serve_fixtures import CHAT_MODEL, TIME, described, flat

pytestmark = pytest.mark.subprocess

MODEL = CHAT_MODEL
QUESTION = "Count from 1 to 12."
#: Bounded parameters, so every forced call fits the token budget (as test_serve_tools).
TOOLS = [flat(described(TIME, "The time in a zone."))]
SCHEMA = {
    "type": "object",
    "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
ERROR_KEYS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def client(chat_client: openai.OpenAI) -> openai.OpenAI:
    return chat_client


@pytest.fixture(scope="module")
def http(client: openai.OpenAI) -> Iterator[httpx.Client]:
    with raw_http(client) as http:
        yield http


def raw_stream(http: httpx.Client, path: str, body: dict[str, Any]) -> str:
    with http.stream("POST", path, json={"model": MODEL, "stream": True, **body}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return response.read().decode()


def sse_events(text: str) -> list[str]:
    """The events' data, checking the framing: each event one `data: ...` line and a blank
    line, nothing else."""
    assert text.endswith("\n\n"), text[-200:]
    blocks = text[:-2].split("\n\n")
    data = []
    for block in blocks:
        assert block.startswith("data: ") and "\n" not in block, block[:200]
        data.append(block.removeprefix("data: "))
    return data


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_KEYS, body
    assert body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


# --- models ------------------------------------------------------------------------------------


def test_models_list_and_get(client: openai.OpenAI, http: httpx.Client) -> None:
    raw = http.get("/v1/models").json()
    assert raw["object"] == "list" and [m["id"] for m in raw["data"]] == [MODEL]
    assert {"id", "object", "created", "owned_by"} <= set(raw["data"][0])
    assert [m.id for m in client.models.list()] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    error = error_of(http.get("/v1/models/nope"), 404)
    assert error["code"] == "model_not_found"


# --- SSE framing and usage ---------------------------------------------------------------------


@pytest.mark.parametrize("include_usage", [False, True])
def test_chat_stream_framing_and_usage(http: httpx.Client, include_usage: bool) -> None:
    body = {
        "messages": [{"role": "user", "content": QUESTION}],
        "stream_options": {"include_usage": include_usage},
    }
    data = sse_events(raw_stream(http, "/v1/chat/completions", body))
    assert data[-1] == "[DONE]" and "[DONE]" not in data[:-1]
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    if include_usage:
        *text_chunks, last = chunks
        assert last["choices"] == [] and last["usage"]["completion_tokens"] > 0
        assert all(c["usage"] is None for c in text_chunks)
        usage = last["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    else:
        assert all("usage" not in c for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}


def test_completions_stream_framing_and_usage(http: httpx.Client) -> None:
    body = {"prompt": "1 2 3", "max_tokens": 8, "stream_options": {"include_usage": True}}
    data = sse_events(raw_stream(http, "/v1/completions", body))
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert chunks[-1]["choices"] == [] and 0 < chunks[-1]["usage"]["completion_tokens"] <= 8


def test_sdk_streams_chat_with_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("1 2 3")
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


# --- /v1/responses -----------------------------------------------------------------------------


def test_responses_text_and_usage(client: openai.OpenAI) -> None:
    response = client.responses.create(model=MODEL, input=QUESTION, instructions="Be brief.")
    assert response.object == "response" and response.status == "completed"
    assert response.id.startswith("resp_")
    assert response.output_text.startswith("1 2 3")
    assert [item.type for item in response.output] == ["message"]
    assert response.instructions == "Be brief."
    usage = response.usage
    assert usage is not None and usage.output_tokens > 0 and usage.input_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens >= 0
    assert usage.output_tokens_details.reasoning_tokens == 0
    assert (response.model_extra or {})["mtp"]["mode"] in ("mtp", "plain", "lookup")


def test_responses_input_items_equal_string_input(client: openai.OpenAI) -> None:
    text = client.responses.create(model=MODEL, input=QUESTION).output_text
    items = client.responses.create(
        model=MODEL,
        input=[
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": QUESTION}],
            }
        ],
    )
    assert items.output_text == text


def test_responses_max_output_tokens_is_incomplete(client: openai.OpenAI) -> None:
    response = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None and response.usage.output_tokens == 3


def deltas_as_one(kinds: list[str]) -> list[str]:
    return [k for i, k in enumerate(kinds) if not (k.endswith(".delta") and kinds[i - 1] == k)]


def test_responses_stream_events(http: httpx.Client, client: openai.OpenAI) -> None:
    data = sse_events(raw_stream(http, "/v1/responses", {"input": QUESTION}))
    assert "[DONE]" not in data
    events = [json.loads(d) for d in data]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 1
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    done = next(e for e in events if e["type"] == "response.output_text.done")
    final = events[-1]["response"]
    assert done["text"] == text == final["output"][0]["content"][0]["text"]
    assert final["usage"]["output_tokens"] > 0 and final["status"] == "completed"
    # The SDK's stream helper reads the same events into the same response.
    with client.responses.stream(model=MODEL, input=QUESTION) as stream:
        seen = [event.type for event in stream]
        response = stream.get_final_response()
    # How many deltas depends on how the engine's steps were batched (timing): compare the
    # event kinds with each run of deltas as one.
    assert deltas_as_one(seen) == deltas_as_one(kinds) and response.output_text == text


def test_responses_previous_response_id_store_and_delete(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    first = client.responses.create(model=MODEL, input=QUESTION)
    second = client.responses.create(model=MODEL, input="Again.", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.status == "completed"
    assert client.responses.retrieve(first.id).output_text == first.output_text
    client.responses.delete(first.id)
    assert error_of(http.get(f"/v1/responses/{first.id}"), 404)["code"] == "response_not_found"
    gone = http.post(
        "/v1/responses", json={"model": MODEL, "input": "x", "previous_response_id": first.id}
    )
    error = error_of(gone, 400)
    assert (error["code"], error["param"]) == (
        "previous_response_not_found",
        "previous_response_id",
    )
    unstored = client.responses.create(model=MODEL, input=QUESTION, store=False)
    assert error_of(http.get(f"/v1/responses/{unstored.id}"), 404)


def test_responses_tool_call_round_trip(client: openai.OpenAI, http: httpx.Client) -> None:
    tools: Any = TOOLS
    called = client.responses.create(
        model=MODEL, input="What time is it?", tools=tools, tool_choice="required"
    )
    calls = [item for item in called.output if item.type == "function_call"]
    assert len(calls) >= 1 and calls[0].name == "get_time"
    assert json.loads(calls[0].arguments)["zone"] in ("UTC", "CET")
    result = {"type": "function_call_output", "call_id": calls[0].call_id, "output": "12:00"}
    # Chained by id, and with the items sent back in full: the same answer.
    chained = client.responses.create(
        model=MODEL, input=[result], previous_response_id=called.id, tools=tools
    )
    full = client.responses.create(
        model=MODEL,
        input=[
            {"role": "user", "content": "What time is it?"},
            *[item.model_dump(exclude_none=True) for item in called.output],
            result,
        ],
        tools=tools,
    )
    assert chained.status == full.status == "completed"
    assert chained.output_text == full.output_text
    named = client.responses.create(
        model=MODEL,
        input="What time is it?",
        tools=tools,
        tool_choice={"type": "function", "name": "get_time"},
        parallel_tool_calls=False,
    )
    assert [item.type for item in named.output] == ["function_call"]
    # Streamed: the call as a function_call item with its arguments' delta and done.
    data = sse_events(
        raw_stream(
            http,
            "/v1/responses",
            {"input": "What time is it?", "tools": TOOLS, "tool_choice": "required"},
        )
    )
    events = [json.loads(d) for d in data]
    kinds = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" in kinds
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    added = next(
        e
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"
    )
    assert added["item"]["arguments"] == "" and done["item_id"] == added["item"]["id"]
    assert events[-1]["response"]["output"][-1]["arguments"] == done["arguments"]


def test_responses_json_schema(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        input="Pick a zone.",
        text={"format": {"type": "json_schema", "name": "zone", "schema": SCHEMA, "strict": True}},
    )
    assert json.loads(response.output_text)["zone"] in ("UTC", "CET")
    assert response.text is not None and response.text.format.type == "json_schema"
    plain = client.responses.create(
        model=MODEL, input="A JSON object.", text={"format": {"type": "json_object"}}
    )
    assert isinstance(json.loads(plain.output_text), dict)


def test_responses_thinking_gives_a_reasoning_item(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        input=QUESTION,
        extra_body={"chat_template_kwargs": {"enable_thinking": True}},
        max_output_tokens=64,
    )
    assert response.usage is not None
    if response.usage.output_tokens_details.reasoning_tokens:
        assert response.output[0].type == "reasoning"
        content = response.output[0].content
        assert content and content[0].text


def test_responses_logprobs(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model=MODEL,
        input=QUESTION,
        include=["message.output_text.logprobs"],
        top_logprobs=2,
        max_output_tokens=6,
    )
    part = response.output[0].content[0]  # type: ignore[union-attr]
    assert part.type == "output_text" and part.logprobs is not None and len(part.logprobs) == 6
    assert all(len(entry.top_logprobs) == 2 for entry in part.logprobs)


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]}),
        ("/v1/completions", {"prompt": "x"}),
        ("/v1/responses", {"input": "x"}),
    ],
)
def test_unknown_model_and_malformed_json(
    http: httpx.Client, path: str, body: dict[str, Any]
) -> None:
    error = error_of(http.post(path, json={"model": "nope", **body}), 404)
    assert (error["code"], error["param"], error["type"]) == (
        "model_not_found",
        "model",
        "not_found_error",
    )
    broken = http.post(path, content=b'{"model": ', headers={"Content-Type": "application/json"})
    assert error_of(broken, 400)["code"] == "invalid_json"
    assert error_of(http.post(path, json={"model": MODEL}), 400)["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/chat/completions", {}, "messages"),
        ("/v1/chat/completions", {"messages": "hi"}, "messages"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": "5"},
            "max_tokens",
        ),
        ("/v1/completions", {}, "prompt"),
        ("/v1/responses", {}, "input"),
        ("/v1/responses", {"input": 5}, "input"),
        ("/v1/responses", {"input": "x", "max_output_tokens": "5"}, "max_output_tokens"),
        ("/v1/responses", {"input": "x", "max_tokens": 5}, "max_tokens"),
        ("/v1/responses", {"input": "x", "background": True}, "background"),
        ("/v1/responses", {"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning"),
        ("/v1/responses", {"input": "x", "include": ["reasoning.summary"]}, "include"),
        ("/v1/responses", {"input": "x", "max_tool_calls": 0}, "max_tool_calls"),
        ("/v1/responses", {"input": "x", "tools": [{"type": "web_search"}]}, "tools[0]"),
        ("/v1/responses", {"input": [{"type": "computer_call_output"}]}, "input[0]"),
        (
            "/v1/responses",
            {
                "input": "x",
                "text": {
                    "format": {"type": "json_schema", "name": "a", "schema": {"type": "nope"}}
                },
            },
            "text.format",
        ),
        ("/v1/responses", {"input": "x", "top_logprobs": 2}, "top_logprobs"),
        (
            "/v1/responses",
            {"input": "x", "stream_options": {"include_obfuscation": True}},
            "stream_options",
        ),
        (
            "/v1/responses",
            {"input": [{"type": "function_call_output", "call_id": "c1", "output": "x"}]},
            "input[0].tool_call_id",
        ),
        (
            "/v1/responses",
            {"input": [{"role": "user", "content": "x"}], "tool_choice": "required"},
            "tool_choice",
        ),
    ],
)
def test_bad_requests_name_the_field(
    http: httpx.Client, path: str, body: dict[str, Any], param: str
) -> None:
    error = error_of(http.post(path, json={"model": MODEL, **body}), 400)
    assert error["param"] is not None and error["param"].startswith(param), error


@pytest.mark.parametrize(
    ("message", "param"),
    [
        ({"role": "user", "content": "x", "name": "ann"}, "messages[0].name"),
        ({"role": "user", "content": "x", "audio": {"id": "a"}}, "messages[0].audio"),
        ({"role": "user", "content": "x", "refusal": "no"}, "messages[0].refusal"),
        ({"role": "user", "content": "x", "unknown": 1}, "messages[0].unknown"),
        (
            {"role": "user", "content": [{"type": "text", "text": "x", "extra": 1}]},
            "messages[0].content",
        ),
    ],
)
def test_chat_message_fields_are_honoured_or_refused(
    http: httpx.Client, message: dict[str, Any], param: str
) -> None:
    body = {"model": MODEL, "messages": [message]}
    error = error_of(http.post("/v1/chat/completions", json=body), 400)
    assert error["param"] is not None and error["param"].startswith(param), error


def test_chat_refusal_and_function_call(http: httpx.Client) -> None:
    refused = [
        {"role": "user", "content": "Say something rude."},
        {"role": "assistant", "refusal": "I cannot help with that."},
        {"role": "user", "content": QUESTION},
    ]
    answer = http.post("/v1/chat/completions", json={"model": MODEL, "messages": refused})
    assert answer.status_code == 200, answer.text
    legacy = [{"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}]
    body = {"model": MODEL, "messages": [*legacy, {"role": "user", "content": "x"}]}
    error = error_of(http.post("/v1/chat/completions", json=body), 400)
    assert error["param"] == "messages[0].function_call"


@pytest.mark.parametrize(
    ("options", "stream"),
    [({"include_usage": True}, False), ({"include_obfuscation": True}, True), ({"x": 1}, True)],
)
def test_stream_options_keys(http: httpx.Client, options: dict[str, Any], stream: bool) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x"}],
        "stream": stream,
        "stream_options": options,
    }
    error = error_of(http.post("/v1/chat/completions", json=body), 400)
    assert error["param"] is not None and error["param"].startswith("stream_options")


def test_sdk_raises_openai_errors(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="nope", input="x")
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model=MODEL, input="x", previous_response_id="resp_missing")
    assert caught.value.code == "previous_response_not_found"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_item = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(
            ["message", "function_call", "function_call_output", "reasoning", "x"]
        )
        | _json,
        "role": st.sampled_from(["user", "assistant", "system", "tool"]) | _json,
        "content": st.text(max_size=10)
        | st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.sampled_from(["input_text", "output_text", "input_image"]),
                    "text": st.text(max_size=5),
                }
            ),
            max_size=2,
        )
        | _json,
        "call_id": st.text(max_size=5) | _json,
        "name": st.sampled_from(["get_time", "f"]) | _json,
        "arguments": st.sampled_from(["{}", '{"zone": "UTC"}', "[", ""]) | _json,
        "output": st.text(max_size=5) | _json,
    },
)
_responses_body = st.fixed_dictionaries(
    {"model": st.just(MODEL), "max_output_tokens": st.integers(1, 4)},
    optional={
        "input": st.text(max_size=10) | st.lists(_item, max_size=3) | _json,
        "instructions": st.text(max_size=10) | _json,
        "stream": st.booleans(),
        "tools": st.just(TOOLS) | _json,
        "tool_choice": st.sampled_from(["auto", "none", "required"]) | _json,
        "text": st.fixed_dictionaries(
            {"format": st.sampled_from([{"type": "json_object"}, {"type": "text"}]) | _json}
        )
        | _json,
        "previous_response_id": st.text(max_size=8) | _json,
        "store": st.booleans() | _json,
        "temperature": st.sampled_from([0, 0.5, 3]) | _json,
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_responses_body.map(json.dumps) | _json.map(json.dumps) | st.text(max_size=40))
def test_junk_responses_bodies_never_break_the_server(http: httpx.Client, body: str) -> None:
    response = http.post(
        "/v1/responses", content=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    if response.status_code != 200:
        error_of(response, response.status_code)
    elif response.headers["content-type"].startswith("text/event-stream"):
        events = [json.loads(d) for d in sse_events(response.text)]
        assert events[-1]["type"] in ("response.completed", "response.incomplete")
    else:
        assert response.json()["object"] == "response"
