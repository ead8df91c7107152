"""Remote models' core (core.remote): the saved endpoints file, base URLs, the key store and
the streaming client's reading of what a server sends, with generated hostile input. The
client reads from a real HTTP server on 127.0.0.1 (tests/remote_server.canned_server)."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from keyring.backends import fail

from qwen_mtp_desktop.core.chat.tools import read_calls
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.engine import GenerationSettings, Message, ToolCallRecord
from qwen_mtp_desktop.core.remote.client import (
    MAX_NOTICE_CHARS,
    RemoteAnswer,
    event_notice,
    list_models,
    request_body,
    server_stats,
)
from qwen_mtp_desktop.core.remote.endpoints import (
    EndpointError,
    RemoteEndpoint,
    endpoint_id,
    endpoints_file,
    load_endpoints,
    normalize_base_url,
    remote_ref,
    save_endpoints,
)
from qwen_mtp_desktop.core.remote.errors import RemoteError
from qwen_mtp_desktop.core.remote.inbox import CLOSED, Batch, Inbox
from qwen_mtp_desktop.core.remote.keys import MEMORY_ONLY, KeyStore
from qwen_mtp_desktop.core.remote.sse import iter_sse
from qwen_mtp_desktop.core.tools.calls import Calls, Malformed, Text
from qwen_mtp_desktop.ui.chat.transcript.message import format_stats
from tests.remote_server import canned_server

SLOW = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# --- base URLs and references ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000/v1"),
        (" HTTPS://Example.COM/v3/ ", "https://example.com/v3"),
        ("http://[::1]:8000", "http://[::1]:8000/v1"),
    ],
)
def test_base_urls_are_normalized(text: str, expected: str) -> None:
    assert normalize_base_url(text) == expected


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("ftp://host/v1", "http:// or https://"),
        ("http://user:pw@host/v1", "user name or password"),
        ("http://host/v1?x=1", "query"),
        ("http://host:99999/v1", "not a valid URL"),
        ("http://host name/v1", "spaces"),
        ("http:///v1", "no host"),
    ],
)
def test_bad_base_urls_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(EndpointError) as caught:
        normalize_base_url(text)
    assert needle in str(caught.value)


@given(st.text(max_size=80))
def test_any_text_is_a_url_or_a_plain_refusal(text: str) -> None:
    try:
        url = normalize_base_url(text)
    except EndpointError as exc:
        assert exc.message
        return
    assert url.startswith(("http://", "https://"))
    assert normalize_base_url(url) == url  # saving and loading again changes nothing


def test_remote_references_round_trip() -> None:
    assert endpoint_id(remote_ref("ab12cd")) == "ab12cd"
    assert endpoint_id(Path("/models/remote:ab12")) is None
    assert endpoint_id("remote:../../etc") is None


# --- the endpoints file -----------------------------------------------------------------------

_endpoint = st.builds(
    RemoteEndpoint,
    id=st.text("abcdef0123456789", min_size=1, max_size=12),
    name=st.text(
        st.characters(min_codepoint=32, blacklist_characters="\x7f"), min_size=1, max_size=120
    )
    .map(str.strip)
    .filter(bool),
    base_url=st.sampled_from(["http://127.0.0.1:8000/v1", "https://gpu.lan/v3"]),
    model=st.text(
        st.characters(max_codepoint=0x2FFF, blacklist_categories=("Cc", "Zs", "Zl", "Zp")),
        min_size=1,
        max_size=40,
    ),
    has_key=st.booleans(),
)


@SLOW
@given(st.lists(_endpoint, max_size=5, unique_by=lambda e: e.id))
def test_endpoints_round_trip_and_leave_no_temp_file(endpoints: list[RemoteEndpoint]) -> None:
    save_endpoints(endpoints)
    assert load_endpoints().endpoints == endpoints
    assert load_endpoints().problems == []
    assert [p.name for p in endpoints_file().parent.iterdir()] == [endpoints_file().name]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text(max_size=40) | _json,
        "name": st.text(max_size=300) | _json,
        "base_url": st.text(max_size=80) | st.just("http://h:1/v1") | _json,
        "model": st.text(max_size=600) | _json,
        "has_key": _json,
    },
)


@SLOW
@given(
    st.one_of(
        st.binary(max_size=300),
        _json.map(lambda v: json.dumps(v).encode()),
        st.lists(_entry | _json, max_size=6).map(
            lambda items: json.dumps({"schema_version": 1, "endpoints": items}).encode()
        ),
        st.integers(1, 200).map(lambda depth: ("[" * depth + "]" * depth).encode()),
    )
)
def test_a_hostile_endpoints_file_never_breaks_loading(content: bytes) -> None:
    path = endpoints_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    loaded = load_endpoints()  # never raises
    for endpoint in loaded.endpoints:
        assert endpoint_id(endpoint.ref) == endpoint.id
        assert normalize_base_url(endpoint.base_url) == endpoint.base_url
        assert endpoint.name and endpoint.model and isinstance(endpoint.has_key, bool)
    assert len({e.id for e in loaded.endpoints}) == len(loaded.endpoints)
    assert path.read_bytes() == content  # reading never rewrites the user's file


def test_a_fifo_as_the_endpoints_file_is_refused_not_waited_on() -> None:
    path = endpoints_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    loaded = load_endpoints()
    assert loaded.endpoints == [] and "named pipe" in loaded.problems[0]


# --- keys -------------------------------------------------------------------------------------


def test_without_a_keychain_keys_live_in_memory_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store = KeyStore()  # this machine has no Secret Service: keyring's fail backend
    assert not store.keychain and store.where == MEMORY_ONLY
    store.set("ab", "sk-secret-123")
    assert store.get("ab") == "sk-secret-123"
    assert KeyStore().get("ab") is None  # a new app run has forgotten it
    store.delete("ab")
    assert store.get("ab") is None
    # A keychain that refuses (keyring's own failing backend, given as if it were usable):
    # the key stays usable for this session, and the log never holds it.
    refusing = KeyStore(fail.Keyring())
    assert refusing.keychain
    refusing.set("cd", "sk-secret-456")
    assert refusing.get("cd") == "sk-secret-456"
    assert "sk-secret" not in caplog.text and "refused the key" in caplog.text


# --- what a server sends ----------------------------------------------------------------------

ENDPOINT_MODEL = "m"


def _answer(url: str) -> RemoteAnswer:
    endpoint = RemoteEndpoint("t", "t", url, ENDPOINT_MODEL)
    return RemoteAnswer(endpoint, None, [Message("user", "hi")], GenerationSettings())


def _sse(events: list[str]) -> bytes:
    return "".join(f"data: {event}\n\n" for event in events).encode()


def _chunk(content: str, finish: str | None = None, **extra: Any) -> str:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return json.dumps({"object": "chat.completion.chunk", "choices": [choice], **extra})


def _ending(usage: dict[str, Any], mtp: dict[str, Any]) -> list[str]:
    """A stream's last events as `serve` sends them: the finish, the usage, [DONE]."""
    return [
        _chunk("", "stop", mtp=mtp),
        json.dumps({"choices": [], "usage": usage, "mtp": mtp}),
        "[DONE]",
    ]


def test_a_well_formed_stream_with_usage_and_mtp_statistics() -> None:
    mtp = {
        "mode": "mtp",
        "draft_tokens_per_step": 2,
        "drafted_tokens": 8,
        "accepted_tokens": 6,
        "acceptance_rate": 0.75,
        "mean_accepted_per_step": 1.5,
        "steps": 5,
    }
    usage = {"prompt_tokens": 7, "completion_tokens": 11}
    body = (
        _sse([_chunk("Hel")])
        + b": keep-alive comment\r\n\r\n"
        + _sse([_chunk("lo"), *_ending(usage, mtp)])
    )
    with canned_server() as (url, handler):
        handler.body = body
        answer = _answer(url)
        stats = answer.run_to_end()
    assert answer.answer == "Hello"
    assert stats.method == DecodingMethod.mtp(2)
    assert stats.acceptance_rate == 0.75 and stats.generated_tokens == 11
    assert stats.prompt_tokens == 7 and stats.finish_reason == "eos"
    assert stats.remote is not None and stats.remote["server_stats"]["accepted_tokens"] == 6


@pytest.mark.parametrize("server_tps", [42.5, None])
def test_an_answer_in_one_event_takes_the_servers_decode_speed(server_tps: float | None) -> None:
    """A server that batched every step into one event leaves the client nothing to time:
    the server's own decode speed is shown, marked as the server's; without one, none."""
    mtp: dict[str, Any] = {"mode": "mtp", "draft_tokens_per_step": 2, "steps": 5}
    if server_tps is not None:
        mtp["decode_tokens_per_s"] = server_tps
    usage = {"prompt_tokens": 7, "completion_tokens": 11}
    with canned_server() as (url, handler):
        handler.body = _sse([_chunk("Hello, world."), *_ending(usage, mtp)])
        stats = _answer(url).run_to_end()
    assert stats.remote is not None and stats.remote["timing"] == "client"
    if server_tps is None:
        assert stats.decode_tokens_per_s == 0.0 and stats.remote["decode_timing"] == "client"
    else:
        assert stats.decode_tokens_per_s == server_tps
        assert stats.remote["decode_timing"] == "server"


@pytest.mark.parametrize(
    ("details", "reused"),
    [
        ({"cached_tokens": 5}, 5),  # the server kept 5 of the 7 prompt tokens' state
        ({"cached_tokens": 70}, 7),  # more than the prompt: capped, never shown as more
        ({"cached_tokens": "5"}, 0),  # not a count: ignored
        ({"cached_tokens": -1}, 0),
        ("cached", 0),
        (None, 0),  # a server that does not report it (OpenAI-compatible servers may not)
    ],
)
def test_reused_prompt_tokens_from_the_servers_cached_tokens(details: object, reused: int) -> None:
    usage: dict[str, Any] = {"prompt_tokens": 7, "completion_tokens": 2}
    if details is not None:
        usage["prompt_tokens_details"] = details
    body = _sse([_chunk("ok"), _chunk("", "stop"), json.dumps({"choices": [], "usage": usage})])
    with canned_server() as (url, handler):
        handler.body = body + _sse(["[DONE]"])
        stats = _answer(url).run_to_end()
    assert stats.reused_tokens == reused and stats.prompt_tokens == 7
    shown = format_stats(stats.to_json_dict()).replace("\u00a0", " ")
    assert ("5 of 7 prompt tokens reused" in shown) == (reused == 5)


def test_a_server_without_statistics_shows_no_acceptance() -> None:
    with canned_server() as (url, handler):
        handler.body = _sse([_chunk("ok"), _chunk("", "length"), "[DONE]"])
        answer = _answer(url)
        stats = answer.run_to_end()
    assert answer.answer == "ok" and stats.finish_reason == "length"
    assert stats.method == PLAIN and stats.drafted_tokens == 0 and stats.acceptance_rate == 0
    assert stats.remote is not None and stats.remote["server_stats"] is None
    assert stats.generated_tokens == 0 and stats.remote["tokens_reported"] is False


@pytest.mark.parametrize(
    ("status", "body", "code", "needle"),
    [
        (401, '{"error": {"message": "bad key"}}', "REMOTE_UNAUTHORIZED", "HTTP 401"),
        (403, "", "REMOTE_FORBIDDEN", "refused access"),
        (
            404,
            '{"error": {"code": "model_not_found", "message": "x"}}',
            "REMOTE_MODEL_NOT_FOUND",
            "no model named 'm'",
        ),
        (404, "<html>Not Found</html>", "REMOTE_NOT_FOUND", "/v3 for OpenVINO Model Server"),
        (429, '{"error": {"message": "queue full"}}', "REMOTE_BUSY", "Wait a moment"),
        (503, "", "REMOTE_UNAVAILABLE", "try again in a moment"),
        (500, "\x00boom\x1b[31m", "REMOTE_SERVER_ERROR", "HTTP 500"),
    ],
)
def test_http_errors_are_plain(status: int, body: str, code: str, needle: str) -> None:
    with canned_server() as (url, handler):
        handler.status, handler.body, handler.content_type = status, body.encode(), "text/plain"
        with pytest.raises(RemoteError) as streamed:
            _answer(url).run_to_end()
        with pytest.raises(RemoteError) as listed:
            list_models(RemoteEndpoint("t", "t", url, ENDPOINT_MODEL), None)
    for caught in (streamed, listed):
        assert caught.value.code == code and needle in str(caught.value)
        assert "\x00" not in str(caught.value) and "\x1b" not in str(caught.value)


def test_a_json_reply_to_a_stream_request_is_named() -> None:
    with canned_server() as (url, handler):
        handler.body, handler.content_type = b'{"choices": []}', "application/json"
        with pytest.raises(RemoteError) as caught:
            _answer(url).run_to_end()
    assert caught.value.code == "REMOTE_BAD_REPLY" and "not an event stream" in str(caught.value)


_event = st.one_of(
    st.text(max_size=12).map(_chunk),
    st.text(max_size=40),  # not JSON
    _json.map(json.dumps),  # JSON of any shape
    st.builds(
        lambda mtp: json.dumps({"choices": [], "mtp": mtp}),
        st.dictionaries(
            st.sampled_from(
                ["mode", "drafted_tokens", "acceptance_rate", "acceptance_by_position", "steps"]
            ),
            _json,
        ),
    ),
    st.builds(lambda m: json.dumps({"error": {"message": m}}), _json),
    st.just("[DONE]"),
)


@pytest.fixture(scope="module")
def canned() -> Iterator[tuple[str, Any]]:
    with canned_server() as served:
        yield served


@SLOW
@given(st.lists(_event, max_size=8), st.booleans())
def test_hostile_streams_end_in_stats_or_a_plain_error(
    canned: tuple[str, Any], events: list[str], cut: bool
) -> None:
    """Whatever a server streams: the text before the first bad event is kept, the answer
    ends with stats or a RemoteError, and the server's figures are only ever in range."""
    body = _sse(events)
    if cut:
        body = body[: len(body) // 2]
    url, handler = canned
    handler.body = body
    answer = _answer(url)
    try:
        stats = answer.run_to_end()
    except RemoteError as exc:
        assert exc.message and exc.code.startswith("REMOTE"), exc
        stats = answer.stats
    assert stats is not None
    assert 0.0 <= stats.acceptance_rate <= 1.0
    assert all(0.0 <= share <= 1.0 for share in stats.acceptance_by_position)
    expected = ""
    for event in events:
        try:
            parsed = json.loads(event)
        except ValueError:
            break
        choices = parsed.get("choices") if isinstance(parsed, dict) else None
        if not isinstance(parsed, dict) or "error" in parsed:
            break
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            delta = choices[0].get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(content, str):
                expected += content
    assert expected.startswith(answer.answer) or cut


@given(
    st.lists(
        st.lists(
            st.text(st.characters(blacklist_characters="\r\n"), max_size=10), min_size=1, max_size=3
        ),
        max_size=5,
    )
)
def test_sse_data_lines_join_back(events: list[list[str]]) -> None:
    lines: list[str] = []
    for data_lines in events:
        lines += [f"data: {line}" for line in data_lines] + [""]
    assert list(iter_sse(lines)) == ["\n".join(d) for d in events]


def test_server_stats_drop_values_out_of_range() -> None:
    raw = {
        "mode": "mtp",
        "draft_tokens_per_step": 2,
        "acceptance_rate": 7,
        "drafted_tokens": -1,
        "steps": True,
        "acceptance_by_position": [0.5, "x"],
        "decoder": "app",
    }
    assert server_stats(raw) == {
        "mode": "mtp",
        "method": DecodingMethod.mtp(2).to_record(),
        "draft_tokens_per_step": 2,
        "decoder": "app",
    }
    assert server_stats({"mode": "warp"}) is None
    # A method this app cannot run is no method: no figures rather than wrong ones.
    assert server_stats({"mode": "mtp"}) is None
    assert server_stats({"mode": "mtp", "draft_tokens_per_step": 10**6}) is None


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ({"notice": "Earlier messages were left out."}, "Earlier messages were left out."),
        ({"notice": "line\nbreak\x1b[31m"}, "line break [31m"),  # one printable line
        ({"notice": "   "}, None),
        ({"notice": 3}, None),
        ({"notice": ["x"]}, None),
        ({}, None),
        ([], None),
    ],
)
def test_a_servers_notice_is_one_bounded_printable_line(
    event: object, expected: str | None
) -> None:
    assert event_notice(json.dumps(event)) == expected


@given(st.text(max_size=3000))
def test_any_notice_text_is_bounded(text: str) -> None:
    notice = event_notice(json.dumps({"notice": text}))
    assert notice is None or (len(notice) <= MAX_NOTICE_CHARS + 1 and notice.isprintable())
    assert event_notice(text) is None or text.lstrip().startswith("{")


def test_server_stats_read_the_method_record_and_older_servers_mode() -> None:
    """This app's `serve` sends the whole method; an older one (and other servers that copy
    the object) only "mode" and "draft_tokens_per_step", where prompt lookup's n-gram size
    is not said (the default is assumed)."""
    lookup = DecodingMethod.lookup(6, 2)
    newer = server_stats(
        {"mode": "lookup", "draft_tokens_per_step": 6, "method": lookup.to_record()}
    )
    assert newer is not None and newer["method"] == lookup.to_record()
    older = server_stats({"mode": "lookup", "draft_tokens_per_step": 6})
    assert older is not None and older["method"] == DecodingMethod.lookup(6).to_record()
    plain = server_stats({"mode": "plain", "draft_tokens_per_step": 0})
    assert plain is not None and plain["method"] == PLAIN.to_record()
    assert server_stats({"mode": "mtp", "draft_tokens_per_step": 2, "method": "x"}) is None


# --- the answer's inbox (core.remote.inbox) ------------------------------------------------------


@given(st.lists(st.text(max_size=50), max_size=40), st.integers(1, 120), st.integers(1, 80))
def test_the_inbox_hands_over_everything_in_order_within_its_bound(
    pieces: list[str], max_pending: int, max_batch: int
) -> None:
    inbox: Inbox[str] = Inbox(max_pending_chars=max_pending, max_batch_chars=max_batch)
    taken: list[Batch] = []
    most = 0

    def consume() -> None:
        nonlocal most
        while True:
            most = max(most, inbox._pending)
            item = inbox.take(5)
            if not isinstance(item, Batch):
                assert item == "end"
                return
            taken.append(item)

    consumer = threading.Thread(target=consume)
    consumer.start()
    for index, piece in enumerate(pieces):
        assert inbox.put_text(piece, "", float(index))
    inbox.put_end("end")
    consumer.join(10)
    assert "".join(batch.answer for batch in taken) == "".join(pieces)
    assert sum(batch.events for batch in taken) == len(pieces)
    assert all(batch.first_at <= batch.last_at for batch in taken)
    # The reader waits once the bound is reached: at most one piece beyond it waits.
    assert most <= max_pending + 50


def test_closing_the_inbox_wakes_a_waiting_reader_and_drops_the_backlog() -> None:
    inbox: Inbox[str] = Inbox(max_pending_chars=10)
    assert inbox.put_text("x" * 10, "", 0.0)
    results: list[bool] = []
    reader = threading.Thread(target=lambda: results.append(inbox.put_text("y", "", 1.0)))
    reader.start()
    time.sleep(0.1)
    assert reader.is_alive()  # the inbox is full: the reader waits
    inbox.close()
    reader.join(2)
    assert results == [False]
    assert inbox.take(0) is CLOSED  # what waited is dropped: Stop is the next thing taken


# --- tools ------------------------------------------------------------------------------------

TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
    },
}


def test_tools_and_earlier_calls_go_out_as_openai_reads_them() -> None:
    settings = GenerationSettings(tools_json=json.dumps([TOOL]), tool_choice="add")
    messages = [
        Message("user", "1 + 2?"),
        Message("assistant", "", tool_calls=(ToolCallRecord("call_1", "add", '{"a": 1}'),)),
        Message("tool", "3", tool_call_id="call_1"),
    ]
    body = request_body("m", messages, settings)
    assert body["tools"] == [TOOL]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert body["messages"] == [
        {"role": "user", "content": "1 + 2?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "add", "arguments": '{"a": 1}'}}
            ],
        },
        {"role": "tool", "content": "3", "tool_call_id": "call_1"},
    ]  # fmt: skip
    plain = request_body("m", messages[:1], GenerationSettings())
    assert "tools" not in plain and "tool_choice" not in plain
    auto = request_body("m", messages[:1], GenerationSettings(tools_json=json.dumps([TOOL])))
    assert auto["tools"] == [TOOL] and "tool_choice" not in auto


def test_thinking_and_its_budget_go_out_only_when_asked_for() -> None:
    question = [Message("user", "hi")]
    assert "chat_template_kwargs" not in request_body("m", question, GenerationSettings())
    off = request_body("m", question, GenerationSettings(thinking_budget=64))
    assert "thinking_token_budget" not in off and "chat_template_kwargs" not in off
    thinks = request_body("m", question, GenerationSettings(thinking=True))
    assert thinks["chat_template_kwargs"] == {"enable_thinking": True}
    assert "thinking_token_budget" not in thinks
    budget = request_body("m", question, GenerationSettings(thinking=True, thinking_budget=64))
    assert budget["thinking_token_budget"] == 64


def _call_chunk(*entries: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": {"tool_calls": list(entries)}, "finish_reason": finish}
    return json.dumps({"object": "chat.completion.chunk", "choices": [choice]})


def test_streamed_tool_calls_are_joined_by_index() -> None:
    head = {"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "add", "arguments": ""}}  # fmt: skip
    repeated = {"index": 1, "id": "call_b", "function": {"name": "add", "arguments": '{"a"'}}
    body = _sse(
        [
            _chunk("Let me add."),
            _call_chunk(head),
            _call_chunk({"index": 0, "function": {"arguments": '{"a": '}}),
            _call_chunk({"index": 0, "function": {"arguments": "1}"}}),
            _call_chunk(repeated),  # a server that repeats the id and name in each delta
            _call_chunk({**repeated, "function": {"name": "add", "arguments": ": 2}"}}),
            _chunk("", "tool_calls"),
            "[DONE]",
        ]
    )
    with canned_server() as (url, handler):
        handler.body = body
        answer = _answer(url)
        stats = answer.run_to_end()
    assert answer.answer == "Let me add." and stats.finish_reason == "eos"
    assert stats.remote is not None
    assert stats.remote["tool_calls"] == [
        {"id": "call_a", "name": "add", "arguments": '{"a": 1}'},
        {"id": "call_b", "name": "add", "arguments": '{"a": 2}'},
    ]
    # The chat's loop reads them as it reads a local model's calls.
    parsed = read_calls(answer.answer, stats.remote, [TOOL])
    assert isinstance(parsed, Calls) and parsed.content == "Let me add."
    assert [(c.id, c.name, c.arguments) for c in parsed.calls] == [
        ("call_a", "add", '{"a": 1}'),
        ("call_b", "add", '{"a": 2}'),
    ]
    other = [{**TOOL, "function": {**TOOL["function"], "name": "sub"}}]
    unoffered = read_calls(answer.answer, stats.remote, other)
    assert isinstance(unoffered, Malformed) and "'add'" in unoffered.reason
    assert read_calls("plain", {"endpoint": "t"}, [TOOL]) == Text("plain")


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ({"index": 0, "function": {"arguments": "{}"}}, "without a function name"),
        ({"index": 0, "function": {"name": "add", "arguments": "[1]"}}, "not a JSON object"),
        ({"index": 0, "function": {"name": "add", "arguments": '{"a": '}}, "not a JSON object"),
        ({"index": 999, "function": {"name": "add"}}, "index"),
        ({"index": 0, "function": {"name": 7}}, "not text"),
        ({"index": 0, "function": "add"}, "not an object"),
    ],
)
def test_a_bad_tool_call_is_a_plain_error(entry: dict[str, Any], needle: str) -> None:
    with canned_server() as (url, handler):
        handler.body = _sse([_call_chunk(entry), _chunk("", "tool_calls"), "[DONE]"])
        with pytest.raises(RemoteError) as caught:
            _answer(url).run_to_end()
    assert caught.value.code == "REMOTE_BAD_REPLY" and needle in caught.value.message


def test_calls_cut_by_the_token_limit_are_not_calls() -> None:
    cut = {"index": 0, "id": "c", "function": {"name": "add", "arguments": '{"a": '}}
    with canned_server() as (url, handler):
        handler.body = _sse([_call_chunk(cut), _chunk("", "length"), "[DONE]"])
        stats = _answer(url).run_to_end()
    assert stats.finish_reason == "length" and stats.remote is not None
    assert "tool_calls" not in stats.remote
