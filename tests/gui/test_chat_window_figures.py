"""Issue 44's chat-window minors, with the real engine on the demo model and real widgets:
the chat list's preview (minor 6), ..."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.records import ConversationSummary
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send

pytestmark = [pytest.mark.gui, pytest.mark.slow]


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def _shots(window: MainWindow, screenshot_dir: Path, name: str) -> None:
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"{name}-{width}x{height}.png"))


def test_the_chat_list_previews_plain_words_and_the_question_while_the_answer_streams(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    """Minor 6: no raw Markdown in the preview, and no "No messages" while the first answer
    streams."""
    chat = window.chat
    seen: list[str] = []
    shown = chat.conversations.set_conversations

    def record(items: list[ConversationSummary], current: int | None) -> None:
        shown(items, current)
        if chat.generating and items:
            seen.append(chat.conversations.list.item(0).text())

    chat.conversations.set_conversations = record  # type: ignore[method-assign]
    _send(qtbot, chat, "# Sorting in **Python**\n\nCount from 1 to 5.")
    assert seen, "the list was not refreshed while the answer streamed"
    assert all("No messages" not in text for text in seen), seen
    assert any("Sorting in Python Count" in text for text in seen), seen
    qtbot.waitUntil(lambda: "1 2 3" in chat.conversations.list.item(0).text(), timeout=LONG_WAIT)
    assert "#" not in chat.conversations.list.item(0).text()
    _shots(window, screenshot_dir, "chat-list-preview")
