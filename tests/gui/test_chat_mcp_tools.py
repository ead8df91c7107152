"""Issue 27 item 5 in the real window (offscreen, the real engine host on the demo model, a real
stdio MCP server, tests/mcp_server.py): a chat enables the server, "Use a tool" forces a call
(a grammar: the demo model never calls a tool by itself; the tool model does, in
test_chat_tool_model.py), the chat asks before it runs, the tool runs on the server, its
result goes back to the model, which answers; the call is shown folded and stored with the
answer. A hanging tool times out, a crashing server is reported,
Deny and Stop end cleanly. Screenshots of the servers dialog and a transcript with a call."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QScrollArea
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.tools import trace_from_record
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.tools.mcp.config import McpServer, servers_from_settings
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.transcript.tool_calls_view import ToolCallsView
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_panel import LONG_WAIT, window_idle

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SERVER = McpServer(
    "tests", command=sys.executable, args=(str(Path(__file__).parents[1] / "mcp_server.py"),)
)


def _window(qtbot: QtBot, width: int = 1280, height: int = 800) -> MainWindow:
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.mcp_servers = [SERVER.to_dict()]
    store.settings.tool_timeout_s = 3.0
    store.save()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready and chat._loaded is not None, timeout=LONG_WAIT)
    options = chat.tool_turns.options
    qtbot.waitUntil(lambda: "tests" in options.checks, timeout=LONG_WAIT)
    options.checks["tests"].setChecked(True)  # this chat enables the server
    qtbot.waitUntil(lambda: "ping" in chat.tool_turns.catalog().functions, timeout=LONG_WAIT)
    return window


def _ask(qtbot: QtBot, chat: ChatPanel, text: str, tool: str) -> ToolCallsView:
    """Send `text` with a forced call of `tool`; returns the answer's tool calls view once it
    asks for permission."""
    chat.tool_turns.options.choose_forced(tool)
    count = len(chat.transcript.messages)
    chat.composer.set_text(text)
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == count + 2, timeout=LONG_WAIT)
    answer = chat.transcript.messages[-1]
    qtbot.waitUntil(
        lambda: answer.findChild(ToolCallsView) is not None or not chat.generating,
        timeout=LONG_WAIT,
    )
    view = answer.findChild(ToolCallsView)
    assert view is not None, f"no tool call; the answer: {answer.content!r}"
    return view


def _asking(chat: ChatPanel, view: ToolCallsView) -> ToolCallsView | None:
    """The call view that asks for consent now: `view`, or one a later round of the same turn
    added (a model that calls again after a result)."""
    views = [view, *(v for m in chat.transcript.messages for v in m.findChildren(ToolCallsView))]
    return next((v for v in views if v.consent.isVisible()), None)


def _finish(qtbot: QtBot, chat: ChatPanel, view: ToolCallsView) -> None:
    """Let the turn end: a further call the model makes by itself is denied."""
    for _ in range(10):
        qtbot.waitUntil(
            lambda: not chat.generating or _asking(chat, view) is not None, timeout=LONG_WAIT
        )
        asking = _asking(chat, view)
        if not chat.generating or asking is None:
            break
        qtbot.mouseClick(asking.deny, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)


def _stored_calls(chat: ChatPanel) -> list[dict[str, object]]:
    stats = chat._messages[-1].stats
    assert stats is not None
    return [c.__dict__ for r in trace_from_record(stats.get("tool_calls")) for c in r.calls]


def test_forced_call_consent_result_and_answer(
    qtbot: QtBot, screenshot_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = _window(qtbot)
    chat = window.chat
    view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
    assert view.consent.isVisible() and "'ping' from 'tests'" in view.question.text()
    assert chat.generating  # the turn waits for the user, the window does not
    assert "<tool_call>" not in chat.transcript.messages[-1].content
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        chat.transcript.ensureWidgetVisible(view.consent)
        qtbot.wait(300)
        assert view.allow_always.isVisible() and view.deny.width() > 20
        window.grab().save(str(screenshot_dir / f"mcp-consent-{width}x{height}.png"))
    window.resize(1280, 800)
    qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    calls = _stored_calls(chat)
    assert calls[0]["tool"] == "ping" and calls[0]["status"] == "ok"
    assert calls[0]["result"] == "pong"
    answer = chat.transcript.messages[-1]
    stored = chat._messages[-1]
    assert stored.status == "complete" and "<tool_call>" not in stored.content
    row = answer.findChild(ToolCallsView).rows[0]
    assert "ping (tests) · done in" in row.toggle.text()
    assert not row.details.isVisible()  # folded by default
    qtbot.mouseClick(row.toggle, Qt.MouseButton.LeftButton)
    assert row.details.isVisible() and "pong" in row.details.toPlainText()

    # Always allow: saved with the server; the next call runs without asking.
    view = _ask(qtbot, chat, "Count from 1 to 6.", "ping")
    qtbot.mouseClick(view.allow_always, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    saved = servers_from_settings(window._store.settings.mcp_servers)
    assert saved[0].always_allowed == ("ping",)
    view = _ask(qtbot, chat, "Count from 1 to 7.", "ping")
    _finish(qtbot, chat, view)
    assert _stored_calls(chat)[0]["status"] == "ok"

    # Reopened, the chat shows each answer's calls, folded.
    conversation_id = chat.conversation.id
    chat.new_chat()
    chat.open_conversation(conversation_id)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) >= 6, timeout=LONG_WAIT)
    views = [w.findChild(ToolCallsView) for w in chat.transcript.messages if w.role != "user"]
    assert all(v is not None and v.rows for v in views)
    assert all(not v.rows[0].details.isVisible() for v in views if v is not None)

    # Exported (the chat list's actions), the calls and their results are in both formats.
    for action, name in (("export-md", "chat.md"), ("export-json", "chat.json")):
        target = tmp_path / name
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a, t=target: (str(t), ""))
        chat._on_conversation_action(action, conversation_id)
        qtbot.waitUntil(target.exists, timeout=LONG_WAIT)
    markdown = (tmp_path / "chat.md").read_text(encoding="utf-8")
    assert markdown.count("<details><summary>Tool: ping (tests) · done in") == 3
    assert "Function `ping`, arguments:\n\n```json\n{}\n```" in markdown
    assert "Result:\n\n```text\npong\n```" in markdown
    assert "<tool_call>" not in markdown
    exported = json.loads((tmp_path / "chat.json").read_text(encoding="utf-8"))
    answers = [m for m in exported["messages"] if m["role"] == "assistant"]
    assert len(answers) == 3 and all("tool_calls" not in m["stats"] for m in answers)
    for answer_json in answers:
        ((call,),) = [round_["calls"] for round_ in answer_json["tool_calls"]]
        assert (call["function"], call["server"], call["tool"]) == ("ping", "tests", "ping")
        assert call["status"] == "ok" and call["result"] == "pong"
        assert json.loads(call["arguments"]) == {} and call["duration_s"] > 0

    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        first = views[0]
        assert first is not None
        if not first.rows[0].expanded:
            first.rows[0].toggle.click()
        chat.transcript.ensureWidgetVisible(first)
        qtbot.wait(300)
        window.grab().save(str(screenshot_dir / f"mcp-transcript-{width}x{height}.png"))
        dialog = window.show_mcp_dialog()
        qtbot.wait(200)
        dialog.grab().save(str(screenshot_dir / f"mcp-servers-dialog-{width}x{height}.png"))
        assert dialog.width() <= width and dialog.height() <= height
        dialog.close()
        chat.settings_toggle.setChecked(True)
        qtbot.wait(100)
        scroll = chat.settings_panel.findChild(QScrollArea)
        assert scroll is not None
        scroll.ensureWidgetVisible(chat.tool_turns.options)
        qtbot.wait(300)
        assert chat.tool_turns.options.checks["tests"].isVisible()
        window.grab().save(str(screenshot_dir / f"mcp-chat-options-{width}x{height}.png"))


def test_timeout_crash_deny_and_stop(qtbot: QtBot) -> None:
    window = _window(qtbot)
    chat = window.chat
    view = _ask(qtbot, chat, "Count from 1 to 5.", "hang")
    qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
    assert chat.generating  # the window answers while the tool hangs
    _finish(qtbot, chat, view)
    (call, *_rest) = _stored_calls(chat)
    assert call["status"] == "failed" and "did not answer within 3 s" in str(call["result"])
    assert "failed" in view.rows[0].toggle.text()

    view = _ask(qtbot, chat, "Count from 1 to 5.", "crash")
    qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    (call, *_rest) = _stored_calls(chat)
    assert call["status"] == "failed" and "crashing on purpose" in str(call["result"])

    view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
    qtbot.mouseClick(view.deny, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    assert _stored_calls(chat)[0]["status"] == "denied"

    # Stop while the chat asks: the answer ends as stopped, nothing runs.
    view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
    chat.stop()
    qtbot.waitUntil(lambda: not chat.generating, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    assert _stored_calls(chat)[0]["status"] == "cancelled"
    stats = chat._messages[-1].stats
    assert stats is not None and stats["finish_reason"] == "cancelled"  # as any stopped answer
    assert not view.consent.isVisible()
    assert "Stopped" in chat.transcript.messages[-1].problem.label.text()


def test_a_remote_model_calls_the_chats_mcp_tools(qtbot: QtBot, screenshot_dir: Path) -> None:
    """A chat on a remote server (a real `serve` of the demo model) gets the chat's MCP tools
    as OpenAI `tools` (a forced call as a named `tool_choice`), the server's streamed
    `tool_calls` go through the same consent and loop as a local model's, and the result goes
    back as a `tool` message the server answers."""
    from tests.gui.test_remote_chat import _add_remote
    from tests.remote_server import KEY, serving

    window = _window(qtbot)
    chat = window.chat
    with serving(demo_model_dir()) as (_process, url):
        qtbot.waitUntil(lambda: chat.remote_models.loaded, timeout=LONG_WAIT)
        endpoint = _add_remote(qtbot, chat, url, KEY)
        assert chat.settings_panel.settings.mcp_servers == ("tests",)  # still enabled
        view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
        assert view.consent.isVisible() and "'ping' from 'tests'" in view.question.text()
        qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
        _finish(qtbot, chat, view)
        for width, height in ((1024, 700), (1600, 1000)):
            window.resize(width, height)
            chat.transcript.ensureWidgetVisible(view)
            qtbot.wait(300)
            window.grab().save(str(screenshot_dir / f"mcp-remote-{width}x{height}.png"))
    calls = _stored_calls(chat)
    assert len(calls) >= 1
    assert (calls[0]["tool"], calls[0]["status"], calls[0]["result"]) == ("ping", "ok", "pong")
    stored = chat._messages[-1]
    assert stored.status == "complete" and stored.content  # the server answered the result
    assert "<tool_call>" not in stored.content
    stats = stored.stats
    assert stats is not None and stats["remote"]["endpoint"] == endpoint.name
    row = view.rows[0]
    assert "ping (tests) · done in" in row.toggle.text()


def _marker_shown(chat: ChatPanel, count: int) -> bool:
    marker = chat.header.tools_button
    return marker.isVisible() and marker.text() == f"Tools: {count}"


def test_tools_are_per_chat_and_the_header_says_when_they_are_on(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    """Issue 44: servers enabled in one chat came along, unseen, into every new chat (Ctrl+N,
    Models > Open in chat), each prompt carrying their tool definitions. A new chat starts
    with none and no marker; the chat that enables a server says so in its header."""
    window = _window(qtbot)
    chat = window.chat
    marker = chat.header.tools_button
    qtbot.waitUntil(lambda: _marker_shown(chat, 1), timeout=LONG_WAIT)
    # Plain text (ui.widgets.plain_text), names listed.
    assert "enables:\ntests\n" in marker.toolTip()
    # A turn makes the chat a stored one (chat A), with its server enabled.
    view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
    qtbot.mouseClick(view.allow_once, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    assert chat.conversation is not None
    chat_a = chat.conversation.id
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(300)
        assert marker.isVisible() and marker.width() >= marker.sizeHint().width()
        assert chat.header.title_label.width() > 100  # the title keeps its room beside it
        window.grab().save(str(screenshot_dir / f"mcp-tools-marker-{width}x{height}.png"))
    window.resize(1280, 800)

    # The marker opens this chat's tool options.
    chat.settings_toggle.setChecked(False)
    qtbot.mouseClick(marker, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat.tool_turns.options.checks["tests"].isVisible())
    assert chat.settings_toggle.isChecked()
    chat.settings_toggle.setChecked(False)

    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)  # File > New chat
    qtbot.waitUntil(lambda: chat.conversation is None)
    assert chat.settings_panel.settings.mcp_servers == ()
    assert not chat.tool_turns.options.checks["tests"].isChecked()
    assert not marker.isVisible() and not chat.tool_turns.catalog().functions
    window.grab().save(str(screenshot_dir / "mcp-new-chat-no-tools-1280x800.png"))

    chat.open_conversation(chat_a)
    qtbot.waitUntil(lambda: chat.conversation is not None and chat.conversation.id == chat_a)
    qtbot.waitUntil(lambda: _marker_shown(chat, 1), timeout=LONG_WAIT)
    assert chat.tool_turns.options.checks["tests"].isChecked()

    window._open_in_chat(demo_model_dir())  # Models > Open in chat
    qtbot.waitUntil(lambda: chat.conversation is None)
    assert chat.settings_panel.settings.mcp_servers == () and not marker.isVisible()

    chat.open_conversation(chat_a)
    qtbot.waitUntil(lambda: _marker_shown(chat, 1), timeout=LONG_WAIT)
    assert chat.conversation is not None and chat.conversation.settings.mcp_servers == ("tests",)


def test_always_allow_while_the_servers_dialog_is_open(qtbot: QtBot, screenshot_dir: Path) -> None:
    """Issue 44: the MCP servers dialog, opened before the chat allowed a tool, showed "none"
    and saving a server from it wrote its old copy back over the permission. Now it shows the
    permission, keeps it through its own save, and "Ask again for every tool" revokes it."""
    window = _window(qtbot)
    chat = window.chat
    dialog = window.show_mcp_dialog()
    assert dialog.allowed_label.text().startswith("none")
    view = _ask(qtbot, chat, "Count from 1 to 5.", "ping")
    qtbot.mouseClick(view.allow_always, Qt.MouseButton.LeftButton)
    _finish(qtbot, chat, view)
    assert dialog.allowed_label.text() == "ping" and dialog.forget_allowed.isEnabled()
    dialog.env_edit.setPlainText("MODE=quiet")
    assert dialog.save_current()
    (saved,) = servers_from_settings(SettingsStore(window._store.path).settings.mcp_servers)
    assert saved.always_allowed == ("ping",) and dict(saved.env) == {"MODE": "quiet"}
    dialog.close()
    window.show_mcp_dialog()  # shown again: what is saved now
    assert dialog.allowed_label.text() == "ping"
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        window.show_mcp_dialog()
        qtbot.wait(200)
        assert dialog.forget_allowed.isVisible() and dialog.allowed_label.isVisible()
        assert dialog.width() <= width and dialog.height() <= height
        dialog.grab().save(str(screenshot_dir / f"mcp-dialog-allowed-{width}x{height}.png"))
    qtbot.mouseClick(dialog.forget_allowed, Qt.MouseButton.LeftButton)
    (saved,) = servers_from_settings(SettingsStore(window._store.path).settings.mcp_servers)
    assert saved.always_allowed == () and dict(saved.env) == {"MODE": "quiet"}
    # The dialog's saves restarted the server: its tools are listed again, then it asks again.
    qtbot.waitUntil(lambda: "ping" in chat.tool_turns.catalog().functions, timeout=LONG_WAIT)
    view = _ask(qtbot, chat, "Count from 1 to 6.", "ping")
    assert view.consent.isVisible()
    _finish(qtbot, chat, view)
