"""The local OpenAI-compatible API server, really served (uvicorn on a free port, in a thread)
over the real engine and the demo model, driven by the official `openai` client and by raw
HTTP for what a well-behaved client never sends."""

from __future__ import annotations

import base64
import io
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.engine import LoadOptions
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.server import ServerConfig, ServerHandle, TurnDefaults, start_server_thread
from qwen_mtp_desktop.server.http.connections import ConnectionLimits

pytestmark = pytest.mark.model

API_KEY = "test-key-0123456789"
MODEL = "demo-model"
#: A request body limit small enough to test cheaply (the default is 32 MiB).
BODY_LIMIT = 256 * 1024


@pytest.fixture(scope="module")
def service(demo_model: Path) -> Iterator[EngineService]:
    service = EngineService()
    with service.exclusive() as engine:
        engine.load(demo_model, LoadOptions())
    yield service
    with service.exclusive() as engine:
        engine.unload()


@pytest.fixture(scope="module")
def server(service: EngineService) -> Iterator[ServerHandle]:
    handle = start_server_thread(
        service,
        ServerConfig(
            port=0,
            api_key=API_KEY,
            max_body_bytes=BODY_LIMIT,
            defaults=TurnDefaults(max_tokens=64),
        ),
    )
    yield handle
    handle.stop()
    assert not handle.running


@pytest.fixture(scope="module")
def client(server: ServerHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120
    ) as http:
        yield http


def chat(client: openai.OpenAI, prompt: str, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}], **kwargs
    )


def mtp_of(response: Any) -> dict[str, Any]:
    extra = response.model_extra or {}
    assert "mtp" in extra, f"no mtp object in {response}"
    mtp: dict[str, Any] = extra["mtp"]
    return mtp


def assert_healthy(server: ServerHandle) -> None:
    """The server still answers a real request after whatever the test threw at it."""
    result = httpx.post(
        f"{server.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {API_KEY}"},
        json={"model": MODEL, "messages": [{"role": "user", "content": "Count from 1 to 3."}]},
        timeout=60,
    )
    assert result.status_code == 200, result.text
    assert result.json()["choices"][0]["message"]["content"].split() == ["1", "2", "3"]


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> str:
    assert response.status_code == status, response.text
    assert "Traceback" not in response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "code"} and error["message"], error
    if code is not None:
        assert error["code"] == code, error
    message: str = error["message"]
    return message


# --- what a client sees ------------------------------------------------------------------------


def test_models_list_and_retrieve(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert client.models.retrieve(MODEL).id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


def test_chat_answers_with_usage_and_mtp_statistics(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": "Count from 1 to 12."}]
    )
    response = raw.parse()
    assert raw.headers["x-queue-position"] == "0"
    assert int(raw.headers["x-queue-wait-ms"]) >= 0
    choice = response.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content.split() == [str(i) for i in range(1, 13)]
    assert choice.finish_reason == "stop"
    usage = response.usage
    assert usage is not None and usage.prompt_tokens > 5
    details = usage.prompt_tokens_details
    assert details is not None and 0 <= (details.cached_tokens or 0) <= usage.prompt_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    mtp = mtp_of(response)
    assert mtp["mode"] == "mtp" and mtp["draft_tokens_per_step"] == 1
    assert mtp["method"] == {
        "kind": "mtp",
        "drafts": 1,
        "ngram": 0,
        "sampling": {
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "seed": None,
        },
    }
    assert mtp["decoder"] == "app" and mtp["decoding"] == "fixed"
    # One target token per step plus the accepted drafts: the statistics add up.
    assert mtp["steps"] + mtp["accepted_tokens"] == usage.completion_tokens
    assert 0 < mtp["accepted_tokens"] <= mtp["drafted_tokens"]
    assert mtp["acceptance_rate"] == pytest.approx(
        mtp["accepted_tokens"] / mtp["drafted_tokens"], abs=1e-4
    )
    assert mtp["mean_accepted_per_step"] == pytest.approx(
        mtp["accepted_tokens"] / (mtp["steps"] - 1), abs=1e-4
    )
    assert len(mtp["acceptance_by_position"]) == 1
    assert mtp["decode_tokens_per_s"] > 0 and 0 < mtp["ttft_s"] <= mtp["total_s"]
    assert mtp["queue_wait_s"] >= 0 and mtp["switched_to_plain_after_tokens"] is None


def test_streaming_matches_the_whole_answer(client: openai.OpenAI) -> None:
    whole = chat(client, "Count from 3 to 17.")
    stream = chat(
        client, "Count from 3 to 17.", stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finish) == 1 and finish[0].choices[0].finish_reason == "stop"
    assert mtp_of(finish[0])["mode"] == "mtp"
    # include_usage: one more chunk, no choices, the usage (and every earlier chunk says null).
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert mtp_of(last)["drafted_tokens"] == mtp_of(whole)["drafted_tokens"]


def test_stream_without_usage_has_none(client: openai.OpenAI) -> None:
    chunks = list(chat(client, "Count from 1 to 4.", stream=True))
    assert all(getattr(c, "usage", None) is None for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks).split() == list("1234")


def test_stop_strings_end_the_answer(client: openai.OpenAI) -> None:
    full = chat(client, "Count from 1 to 9.").choices[0].message.content
    for stop in ("5", ["7", "4"]):
        response = chat(client, "Count from 1 to 9.", stop=stop)
        first = min(full.index(s) for s in ([stop] if isinstance(stop, str) else stop))
        assert response.choices[0].message.content == full[:first]
        assert response.choices[0].finish_reason == "stop"
        streamed = chat(client, "Count from 1 to 9.", stop=stop, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert text == full[:first]


def test_max_tokens_gives_length(client: openai.OpenAI) -> None:
    for field in ("max_tokens", "max_completion_tokens"):
        response = chat(client, "Count from 1 to 20.", **{field: 5})
        assert response.choices[0].finish_reason == "length"
        assert response.usage.completion_tokens == 5


def test_request_depth_and_system_prompt(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "You count."},
            {"role": "user", "content": [{"type": "text", "text": "Count from 1 to 15."}]},
        ],
        extra_body={"num_assistant_tokens": 3},
    )
    mtp = mtp_of(response)
    assert mtp["draft_tokens_per_step"] == 3 and len(mtp["acceptance_by_position"]) == 3
    assert response.choices[0].message.content.split()[:3] == ["1", "2", "3"]


def test_sampling_keeps_mtp(client: openai.OpenAI) -> None:
    first = chat(client, "Count from 1 to 6.", temperature=0.8, seed=7)
    second = chat(client, "Count from 1 to 6.", temperature=0.8, seed=7)
    assert mtp_of(first)["mode"] == "mtp" and mtp_of(first)["drafted_tokens"] > 0
    sampling = mtp_of(first)["method"]["sampling"]
    assert (sampling["temperature"], sampling["top_k"], sampling["seed"]) == (0.8, 20, 7)
    assert first.choices[0].message.content == second.choices[0].message.content


def test_multi_turn_conversation(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "user", "content": "Count from 1 to 3."},
            {"role": "assistant", "content": "1 2 3"},
            {"role": "user", "content": "Count from 4 to 6."},
        ],
    )
    assert response.choices[0].message.content.split() == ["4", "5", "6"]


def test_greedy_output_equals_generate(client: openai.OpenAI, demo_model: Path) -> None:
    for prompt, extra in (("Count from 5 to 19.", []), ("Say 'we like apples' three times.", [])):
        result = subprocess.run(
            [sys.executable, "-m", "qwen_mtp_desktop", "generate", str(demo_model), prompt,
             "--json", "--max-new-tokens", "64", *extra],
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        expected = json.loads(result.stdout)
        response = chat(client, prompt, max_tokens=64)
        assert response.choices[0].message.content == expected["text"]
        assert response.usage.completion_tokens == expected["stats"]["generated_tokens"]
        assert response.usage.prompt_tokens == expected["stats"]["prompt_tokens"]


def test_image_part_on_the_vision_model(client: openai.OpenAI) -> None:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 40, 40)).save(buffer, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    before = set(Path(tempfile.gettempdir()).glob("qwen-mtp-api-*"))
    response = client.chat.completions.create(
        model=MODEL,
        max_tokens=8,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": url}},
                    {"type": "text", "text": "Count from 1 to 3."},
                ],
            }
        ],
    )
    assert response.usage.prompt_tokens > 10 and response.usage.completion_tokens > 0
    assert mtp_of(response)["decoder"] == "genai"  # images go to openvino-genai's pipeline
    assert set(Path(tempfile.gettempdir()).glob("qwen-mtp-api-*")) == before  # cleaned up


# --- many clients ------------------------------------------------------------------------------


def test_eight_clients_five_requests_each(server: ServerHandle, client: openai.OpenAI) -> None:
    prompts = [
        [f"Count from {c * 5 + r + 1} to {c * 5 + r + 6}." for r in range(5)] for c in range(8)
    ]
    expected = {p: chat(client, p).choices[0].message.content for row in prompts for p in row}
    results: dict[str, list[str]] = {}
    positions: list[int] = []
    errors: list[BaseException] = []

    def run(index: int) -> None:
        own = openai.OpenAI(base_url=f"{server.url}/v1", api_key=API_KEY, max_retries=0)
        try:
            for prompt in prompts[index]:
                raw = own.chat.completions.with_raw_response.create(
                    model=MODEL,
                    messages=[{"role": "user", "content": prompt}],
                    stream=index % 2 == 0,
                )
                positions.append(int(raw.headers["x-queue-position"]))
                parsed = raw.parse()
                if index % 2 == 0:
                    text = "".join(c.choices[0].delta.content or "" for c in parsed if c.choices)
                else:
                    text = parsed.choices[0].message.content
                results.setdefault(prompt, []).append(text)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    assert sum(len(v) for v in results.values()) == 40
    assert {p: v[0] for p, v in results.items()} == expected
    assert max(positions) > 0  # they really queued


# --- cancellation and a full queue -------------------------------------------------------------

LONG = {"max_tokens": 20_000, "ignore_eos": True}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_disconnect_cancels_the_running_generation(
    server: ServerHandle, service: EngineService, http: httpx.Client
) -> None:
    activity = server.activity
    cancelled = activity.snapshot()["cancelled"]
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    started = time.monotonic()
    with http.stream("POST", "/v1/chat/completions", json=body | LONG) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        next(line for line in lines if '"content": "' in line and '""' not in line)
    wait_for(lambda: activity.snapshot()["cancelled"] == cancelled + 1)
    wait_for(lambda: not service.busy)
    _, reason, tokens = activity.recent[-1]
    assert reason == "cancelled" and 0 < tokens < LONG["max_tokens"]
    assert time.monotonic() - started < 15  # 20,000 tokens would take far longer
    assert_healthy(server)


def test_disconnect_while_queued_leaves_the_queue(
    server: ServerHandle, service: EngineService, http: httpx.Client
) -> None:
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    with http.stream("POST", "/v1/chat/completions", json=body | LONG) as running:
        assert running.status_code == 200
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body, timeout=1.0)
        wait_for(lambda: service.waiting == 0)  # the gone client's turn left the queue
    wait_for(lambda: not service.busy)
    assert_healthy(server)


def test_full_queue_gives_429(
    server: ServerHandle, service: EngineService, http: httpx.Client
) -> None:
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    rejected = server.activity.snapshot()["rejected"]
    service.max_waiting = 0
    try:
        with http.stream("POST", "/v1/chat/completions", json=body | LONG) as running:
            assert running.status_code == 200
            refused = http.post("/v1/chat/completions", json=body)
            message = assert_error(refused, 429, "queue_full")
            assert "busy" in message and refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["type"] == "rate_limit_error"
    finally:
        service.max_waiting = 16
    assert server.activity.snapshot()["rejected"] == rejected + 1
    wait_for(lambda: not service.busy)
    assert_healthy(server)


# --- bad requests ------------------------------------------------------------------------------

GOOD = {"model": MODEL, "messages": [{"role": "user", "content": "Count from 1 to 3."}]}


def said(role: str, content: Any) -> dict[str, Any]:
    return {**GOOD, "messages": [{"role": role, "content": content}]}


def image(url: str) -> dict[str, Any]:
    return said("user", [{"type": "image_url", "image_url": {"url": url}}])


@pytest.mark.parametrize(
    ("body", "status", "code", "needle"),
    [
        (b'{"model": "demo-model", "messages": [', 400, "invalid_json", "not valid JSON"),
        (b"\xff\xfe not text", 400, "invalid_json", "UTF-8"),
        (b"[1, 2]", 400, "invalid_json", "JSON object"),
        (b'{"model": "demo-model", "top_p": NaN}', 400, "invalid_json", "NaN"),
        (b"[" * 100_000, 400, "invalid_json", "nested"),
        ({**GOOD, "messages": "hello"}, 400, "invalid_value", "messages"),
        ({**GOOD, "messages": []}, 400, "invalid_value", "messages"),
        ({**GOOD, "temperature": "hot"}, 400, "invalid_value", "temperature"),
        ({**GOOD, "max_tokens": -1}, 400, "invalid_value", "max_tokens"),
        ({**GOOD, "max_tokens": "5"}, 400, "invalid_value", "max_tokens"),
        ({**GOOD, "stop": 5}, 400, "invalid_value", "stop"),
        ({**GOOD, "stop": [""]}, 400, "invalid_value", "stop"),
        ({**GOOD, "top_p": 0}, 400, "invalid_value", "top_p"),
        ({**GOOD, "n": 2}, 400, "unsupported_value", "n at most 1"),
        ({**GOOD, "presence_penalty": 2.5}, 400, "invalid_value", "presence_penalty"),
        ({**GOOD, "response_format": {"type": "json_schema",
                                      "json_schema": {"schema": {"type": "x"}}}},
         400, "invalid_schema", "Invalid type: x"),
        ({**GOOD, "response_format": {"type": "json_object", "schema": {}}}, 400, "invalid_value",
         "Extra inputs"),
        (said("tool", "x"), 400, "invalid_value", "tool_call_id"),
        (said("user", "\ud800"), 400, "invalid_value", "surrogate"),
        ({**GOOD, "model": "gpt-4o"}, 404, "model_not_found", "demo-model"),
        (said("assistant", "1 2"), 400, "invalid_messages", "user message"),
        (said("user", "1 " * 40_000), 400, "context_length_exceeded", "context length"),
        ({**GOOD, "max_tokens": 40_000}, 400, "context_length_exceeded", "context length"),
        (image("https://example.com/a.png"), 400, "invalid_image_url", "does not fetch"),
        (image("data:image/png;base64,AAAA"), 400, "invalid_image", "cannot be read"),
        (image("data:image/png;base64,@@"), 400, "invalid_image", "damaged"),
    ],
)  # fmt: skip
def test_bad_request_gets_a_clear_error(
    server: ServerHandle, http: httpx.Client, body: Any, status: int, code: str, needle: str
) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = http.post(
        "/v1/chat/completions", content=content, headers={"Content-Type": "application/json"}
    )
    message = assert_error(response, status, code)
    assert needle in message, message
    assert_healthy(server)


def test_wrong_or_missing_key_is_401(server: ServerHandle) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": API_KEY}):
        response = httpx.post(f"{server.url}/v1/chat/completions", json=GOOD, headers=headers)
        message = assert_error(response, 401, "invalid_api_key")
        assert "Authorization: Bearer" in message
        assert response.headers["www-authenticate"] == "Bearer"
    assert_error(httpx.get(f"{server.url}/v1/models"), 401, "invalid_api_key")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0).models.list()
    assert httpx.get(f"{server.url}/health").json()["status"] == "ok"  # no key needed


def _read_reply(sock: socket.socket) -> str:
    def more() -> bytes:
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection after {data + rest!r}"
        return chunk

    data = rest = b""
    while b"\r\n\r\n" not in data:
        data += more()
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    while len(rest) < length:
        rest += more()
    return (head + b"\r\n\r\n" + rest).decode()


def test_oversize_body_is_refused_before_it_is_read(server: ServerHandle) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        # Announce 1 GB and send none of it: the answer must come at once.
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + API_KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{"
        )
        reply = _read_reply(sock)
    assert reply.startswith("HTTP/1.1 413"), reply
    assert "request_too_large" in reply and "Traceback" not in reply

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it arrives
        yield b'{"model": "demo-model", "messages": [{"role": "user", "content": "'
        for _ in range(BODY_LIMIT // 4096 + 2):
            yield b"x" * 4096
        yield b'"}]}'

    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=chunks(),
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
    )
    assert_error(response, 413, "request_too_large")
    assert_healthy(server)


def test_a_refused_body_sent_whole_still_reads_its_refusal(server: ServerHandle) -> None:
    """A client that sends its whole body before reading (most do) gets the 413, not
    "connection reset": the server reads and drops the rest of a body it refused."""
    port = int(server.url.rsplit(":", 1)[1])
    body = b'{"messages": "' + b"x" * (16 * 1024 * 1024) + b'"}'
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Authorization: Bearer " + API_KEY.encode() + b"\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            reply = _read_reply(sock)
        assert reply.startswith("HTTP/1.1 413"), reply[:200]
        assert "request_too_large" in reply
    assert_healthy(server)


def test_a_new_connection_outlives_slow_bodies_when_the_server_is_full(
    service: EngineService,
) -> None:
    """At its connection cap, the server closes a slow body's connection to make room
    before one that has just arrived: under a flood, a quick client's request is read
    some turns of the event loop after its connection is accepted, and it must not be
    closed meanwhile as "the oldest that has sent no headers" (one /health probe was,
    in a full-suite run of the slow-clients test)."""
    handle = start_server_thread(
        service,
        ServerConfig(
            port=0, api_key=API_KEY, connection_limits=ConnectionLimits(max_connections=4)
        ),
    )
    port = int(handle.url.rsplit(":", 1)[1])
    uploads = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
    try:
        for sock in uploads:  # keyed bodies that trickle: connections nobody answers yet
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Authorization: Bearer " + API_KEY.encode() + b"\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
            )
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as quick:
            time.sleep(0.2)  # accepted; its request not sent yet, as if not yet read
            with socket.create_connection(("127.0.0.1", port), timeout=10):
                time.sleep(0.2)  # one more arrives at the cap
                quick.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                reply = _read_reply(quick)
        assert reply.startswith("HTTP/1.1 200"), reply
        closed = []
        for sock in uploads:
            sock.setblocking(False)
            try:
                closed.append(sock.recv(1) == b"")
            except BlockingIOError:
                closed.append(False)
            except ConnectionResetError:
                closed.append(True)
        assert closed == [True, True, False, False], "the two oldest uploads made room"
    finally:
        for sock in uploads:
            sock.close()
        handle.stop()


def test_wrong_route_method_and_media_type(server: ServerHandle, http: httpx.Client) -> None:
    assert "/v1/chat/completions" in assert_error(http.get("/v1/nothing"), 404)
    assert_error(http.get("/v1/chat/completions"), 405)
    response = http.post(
        "/v1/chat/completions", content=json.dumps(GOOD), headers={"Content-Type": "text/plain"}
    )
    assert_error(response, 415, "unsupported_media_type")
    assert_healthy(server)


def test_loopback_server_without_key_checks_the_host(service: EngineService) -> None:
    handle = start_server_thread(service, ServerConfig(port=0))
    try:
        assert httpx.get(f"{handle.url}/v1/models").json()["data"][0]["id"] == MODEL
        rebinding = httpx.get(f"{handle.url}/v1/models", headers={"Host": "evil.example:80"})
        assert_error(rebinding, 403, "invalid_host")
        localhost = handle.url.replace("127.0.0.1", "localhost")
        assert httpx.get(f"{localhost}/v1/models").status_code == 200
    finally:
        handle.stop()


def test_auto_depth_reports_its_choice(service: EngineService) -> None:
    handle = start_server_thread(
        service, ServerConfig(port=0, defaults=TurnDefaults(depth="auto", max_tokens=64))
    )
    try:
        client = openai.OpenAI(base_url=f"{handle.url}/v1", api_key="unused", max_retries=0)
        for _ in range(2):
            response = chat(client, "Count from 1 to 18.")
            assert response.choices[0].message.content.split()[:18] == [
                str(i) for i in range(1, 19)
            ]
            mtp = mtp_of(response)
            assert mtp["decoding"] == "auto"
            assert mtp["auto"]["choice"] in ("plain", *(f"MTP n={n}" for n in range(1, 5)))
            assert mtp["auto"]["reason"]
        fixed = mtp_of(chat(client, "Count from 1 to 4.", extra_body={"num_assistant_tokens": 2}))
        assert fixed["decoding"] == "fixed" and fixed["draft_tokens_per_step"] == 2
    finally:
        handle.stop()


def test_stopping_the_server_ends_streams_with_an_error(service: EngineService) -> None:
    handle = start_server_thread(service, ServerConfig(port=0))
    lines: list[str] = []
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    try:
        with (
            httpx.Client(base_url=handle.url, timeout=60) as http,
            http.stream("POST", "/v1/chat/completions", json=body | LONG) as response,
        ):
            for line in response.iter_lines():
                lines.append(line)
                if len(lines) == 3:
                    threading.Thread(target=handle.stop, daemon=True).start()
    finally:
        handle.stop()
    assert not handle.running
    assert any("server_stopping" in line for line in lines), lines[-3:]
    assert [line for line in lines if line][-1] == "data: [DONE]"
    wait_for(lambda: not service.busy)


# --- junk ---------------------------------------------------------------------------------------

_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "developer", "tool", ""]) | _json},
    optional={
        "content": st.text(max_size=30)
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url", "audio"]) | _json},
                optional={
                    "text": _json,
                    "image_url": _json | st.fixed_dictionaries({"url": st.text(max_size=40)}),
                },
            ),
            max_size=3,
        )
        | _json,
        "name": _json,
    },
)
_request = st.fixed_dictionaries(
    {"max_tokens": st.integers(min_value=1, max_value=4) | _json},
    optional={
        "model": st.just(MODEL) | _json,
        "messages": st.lists(_message, max_size=3) | _json,
        "stream": st.booleans() | _json,
        "stream_options": _json,
        "temperature": st.sampled_from([0, 0.0, 0.5, -1, 3]) | _json,
        "top_p": _json,
        "stop": st.text(max_size=4) | st.lists(st.text(max_size=4), max_size=3) | _json,
        "seed": _json,
        "n": _json,
        "num_assistant_tokens": _json,
        "chat_template_kwargs": _json,
    },
)
_valid_message = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "system", "assistant", "developer"]),
        "content": st.text(max_size=30)
        | st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
            max_size=2,
        ),
    }
)
_field_values = {
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "temperature": st.sampled_from([0, 0.0, 0.7]),
    "top_p": st.floats(min_value=0.05, max_value=1),
    "stop": st.text(min_size=1, max_size=3) | st.lists(st.text(min_size=1, max_size=3), max_size=3),
    "seed": st.integers(min_value=0, max_value=2**32),
    "num_assistant_tokens": st.integers(min_value=1, max_value=4),
    "chat_template_kwargs": st.fixed_dictionaries({"enable_thinking": st.booleans()}),
    "model": st.sampled_from([MODEL, "other"]),
}
# Nearly valid requests (most are answered), with one field perhaps junk.
_near_valid = st.builds(
    lambda history, last, extra, junk: {
        "model": MODEL,
        "max_tokens": 3,
        "messages": [*history, {"role": "user", "content": last}],
        **extra,
        **junk,
    },
    st.lists(_valid_message, max_size=2),
    st.text(max_size=30),
    st.fixed_dictionaries({}, optional=_field_values),
    st.dictionaries(st.sampled_from([*_field_values, "messages", "max_tokens"]), _json, max_size=1),
)
_body = (
    _near_valid.map(lambda d: json.dumps(d).encode())
    | _request.map(lambda d: json.dumps(d).encode())
    | _json.map(lambda d: json.dumps(d).encode())
    | st.binary(max_size=64)
    | st.text(max_size=64).map(str.encode)
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_body)
def test_junk_bodies_never_break_the_server(server: ServerHandle, body: bytes) -> None:
    response = httpx.post(
        f"{server.url}/v1/chat/completions",
        content=body,
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
        timeout=60,
    )
    event(f"status {response.status_code}")
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text and 'File "' not in response.text
    if response.status_code != 200:
        assert response.json()["error"]["message"]
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert response.text.rstrip().endswith("data: [DONE]")
        assert '"error"' not in response.text
    else:
        assert response.json()["object"] == "chat.completion"
