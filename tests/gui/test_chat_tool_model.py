"""Issue 27's end-to-end target in the real window (offscreen, the real engine host, a real
stdio MCP server: `tests/mcp_server.py --tools add,get_weather`): a chat on the tool model
(tests/tool-model, trained by `make tool-model` to call tools) with the server enabled and
nothing forced ("Use a tool" not chosen). The model calls get_weather by itself, the chat
asks, the user allows it, the server's result goes back and the model's answer says what the
tool found; a later greeting in the same chat is answered in text, with no call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.tools.mcp.config import McpServer
from qwen_mtp_desktop.devtools.tool_corpus import is_held_out, weather_report
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.transcript.tool_calls_view import ToolCallsView
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_mcp_tools import _finish, _stored_calls
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, window_idle
from tests.models import TOOL_MODEL

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SERVER = McpServer(
    "tests",
    command=sys.executable,
    args=(str(Path(__file__).parents[1] / "mcp_server.py"), "--tools", "add,get_weather"),
)


def _window(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.mcp_servers = [SERVER.to_dict()]
    store.settings.default_model = str(TOOL_MODEL)
    store.save()
    window = _open_window(qtbot)
    chat = window.chat
    assert chat.current_model_dir() == TOOL_MODEL
    options = chat.tool_turns.options
    qtbot.waitUntil(lambda: "tests" in options.checks, timeout=LONG_WAIT)
    options.checks["tests"].setChecked(True)  # this chat enables the server
    qtbot.waitUntil(lambda: "get_weather" in chat.tool_turns.catalog().functions, timeout=LONG_WAIT)
    functions = chat.tool_turns.catalog().functions
    assert sorted(functions) == ["add", "get_weather"]
    return window


def _send(qtbot: QtBot, chat: ChatPanel, text: str) -> None:
    count = len(chat.transcript.messages)
    chat.composer.set_text(text)
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == count + 2, timeout=LONG_WAIT)


def test_the_model_calls_an_mcp_tool_by_itself_and_answers_with_its_result(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    window = _window(qtbot)
    chat = window.chat
    assert chat.tool_turns.options.forced is None  # nothing forces a call
    assert not chat.settings_panel.settings.thinking
    question = "What is the weather in Paris?"
    assert is_held_out(question)  # training never asked it
    _send(qtbot, chat, question)
    answer = chat.transcript.messages[-1]
    qtbot.waitUntil(
        lambda: answer.findChild(ToolCallsView) is not None or not chat.generating,
        timeout=LONG_WAIT,
    )
    view = answer.findChild(ToolCallsView)
    assert view is not None, f"the model did not call a tool; it answered {answer.content!r}"
    qtbot.waitUntil(view.consent.isVisible, timeout=LONG_WAIT)
    assert "'get_weather' from 'tests'" in view.question.text()
    assert "<tool_call>" not in answer.content
    qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)

    (call,) = _stored_calls(chat)
    assert call["function"] == call["tool"] == "get_weather" and call["server"] == "tests"
    assert json.loads(str(call["arguments"])) == {"city": "Paris"}
    report = weather_report("Paris")
    assert call["status"] == "ok" and call["result"] == report
    condition, temperature = report.split(": ")[1].removesuffix(" C").split(", ")
    stored = chat._messages[-1]
    assert stored.status == "complete"
    assert stored.content == f"It is {condition} and {temperature} C in Paris."
    stats = stored.stats
    assert stats is not None and stats["finish_reason"] == "eos"
    assert stats["method"]["kind"] == "mtp" and stats["accepted_tokens"] > 0
    row = view.rows[0]
    assert "get_weather (tests) · done in" in row.toggle.text()
    row.toggle.click()
    chat.transcript.ensureWidgetVisible(view)
    qtbot.wait(300)
    window.grab().save(str(screenshot_dir / "mcp-tool-model-call.png"))

    # A greeting after it (the whole conversation, the call included, is the prompt): text.
    _send(qtbot, chat, "Hello there")
    qtbot.waitUntil(lambda: not chat.generating, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    greeting = chat.transcript.messages[-1]
    assert greeting.findChild(ToolCallsView) is None
    assert chat._messages[-1].content == "Hello! I can check the weather and add numbers."
