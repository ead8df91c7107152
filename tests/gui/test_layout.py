"""Every panel usable on a small (1024x700) and a large (1600x1000) window: every action button
fully inside the window and not squeezed below its text, the chat's conversation wide enough with
Settings open. Saves a screenshot of each panel at each size under .cache/screenshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import QAbstractButton, QAbstractScrollArea, QApplication, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.settings import SettingsStore
from qwen_mtp_desktop.ui.main_window import PANELS, MainWindow

pytestmark = pytest.mark.gui

SIZES = ((1024, 700), (1600, 1000))
#: The conversation column must keep at least this much of the window with Settings open.
MIN_TRANSCRIPT_SHARE = 0.5


def _window(qtbot: QtBot, width: int, height: int) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.chat.store_ready, timeout=10_000)
    qtbot.waitUntil(
        lambda: window.models.scans_done >= 1 and not window.models.busy, timeout=30_000
    )
    assert (window.width(), window.height()) == (width, height)
    return window


def _scroll_viewport(widget: QWidget, stop: QWidget) -> QWidget | None:
    """The viewport of the scroll area `widget` sits in below `stop`, if any."""
    parent = widget.parentWidget()
    while parent is not None and parent is not stop:
        if isinstance(parent, QAbstractScrollArea):
            return parent.viewport()
        parent = parent.parentWidget()
    return None


def _rect_in(widget: QWidget, window: QWidget) -> QRect:
    return QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())


def clipped_buttons(window: QWidget, panel: QWidget) -> list[str]:
    """The visible buttons of `panel` that are not fully shown: outside the window, outside a
    parent that clips them, or narrower than their text needs. A button below the fold of a
    scroll area counts as shown (the user scrolls to it) if it fits the area's width."""
    problems: list[str] = []
    frame = window.rect()
    for button in panel.findChildren(QAbstractButton):
        if not button.isVisibleTo(window) or button.width() == 0:
            continue
        name = button.text() or button.toolTip() or button.objectName() or type(button).__name__
        rect = _rect_in(button, window)
        if button.width() < button.minimumSizeHint().width():
            problems.append(
                f"{name!r} is {button.width()} px wide, its text needs "
                f"{button.minimumSizeHint().width()} px"
            )
            continue
        viewport = _scroll_viewport(button, panel)
        if viewport is not None:
            area = _rect_in(viewport, window)
            if rect.left() < area.left() or rect.right() > area.right():
                problems.append(f"{name!r} at {rect.getRect()} is wider than its scroll area")
            continue
        if not frame.contains(rect):
            problems.append(f"{name!r} at {rect.getRect()} is outside the window {frame.size()}")
            continue
        parent = button.parentWidget()
        while parent is not None and parent is not window:
            if not _rect_in(parent, window).contains(rect):
                problems.append(f"{name!r} is cut off by {type(parent).__name__}")
                break
            parent = parent.parentWidget()
    return problems


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_every_action_button_is_fully_visible(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int
) -> None:
    window = _window(qtbot, width, height)
    problems: dict[str, list[str]] = {}
    for name in PANELS:
        window.show_panel(name)
        QApplication.processEvents()
        panel = window.panel(name)
        assert window.grab().save(
            str(screenshot_dir / f"layout-{name.lower()}-{width}x{height}.png")
        )
        found = clipped_buttons(window, panel)
        if found:
            problems[name] = found
    assert not problems, problems


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_chat_with_settings_open_keeps_the_conversation_wide(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int
) -> None:
    window = _window(qtbot, width, height)
    window.show_panel("Chat")
    window.chat.settings_toggle.setChecked(True)
    QApplication.processEvents()
    assert window.chat.settings_panel.isVisible()
    assert window.grab().save(str(screenshot_dir / f"layout-chat-settings-{width}x{height}.png"))
    transcript = window.chat.transcript
    assert transcript.width() >= MIN_TRANSCRIPT_SHARE * width, (
        f"the conversation is {transcript.width()} px of a {width} px window"
    )
    problems = clipped_buttons(window, window.chat)
    assert not problems, problems


def test_narrow_chat_opens_one_side_column_at_a_time(qtbot: QtBot) -> None:
    window = _window(qtbot, 1024, 700)
    chat = window.chat
    window.show_panel("Chat")
    assert chat.conversations.isVisible() and not chat.settings_panel.isVisible()
    chat.settings_toggle.click()
    assert chat.settings_panel.isVisible() and not chat.conversations.isVisible()
    assert not chat.chats_toggle.isChecked()
    chat.chats_toggle.click()
    assert chat.conversations.isVisible() and not chat.settings_panel.isVisible()
    assert not chat.settings_toggle.isChecked()
    # Wide enough for both: both stay open.
    window.resize(1600, 1000)
    QApplication.processEvents()
    chat.settings_toggle.click()
    assert chat.settings_panel.isVisible() and chat.conversations.isVisible()
    # Narrowing the window with both open closes the chat list.
    window.resize(1024, 700)
    QApplication.processEvents()
    assert chat.settings_panel.isVisible() and not chat.conversations.isVisible()


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_dialogs_fit_and_show_every_button(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int
) -> None:
    """Settings and Discover, opened over the window, fit inside it with every button shown."""
    window = _window(qtbot, width, height)
    settings_dialog = window.show_settings()
    discover = window.show_discover()
    qtbot.waitUntil(lambda: discover.loaded, timeout=10_000)
    for name, dialog in (("settings", settings_dialog), ("discover", discover)):
        dialog.adjustSize()
        QApplication.processEvents()
        assert dialog.width() <= width and dialog.height() <= height, (name, dialog.size())
        assert not clipped_buttons(dialog, dialog), name
        assert dialog.grab().save(str(screenshot_dir / f"layout-{name}-{width}x{height}.png"))
