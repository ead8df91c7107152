"""The chat as a new user meets it, with the real engine on the demo model: figures explained
and never stale, example prompts in an empty chat."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.units import NBSP
from qwen_mtp_desktop.ui.figures import LEGEND
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send

pytestmark = [pytest.mark.gui, pytest.mark.slow]


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def test_figures_are_live_explained_and_never_stale(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    assert not chat.legend.isVisibleTo(chat) and chat.live_stats.text() == ""
    live: list[str] = []
    window.engine.chunks.connect(lambda _rid, _batch: live.append(chat.live_stats.text()))
    _send(qtbot, chat, "Count from 1 to 30.")
    # A live speed while the answer streams, before the answer's own stats exist.
    assert any(text.startswith("Generating") and "tok/s" in text for text in live), live
    answer = chat.transcript.messages[-1]
    stats_text = answer.stats_label.text()
    assert f"{NBSP}tok/s" in stats_text and f"TTFT{NBSP}" in stats_text
    # Every figure shown is explained in the tooltip, and the legend is on screen.
    tooltip = answer.stats_label.toolTip()
    for figure in ("MTP n=k", "drafts accepted", "/step", "tok/s", "TTFT", "tokens"):
        assert f"<b>{figure}</b>" in tooltip, figure
    assert chat.legend.isVisibleTo(chat) and chat.legend.text() == LEGEND
    assert "tok/s" in chat.live_stats.toolTip()

    # A new chat shows none of the previous chat's figures.
    chat.new_chat()
    assert chat.live_stats.text() == "" and not chat.legend.isVisibleTo(chat)

    # Back in the first chat: its last answer's figures; deleting that answer clears them.
    first = chat.conversations.list.item(0)
    assert first is not None
    chat.open_conversation(int(first.data(Qt.ItemDataRole.UserRole)))
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    assert chat.live_stats.text().startswith("Last answer") and "tok/s" in chat.live_stats.text()
    chat._on_message_action(chat.transcript.messages[1], "delete")
    QApplication.processEvents()
    assert chat.live_stats.text() == "" and not chat.legend.isVisibleTo(chat)
