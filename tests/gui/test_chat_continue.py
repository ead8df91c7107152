"""Continue (issue 44, "what LM Studio users reach for" item 3): an answer stopped by the user,
cut by the token limit or interrupted by a closed window goes on where it ended, in the same
stored message, and under greedy decoding ends as the uninterrupted answer does. The real window
offscreen, its engine host on the demo model (deterministic), the real chat store."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.records import ChatSettings, StoredMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.units import plain_figures
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send, window_idle

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SHOTS = Path("/tmp/shots")
PROMPT = "Count from 1 to 20."
GREEDY = ChatSettings(temperature=0.0, model_sampling=False, max_new_tokens=200)


def _database() -> Path:
    return app_paths().ensure().data_dir / "chats.sqlite3"


def _stored(conversation_id: int) -> list[StoredMessage]:
    with ChatStore(_database()) as store:
        return store.messages(conversation_id)


def _offers_continue(widget: MessageWidget) -> bool:
    button = widget._buttons.get("continue")  # none on a question
    return button is not None and button.isVisibleTo(widget)


def _continue(qtbot: QtBot, chat: ChatPanel, widget: MessageWidget) -> None:
    assert _offers_continue(widget)
    with qtbot.waitSignal(chat.turns.started, timeout=LONG_WAIT):
        qtbot.mouseClick(widget._buttons["continue"], Qt.MouseButton.LeftButton)
    assert not _offers_continue(widget)  # not while it runs
    qtbot.waitUntil(lambda: not chat.generating and window_idle(chat), timeout=LONG_WAIT)


def _shoot(window: MainWindow, name: str, screenshot_dir: Path) -> None:
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        for folder in (screenshot_dir, SHOTS):
            folder.mkdir(parents=True, exist_ok=True)
            assert window.grab().save(str(folder / f"{name}-{width}x{height}.png"))
    window.resize(1280, 800)


def test_continue_an_answer_stopped_cut_or_interrupted(qtbot: QtBot, screenshot_dir: Path) -> None:
    # A window closed mid-answer: the store finds the answer still "streaming" at the next
    # start and marks it incomplete, its text kept.
    with ChatStore(_database()) as store:
        interrupted_chat = store.create_conversation(PROMPT)
        store.add_message(interrupted_chat.id, "user", PROMPT)
        begun = store.begin_assistant_message(interrupted_chat.id)
        store.append_to_message(begun.id, "1 2 3 4 5")
    window = _open_window(qtbot)
    chat = window.chat
    qtbot.waitUntil(
        lambda: chat.conversation is not None and len(chat.transcript.messages) == 2,
        timeout=LONG_WAIT,
    )
    qtbot.waitUntil(lambda: window_idle(chat))
    chat.settings_panel.set_settings(GREEDY)
    answer = chat.transcript.messages[-1]
    assert "interrupted" in answer.error_label.text()
    assert _offers_continue(answer) and answer._buttons["regenerate"].isVisibleTo(answer)
    assert not _offers_continue(chat.transcript.messages[0])  # a question has none
    _shoot(window, "chat-continue-offered", screenshot_dir)
    _continue(qtbot, chat, answer)
    interrupted = answer.content
    assert interrupted.startswith("1 2 3 4 5 6")
    assert answer.problem.isHidden() and not _offers_continue(answer)  # complete now
    figures = plain_figures(answer.stats_label.text())
    assert figures.startswith("Continued after an interruption"), figures
    assert " more tokens" in figures  # the figures are the continuation's
    (_question, stored) = _stored(interrupted_chat.id)
    assert stored.id == begun.id and stored.content == interrupted
    assert stored.status == "complete" and stored.stats is not None
    assert stored.stats["continued"] == {"after": "incomplete", "after_tokens": None, "times": 1}
    _shoot(window, "chat-continued", screenshot_dir)

    # Cut by the token limit, continued (and cut) until it ends: still one message.
    chat.new_chat()
    chat.settings_panel.set_settings(ChatSettings(**{**GREEDY.to_dict(), "max_new_tokens": 12}))
    _send(qtbot, chat, PROMPT)
    answer = chat.transcript.messages[-1]
    assert answer.stored is not None and answer.stored.stats is not None
    assert answer.stored.stats["finish_reason"] == "length" and _offers_continue(answer)
    cut_chat = chat.conversation
    assert cut_chat is not None
    rounds = 0
    while _offers_continue(answer):
        rounds += 1
        assert rounds < 10, "the answer never ended"
        _continue(qtbot, chat, answer)
        figures = plain_figures(answer.stats_label.text())
        assert figures.startswith(f"Continued after {12 * rounds} tokens"), figures
    assert rounds >= 2
    cut = answer.content
    (_, stored) = _stored(cut_chat.id)
    assert stored.content == cut and stored.stats is not None
    assert stored.stats["finish_reason"] == "eos"
    assert stored.stats["continued"] == {
        "after": "length",
        "after_tokens": 12 * rounds,
        "times": rounds,
    }

    # Stopped by the user while it streams.
    chat.new_chat()
    chat.settings_panel.set_settings(GREEDY)
    chat.turns.figures.connect(lambda _text: chat.stop())
    _send(qtbot, chat, PROMPT)
    chat.turns.figures.disconnect()
    answer = chat.transcript.messages[-1]
    assert answer.stored is not None and answer.stored.stats is not None
    assert answer.stored.stats["finish_reason"] == "cancelled", "it ended before Stop"
    before = answer.stored.stats["generated_tokens"]
    kept = answer.content
    assert "Stopped" in answer.error_label.text() and _offers_continue(answer)
    _shoot(window, "chat-continue-stopped", screenshot_dir)
    _continue(qtbot, chat, answer)
    stopped = answer.content
    assert stopped.startswith(kept) and len(stopped) > len(kept)
    figures = plain_figures(answer.stats_label.text())
    assert figures.startswith(f"Continued after {before} tokens"), figures
    _shoot(window, "chat-continued-after-stop", screenshot_dir)
    stopped_chat = chat.conversation
    assert stopped_chat is not None
    (_, stored) = _stored(stopped_chat.id)
    assert stored.content == stopped and stored.stats is not None
    # The stopped answer's state was kept: the model read (almost) nothing again.
    assert stored.stats["prompt_tokens"] - stored.stats["reused_tokens"] <= 1, stored.stats

    # The same question answered in one go: every continued answer ends the same.
    chat.new_chat()
    chat.settings_panel.set_settings(GREEDY)
    _send(qtbot, chat, PROMPT)
    whole = chat.transcript.messages[-1]
    assert whole.stored is not None and whole.stored.stats is not None
    assert whole.stored.stats["finish_reason"] == "eos" and not _offers_continue(whole)
    assert stopped == cut == interrupted == whole.content, (stopped, cut, interrupted)
    window.close()
