from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage, QKeySequence
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.main_window import PANELS, MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


def _window(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


def test_sidebar_switches_panels(qtbot: QtBot) -> None:
    window = _window(qtbot)
    assert [window.sidebar.item(i).text() for i in range(window.sidebar.count())] == list(PANELS)
    for name in PANELS:
        window.show_panel(name)
        assert window.stack.currentWidget() is window.panel(name)


def test_typing_at_start_goes_to_the_message_box(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.activateWindow()
    editor = window.chat.composer.editor
    qtbot.waitUntil(editor.hasFocus, timeout=5_000)
    assert not window.sidebar.hasFocus()


def test_demo_model_is_selected_and_labelled(qtbot: QtBot) -> None:
    window = _window(qtbot)
    assert window.model_dir == demo_model_dir()
    assert "Demo model" in window.model_label.text()
    assert "counts and repeats" in window.model_label.text()


def test_geometry_is_remembered(qtbot: QtBot) -> None:
    window = _window(qtbot)
    window.resize(790, 610)  # inside the offscreen screen (800 x 800), so nothing is clamped
    window.close()
    again = _window(qtbot)
    assert (again.width(), again.height()) == (790, 610)


def test_screenshot(qtbot: QtBot, screenshot_dir: Path) -> None:
    window = _window(qtbot)
    window.resize(1100, 720)
    path = screenshot_dir / "main_window.png"
    assert window.grab().save(str(path))
    image = QImage(str(path))
    assert image.width() == 1100 and image.height() == 720
    # What a newcomer needs is on the picture: the message box and Send, whole and enabled
    # for typing, inside the window; and the picture is a drawn window, not a blank one.
    composer = window.chat.composer
    for widget in (composer.editor, composer.send_button):
        assert widget.isVisible()
        corner = widget.mapTo(window, widget.rect().bottomRight())
        assert window.rect().contains(corner), (type(widget).__name__, corner)
    assert composer.send_button.text() == "Send"
    colours = {image.pixel(x, y) for x in range(0, 1100, 37) for y in range(0, 720, 29)}
    assert len(colours) > 5, len(colours)


def test_app_starts_and_quits_like_make_run(tmp_path: Path) -> None:
    """`make run` runs the entry point; here it opens, saves a screenshot and exits 0."""
    shot = tmp_path / "run.png"
    result = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert QImage(str(shot)).width() >= 760
    assert "Traceback" not in result.stderr


def test_file_and_help_menus(qtbot: QtBot) -> None:
    from PySide6.QtCore import QUrl

    window = _window(qtbot)
    menus = [action.text() for action in window.menuBar().actions()]
    assert menus == ["&File", "&Tools", "&Help"]
    opened: list[QUrl] = []
    window.open_url = opened.append
    window.open_logs_action.trigger()
    window.open_data_action.trigger()
    paths = app_paths()
    assert [url.toLocalFile() for url in opened] == [str(paths.log_dir), str(paths.data_dir)]
    box = window.show_shortcuts()
    for words in ("New chat", "Send the message", "Stop the answer", "Quit", "Esc"):
        assert words in box.text(), words
    box.close()
    assert (
        window.quit_action.shortcut().matches(QKeySequence(QKeySequence.StandardKey.Quit))
        == QKeySequence.SequenceMatch.ExactMatch
    )
    window.quit_action.trigger()
    assert not window.isVisible()


def test_open_in_chat_starts_a_new_chat_with_that_model(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 28: "Open in chat" (Models, Export) used to switch the open chat's model."""
    import shutil

    other = tmp_path / "Qwen3.5-0.8B-int8"
    shutil.copytree(demo_model_dir(), other)
    window = _window(qtbot)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready, timeout=10_000)
    chat.send("Count from 1 to 5.")
    qtbot.waitUntil(lambda: chat.conversation is not None and not chat.generating, timeout=60_000)
    first = chat.conversation
    assert first is not None
    window._open_in_chat(other)
    assert window.stack.currentWidget() is chat
    assert chat.conversation is None  # a new, empty chat ...
    assert chat.current_model_dir() == other  # ... with that model
    store = chat._chats.store
    assert store is not None
    assert Path(store.get_conversation(first.id).model_dir or "") == demo_model_dir()
    loaded = chat.model
    qtbot.waitUntil(
        lambda: loaded.loaded is not None and loaded.loaded.model_dir == other, timeout=60_000
    )
    window.shutdown()
