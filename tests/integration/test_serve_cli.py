"""`qwen-mtp-desktop serve` as a user runs it: a real process, its printed URL and curl example,
Ctrl+C, and the refusals that must come before the model loads."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

pytestmark = pytest.mark.subprocess

KEY = "cli-key-0123456789"


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _read_banner(process: subprocess.Popen[str]) -> str:
    """stdout up to the end of the curl example (a blank line after it)."""
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.strip() == "" and any(item.startswith("curl ") for item in lines):
            break
    return "".join(lines)


@pytest.fixture
def served(demo_model: Path) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    process = _serve(str(demo_model), "--port", "0", env={"QWEN_MTP_API_KEY": KEY})
    try:
        banner = _read_banner(process)
        match = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", banner)
        assert match, banner + (process.stderr.read() if process.poll() is not None else "")
        yield process, match.group(1), banner
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def test_serve_answers_and_stops_cleanly_on_ctrl_c(
    served: tuple[subprocess.Popen[str], str, str],
) -> None:
    process, url, banner = served
    assert "'demo-model' (MTP, 1 draft tokens per step" in banner
    assert process.stdout is not None  # then what the demo does with earlier turns
    assert process.stdout.readline().startswith("Note: The demo model answers each request")
    assert 'Authorization: Bearer $QWEN_MTP_API_KEY"' in banner and KEY not in banner
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    answer = client.chat.completions.create(
        model="demo-model", messages=[{"role": "user", "content": "Count from 1 to 5."}]
    )
    assert answer.choices[0].message.content.split() == ["1", "2", "3", "4", "5"]
    if shutil.which("curl") and shutil.which("bash"):
        # The printed example, run as printed.
        example = banner[banner.index("curl ") :].strip()
        result = subprocess.run(
            ["bash", "-c", example],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "QWEN_MTP_API_KEY": KEY},
        )
        # It asks what the demo answers well (its first example chip: counting to 20).
        counted = " ".join(str(n) for n in range(1, 21))
        assert f'"content":"{counted}"' in result.stdout, result.stdout + result.stderr

    # Ctrl+C while a long answer streams: the server stops at once, not after the answer.
    stream_lines: list[str] = []

    def stream() -> None:
        body = {
            "model": "demo-model",
            "stream": True,
            "max_tokens": 20_000,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Hi"}],
        }
        with (
            httpx.Client(timeout=60) as http,
            http.stream(
                "POST",
                f"{url}/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {KEY}"},
            ) as response,
        ):
            for line in response.iter_lines():
                stream_lines.append(line)

    reader = threading.Thread(target=stream, daemon=True)
    reader.start()
    deadline = time.monotonic() + 30
    while len(stream_lines) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    _out, err = process.communicate(timeout=30)
    assert time.monotonic() - started < 10
    assert process.returncode == 0, err
    assert "Server stopped." in err and "Traceback" not in err
    reader.join(10)
    assert any("server_stopping" in line for line in stream_lines)  # told, not cut off


def test_serve_refuses_a_public_host_without_a_key(demo_model: Path) -> None:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(demo_model), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "QWEN_MTP_API_KEY"},
    )
    assert result.returncode == 1
    assert "without an API key" in result.stderr and "--api-key" in result.stderr
    assert "Loading" not in result.stderr  # refused before the model loads
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 60


def test_serve_reports_a_taken_port(demo_model: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(demo_model),
             "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"Port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_reports_a_missing_model(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(tmp_path / "none"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_engine_death_mid_stream_is_an_error_event_and_the_server_recovers(
    served: tuple[subprocess.Popen[str], str, str], sig: int
) -> None:
    """The engine runs in its own process under `serve`: killing it mid-answer ends that
    stream with an error event, the server stays up, restarts the engine, reloads the model,
    and the next request is answered."""
    import psutil

    process, url, _banner = served
    engines = [
        child
        for child in psutil.Process(process.pid).children()
        if "qwen_mtp_desktop.host" in " ".join(child.cmdline())
    ]
    assert len(engines) == 1
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0, timeout=120)
    stream = client.chat.completions.create(
        model="demo-model",
        messages=[{"role": "user", "content": "Count from 1 to 300."}],
        max_tokens=3000,
        stream=True,
        extra_body={"ignore_eos": True},
    )
    received = ""
    with pytest.raises(openai.APIError) as failed:
        for event in stream:
            if event.choices and event.choices[0].delta.content:
                received += event.choices[0].delta.content
                if len(received.split()) >= 3 and engines[0].is_running():
                    os.kill(engines[0].pid, sig)
    assert received.split()[:3] == ["1", "2", "3"]
    assert f"inference engine stopped ({signal.Signals(sig).name})" in str(failed.value)
    assert process.poll() is None  # the server is still up
    # The next request waits for the reload and is answered by a new engine process.
    answer = client.chat.completions.create(
        model="demo-model", messages=[{"role": "user", "content": "Count from 1 to 5."}]
    )
    assert answer.choices[0].message.content.split() == ["1", "2", "3", "4", "5"]
    now = [c for c in psutil.Process(process.pid).children() if c.pid != engines[0].pid]
    assert any("qwen_mtp_desktop.host" in " ".join(c.cmdline()) for c in now)
    health = httpx.get(f"{url}/health", timeout=10).json()
    assert health["status"] == "ok", health
