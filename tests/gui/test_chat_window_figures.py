"""Issue 44's chat-window minors, with the real engine on the demo model and real widgets:
the chat list's preview (minor 6), ..."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.records import ConversationSummary
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.prompt.context_limit import context_length
from qwen_mtp_desktop.core.settings.presets import ChatPreset
from qwen_mtp_desktop.core.units import plain_figures
from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send, window_idle

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]  # the engine host runs each turn


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def _shots(window: MainWindow, screenshot_dir: Path, name: str) -> None:
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        for _ in range(3):  # a resize's layout requests post more of their own
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


def test_the_figures_say_something(qtbot: QtBot, window: MainWindow, screenshot_dir: Path) -> None:
    """Minor 7: the method named once, no "(1.00/step)" at depth 1, no "0.0 s", and Compare's
    TTFT a real figure on both sides."""
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    answer = chat.transcript.messages[-1]
    shown = plain_figures(answer.stats_label.text())
    assert "MTP n=1" in shown and shown.count("MTP n=1") == 1, shown
    assert "/step" not in shown and "drafts accepted" in shown, shown
    assert " 0.0 s" not in shown and not re.search(r"\b0 ms", shown), shown
    assert re.search(r"(\d+ ms|\d\.\d s)$", shown), shown
    _shots(window, screenshot_dir, "chat-figures-once")
    qtbot.mouseClick(chat.compare_button, Qt.MouseButton.LeftButton)
    dialog = chat.compare_dialog
    assert dialog is not None
    qtbot.waitUntil(lambda: not dialog.running, timeout=LONG_WAIT)
    for side in (dialog.plain, dialog.mtp):
        assert side.stats is not None and side.stats.ttft_s > 0, side.stats
        text = plain_figures(side.status.text())
        assert "TTFT 0 ms" not in text and "/step" not in text, text
    assert "/step" not in dialog.summary.text()
    assert dialog.grab().save(str(screenshot_dir / "chat-compare-figures.png"))
    dialog.reject()
    qtbot.waitUntil(lambda: chat.compare_dialog is None, timeout=10_000)


def test_the_status_bar_says_the_shown_chats_last_answer(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    """Minor 4: "last answer" is the shown chat's, on a new chat, a switch and a restart."""
    window = _open_window(qtbot)
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    label = window.model_label
    assert "last answer: MTP n=1" in label.text(), label.text()
    answered = chat.conversation
    assert answered is not None
    chat.new_chat()
    qtbot.waitUntil(lambda: "no answer yet" in label.text(), timeout=10_000)
    assert "last answer" not in label.text()
    _shots(window, screenshot_dir, "status-new-chat")
    chat.open_conversation(answered.id)
    qtbot.waitUntil(lambda: "last answer: MTP n=1" in label.text(), timeout=10_000)
    window.close()
    # A restart opens the chat used last, with its last answer in the status bar.
    window = _open_window(qtbot)
    qtbot.waitUntil(lambda: window.chat.conversation is not None, timeout=LONG_WAIT)
    assert window.chat.conversation is not None
    assert window.chat.conversation.id == answered.id
    qtbot.waitUntil(lambda: "last answer: MTP n=1" in window.model_label.text(), timeout=10_000)
    _shots(window, screenshot_dir, "status-after-restart")
    window.close()


def test_the_context_meter_counts_the_message_box_and_agrees_with_the_overflow_error(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    """Minor 3: a paste shows in the meter before sending (an estimate, said so), and after a
    send that does not fit, the meter shows the engine's count, the one the error gives."""
    chat = window.chat
    meter = chat.composer.meter
    limit = context_length(demo_model_dir())
    assert limit is not None
    qtbot.waitUntil(lambda: meter.isVisible(), timeout=10_000)
    empty = meter.usage
    assert empty is not None and empty.typed == 0
    paste = "one two three four five six seven eight nine ten " * (limit // 6)
    chat.composer.set_text(paste)
    typed = meter.usage
    assert typed is not None and typed.typed > limit // 2, typed
    shown = plain_figures(meter.label.text())
    assert shown.startswith("Context full: about "), shown
    assert "message being typed" in meter.toolTip()
    _shots(window, screenshot_dir, "context-meter-typed")
    assert meter.label.width() >= meter.label.sizeHint().width()  # the whole figure shows
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: not chat.generating and window_idle(chat), timeout=LONG_WAIT)
    error = chat.transcript.messages[-1].error_label.text()
    found = re.search(r"The conversation is ([\d,]+) tokens long", error)
    assert found, error
    qtbot.waitUntil(lambda: meter.usage is not None and not meter.usage.estimated, timeout=10_000)
    assert meter.usage is not None and meter.usage.typed == 0
    shown = plain_figures(meter.label.text())
    assert shown == f"Context full: {found.group(1)} / {limit:,} tokens", (shown, error)
    _shots(window, screenshot_dir, "context-meter-overflow")


def test_a_new_chat_samples_from_the_default_preset_or_the_models_defaults(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    """Minor 1: a temperature and seed chosen in one chat do not follow into new chats; a new
    chat starts from the default preset if one is set, else the model's defaults, and Chat
    options says which."""
    chat, panel = window.chat, window.chat.settings_panel
    chat.settings_toggle.setChecked(True)
    assert panel.sampling_source.text() == "New chat: the model's own sampling"
    panel.model_default_check.setChecked(False)
    panel.temperature_spin.setValue(1.5)
    panel.seed_spin.setValue(42)
    assert panel.sampling_source.text() == "Chosen in this chat"
    _send(qtbot, chat, "Count from 1 to 3.")
    chosen = chat.conversation
    assert chosen is not None and chosen.settings.seed == 42
    chat.new_chat()
    fresh = panel.settings
    assert fresh.model_sampling and fresh.seed is None and panel.seed_spin.value() == -1
    assert panel.temperature_spin.value() != pytest.approx(1.5)
    assert panel.sampling_source.text() == "New chat: the model's own sampling"
    assert "default preset" in panel.sampling_source.toolTip()
    _shots(window, screenshot_dir, "chat-options-new-chat-sampling")
    # The chat that chose them keeps them, and says so.
    chat.open_conversation(chosen.id)
    qtbot.waitUntil(lambda: panel.settings.seed == 42, timeout=10_000)
    assert panel.temperature_spin.value() == pytest.approx(1.5)
    assert panel.sampling_source.text() == "Kept with this chat"
    # With a default preset, new chats start from it.
    preset = ChatPreset.of_chat("Warm", replace(fresh, model_sampling=False, temperature=0.9), "")
    chat.presets.set_presets([preset], "Warm")
    chat.new_chat()
    assert panel.temperature_spin.value() == pytest.approx(0.9) and panel.settings.seed is None
    assert panel.sampling_source.text() == "New chat: the default preset “Warm”"


def test_a_stored_answer_keeps_its_line_breaks_and_previews_plain_words(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    """Minors 5 and 6 in the real window: a stored answer's single line breaks show as line
    breaks in the transcript, its code block as before, and the chat list shows its words."""
    answer = (
        "# Sorting in Python\n\nLine one\nLine two\nLine three\nLine four\n\n"
        "```python\nsorted(items)\nitems.sort()\n```\nUse **sorted()** for a new list."
    )
    with ChatStore(app_paths().ensure().data_dir / "chats.sqlite3") as store:
        chat_id = store.create_conversation("Sorting", model_dir=str(demo_model_dir())).id
        store.add_message(chat_id, "user", "How do I sort a list?")
        store.add_message(chat_id, "assistant", answer)
    window = _open_window(qtbot)
    chat = window.chat
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    shown = chat.transcript.messages[-1]
    texts = [shown._body.itemAt(i).widget() for i in range(shown._body.count())]
    prose = "\n".join(w.toPlainText() for w in texts if isinstance(w, AutoHeightText))
    assert "Line one\nLine two\nLine three\nLine four" in prose, prose
    assert any(isinstance(w, CodeBlock) and w.code == "sorted(items)\nitems.sort()" for w in texts)
    row = chat.conversations.list.item(0).text()
    assert "Sorting in Python Line one" in row and "#" not in row, row
    _shots(window, screenshot_dir, "chat-line-breaks")
    window.close()
