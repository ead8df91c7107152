"""Tools > MCP servers (ui.dialogs.mcp_servers): add, edit, remove and import servers, bad input
named in the dialog (never saved, never a traceback), a real server tested (its tools listed off the
GUI thread), everything kept in the settings file."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.tools.mcp.config import McpServer, allowing_tool, servers_from_settings
from qwen_mtp_desktop.ui.dialogs.mcp_servers import McpServersDialog
from qwen_mtp_desktop.workers.mcp_tools import McpTools

pytestmark = [pytest.mark.gui]
TEST_SERVER = str(Path(__file__).parents[1] / "mcp_server.py")


@pytest.fixture
def tools() -> Iterator[McpTools]:
    made = McpTools()
    yield made
    made.shutdown()


def _dialog(qtbot: QtBot, tmp_path: Path, tools: McpTools) -> McpServersDialog:
    dialog = McpServersDialog(SettingsStore(tmp_path / "settings.json"), tools)
    qtbot.addWidget(dialog)
    dialog.show()
    return dialog


def _saved(tmp_path: Path) -> list[McpServer]:
    return servers_from_settings(SettingsStore(tmp_path / "settings.json").settings.mcp_servers)


@pytest.mark.subprocess
def test_add_edit_remove_and_bad_input(qtbot: QtBot, tmp_path: Path, tools: McpTools) -> None:
    dialog = _dialog(qtbot, tmp_path, tools)
    assert dialog.server_list.count() == 0
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    dialog.name_edit.setText("tests")
    dialog.command_edit.setText(sys.executable)
    dialog.args_edit.setText(f'"{TEST_SERVER}"')
    dialog.env_edit.setPlainText("MODE=quiet\nEMPTY=")
    assert dialog.save_current()
    (saved,) = _saved(tmp_path)
    assert saved.args == (TEST_SERVER,) and dict(saved.env) == {"MODE": "quiet", "EMPTY": ""}

    for field, value, words in (
        (dialog.name_edit, "a/b", "is not usable"),
        (dialog.args_edit, '"unclosed', "close the quote"),
        (dialog.command_edit, "", "the command is empty"),
    ):
        old = field.text()
        field.setText(value)
        assert not dialog.save_current()
        assert words in dialog.status.text()
        field.setText(old)
    dialog.env_edit.setPlainText("no equals sign")
    assert not dialog.save_current() and "expected NAME=VALUE" in dialog.status.text()
    dialog.env_edit.setPlainText("")
    dialog.kind_combo.setCurrentIndex(1)
    assert dialog.url_edit.isVisible() and not dialog.command_edit.isVisible()
    dialog.url_edit.setText("ftp://example.com/")
    assert not dialog.save_current() and "not an http://" in dialog.status.text()
    assert _saved(tmp_path) == [saved]  # nothing bad was written

    # Test: the real server's tools, listed off the GUI thread.
    dialog.kind_combo.setCurrentIndex(0)
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    assert "asking for its tools" in dialog.status.text()
    qtbot.waitUntil(lambda: dialog.tools_list.count() > 0, timeout=60_000)
    assert dialog.status.text() == "7 tools:"
    # Each tool with what it does (issue 44, minor 12), one line each, the rest in a tooltip.
    rows = [dialog.tools_list.item(row) for row in range(dialog.tools_list.count())]
    assert "add — Add two whole numbers." in [item.text() for item in rows]
    assert dialog.tools_list.isVisible()
    assert "Add two whole numbers." in rows[0].toolTip()

    # Remove asks first; "Cancel" keeps the server (issue 44, minor 12).
    asked: list[str] = []
    dialog.confirm = lambda _parent, _title, text, _action: asked.append(text) or False
    qtbot.mouseClick(dialog.remove_button, Qt.MouseButton.LeftButton)
    assert asked and "'tests'" in asked[0]
    assert dialog.server_list.count() == 1 and _saved(tmp_path) == [saved]
    dialog.confirm = lambda *_args: True
    qtbot.mouseClick(dialog.remove_button, Qt.MouseButton.LeftButton)
    assert dialog.server_list.count() == 0 and _saved(tmp_path) == []


@pytest.mark.subprocess
@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_a_program_that_is_not_an_mcp_server_says_why(
    qtbot: QtBot, tmp_path: Path, tools: McpTools, size: tuple[int, int]
) -> None:
    """Issue 44, minor 12: Test on a program that is not an MCP server said only "Connection
    closed", and its fix sent the user to "Tools > MCP servers", the dialog they were in. It
    now quotes the program's last lines on stderr and says what to check "here"."""
    dialog = _dialog(qtbot, tmp_path, tools)
    dialog.resize(*size)
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    dialog.name_edit.setText("not-mcp")
    dialog.command_edit.setText(sys.executable)
    usage = "usage: notes-app [--open FILE]; unknown option --stdio"
    script = f"import sys; print({usage!r}, file=sys.stderr); sys.exit(2)"
    dialog.args_edit.setText(f'-c "{script}" --stdio')
    assert dialog.save_current()
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "handshake" in dialog.status.text(), timeout=60_000)
    text = dialog.status.text()
    assert "ended before answering MCP's handshake" in text
    assert f'Its last output: "{usage}". Check' in text
    assert "Tools > MCP servers" not in text
    assert text.endswith(
        "Check the command and its arguments here: they must start an MCP server on stdio."
    )
    assert not dialog.tools_list.isVisible()
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    qtbot.wait(50)
    assert dialog.grab().save(str(shots / f"mcp_not_a_server_{size[0]}.png"))


@pytest.mark.subprocess
@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_screenshot_of_listed_tools(
    qtbot: QtBot, tmp_path: Path, tools: McpTools, size: tuple[int, int]
) -> None:
    dialog = _dialog(qtbot, tmp_path, tools)
    dialog.resize(*size)
    qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    dialog.name_edit.setText("tests")
    dialog.command_edit.setText(sys.executable)
    dialog.args_edit.setText(f'"{TEST_SERVER}"')
    assert dialog.save_current()
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.tools_list.count() > 0, timeout=60_000)
    # Every row fits the list's width: long descriptions end in "…", never run off.
    assert dialog.tools_list.horizontalScrollBar().maximum() == 0
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    qtbot.wait(50)
    assert dialog.grab().save(str(shots / f"mcp_tools_{size[0]}.png"))


def test_import_json(qtbot: QtBot, tmp_path: Path, tools: McpTools) -> None:
    dialog = _dialog(qtbot, tmp_path, tools)
    dialog.import_button.click()
    importer = dialog.import_dialog
    assert importer is not None
    importer.text.setPlainText('{"mcpServers": {"x": {"command": 5}}}')
    importer._import()
    assert importer.isVisible() and "must be text" in importer.error.text()
    block = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}},
            "web": {"url": "https://example.com/mcp", "headers": {"X-Key": "k"}},
        }
    }
    importer.text.setPlainText(json.dumps(block))
    importer._import()
    assert not importer.isVisible()
    assert [s.name for s in _saved(tmp_path)] == ["files", "web"]
    assert dialog.server_list.count() == 2 and "Imported 2 servers" in dialog.status.text()
    dialog.server_list.setCurrentRow(1)
    assert dialog.url_edit.text() == "https://example.com/mcp"
    assert dialog.headers_edit.toPlainText() == "X-Key: k"
    dialog.timeout_spin.setValue(15)
    assert SettingsStore(tmp_path / "settings.json").settings.tool_timeout_s == 15


def _chat_allows(store: SettingsStore, server: str, tool: str) -> None:
    """What the window does for the chat's "Always allow this tool" (MainWindow._allow_tool):
    that entry changes, on the latest settings."""
    servers = allowing_tool(servers_from_settings(store.settings.mcp_servers), server, tool)
    stored = [s.to_dict() for s in servers]
    store.update(lambda settings: setattr(settings, "mcp_servers", stored))


def test_saves_merge_and_the_dialog_shows_what_is_saved_now(
    qtbot: QtBot, tmp_path: Path, tools: McpTools
) -> None:
    """Issue 44: the dialog, made once and shown again, showed "Always allowed: none" after the
    chat allowed a tool, and saving a server from it wrote its old copy back (the settings
    file lost `always_allowed: ["add"]`). Two parts of the app save, in either order: both
    changes stay."""
    store = SettingsStore(tmp_path / "settings.json")
    store.settings.mcp_servers = [
        McpServer("calc", command=sys.executable, args=("a.py",)).to_dict(),
        McpServer("other", command="npx").to_dict(),
    ]
    store.save()
    dialog = McpServersDialog(store, tools)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.allowed_label.text().startswith("none")
    assert not dialog.forget_allowed.isEnabled()

    # The chat allows `add` while the dialog is open with what it read before; then the
    # dialog saves an edit of that server: `add` stays.
    _chat_allows(store, "calc", "add")
    dialog.args_edit.setText("b.py")
    assert dialog.save_current()
    calc, other = _saved(tmp_path)
    assert calc.args == ("b.py",) and calc.always_allowed == ("add",)
    assert dialog.allowed_label.text() == "add" and dialog.forget_allowed.isEnabled()

    # The reverse: the dialog saves first (another server's edit), then the chat allows: both.
    dialog.server_list.setCurrentRow(1)
    dialog.args_edit.setText("-y pkg")
    assert dialog.save_current()
    _chat_allows(store, "calc", "mul")
    calc, other = _saved(tmp_path)
    assert other.args == ("-y", "pkg") and calc.always_allowed == ("add", "mul")
    assert calc.args == ("b.py",)

    # Closed and shown again (as Tools > MCP servers does): the permissions saved since show,
    # and "Ask again for every tool" revokes them, nothing else.
    dialog.hide()
    _chat_allows(store, "calc", "sub")
    dialog.show()
    dialog.server_list.setCurrentRow(0)
    assert dialog.allowed_label.text() == "add, mul, sub"
    assert dialog.forget_allowed.isEnabled()
    qtbot.mouseClick(dialog.forget_allowed, Qt.MouseButton.LeftButton)
    calc, other = _saved(tmp_path)
    assert calc.always_allowed == () and calc.args == ("b.py",) and other.args == ("-y", "pkg")
    assert dialog.allowed_label.text().startswith("none")
    assert not dialog.forget_allowed.isEnabled()
