"""Issue 29, items 4-5: what reaches the user's terminal, and where an API key goes.

Item 4: a server streams generated text full of escape sequences (window title, clear screen,
OSC 8 hyperlinks, C1 controls, carriage-return overwrites) and bidi controls, split into
events at random points. `generate --remote` on a pseudo-terminal shows none of them raw
(each becomes a visible \\uXXXX); piped, it writes the text exactly; --json carries it exactly.
The same printing serves local `generate` (checked on the demo model).

Item 5: a key for a plain http:// server on another computer gets a warning (CLI and the
GUI's dialog), and `--api-key` warns that the process list shows it; loopback, this
computer's own addresses and https:// do not warn. The key itself is never printed.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.commands.answer_output import terminal_safe
from qwen_mtp_desktop.core.remote.endpoints import key_in_clear
from tests.conftest import REPO_ROOT
from tests.hostile.net_servers import base_url, hostile_server
from tests.reliability import figures

CLI_EXAMPLES = 8
_counts = {"terminal_texts": 0, "terminal_cli": 0, "key_urls": 0, "key_cli": 0}

#: What a terminal must never receive raw.
_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_UNSAFE = {*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI} - {0x09, 0x0A}

_ATTACKS = [
    "\x1b]0;pwned window title\x07",
    "\x1b]2;title\x1b\\",
    "\x1b[2J\x1b[H",
    "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\",
    "\x9b31m",
    "\x9d0;c1 title\x9c",
    "rm -rf ~\rls -l",
    "\u202eevil.exe\u202c",
    "\u2066isolated\u2069",
    "\x1b[6n",  # asks the terminal to type its cursor position back
    "\x08\x08\x08",
    "\x00\x7f",
]
_text = st.lists(
    st.sampled_from(_ATTACKS) | st.text(max_size=12),
    min_size=1,
    max_size=4,
).map("".join)


def _pieces(text: str, cuts: list[int]) -> list[str]:
    """`text` split at `cuts` (an escape sequence may be cut between two events)."""
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    return [piece for piece in pieces if piece]


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with hostile_server() as served:
        yield served


def _cli(
    *args: str, terminal: bool, env: dict[str, str] | None = None, timeout: float = 60
) -> tuple[int, bytes, bytes]:
    """(exit code, stdout, stderr) of the CLI, stdout a pseudo-terminal or a pipe."""
    command = [sys.executable, "-m", "qwen_mtp_desktop", *args]
    full_env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    full_env.pop("QWEN_MTP_REMOTE_API_KEY", None)
    full_env.update(env or {})
    if not terminal:
        done = subprocess.run(command, capture_output=True, env=full_env, timeout=timeout)
        return done.returncode, done.stdout, done.stderr
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        command, stdout=secondary, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=full_env
    )
    os.close(secondary)
    assert process.stderr is not None
    shown, errors = b"", b""
    deadline = time.monotonic() + timeout
    open_fds = [primary, process.stderr.fileno()]
    while open_fds and time.monotonic() < deadline:
        ready, _, _ = select.select(open_fds, [], [], 1)
        for fd in ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's other end closed
                data = b""
            if not data:
                open_fds.remove(fd)
            elif fd == primary:
                shown += data
            else:
                errors += data
    code = process.wait(10)
    os.close(primary)
    return code, shown, errors


class TestTerminalOutput:
    @settings(max_examples=500)
    @given(st.text(max_size=200) | _text)
    def test_nothing_unsafe_survives_and_the_rest_is_kept(self, text: str) -> None:
        _counts["terminal_texts"] += 1
        shown = terminal_safe(text)
        assert not any(ord(c) in _UNSAFE for c in shown), repr(shown)
        # Each unsafe character becomes its visible escape (a carriage return, nothing);
        # everything else (emoji, CJK, tabs, newlines, zero-width joiners) is untouched.
        expected = "".join(
            "" if c == "\r" else f"\\u{ord(c):04x}" if ord(c) in _UNSAFE else c for c in text
        )
        assert shown == expected

    @pytest.mark.subprocess
    @settings(max_examples=CLI_EXAMPLES, deadline=None)
    @given(text=_text, cuts=st.lists(st.integers(0, 80), max_size=6))
    def test_generate_remote_on_a_terminal_and_through_a_pipe(
        self, port: int, text: str, cuts: list[int]
    ) -> None:
        _counts["terminal_cli"] += 1
        url = base_url(port, {"pieces": _pieces(text, cuts)})
        args = ("generate", "--remote", url, "--remote-model", "m", "hi")
        code, shown, errors = _cli(*args, terminal=True)
        assert code == 0, errors
        raw = shown.decode("utf-8", "replace")
        assert not any(ord(c) in _UNSAFE - {0x0D} for c in raw), repr(raw)
        # A terminal turns "\n" into "\r\n" itself; no other CR reaches it.
        assert "\r" not in raw.replace("\r\n", "\n")
        assert terminal_safe(text) in raw.replace("\r\n", "\n")
        # Piped: the exact text (and a newline after it).
        code, piped, errors = _cli(*args, terminal=False)
        assert code == 0 and piped.decode() == text + "\n", (piped, errors)
        code, as_json, errors = _cli(*args, "--json", terminal=False)
        assert code == 0 and json.loads(as_json)["text"] == text
        assert all(byte >= 0x20 or byte == 0x0A for byte in as_json)  # JSON escaped them

    @pytest.mark.subprocess
    def test_local_generate_uses_the_same_printing(self, demo_model: Path) -> None:
        args = ("generate", str(demo_model), "Count from 1 to 5.")
        code, shown, errors = _cli(*args, terminal=True, timeout=300)
        assert code == 0, errors
        assert shown.decode().split()[:5] == ["1", "2", "3", "4", "5"]
        assert b"tok/s" in errors and b"\x1b" not in shown
        code, piped, _ = _cli(*args, terminal=False, timeout=300)
        assert code == 0 and piped.decode().split()[:5] == ["1", "2", "3", "4", "5"]

    @pytest.mark.subprocess
    def test_help_says_what_happens_to_control_characters(self) -> None:
        code, out, _ = _cli("generate", "--help", terminal=False)
        text = " ".join(out.decode().split())
        assert code == 0 and "terminal" in text and "piped or redirected" in text


def _this_machine() -> list[str]:
    import psutil

    found = []
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                address = entry.address.split("%")[0]
                found.append(f"[{address}]" if ":" in address else address)
    return [*found, socket.gethostname()]


_LOCAL = ["localhost", "LocalHost.", "api.localhost", "127.0.0.1", "127.8.9.10", "[::1]"]
_LOCAL += ["0.0.0.0", "[::ffff:127.0.0.1]"]
_ELSEWHERE = ["192.0.2.7", "10.0.0.5", "gpu.lan", "example.com", "[2001:db8::1]", "127.example"]


class TestKeyWarnings:
    @given(
        scheme=st.sampled_from(["http", "https", "HTTP"]),
        host=st.sampled_from(_LOCAL + _ELSEWHERE + _this_machine()),
        port=st.none() | st.integers(1, 65535),
        path=st.sampled_from(["/v1", "/v3", "/api/v1"]),
    )
    def test_warns_exactly_for_http_to_another_computer(
        self, scheme: str, host: str, port: int | None, path: str
    ) -> None:
        _counts["key_urls"] += 1
        from qwen_mtp_desktop.core.remote.endpoints import normalize_base_url

        url = normalize_base_url(f"{scheme}://{host}{'' if port is None else f':{port}'}{path}")
        warned = key_in_clear(url)
        elsewhere = host in _ELSEWHERE
        assert (warned is not None) == (scheme.lower() == "http" and elsewhere), (url, warned)

    @pytest.mark.subprocess
    def test_the_command_line_warns_and_never_prints_the_key(self, port: int) -> None:
        secret = "sk-hostile-0123456789"
        served = base_url(port, {"pieces": ["ok"]})
        args = ("generate", "--remote", served, "--remote-model", "m", "hi")
        # --api-key on loopback: the process-list warning only.
        code, out, errors = _cli(*args, "--api-key", secret, terminal=False)
        said = errors.decode()
        assert code == 0 and "process list" in said and "QWEN_MTP_REMOTE_API_KEY" in said
        assert "unencrypted" not in said and secret not in said + out.decode()
        # From the environment, to loopback: no warning at all.
        code, _, errors = _cli(*args, terminal=False, env={"QWEN_MTP_REMOTE_API_KEY": secret})
        assert code == 0 and b"warning" not in errors
        # http:// to another computer (a documentation address: nothing answers there): the
        # warning comes before the connection is tried.
        for url, key, expected in [
            ("http://192.0.2.7:9/v1", secret, True),
            ("https://192.0.2.7:9/v1", secret, False),
            ("http://192.0.2.7:9/v1", None, False),
        ]:
            _counts["key_cli"] += 1
            said = _first_stderr(url, key)
            assert ("unencrypted" in said) == expected, (url, key, said)
            assert secret not in said
        # `serve --api-key` warns the same way (the model folder does not exist: it stops).
        code, _, errors = _cli(
            "serve", "/nonexistent-model", "--api-key", secret, "--port", "0", terminal=False
        )
        said = errors.decode()
        assert code == 1 and "process list" in said and "QWEN_MTP_API_KEY" in said, said
        assert secret not in said

    @pytest.mark.subprocess
    @pytest.mark.gui
    def test_the_dialog_warns(self, qtbot: Any, screenshot_dir: Path) -> None:
        """The real window's Add remote server dialog, as a user opens it from the picker."""
        from PySide6.QtCore import Qt
        from PySide6.QtWidgets import QApplication

        from qwen_mtp_desktop.core.files.paths import app_paths
        from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
        from qwen_mtp_desktop.core.settings.store import SettingsStore
        from qwen_mtp_desktop.ui.chat.remote.dialog import RemoteServerDialog
        from qwen_mtp_desktop.ui.chat.remote.picker import ADD
        from qwen_mtp_desktop.ui.main_window import MainWindow

        paths = app_paths().ensure()
        window = MainWindow(paths, SettingsStore(paths.settings_file))
        qtbot.addWidget(window)
        window.show()
        chat = window.chat
        qtbot.waitUntil(lambda: chat.store_ready and chat.remote_models.loaded, timeout=180_000)

        def open_dialog() -> RemoteServerDialog:
            index = chat.model_picker.findData(ADD, Qt.ItemDataRole.UserRole)
            chat.model_picker.activated.emit(index)
            dialog = chat.remote_dialog
            assert isinstance(dialog, RemoteServerDialog) and dialog.isVisible()
            return dialog

        dialog = open_dialog()
        for url, key, expected in [
            ("http://192.0.2.7:8000/v1", "sk-1", True),
            ("192.0.2.7:8000", "sk-1", True),  # no scheme: http
            ("https://192.0.2.7:8000/v1", "sk-1", False),
            ("http://127.0.0.1:8000/v1", "sk-1", False),
            ("http://192.0.2.7:8000/v1", "", False),
            ("not a url", "sk-1", False),
        ]:
            dialog.url_edit.setText(url)
            dialog.key_edit.setText(key)
            assert dialog.key_warning.isVisible() == expected, (url, key)
        dialog.reject()
        stored = RemoteEndpoint("ab12", "lan", "http://192.0.2.7:8000/v1", "m", True)
        editing = RemoteServerDialog(chat.remote_models, stored, chat)  # a stored key counts
        qtbot.addWidget(editing)
        editing.show()
        assert editing.key_warning.isVisible()
        editing._forget_key()
        assert not editing.key_warning.isVisible()
        editing.close()
        for width, height in ((1024, 700), (1600, 1000)):
            window.resize(width, height)
            dialog = open_dialog()
            dialog.url_edit.setText("http://192.0.2.7:8000/v1")
            dialog.key_edit.setText("sk-1")
            QApplication.processEvents()
            warning = dialog.key_warning
            assert warning.isVisible() and warning.height() >= warning.heightForWidth(
                warning.width()
            )
            shot = screenshot_dir / f"hostile-remote-key-warning-{width}x{height}.png"
            assert dialog.grab().save(str(shot))
            dialog.reject()
        window.close()

    @pytest.mark.subprocess
    def test_record(self) -> None:
        figures.record(
            "hostile",
            terminal_inputs=_counts["terminal_texts"],
            terminal_cli_inputs=_counts["terminal_cli"],
            key_url_inputs=_counts["key_urls"],
            key_cli_inputs=_counts["key_cli"],
        )


def _first_stderr(url: str, key: str | None) -> str:
    """What `generate --remote URL` says on stderr in its first 5 s (it then waits for an
    address where nothing answers, so it is stopped)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("QWEN_MTP_REMOTE_API_KEY", None)
    if key:
        env["QWEN_MTP_REMOTE_API_KEY"] = key
    command = [sys.executable, "-m", "qwen_mtp_desktop", "generate", "--remote", url]
    process = subprocess.Popen(
        [*command, "--remote-model", "m", "hi"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    said = b""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and process.poll() is None:
        ready, _, _ = select.select([process.stderr], [], [], 0.2)
        if ready:
            said += os.read(process.stderr.fileno(), 65536)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    process.wait(10)
    said += process.stderr.read()
    return said.decode()
