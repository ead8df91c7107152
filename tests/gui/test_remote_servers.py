"""Tools > Remote servers…: the one place listing the saved remote servers with Add, Edit and
Remove (issue 28). The real window offscreen, the real endpoints file and chat store; no
server needs to run: listing, editing and removing never reach the network, and a chat whose
server was removed must say so when opened rather than fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.remote.endpoints import (
    RemoteEndpoint,
    load_endpoints,
    remote_ref,
    save_endpoints,
)
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.remote.dialog import RemoteServerDialog
from qwen_mtp_desktop.ui.chat.remote.picker import EDIT, MANAGE
from qwen_mtp_desktop.ui.chat.remote.servers import EMPTY_TEXT, RemoteServersDialog
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000
GPU = RemoteEndpoint("a1b2c3", "GPU server", "http://192.168.1.20:8000/v1", "Qwen3.5-9B", False)
OVMS = RemoteEndpoint("d4e5f6", "OVMS team", "http://ovms.lan:8000/v3", "qwen35", False)


def _open(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready and chat.remote_models.loaded, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    return window


def _rows(dialog: RemoteServersDialog) -> list[list[str]]:
    rows = []
    for index in range(dialog.table.topLevelItemCount()):
        item = dialog.table.topLevelItem(index)
        assert item is not None
        rows.append([item.text(column) for column in range(4)])
    return rows


def _seed_remote_chat() -> int:
    """Two saved servers and a chat with GPU server's model and two messages."""
    app_paths().ensure()
    save_endpoints([GPU, OVMS])
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        local = store.create_conversation("Local chat")
        store.add_message(local.id, "user", "local question")
        chat = store.create_conversation("Remote chat", model_dir=str(remote_ref(GPU.id)))
        store.add_message(chat.id, "user", "What is OpenVINO?")
        store.add_message(chat.id, "assistant", "A toolkit for inference.")
        return chat.id


def _problem(chat: ChatPanel) -> str:
    return chat.figures.label.text() if chat.figures.label.isVisible() else ""


def test_list_edit_and_remove_in_one_place(qtbot: QtBot, screenshot_dir: Path) -> None:
    remote_chat = _seed_remote_chat()
    window = _open(qtbot)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.conversation is not None, timeout=LONG_WAIT)
    assert chat.conversation is not None and chat.conversation.id == remote_chat

    # Tools > Remote servers… lists every saved server.
    window.remote_action.trigger()
    dialog = chat.remote_servers_dialog
    assert isinstance(dialog, RemoteServersDialog) and dialog.isVisible()
    assert _rows(dialog) == [
        ["GPU server", "Qwen3.5-9B", "http://192.168.1.20:8000/v1", "none"],
        ["OVMS team", "qwen35", "http://ovms.lan:8000/v3", "none"],
    ]
    assert not dialog.empty_label.isVisible()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        dialog.resize(min(720, width - 80), 360)
        QApplication.processEvents()
        assert dialog.grab().save(str(screenshot_dir / f"remote-servers-{width}x{height}.png"))
        for button in (dialog.add_button, dialog.edit_button, dialog.remove_button):
            assert button.width() >= button.minimumSizeHint().width()
        header = dialog.table.header()
        assert sum(header.sectionSize(c) for c in range(4)) <= dialog.table.viewport().width()

    # Edit: the second server's name and model; the list and the picker follow.
    dialog.select(OVMS.id)
    editor = dialog.edit_selected()
    assert isinstance(editor, RemoteServerDialog) and editor.isVisible()
    assert editor.url_edit.text() == OVMS.base_url
    editor.name_edit.setText("OVMS (team)")
    editor.model_combo.setCurrentText("qwen35-int4")
    editor.buttons.button(editor.buttons.StandardButton.Save).click()
    assert _rows(dialog)[1][:2] == ["OVMS (team)", "qwen35-int4"]
    assert dialog.selected() is not None and dialog.selected().id == OVMS.id  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    assert [e.name for e in load_endpoints().endpoints] == ["GPU server", "OVMS (team)"]
    picker = chat.model_picker
    assert picker.findText("OVMS (team)") >= 0 and picker.findData(MANAGE) >= 0

    # Remove asks; Cancel keeps the server.
    dialog.select(GPU.id)
    box = dialog.remove_selected()
    assert isinstance(box, QMessageBox) and "Remove the remote server “GPU server”" in box.text()
    assert "keep their messages" in box.text()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert len(_rows(dialog)) == 2
    # Remove removes it: the open chat, which uses it, says so plainly.
    box = dialog.remove_selected()
    assert box is not None
    next(b for b in box.buttons() if b.text() == "Remove").click()
    assert [row[0] for row in _rows(dialog)] == ["OVMS (team)"]
    qtbot.waitUntil(lambda: "no longer in the list" in _problem(chat), timeout=30_000)
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    assert [e.id for e in load_endpoints().endpoints] == [OVMS.id]
    assert chat.model_picker.findText("GPU server") < 0
    dialog.close()

    # Opened again later: the chat says its server is gone; its messages are all there.
    chat.new_chat()
    qtbot.waitUntil(lambda: chat._loaded is not None, timeout=LONG_WAIT)
    chat.open_conversation(remote_chat)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: "no longer in the list" in _problem(chat), timeout=30_000)
    assert "add the server again" in _problem(chat)
    assert chat.model_picker.currentText() == "Removed server"  # not another model's name
    assert [m.content for m in chat.transcript.messages] == [
        "What is OpenVINO?",
        "A toolkit for inference.",
    ]
    window.close()


def test_the_picker_opens_the_list_and_edit_asks_before_remove(qtbot: QtBot) -> None:
    app_paths().ensure()
    save_endpoints([GPU])
    window = _open(qtbot)
    chat = window.chat
    picker = chat.model_picker
    picker.activated.emit(picker.findData(MANAGE, Qt.ItemDataRole.UserRole))
    dialog = chat.remote_servers_dialog
    assert dialog is not None and dialog.isVisible()
    assert [row[0] for row in _rows(dialog)] == ["GPU server"]
    dialog.close()
    # The picker's own Edit dialog asks before Remove too.
    chat._on_model_changed(remote_ref(GPU.id))
    qtbot.waitUntil(lambda: picker.findData(EDIT, Qt.ItemDataRole.UserRole) >= 0)
    picker.activated.emit(picker.findData(EDIT, Qt.ItemDataRole.UserRole))
    editor = chat.remote_dialog
    assert isinstance(editor, RemoteServerDialog) and editor.remove_button is not None
    editor.remove_button.click()
    assert editor.confirm is not None and editor.isVisible()
    editor.confirm.button(QMessageBox.StandardButton.Cancel).click()
    assert editor.isVisible() and not editor.removed
    assert [e.id for e in chat.remote_models.endpoints] == [GPU.id]
    editor.remove_button.click()
    assert editor.confirm is not None
    next(b for b in editor.confirm.buttons() if b.text() == "Remove").click()
    assert editor.removed and chat.remote_models.endpoints == []
    qtbot.waitUntil(lambda: "no longer in the list" in _problem(chat), timeout=30_000)
    window.close()


def test_without_servers_the_list_says_how_to_add_one(qtbot: QtBot) -> None:
    window = _open(qtbot)
    dialog = window.chat.show_remote_servers()
    assert dialog.table.isHidden() and dialog.empty_label.text() == EMPTY_TEXT
    assert not dialog.edit_button.isEnabled() and not dialog.remove_button.isEnabled()
    assert dialog.remove_selected() is None and dialog.edit_selected() is None
    editor = dialog.add()
    assert editor.windowTitle() == "Add remote server"
    editor.url_edit.setText("not a url at all")
    editor.model_combo.setCurrentText("m")
    editor.buttons.button(editor.buttons.StandardButton.Save).click()
    assert editor.isVisible() and editor.status.text()  # says what is wrong, saves nothing
    editor.reject()
    assert window.chat.remote_models.endpoints == []
    assert window.chat.show_remote_servers() is dialog  # one at a time
    window.close()
