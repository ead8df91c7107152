"""Tools > Local API server: the window starts the API server inside its engine process, other
apps get answers from the chat's model, and the server comes back after the engine dies."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.turns import DEMO_EXAMPLES
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore, load_settings
from qwen_mtp_desktop.ui.dialogs.api_server import ServerDialog
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    qtbot.waitUntil(lambda: window.chat._loaded is not None, timeout=LONG_WAIT)
    yield window
    window.close()


def _start(qtbot: QtBot, dialog: ServerDialog, port: int) -> None:
    dialog.port_spin.setValue(port)
    with qtbot.waitSignal(dialog._engine_process.api_state, timeout=60_000):
        dialog.start_button.click()


def _ask(url: str, prompt: str, key: str = "none") -> openai.types.chat.ChatCompletion:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=120)
    return client.chat.completions.create(
        model="demo-model",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=24,
        temperature=0,
    )


def test_the_window_serves_its_model_and_brings_the_server_back(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    dialog = window.show_server_dialog()
    port = _free_port()
    _start(qtbot, dialog, port)
    url = f"http://127.0.0.1:{port}"
    assert window.engine_process.api_url == url
    assert dialog.status_label.text().startswith(f"Running at {url}/v1")
    assert "(this computer only)" in dialog.status_label.text()
    assert window.api_label.isVisible() and url in window.api_label.text()
    example = dialog.example.toPlainText()
    assert f"curl {url}/v1/chat/completions" in example and '"demo-model"' in example
    assert not dialog.port_spin.isEnabled()  # settings are fixed while it runs
    assert load_settings(app_paths().settings_file).settings.api_server is True
    for size, name in (((1024, 700), "small"), ((1600, 1000), "large")):
        window.resize(*size)
        dialog.resize(640, 420) if name == "small" else dialog.resize(1000, 640)
        qtbot.wait(50)
        dialog.grab().save(str(screenshot_dir / f"server_dialog_{name}.png"))
        assert dialog.start_button.geometry().bottom() < dialog.height()

    answer = _ask(url, "Count from 1 to 10.")
    assert answer.choices[0].message.content.split()[:3] == ["1", "2", "3"]
    stats = answer.model_extra["mtp"] if answer.model_extra else None
    assert stats is not None and stats["drafted_tokens"] >= stats["accepted_tokens"] >= 0
    # The dialog lists it: time, endpoint, status, tokens, duration; not what was asked.
    log = dialog.request_log
    qtbot.waitUntil(lambda: log.rowCount() >= 1, timeout=10_000)
    row = [log.item(0, column).text() for column in range(log.columnCount())]
    assert row[1:3] == ["POST /v1/chat/completions", "200"]
    assert answer.usage is not None and row[3] == str(answer.usage.completion_tokens)
    assert row[4].endswith(" s") and float(row[4][:-2]) > 0
    cells = [log.item(r, c).text() for r in range(log.rowCount()) for c in range(5)]
    assert not any("Count from" in cell for cell in cells)
    dialog.grab().save(str(screenshot_dir / "server_dialog_requests.png"))

    # The engine dies: the server goes with it and comes back with the new engine, same port.
    pid = window.engine_process.pid
    assert pid is not None
    states: list[str | None] = []
    window.engine_process.api_state.connect(lambda u, _e: states.append(u))
    os.kill(pid, signal.SIGKILL)
    qtbot.waitUntil(lambda: states[-1:] == [url], timeout=LONG_WAIT)
    assert states[0] is None
    qtbot.waitUntil(lambda: window.engine_process.loaded_model is not None, timeout=LONG_WAIT)
    assert _ask(url, "Count from 1 to 10.").choices[0].message.content.split()[:2] == ["1", "2"]

    # Stop: gone, and remembered as off.
    with qtbot.waitSignal(window.engine_process.api_state, timeout=60_000) as stopped:
        dialog.start_button.click()
    assert stopped.args == [None, None]
    assert dialog.status_label.text().startswith("Off.")
    assert not window.api_label.isVisible()
    assert load_settings(app_paths().settings_file).settings.api_server is False
    with pytest.raises(openai.APIConnectionError):
        _ask(url, "hello")


def test_a_taken_port_and_a_network_server_without_a_key_are_explained(
    qtbot: QtBot, window: MainWindow
) -> None:
    dialog = window.show_server_dialog()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        _start(qtbot, dialog, port)
        text = dialog.status_label.text()
    assert text.startswith("Not running:") and f"Port {port}" in text and "in use" in text
    assert window.engine_process.api_url is None
    assert dialog.port_spin.isEnabled()
    assert load_settings(app_paths().settings_file).settings.api_server is False

    dialog.lan_check.setChecked(True)
    dialog.key_edit.setText("")
    dialog.start_button.click()
    assert "only connect with an API key" in dialog.status_label.text()
    assert window.engine_process.api_url is None
    dialog.generate_button.click()
    key = dialog.key_edit.text()
    assert len(key) >= 24
    assert f'Bearer {key}"' in dialog.example.toPlainText()


def test_a_server_left_on_starts_with_the_app(qtbot: QtBot) -> None:
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    port = _free_port()
    store.settings.api_server = True
    store.settings.api_server_port = port
    store.settings.api_server_key = "sesame-1234"
    store.save()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    qtbot.waitUntil(lambda: window.engine_process.api_url is not None, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window.engine_process.loaded_model is not None, timeout=LONG_WAIT)
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(openai.AuthenticationError):
        _ask(url, "hello", key="wrong")
    answer = _ask(url, "Count from 1 to 10.", key="sesame-1234")
    assert answer.choices[0].message.content.split()[:2] == ["1", "2"]
    window.close()


def _rows(dialog: ServerDialog, count: int) -> list[list[str]]:
    log = dialog.request_log
    return [[log.item(r, c).text() for c in range(log.columnCount())] for r in range(count)]


def test_streamed_requests_count_their_tokens_and_the_example_fits_the_model(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    """Issue 44, minor 13, through the window's engine host: streamed answers (chat
    completions with and without usage, Responses) list their tokens as a whole answer does,
    and a stream the client leaves part-way lists the tokens made until then, not "-"; the
    example request is the demo model's own first example, and it answers it; the status bar
    keeps the API address and the model apart."""
    dialog = window.show_server_dialog()
    port = _free_port()
    _start(qtbot, dialog, port)
    url = f"http://127.0.0.1:{port}"
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": "Count from 1 to 12."}]
    with_usage = list(
        client.chat.completions.create(
            model="demo-model", messages=messages, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    usage = next(c.usage for c in with_usage if c.usage is not None)
    list(
        client.chat.completions.create(
            model="demo-model", messages=messages, temperature=0, stream=True
        )
    )
    with client.responses.stream(model="demo-model", input="Count from 1 to 7.") as stream:
        final = stream.get_final_response()
    log = dialog.request_log
    qtbot.waitUntil(lambda: log.rowCount() >= 3, timeout=10_000)
    rows = _rows(dialog, 3)  # newest on top
    assert [row[1] for row in rows] == [
        "POST /v1/responses",
        "POST /v1/chat/completions",
        "POST /v1/chat/completions",
    ]
    assert final.usage is not None and rows[0][3] == str(final.usage.output_tokens)
    # The same greedy answer, streamed with and without usage: the same count.
    assert rows[1][3] == rows[2][3] == str(usage.completion_tokens) and usage.completion_tokens > 0

    # A client that reads the first steps and leaves: the tokens made so far.
    long = {"role": "user", "content": "Count from 1 to 40."}
    with httpx.stream(
        "POST", f"{url}/v1/chat/completions", timeout=120,
        json={"model": "demo-model", "messages": [long], "stream": True, "max_tokens": 400},
    ) as response:  # fmt: skip
        for seen, _line in enumerate(response.iter_lines()):
            if seen >= 3:
                break
    qtbot.waitUntil(lambda: log.rowCount() >= 4, timeout=10_000)
    left = _rows(dialog, 1)[0]
    assert left[1] == "POST /v1/chat/completions" and left[3].isdigit(), left
    assert 0 < int(left[3]) < 120  # the whole count is ~120 tokens; it left long before

    # The example asks what this model answers well: the demo's own first example.
    example = dialog.example.toPlainText()
    assert DEMO_EXAMPLES[0] in example and "Count from 1 to 10." not in example
    body = json.loads(shlex.split(example.replace("\\\n", " "))[-1])
    answer = client.chat.completions.create(**body, temperature=0)
    assert answer.choices[0].message.content.split()[:3] == ["1", "2", "3"]

    # The status bar: the API address, a line, then the model; no run-on text.
    separator = window.api_separator
    assert window.api_label.isVisible() and separator.isVisible()
    assert window.api_label.geometry().right() < separator.geometry().left()
    assert separator.geometry().right() < window.model_label.geometry().left()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        dialog.resize(640, 480) if width == 1024 else dialog.resize(1000, 640)
        qtbot.wait(50)
        assert window.grab().save(str(screenshot_dir / f"server_status-{width}x{height}.png"))
        assert dialog.grab().save(str(screenshot_dir / f"server_log-{width}x{height}.png"))
