"""The local API server on the demo model (issue 28): it reads only the latest message, as the
app's chat does, and says so; every answered request is recorded for the app's "Recent
requests" list, without what was asked; and models get their own names as ids."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from qwen_mtp_desktop.core.engine import LoadOptions
from qwen_mtp_desktop.core.hosting.protocol import ApiRequest
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.server import ServerConfig, ServerHandle, TurnDefaults, start_server_thread
from qwen_mtp_desktop.server.examples import SINGLE_TURN_HEADER, model_id_for

KEY = "test-key-0123456789"
EARLIER = "Count from 1 to 5."
LATEST = "Count from 3 to 9."


@pytest.fixture(scope="module")
def records() -> list[ApiRequest]:
    return []


@pytest.fixture(scope="module")
def server(demo_model: Path, records: list[ApiRequest]) -> Iterator[ServerHandle]:
    service = EngineService()
    with service.exclusive() as engine:
        engine.load(demo_model, LoadOptions())
    handle = start_server_thread(
        service,
        ServerConfig(
            port=0,
            api_key=KEY,
            defaults=TurnDefaults(max_tokens=32),
            on_request=records.append,
        ),
    )
    yield handle
    handle.stop()
    with service.exclusive() as engine:
        engine.unload()


@pytest.fixture
def http(server: ServerHandle) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120
    ) as http:
        yield http


def _ask(http: httpx.Client, messages: list[dict[str, str]], **extra: object) -> httpx.Response:
    body = {"model": "demo-model", "messages": messages, "temperature": 0, **extra}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    return response


@pytest.mark.model
def test_the_demo_reads_only_the_latest_message_and_says_so(http: httpx.Client) -> None:
    alone = _ask(http, [{"role": "user", "content": LATEST}])
    assert SINGLE_TURN_HEADER not in alone.headers and "notice" not in alone.json()
    history = [
        {"role": "system", "content": "You count."},
        {"role": "user", "content": EARLIER},
        {"role": "assistant", "content": "1 2 3 4 5"},
        {"role": "user", "content": LATEST},
    ]
    answered = _ask(http, history)
    assert answered.headers[SINGLE_TURN_HEADER] == "1"
    body = answered.json()
    assert "2 earlier messages were left out" in body["notice"]
    assert "trained on single requests" in body["notice"]
    # What the demo read: the system prompt and the latest message, so the same answer as
    # that request alone (with its system prompt).
    same = _ask(http, [history[0], history[-1]])
    assert (
        body["choices"][0]["message"]["content"]
        == (same.json()["choices"][0]["message"]["content"])
    )
    assert body["choices"][0]["message"]["content"].split()[:3] == ["3", "4", "5"]
    # Streamed: the last chunk carries the notice too.
    with http.stream(
        "POST",
        "/v1/chat/completions",
        json={"model": "demo-model", "messages": history, "temperature": 0, "stream": True},
    ) as stream:
        assert stream.headers[SINGLE_TURN_HEADER] == "1"
        events = [
            json.loads(line[6:])
            for line in stream.iter_lines()
            if line.startswith("data: {") and '"choices"' in line
        ]
    finishing = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert finishing and "earlier messages were left out" in finishing[-1]["notice"]


@pytest.mark.model
def test_the_model_list_says_the_demo_reads_single_requests(http: httpx.Client) -> None:
    (model,) = http.get("/v1/models").json()["data"]
    assert model["id"] == "demo-model" and model["single_turn"] is True


@pytest.mark.model
def test_every_request_is_recorded_without_what_was_asked(
    server: ServerHandle, http: httpx.Client, records: list[ApiRequest]
) -> None:
    records.clear()
    secret = "Repeat 'purple elephants' two times."
    answer = _ask(http, [{"role": "user", "content": secret}]).json()
    http.get("/v1/models")
    refused = httpx.get(f"{server.url}/v1/models", headers={"Authorization": "Bearer wrong"})
    assert refused.status_code == 401
    assert http.get("/v1/nothing-here").status_code == 404
    deadline = time.monotonic() + 10  # a record follows its response's last byte
    while len(records) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    seen = [(r.method, r.path, r.status) for r in records]
    assert seen == [
        ("POST", "/v1/chat/completions", 200),
        ("GET", "/v1/models", 200),
        ("GET", "/v1/models", 401),
        ("GET", "/v1/nothing-here", 404),
    ]
    chat = records[0]
    assert chat.tokens == answer["usage"]["completion_tokens"] > 0
    assert all(r.tokens is None for r in records[1:])
    assert all(0 < r.duration_s < 120 and r.at > 0 for r in records)
    assert "purple" not in repr(records) and KEY not in repr(records)


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("models/Qwen3.5-0.8B-int4", "Qwen3.5-0.8B-int4"),
        ("downloads/demo-model/openvino", "demo-model"),
        ("exports/Qwen3.5-2B/ov", "Qwen3.5-2B"),
        ("somewhere/OpenVINO", "somewhere"),
    ],
)
def test_a_model_is_named_after_itself_not_its_format_folder(
    tmp_path: Path, folder: str, expected: str
) -> None:
    assert model_id_for(tmp_path / folder) == expected


def test_the_bundled_demo_is_demo_model(demo_model: Path) -> None:
    assert model_id_for(demo_model) == "demo-model"
