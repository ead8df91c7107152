"""Conversation editing as users know it, on real widgets with the demo model and a real store:
regenerate keeps versions with "‹ 2/2 ›" arrows and each version its own stats, a question is
edited in place (Up in the empty composer), delete offers a non-modal Undo that restores exactly,
Tab reaches every control in reading order, and focus shows as a ring in light and dark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QAbstractButton,
    QApplication,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.chat_file_names import export_filename
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.units import keep_units
from qwen_mtp_desktop.ui.chat.layout import _focusable
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.transcript.message import (
    COMPACT_STATS_WIDTH,
    MessageWidget,
    format_stats,
)
from qwen_mtp_desktop.ui.main_window import MainWindow, shortcuts
from qwen_mtp_desktop.ui.widgets.style import stylesheet
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send, window_idle

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    window.activateWindow()
    yield window
    window.close()


def _stored(chat: ChatPanel) -> list[object]:
    assert chat.conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        return list(store.messages(chat.conversation.id))


def _settle(qtbot: QtBot, chat: ChatPanel) -> None:
    qtbot.waitUntil(lambda: not chat.generating and window_idle(chat), timeout=LONG_WAIT)
    QApplication.processEvents()


def _figures_of(chat: ChatPanel) -> str:
    """What the last answer's figures must say: the shown branch's last answer's stats."""
    last = next(m for m in reversed(chat._messages) if m.role == "assistant")
    assert last.stats is not None
    widget = _last_answer(chat)
    compact = 0 < widget.width() < COMPACT_STATS_WIDTH
    return keep_units(format_stats(last.stats, compact=compact))


def _last_answer(chat: ChatPanel) -> MessageWidget:
    return next(w for w in reversed(chat.transcript.messages) if w.role == "assistant")


def _shown_figures(chat: ChatPanel) -> str:
    """The figures the chat shows for its last answer: on the answer's own line, once (the
    line under the transcript is for the answer being written)."""
    assert chat.live_stats.text() == ""
    return _last_answer(chat).stats_label.text()


def test_regenerate_keeps_versions_with_their_own_stats(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    first = chat._messages[-1]
    assert not chat.transcript.messages[1].versions.isVisibleTo(chat)  # one version: no arrows
    qtbot.keyClick(chat, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)  # regenerate
    qtbot.waitUntil(lambda: chat.generating or chat._messages[-1].id != first.id, timeout=10_000)
    _settle(qtbot, chat)
    second = chat._messages[-1]
    answer = chat.transcript.messages[1]
    assert second.id != first.id and (second.version, second.version_count) == (2, 2)
    assert answer.versions.isVisibleTo(chat) and answer.versions.label.text() == "2/2"
    assert not answer.versions.next.isEnabled() and answer.versions.previous.isEnabled()
    assert chat._messages == _stored(chat)  # what the model reads next is the shown branch
    assert _shown_figures(chat) == _figures_of(chat)

    # Back to version 1 with the arrow: its text, its stats, under it and in the figures line.
    qtbot.mouseClick(answer.versions.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat._messages[-1].id == first.id, timeout=LONG_WAIT)
    _settle(qtbot, chat)
    shown = chat.transcript.messages[1]
    assert shown.versions.label.text() == "1/2" and shown.content == first.content
    assert first.stats is not None
    assert shown.stats_label.text() == keep_units(format_stats(first.stats))
    assert _shown_figures(chat) == _figures_of(chat) and chat._messages[-1].stats == first.stats
    assert chat._messages == _stored(chat)
    # Alt+Right: the keyboard way to the next version.
    qtbot.keyClick(chat, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(lambda: chat._messages[-1].id == second.id, timeout=LONG_WAIT)
    _settle(qtbot, chat)
    assert chat.transcript.messages[1].versions.label.text() == "2/2"
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"chat-versions-{width}x{height}.png"))


def test_edit_in_place_answers_again_and_keeps_the_old_question(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    old_answer = chat._messages[-1]
    # Up in the empty composer edits the last question, in place.
    chat.composer.editor.setFocus()
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Up)
    user = chat.transcript.messages[0]
    assert user.editing and user.editor is not None
    assert user.editor.editor.toPlainText() == "Count from 1 to 5."
    assert user.editor.editor.hasFocus()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"chat-edit-{width}x{height}.png"))
    # Esc leaves it as it was.
    qtbot.keyClick(user.editor.editor, Qt.Key.Key_Escape)
    assert not user.editing and user.content == "Count from 1 to 5."
    assert len(_stored(chat)) == 2

    user.action.emit("edit")
    assert user.editor is not None
    user.editor.editor.setPlainText("Count from 1 to 3.")
    qtbot.keyClick(user.editor.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: chat._messages[-1].id != old_answer.id, timeout=LONG_WAIT)
    _settle(qtbot, chat)
    user, answer = chat.transcript.messages
    assert (user.content, user.versions.label.text()) == ("Count from 1 to 3.", "2/2")
    assert answer.content.split()[:3] == ["1", "2", "3"] and not answer.versions.isVisibleTo(chat)
    assert chat._messages == _stored(chat)

    # Version 1 of the question comes back with its own answer.
    qtbot.mouseClick(user.versions.previous, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: chat._messages[-1].id == old_answer.id, timeout=LONG_WAIT)
    _settle(qtbot, chat)
    user, answer = chat.transcript.messages
    assert (user.content, user.versions.label.text()) == ("Count from 1 to 5.", "1/2")
    assert answer.content == old_answer.content
    assert chat._messages == _stored(chat)


def test_delete_offers_undo_that_restores_exactly(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 4.")
    _send(qtbot, chat, "Count from 1 to 3.")
    before = _stored(chat)
    contents = [w.content for w in chat.transcript.messages]
    figures = _shown_figures(chat)

    chat.transcript.messages[3].action.emit("delete")
    QApplication.processEvents()
    # Gone at once, with its figures: the line shows the answer now last.
    assert [w.content for w in chat.transcript.messages] == contents[:3]
    assert _shown_figures(chat) == _figures_of(chat) != figures
    qtbot.waitUntil(lambda: chat.undo_bar.isVisibleTo(chat), timeout=LONG_WAIT)
    assert chat.undo_bar.text.text() == "Answer deleted."
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"chat-undo-{width}x{height}.png"))
    assert len(_stored(chat)) == 3
    assert not [w for w in QApplication.topLevelWidgets() if w.isModal() and w.isVisible()]

    qtbot.mouseClick(chat.undo_bar.undo_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 4, timeout=LONG_WAIT)
    _settle(qtbot, chat)
    assert not chat.undo_bar.isVisibleTo(chat)
    assert _stored(chat) == before and chat._messages == before
    assert [w.content for w in chat.transcript.messages] == contents
    assert _shown_figures(chat) == figures

    # Deleting a question keeps the chat readable; undo after another action is not offered.
    chat.transcript.messages[2].action.emit("delete")
    qtbot.waitUntil(lambda: chat.undo_bar.isVisibleTo(chat), timeout=LONG_WAIT)
    assert chat.undo_bar.text.text() == "Message deleted."
    _send(qtbot, chat, "Count from 1 to 2.")
    assert not chat.undo_bar.isVisibleTo(chat)


def test_tab_reaches_every_control_in_reading_order(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 3.")
    chat.settings_toggle.setChecked(True)
    QApplication.processEvents()
    start = chat.conversations.new_button
    start.setFocus()
    qtbot.waitUntil(start.hasFocus, timeout=5_000)
    reached: list[QWidget] = []
    for _ in range(400):
        widget = QApplication.focusWidget()
        assert widget is not None
        if widget in reached:
            break
        reached.append(widget)
        qtbot.keyClick(widget, Qt.Key.Key_Tab)
    in_chat = [w for w in reached if chat.isAncestorOf(w)]
    controls = [
        w
        for w in _focusable(chat)
        if w.isVisibleTo(window) and w.isEnabled() and w.focusProxy() is None
    ]
    missing = [f"{type(w).__name__} {getattr(w, 'text', lambda: '')()!r}" for w in controls]
    missing = [m for w, m in zip(controls, missing, strict=True) if w not in in_chat]
    assert not missing, missing
    user, answer = chat.transcript.messages
    order = [
        chat.conversations.new_button,
        chat.chats_toggle,
        chat.settings_toggle,  # the header's first row, then its model row
        chat.model_picker,
        user._buttons["copy"],
        answer._buttons["regenerate"],
        chat.composer.editor,
        chat.composer.send_button,
        chat.settings_panel.findChildren(QComboBox)[0],
    ]
    positions = [in_chat.index(w) for w in order]
    assert positions == sorted(positions), positions


def _ring_share(image: QImage, color: QColor) -> float:
    """The share of the widget's outer 3-pixel band drawn in (about) `color`."""
    width, height = image.width(), image.height()
    band = [(x, y) for x in range(width) for y in (*range(3), *range(height - 3, height))]
    band += [(x, y) for y in range(3, height - 3) for x in (*range(3), *range(width - 3, width))]
    near = 0
    for x, y in band:
        pixel = image.pixelColor(x, y)
        if (
            abs(pixel.red() - color.red())
            + abs(pixel.green() - color.green())
            + abs(pixel.blue() - color.blue())
            < 60
        ):
            near += 1
    return near / max(len(band), 1)


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_focus_shows_a_ring_on_every_kind_of_control(
    qtbot: QtBot, window: MainWindow, dark: bool
) -> None:
    window.setStyleSheet(stylesheet(dark))
    ring = QColor("#9aa6ff" if dark else "#3346e6")
    chat = window.chat
    chat.settings_toggle.setChecked(True)
    QApplication.processEvents()
    kinds = (QPushButton, QToolButton, QComboBox, QPlainTextEdit, QLineEdit, QListWidget)
    kinds += (QCheckBox, QSpinBox)
    checked: list[str] = []
    for kind in kinds:
        widget = next(
            w
            for w in _focusable(chat)
            if isinstance(w, kind) and w.isVisibleTo(window) and w.isEnabled()
        )
        other = chat.composer.send_button if widget is chat.chats_toggle else chat.chats_toggle
        other.setFocus()
        QApplication.processEvents()
        before = _ring_share(widget.grab().toImage(), ring)
        widget.setFocus(Qt.FocusReason.TabFocusReason)
        qtbot.waitUntil(widget.hasFocus, timeout=5_000)
        QApplication.processEvents()
        after = _ring_share(widget.grab().toImage(), ring)
        label = widget.text() if isinstance(widget, QAbstractButton) else ""
        assert after > 0.5 > 0.1 > before, (type(widget).__name__, label, before, after)
        checked.append(type(widget).__name__)
    assert len(checked) == len(kinds)


def test_help_lists_the_chat_shortcuts(window: MainWindow) -> None:
    listed = dict(shortcuts())
    assert listed["Up (in an empty message box)"] == "Edit your last message in place"
    assert any("version" in what for what in listed.values())
    assert any("again" in what for what in listed.values())
    box = window.show_shortcuts()
    assert "Edit your last message" in box.text() and "version" in box.text()
    box.close()


def test_export_is_named_after_the_chat_title(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 3.")
    conversation = chat.conversation
    assert conversation is not None
    hostile = 'CON: ../../"notes"?\u202e'
    shown: list[str] = []

    def rename(*_a: object, text: str = "") -> tuple[str, bool]:
        shown.append(text)
        return hostile, True

    monkeypatch.setattr(QInputDialog, "getText", rename)
    chat._on_conversation_action("rename", conversation.id)
    assert shown == ["Count from 1 to 3."]  # Rename opens with the current name
    qtbot.waitUntil(lambda: chat.title_label.text() == hostile, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: chat._titles.get(conversation.id) == hostile, timeout=LONG_WAIT)
    offered: list[str] = []

    def save_as(_parent: QWidget, _caption: str, name: str, _filter: str) -> tuple[str, str]:
        offered.append(name)
        return str(tmp_path / Path(name).name), ""

    # The save dialog starts in the user's documents folder, not the working directory.
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", save_as)
    chat._on_conversation_action("export-md", conversation.id)
    name = export_filename(hostile, ".md")
    assert name == "CON_ .. .. notes.md"
    assert offered == [str(home / "Documents" / name)]
    qtbot.waitUntil((tmp_path / name).exists, timeout=LONG_WAIT)
    markdown = (tmp_path / name).read_text(encoding="utf-8")
    assert "Count from 1 to 3." in markdown
    # A file to share names the model, never where it lies on this computer.
    assert "- Model: Demo model" in markdown
    assert str(demo_model_dir()) not in markdown and "baseline" not in markdown
    chat._on_conversation_action("export-json", conversation.id)
    json_file = tmp_path / export_filename(hostile, ".json")
    qtbot.waitUntil(json_file.exists, timeout=LONG_WAIT)
    text = json_file.read_text(encoding="utf-8")
    assert str(demo_model_dir()) not in text and "baseline" not in text
    assert json.loads(text)["conversation"]["model"] == "Demo model"


def test_eject_frees_the_model_and_the_next_message_loads_it_again(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    """Eject (as in LM Studio and Jan): the engine process lets the model go, the header says
    what happens next, and sending a message loads it again and answers."""
    chat = window.chat
    engine = window.threads.engine_process
    eject = chat.header.eject_button
    qtbot.waitUntil(lambda: eject.isVisible(), timeout=LONG_WAIT)
    assert engine.loaded_model is not None
    with qtbot.waitSignal(engine.unloaded, timeout=LONG_WAIT):
        qtbot.mouseClick(eject, Qt.MouseButton.LeftButton)
    assert engine.loaded_model is None and chat._loaded is None
    assert not eject.isVisible()
    assert chat.model_status.text() == "ejected"
    assert window.model_label.text() == "No model loaded (ejected)"
    for size in ((1024, 700), (1600, 1000)):
        window.resize(*size)
        QApplication.processEvents()
        window.grab().save(str(screenshot_dir / f"chat-ejected-{size[0]}x{size[1]}.png"))
    _send(qtbot, chat, "Count from 1 to 5.")
    _settle(qtbot, chat)
    assert chat._messages[-1].content.split()[:5] == ["1", "2", "3", "4", "5"]
    assert engine.loaded_model is not None and eject.isVisible()
    assert "ejected" not in chat.model_status.text()
    assert window.model_label.text().startswith("Model: Demo model")
