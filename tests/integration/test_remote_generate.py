"""Remote models headless: `generate --remote` and core.remote.client against a real
`qwen-mtp-desktop serve` process on the demo model."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.core.remote import client as remote_client
from qwen_mtp_desktop.core.remote.client import RemoteAnswer, list_models
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.core.remote.errors import RemoteError
from tests.remote_server import KEY, kill_tree, never_accepting, serving, throttled

PROMPT = "Count from 1 to 12."


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def server(demo_url: str) -> str:
    return demo_url


@pytest.mark.subprocess
def test_remote_answer_equals_local_greedy_with_stats(demo_model: Path, server: str) -> None:
    local = _cli("generate", str(demo_model), PROMPT, "--json")
    assert local.returncode == 0, local.stderr
    local_json = json.loads(local.stdout)
    remote = _cli("generate", "--remote", server, "--api-key", KEY, PROMPT, "--json")
    assert remote.returncode == 0, remote.stderr
    remote_json = json.loads(remote.stdout)
    assert remote_json["text"] == local_json["text"]
    assert remote_json["model"] == "demo-model"  # the server's only model, found by itself
    stats, local_stats = remote_json["stats"], local_json["stats"]
    # The same stats shape as a local answer (plus where it came from).
    assert set(local_stats) <= set(stats) and "remote" in stats
    assert stats["generated_tokens"] == local_stats["generated_tokens"]
    assert stats["ttft_s"] > 0 and stats["decode_tokens_per_s"] > 0 and stats["total_s"] > 0
    assert stats["remote"]["timing"] == "client"
    # Acceptance as the server reported it (our serve sends its `mtp` object).
    server_stats = stats["remote"]["server_stats"]
    assert stats["method"] == server_stats["method"] == local_stats["method"]
    assert server_stats["mode"] == "mtp"
    assert stats["drafted_tokens"] == server_stats["drafted_tokens"] > 0
    assert stats["acceptance_rate"] == server_stats["acceptance_rate"] > 0
    # Client-side timing includes the network and the server's queue: never less than its own.
    assert stats["ttft_s"] >= server_stats["ttft_s"]

    text = _cli("generate", "--remote", server, PROMPT, env={"QWEN_MTP_REMOTE_API_KEY": KEY})
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip() == local_json["text"].strip()
    assert "measured here" in text.stderr and "accepted" in text.stderr


@pytest.mark.subprocess
def test_wrong_key_is_a_plain_401(server: str) -> None:
    result = _cli("generate", "--remote", server, "--api-key", "wrong", PROMPT)
    assert result.returncode == 1
    assert "refused the API key (HTTP 401)" in result.stderr
    assert "wrong" not in result.stderr.replace("is wrong", "")  # the key is never echoed
    assert "Traceback" not in result.stderr
    endpoint = RemoteEndpoint("t", "t", server, "demo-model")
    with pytest.raises(RemoteError) as caught:
        list_models(endpoint, None)
    assert caught.value.code == "REMOTE_UNAUTHORIZED"


@pytest.mark.subprocess
def test_unknown_model_and_bad_usage(server: str) -> None:
    result = _cli("generate", "--remote", server, "--api-key", KEY, "--remote-model", "x", "hi")
    assert result.returncode == 1
    assert "no model named 'x' (HTTP 404)" in result.stderr and "Traceback" not in result.stderr
    for args, needle in [
        (["--remote", server, "dir", "hi"], "only the PROMPT"),
        (["--remote", server, "hi", "--no-mtp"], "local models only"),
        (["--remote", "ftp://x", "hi"], "http:// or https://"),
        (["dir", "hi", "--api-key", "k"], "only with --remote"),
    ]:
        bad = _cli("generate", *args)
        assert bad.returncode == 2 and needle in bad.stderr, (args, bad.stderr)


@pytest.mark.subprocess
def test_unreachable_host_times_out_with_a_plain_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_client, "CONNECT_TIMEOUT_S", 1.0)
    with never_accepting() as url:
        endpoint = RemoteEndpoint("t", "t", url, "m")
        started = time.monotonic()
        answer = RemoteAnswer(endpoint, None, [Message("user", "hi")], GenerationSettings())
        with pytest.raises(RemoteError) as caught:
            answer.run_to_end()
        assert time.monotonic() - started < 5
    assert caught.value.code == "REMOTE_TIMEOUT"
    assert "did not answer within 1 s" in caught.value.message
    with never_accepting() as url:  # the command line, with its real 10 s timeout
        started = time.monotonic()
        result = _cli("generate", "--remote", url, "--remote-model", "m", "hi")
        took = time.monotonic() - started
    assert result.returncode == 1 and "did not answer within 10 s" in result.stderr
    assert took < 60


def test_a_silent_server_names_the_read_limit_the_request_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that takes the connection and never answers: the error names the silence the
    request allowed (an answer's `read_timeout_s`, the model list's quick limit), not a
    default."""
    monkeypatch.setattr(remote_client, "QUICK_TIMEOUT_S", 1.0)
    with socket.socket() as silent:  # the kernel completes connections; nothing reads them
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        endpoint = RemoteEndpoint("t", "t", f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "m")
        answer = RemoteAnswer(
            endpoint, None, [Message("user", "hi")], GenerationSettings(), read_timeout_s=1.0
        )
        with pytest.raises(RemoteError) as caught:
            answer.run_to_end()
        with pytest.raises(RemoteError) as listing:
            list_models(endpoint, None)
    for error in (caught.value, listing.value):
        assert error.code == "REMOTE_TIMEOUT"
        assert "stopped sending for 1 s" in error.message, error.message


@pytest.mark.subprocess
def test_nothing_listening_is_connection_refused() -> None:
    with never_accepting() as url:
        pass  # closed: nothing listens on that port any more
    result = _cli("generate", "--remote", url, "--remote-model", "m", "hi")
    assert result.returncode == 1 and "connection refused" in result.stderr


@pytest.mark.subprocess
def test_server_killed_mid_answer_keeps_the_partial_answer(demo_model: Path) -> None:
    with serving(demo_model) as (process, url):
        endpoint = RemoteEndpoint("t", "t", url, "demo-model")
        messages = [Message("user", "Count from 1 to 20.")]
        with throttled(process):
            answer = RemoteAnswer(endpoint, KEY, messages, GenerationSettings())
            first = answer.next_chunk(timeout=120)
            assert first is not None and first.answer
            kill_tree(process.pid)
        with pytest.raises(RemoteError) as caught:
            answer.run_to_end()
    assert caught.value.code == "REMOTE_DISCONNECTED"
    assert "partial answer is kept" in str(caught.value)
    assert answer.answer.startswith("1") and len(answer.answer.split()) < 20


@pytest.mark.subprocess
def test_cancel_closes_the_stream_at_once(demo_model: Path) -> None:
    with serving(demo_model) as (process, url):
        endpoint = RemoteEndpoint("t", "t", url, "demo-model")
        messages = [Message("user", "Count from 1 to 20.")]
        with throttled(process):
            answer = RemoteAnswer(endpoint, KEY, messages, GenerationSettings())
            assert answer.next_chunk(timeout=120) is not None
            started = time.monotonic()
            answer.cancel()
            stats = answer.run_to_end()
            assert time.monotonic() - started < 0.5
        assert stats.finish_reason == "cancelled"
        assert answer.answer.startswith("1") and len(answer.answer.split()) < 20
        # The server noticed the client leaving: it counts a cancelled request.
        import httpx

        health_url = url.removesuffix("/v1") + "/health"
        deadline = time.monotonic() + 30
        while httpx.get(health_url).json()["cancelled"] == 0:
            assert time.monotonic() < deadline, "the server did not see the stream close"
            time.sleep(0.2)
        assert process.poll() is None
