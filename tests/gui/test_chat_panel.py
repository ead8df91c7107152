"""The chat window with the real engine on the demo model and a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.units import plain_figures
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000


def _open_window(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready and chat._loaded is not None, timeout=LONG_WAIT)
    return window


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def _send(qtbot: QtBot, chat: ChatPanel, text: str) -> None:
    count = len(chat.transcript.messages)
    chat.composer.set_text(text)
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == count + 2, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: not chat.generating, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)


def window_idle(chat: ChatPanel) -> bool:
    return chat._runner.pending == 0


def test_send_streams_and_persists_across_restart(qtbot: QtBot) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    assert chat.banner_wrap.isVisible() or not chat.isVisible()
    chunks: list[object] = []
    window.engine_process.chunks.connect(lambda rid, batch: chunks.extend(batch))
    _send(qtbot, chat, "Count from 1 to 12.")
    user, answer = chat.transcript.messages
    assert user.content == "Count from 1 to 12."
    assert answer.content.split()[:12] == [str(i) for i in range(1, 13)]
    assert len(chunks) > 3, "the answer was not streamed"
    shown = plain_figures(answer.stats_label.text())  # no joiners, plain spaces
    assert "MTP n=1" in shown and "tok/s" in shown and "accepted" in shown
    assert chat.live_stats.text() == ""  # the figures are on the answer's line, once
    window.close()

    # Restart: the conversation and its stats are intact.
    database = app_paths().data_dir / "chats.sqlite3"
    with ChatStore(database) as store:
        conversations = store.list_conversations()
        assert len(conversations) == 1
        messages = store.messages(conversations[0].id)
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].status == "complete"
    assert messages[1].content == answer.content
    stats = messages[1].stats
    assert stats is not None
    for key in (
        "model",
        "device",
        "method",
        "generated_tokens",
        "ttft_s",
        "decode_tokens_per_s",
        "acceptance_rate",
        "total_s",
    ):
        assert key in stats, key
    again = _open_window(qtbot)
    qtbot.waitUntil(lambda: len(again.chat.transcript.messages) == 2, timeout=LONG_WAIT)
    restored = again.chat.transcript.messages[1]
    assert restored.content == answer.content
    assert "MTP n=1" in restored.stats_label.text()
    again.close()


def test_stop_keeps_partial_answer(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    chat.settings_panel.max_tokens_spin.setValue(600)
    # Press Esc as soon as the first tokens arrive (the demo model answers in a blink).
    stopped: list[int] = []

    def stop_once(_request: int, _chunks: object) -> None:
        if not stopped:
            stopped.append(1)
            qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Escape)

    window.engine_process.chunks.connect(stop_once)
    chat.composer.set_text("Count from 1 to 300.")
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(stopped) and not chat.generating, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    answer = chat.transcript.messages[-1]
    assert answer.content.startswith("1")
    assert "Stopped" in answer.error_label.text()
    assert chat.composer.send_button.text() == "Send"
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        assert chat.conversation is not None
        stored = store.messages(chat.conversation.id)[-1]
    assert stored.content == answer.content
    assert stored.stats is not None and stored.stats["finish_reason"] == "cancelled"


def test_regenerate_edit_and_delete(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    first_answer = chat.transcript.messages[1]
    first_answer.action.emit("regenerate")
    qtbot.waitUntil(
        lambda: (
            not chat.generating
            and len(chat.transcript.messages) == 2
            and chat.transcript.messages[1] is not first_answer
        ),
        timeout=LONG_WAIT,
    )
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    assert chat.transcript.messages[1].content.split()[:5] == ["1", "2", "3", "4", "5"]

    user = chat.transcript.messages[0]
    chat._edit_and_regenerate(user, "Count from 1 to 3.")
    qtbot.waitUntil(
        lambda: (
            not chat.generating
            and len(chat.transcript.messages) == 2
            and chat.transcript.messages[1].content.strip() != ""
        ),
        timeout=LONG_WAIT,
    )
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    assert chat.transcript.messages[0].content == "Count from 1 to 3."
    assert chat.transcript.messages[1].content.split()[:3] == ["1", "2", "3"]

    chat.transcript.messages[1].action.emit("delete")
    qtbot.waitUntil(lambda: window_idle(chat), timeout=LONG_WAIT)
    assert len(chat.transcript.messages) == 1
    assert chat.conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        stored = store.messages(chat.conversation.id)
    assert [(m.role, m.content) for m in stored] == [("user", "Count from 1 to 3.")]


def test_switch_chats_and_search(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 4.")
    first = chat.conversation
    qtbot.keyClick(chat, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert chat.conversation is None and chat.transcript.messages == []
    _send(qtbot, chat, "Repeat 'blue sky' two times.")
    second = chat.conversation
    assert first is not None and second is not None and first.id != second.id
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 2, timeout=LONG_WAIT)
    # Newest first.
    assert chat.conversations.list.item(0).data(Qt.ItemDataRole.UserRole) == second.id
    chat.open_conversation(first.id)
    qtbot.waitUntil(
        lambda: chat.conversation is not None and chat.conversation.id == first.id,
        timeout=LONG_WAIT,
    )
    assert chat.transcript.messages[0].content == "Count from 1 to 4."
    chat.conversations.search.setText("blue")
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 1, timeout=LONG_WAIT)
    assert chat.conversations.list.item(0).data(Qt.ItemDataRole.UserRole) == second.id


def test_delete_conversation_and_undo(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 3.")
    conversation = chat.conversation
    assert conversation is not None
    chat._on_conversation_action("delete", conversation.id)
    qtbot.waitUntil(
        lambda: chat.conversation is None and chat.conversations.list.count() == 0,
        timeout=LONG_WAIT,
    )
    chat.delete_notice.close()
    chat.undo_delete()
    qtbot.waitUntil(
        lambda: chat.conversation is not None and len(chat.transcript.messages) == 2,
        timeout=LONG_WAIT,
    )
    assert chat.conversation.id == conversation.id


def test_show_drafted_tokens(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 30.")
    answer = chat.transcript.messages[-1]
    assert answer.drafted_ranges, "an MTP answer on the demo model has accepted drafts"
    chat.drafts_toggle.setChecked(True)
    view = answer._body.itemAt(0).widget()
    document = view.document()
    tinted = 0
    block = document.begin()
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            if fragment.charFormat().background().color().alpha() > 0:
                tinted += fragment.length()
            iterator += 1
        block = block.next()
    assert tinted > 0


def _screenshot(window: MainWindow, path: Path) -> None:
    assert window.grab().save(str(path))


def test_screenshots_light_and_dark(qtbot: QtBot, screenshot_dir: Path) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    chat.settings_toggle.setChecked(True)
    _send(qtbot, chat, "Count from 1 to 20.")
    _screenshot(window, screenshot_dir / "chat_light.png")
    window.close()

    app = QApplication.instance()
    assert isinstance(app, QApplication)
    original = app.palette()
    dark = QPalette()
    for role, color in (
        (QPalette.ColorRole.Window, "#1b1c20"),
        (QPalette.ColorRole.WindowText, "#e6e6e6"),
        (QPalette.ColorRole.Base, "#232428"),
        (QPalette.ColorRole.Text, "#e6e6e6"),
        (QPalette.ColorRole.Button, "#2a2c31"),
        (QPalette.ColorRole.ButtonText, "#e6e6e6"),
    ):
        dark.setColor(role, QColor(color))
    app.setPalette(dark)
    from qwen_mtp_desktop.ui.widgets.style import stylesheet

    app.setStyleSheet(stylesheet(True))
    try:
        window = _open_window(qtbot)
        qtbot.waitUntil(lambda: len(window.chat.transcript.messages) == 2, timeout=LONG_WAIT)
        window.chat.settings_toggle.setChecked(True)
        qtbot.wait(200)
        _screenshot(window, screenshot_dir / "chat_dark.png")
        window.close()
    finally:
        app.setPalette(original)
        app.setStyleSheet(stylesheet(False))


def _recommend(model_dir: Path, depth: int | None, speedup: float, accepted: float) -> None:
    from qwen_mtp_desktop.core.measure.recommendations import save_recommendation

    start = PLAIN if depth is None else DecodingMethod.mtp(depth)
    save_recommendation(
        {
            "recommendation": {
                "method": start.to_record(),
                "label": start.short_label,
                "speedup": speedup,
                "acceptance_rate": accepted,
            },
            "model": {"path": str(model_dir)},
            "device": "CPU",
            "created": "2026-11-30T00:00:00",
            "id": "test",
        }
    )


@pytest.mark.parametrize(
    ("depth", "speedup", "start_label", "answer_mode", "answer_summary", "start_sentence",
     "answer_sentence", "ran"),
    [
        (2, 1.3, "Auto · starts at MTP n=2 (benchmark: 90% accepted, 1.30x)", "mtp",
         "MTP n=2: benchmark: 1.30x",
         "Starts with MTP n=2: the benchmark found it fastest on this model",
         "MTP n=2: the benchmark found it fastest on this model", "last answer: MTP n=2, "),
        (None, 0.6, "Auto · starts at plain (benchmark: 90% accepted, MTP would be 0.60x)",
         "plain", "plain: benchmark found plain decoding faster, MTP was 0.60x",
         "Starts with plain decoding: the benchmark found MTP slower on this model",
         "Plain decoding: the benchmark found MTP slower on this model",
         "last answer: plain decoding"),
    ],
)  # fmt: skip
def test_auto_starts_from_the_benchmark_and_records_its_choice(
    qtbot: QtBot,
    screenshot_dir: Path,
    depth: int | None,
    speedup: float,
    start_label: str,
    answer_mode: str,
    answer_summary: str,
    start_sentence: str,
    answer_sentence: str,
    ran: str,
) -> None:
    from qwen_mtp_desktop.core.files.paths import demo_model_dir
    from qwen_mtp_desktop.core.measure.fullsize_figures import DEMO_TOO_SMALL

    _recommend(demo_model_dir(), depth, speedup, 0.9)
    window = _open_window(qtbot)
    chat = window.chat
    # Auto is the default: the MTP pipeline is loaded, plain decoding joins it when needed.
    assert chat.settings_panel.settings.num_assistant_tokens == "auto"
    assert chat.settings_panel.depth_spin.text() == "Auto"
    # The header says it in one plain sentence; the details are in its tooltip.
    qtbot.waitUntil(
        lambda: (
            chat._loaded is not None
            and chat._loaded.mtp
            and chat.model_status.text() == f"CPU  ·  Auto · {start_sentence}"
        ),
        timeout=LONG_WAIT,
    )
    assert start_label in chat.model_status.toolTip()
    assert DEMO_TOO_SMALL in chat.model_status.toolTip()  # the demo model: why MTP loses
    assert "MTP head loaded, no answer yet" in window.model_label.text()
    _send(qtbot, chat, "Count from 1 to 6.")
    answer = chat.transcript.messages[-1]
    assert answer.content.split()[:6] == ["1", "2", "3", "4", "5", "6"]
    assert chat.model_status.text() == f"CPU  ·  Auto · {answer_sentence}"
    assert f"Auto · {answer_summary}" in chat.model_status.toolTip()
    # The status bar says what decoded this answer, not a static "MTP ready".
    assert ran in window.model_label.text() and "MTP ready" not in window.model_label.text()
    if answer_mode == "mtp":
        assert "of drafts accepted" in window.model_label.text()
    stored = chat._messages[-1].stats
    assert stored is not None
    assert stored["method"]["kind"] == answer_mode and stored["decoding"] == "auto"
    assert stored["auto"]["summary"] == answer_summary
    assert "chunk_times" not in stored
    # The answer's own line: Auto's plain sentence; its technical reason in the tooltip.
    assert stored["auto"]["sentence"] == answer_sentence
    assert f"Auto · {answer_sentence}" in answer.stats_label.text()
    assert answer_summary in answer.stats_label.toolTip()
    window.grab().save(str(screenshot_dir / f"chat-auto-{answer_mode}.png"))
    window.close()


def test_long_chat_opens_with_the_newest_messages_first(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        conversation = store.create_conversation("long")
        for i in range(15):
            store.add_message(conversation.id, "user", f"question {i}")
            store.add_message(conversation.id, "assistant", f"answer {i}")
    chat.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 12, timeout=LONG_WAIT)
    assert chat.transcript.messages[-1].content == "answer 14"
    assert chat.transcript.earlier_button.isVisible()
    assert "18 more" in chat.transcript.earlier_button.text()
    qtbot.mouseClick(chat.transcript.earlier_button, Qt.MouseButton.LeftButton)
    assert len(chat.transcript.messages) == 24
    qtbot.mouseClick(chat.transcript.earlier_button, Qt.MouseButton.LeftButton)
    assert [w.content for w in chat.transcript.messages[:2]] == ["question 0", "answer 0"]
    assert len(chat.transcript.messages) == 30
    assert not chat.transcript.earlier_button.isVisible()


def test_system_prompt_and_export(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from PySide6.QtWidgets import QFileDialog

    chat = window.chat
    chat.settings_panel.system_prompt.setPlainText("You are a counting assistant.")
    _send(qtbot, chat, "Count from 1 to 4.")
    conversation = chat.conversation
    assert (
        conversation is not None and conversation.system_prompt == "You are a counting assistant."
    )
    chat.settings_panel.system_prompt.setPlainText("Be brief.")
    qtbot.waitUntil(
        lambda: chat.conversation is not None and chat.conversation.system_prompt == "Be brief.",
        timeout=LONG_WAIT,
    )
    for action, name in (("export-md", "chat.md"), ("export-json", "chat.json")):
        target = tmp_path / name
        monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *_a, t=target: (str(t), ""))
        chat._on_conversation_action(action, conversation.id)
        qtbot.waitUntil(target.exists, timeout=LONG_WAIT)
    markdown = (tmp_path / "chat.md").read_text()
    assert "Count from 1 to 4." in markdown and "MTP" in markdown
    exported = json.loads((tmp_path / "chat.json").read_text())
    assistant = next(m for m in exported["messages"] if m["role"] == "assistant")
    assert assistant["stats"]["method"]["kind"] == "mtp"
    assert assistant["stats"]["acceptance_rate"] > 0
