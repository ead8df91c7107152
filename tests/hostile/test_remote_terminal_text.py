"""Everything `generate --remote` shows on a terminal from another machine is made safe
(issue 45 item 9): OSC 0 titles, CSI 2J clear screen, OSC 8 links, C1 controls and U+202E
reach the terminal as visible `\\uXXXX` escapes or not at all, as `generate` does for local
answers (commands.answer_output.terminal_safe).

Issue 29 covered the streamed answer on a terminal stdout. Here both stdout and stderr are
one pseudo-terminal, as in an interactive shell, and hypothesis puts the escapes in every
other place a server's text reaches it: the reasoning (stderr), an error's body (JSON
`error.message` and a plain-text 500), and the model names a server lists when the command
must ask which to use. Property: no byte the terminal would act on arrives raw, and the
visible words arrive."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO_ROOT
from tests.hostile.net_servers import base_url, hostile_server, sse_chunk

pytestmark = pytest.mark.subprocess

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_UNSAFE = {*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI} - {0x09, 0x0A, 0x0D}
_ATTACKS = [
    "\x1b]0;pwned title\x07",
    "\x1b[2J\x1b[H",
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "\x9b31m",
    "\x9d0;c1\x9c",
    "\u202eevil.exe\u202c",
    "\x1b[6n",
    "\r\x08",
]
REPORTED = "\x1b]0;TITLE\x07\x1b[2J\x1b]8;;https://evil/\x1b\\link\x1b]8;;\x1b\\\u202eabc"
hostile = st.lists(
    st.sampled_from(_ATTACKS) | st.sampled_from(["word", "中文", " "]), max_size=6
).map(lambda parts: "visible " + "".join(parts) + " end")


def _latin1(text: str) -> str:
    """The spec's bodies are latin-1 text: UTF-8 bytes spelled so."""
    return text.encode().decode("latin-1")


def _cases(text: str) -> dict[str, tuple[dict[str, object], list[str]]]:
    model = ["--remote-model", "m"]
    models = {"object": "list", "data": [{"id": text, "object": "model"}, {"id": "b"}]}
    return {
        "reasoning": (
            {
                "body": _latin1(
                    sse_chunk(reasoning=text)
                    + sse_chunk(content="ok")
                    + sse_chunk(finish="stop")
                    + "data: [DONE]\n\n"
                )
            },
            model,
        ),
        "json error": (
            {
                "status": 400,
                "content_type": "application/json",
                "body": _latin1(json.dumps({"error": {"message": text}}, ensure_ascii=False)),
            },
            model,
        ),
        "plain 500": (
            {"status": 500, "content_type": "text/plain", "body": _latin1(text)},
            model,
        ),
        "model names": (
            {
                "content_type": "application/json",
                "body": _latin1(json.dumps(models, ensure_ascii=False)),
            },
            [],
        ),
    }


def _on_a_terminal(*args: str, timeout: float = 60) -> bytes:
    """What a terminal shows of the CLI, stdout and stderr both on it."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", *args],
        stdout=secondary,
        stderr=secondary,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    os.close(secondary)
    shown = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            data = os.read(primary, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not data:
            break
        shown += data
    process.wait(10)
    os.close(primary)
    return shown


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with hostile_server() as served:
        yield served


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=hostile, case=st.sampled_from(["reasoning", "json error", "plain 500", "model names"]))
@example(text=REPORTED, case="reasoning")
@example(text=REPORTED, case="json error")
@example(text=REPORTED, case="plain 500")
@example(text=REPORTED, case="model names")
def test_a_server_s_text_reaches_the_terminal_safe(port: int, text: str, case: str) -> None:
    spec, extra = _cases(text)[case]
    shown = _on_a_terminal("generate", "--remote", base_url(port, spec), *extra, "hi")
    raw = shown.decode("utf-8", "replace")
    assert not any(ord(c) in _UNSAFE for c in raw), (case, raw)
    # A terminal writes "\n" as "\r\n" itself; no other carriage return may reach it.
    assert "\r" not in raw.replace("\r\n", "\n"), (case, raw)
    assert "visible" in raw or "TITLE" in raw, (case, raw)
