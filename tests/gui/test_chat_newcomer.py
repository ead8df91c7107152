"""The chat as a new user meets it, with the real engine on the demo model: figures explained
and never stale, example prompts in an empty chat."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.turns import DEMO_EXAMPLES
from qwen_mtp_desktop.core.decoding.method import PLAIN
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.measure.fullsize_figures import demo_mtp_note, full_size_details
from qwen_mtp_desktop.core.units import NBSP, WORD_JOINER, keep_units
from qwen_mtp_desktop.ui.chat.transcript.message import format_stats
from qwen_mtp_desktop.ui.figures import LEGEND
from qwen_mtp_desktop.ui.main_window import MainWindow
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def _shots(window: MainWindow, screenshot_dir: Path, name: str) -> None:
    """The window at the two sizes the layout tests check."""
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"{name}-{width}x{height}.png"))


@pytest.mark.subprocess
def test_figures_are_live_explained_shown_once_and_never_stale(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    assert not chat.legend.isVisibleTo(chat) and chat.live_stats.text() == ""
    live: list[str] = []
    window.engine_process.chunks.connect(lambda _rid, _batch: live.append(chat.live_stats.text()))
    _send(qtbot, chat, "Count from 1 to 30.")
    # A live speed while the answer streams, before the answer's own stats exist.
    assert any(text.startswith("Generating") and "tok/" in text for text in live), live
    answer = chat.transcript.messages[-1]
    stats_text = answer.stats_label.text()
    # "tok/s" never breaks after its slash, and the unit stays with its number.
    assert f"{NBSP}tok/{WORD_JOINER}s" in stats_text and f"TTFT{NBSP}" in stats_text
    # Every figure shown is explained in the tooltip, and the legend is on screen, one line.
    tooltip = answer.stats_label.toolTip()
    for figure in ("MTP n=k", "drafts accepted", "tok/s", "TTFT", "tokens"):
        assert f"<b>{figure}</b>" in tooltip, figure
    assert chat.legend.isVisibleTo(chat) and chat.legend.text() == LEGEND
    assert chat.legend.height() < 2 * chat.legend.fontMetrics().height()
    # The figures are shown once: on the answer's own line, not again under the transcript.
    assert chat.live_stats.text() == "" and not chat.live_stats.isVisibleTo(chat)
    _shots(window, screenshot_dir, "chat-figures")

    # A new chat shows none of the previous chat's figures.
    chat.new_chat()
    assert chat.live_stats.text() == "" and not chat.legend.isVisibleTo(chat)

    # Back in the first chat: the legend for its answer's figures; deleting that answer
    # removes the legend too.
    first = chat.conversations.list.item(0)
    assert first is not None
    chat.open_conversation(int(first.data(Qt.ItemDataRole.UserRole)))
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    assert chat.legend.isVisibleTo(chat) and chat.live_stats.text() == ""
    chat._on_message_action(chat.transcript.messages[1], "delete")
    QApplication.processEvents()
    assert chat.live_stats.text() == "" and not chat.legend.isVisibleTo(chat)


def test_figures_line_wraps_between_figures_only() -> None:
    """At any width the stats line never ends a line with "tok/", never starts one with "·",
    and never leaves the last figure alone on a line."""
    from PySide6.QtGui import QFont, QTextLayout

    stats = {
        "method": {"kind": "mtp", "drafts": 2},
        "acceptance_rate": 0.38,
        "mean_accepted_per_step": 0.75,
        "decode_tokens_per_s": 104.2,
        "prompt_tokens": 109,
        "reused_tokens": 0,
        "ttft_s": 0.042,
        "generated_tokens": 15,
        "total_s": 0.2,
    }
    text = keep_units(format_stats(stats))
    for width in range(60, 700, 7):
        layout = QTextLayout(text, QFont())
        layout.beginLayout()
        lines = []
        while (line := layout.createLine()).isValid():
            line.setLineWidth(width)
            lines.append(text[line.textStart() : line.textStart() + line.textLength()])
        layout.endLayout()
        for shown in lines:
            assert not shown.rstrip().endswith("tok/"), (width, lines)
            assert not shown.lstrip(f" {NBSP}").startswith("·"), (width, lines)
        if len(lines) > 1:
            assert lines[-1].strip() != "0.2 s", (width, lines)


@pytest.fixture
def damaged_head(tmp_path: Path) -> Path:
    """The demo model with a truncated MTP head (a copy cut short, a disk error)."""
    folder = tmp_path / "damaged-head"
    shutil.copytree(demo_model_dir(), folder)
    head = folder / "openvino_mtp_model.bin"
    head.write_bytes(head.read_bytes()[:1000])
    return folder


@pytest.mark.subprocess
def test_settings_follow_what_the_model_can_do(
    qtbot: QtBot, window: MainWindow, damaged_head: Path, screenshot_dir: Path
) -> None:
    chat = window.chat
    panel = chat.settings_panel
    chat.settings_toggle.setChecked(True)
    assert panel.mtp_check.isEnabled() and panel.mtp_check.isChecked()
    # The chat follows the model's generation_config.json (the demo's says greedy).
    assert panel.model_default_check.isChecked() and not panel.temperature_spin.isEnabled()

    chat.use_model(damaged_head)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == damaged_head,
        timeout=LONG_WAIT,
    )
    # The head is damaged: MTP off with the reason, Validate off, sampling open.
    assert not panel.mtp_check.isEnabled() and not panel.mtp_check.isChecked()
    assert panel.mtp_note.isVisible()
    assert panel.mtp_note.text().startswith("This model's MTP head is damaged")
    assert "openvino_mtp_model.bin is truncated" in panel.mtp_note.text()
    assert not panel.validate_button.isEnabled()
    assert "damaged" in panel.validate_button.toolTip()
    assert "Plain decoding" in panel.sampling_hint.text()
    assert "plain decoding" in chat.model_status.text()
    # The chat's own choice is kept: a repaired model would use MTP again.
    assert panel.settings.mtp
    # Sampling is the model's default (greedy) until the user chooses their own values.
    assert not panel.temperature_spin.isEnabled()
    panel.model_default_check.setChecked(False)
    assert panel.temperature_spin.isEnabled()
    panel.temperature_spin.setValue(0.8)
    assert panel.settings.temperature == 0.8 and panel.top_p_spin.isEnabled()
    _send(qtbot, chat, "Count from 1 to 5.")
    answer = chat.transcript.messages[-1]
    assert "plain decoding" in answer.stats_label.text()
    _shots(window, screenshot_dir, "chat-damaged-head")

    # Back on the intact demo model: MTP on, and it samples too (exactly), at the chat's 0.8.
    chat.use_model(demo_model_dir())
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == demo_model_dir(),
        timeout=LONG_WAIT,
    )
    assert panel.mtp_check.isEnabled() and panel.mtp_check.isChecked()
    assert not panel.mtp_note.isVisible() and panel.validate_button.isEnabled()
    assert panel.temperature_spin.value() == 0.8 and panel.temperature_spin.isEnabled()
    assert "MTP samples exactly" in panel.sampling_hint.text()
    # Sampled, MTP on, Auto draft tokens: Auto decides (sampled turns by their own numbers).
    assert panel.settings.method == "auto" and panel.settings.sampling.temperature == 0.8
    panel.mtp_check.setChecked(False)
    assert panel.temperature_spin.isEnabled() and panel.temperature_spin.value() == 0.8
    assert panel.settings.temperature == 0.8 and not panel.settings.mtp


@pytest.mark.subprocess
def test_drafts_toggle_and_new_chat_settings_are_remembered(qtbot: QtBot) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    assert not chat.drafts_toggle.isChecked()
    chat.drafts_toggle.setChecked(True)
    chat.settings_panel.max_tokens_spin.setValue(200)
    chat.settings_panel.thinking_check.setChecked(True)
    window.close()

    again = _open_window(qtbot)
    assert again.chat.drafts_toggle.isChecked()
    again.chat.new_chat()
    settings = again.chat.settings_panel.settings
    assert settings.max_new_tokens == 200 and settings.thinking
    again.close()


@pytest.mark.subprocess
def test_example_chips_and_a_demo_chat_that_stays_correct(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    chat.new_chat()
    assert chat.examples.isVisible()
    assert [chip.text() for chip in chat.examples.chips] == list(DEMO_EXAMPLES)
    assert "demo model" in chat.examples.title.text()
    assert not chat.demo_turn_note.isVisible()
    count_chip = chat.examples.chips[0]
    assert count_chip.text() == "Count from 1 to 20."
    qtbot.mouseClick(count_chip, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    assert not chat.examples.isVisible()
    qtbot.waitUntil(lambda: not chat.generating and chat._runner.pending == 0, timeout=LONG_WAIT)
    first = chat.transcript.messages[1]
    assert first.content.split() == [str(i) for i in range(1, 21)]

    # Later turns stay correct: the demo model reads only the latest message.
    _send(qtbot, chat, "Count from 35 to 52.")
    _send(qtbot, chat, "List the numbers from 5 to 16.")
    _send(qtbot, chat, "Count from 1 to 10.")
    answers = [w.content for w in chat.transcript.messages if w.role == "assistant"]
    assert answers[2].split() == [str(i) for i in range(5, 17)]
    assert answers[3].split() == [str(i) for i in range(1, 11)]
    assert chat.demo_turn_note.isVisible()

    # The same chips come back in a fresh chat.
    chat.new_chat()
    assert chat.examples.isVisible() and not chat.demo_turn_note.isVisible()


@pytest.mark.subprocess
def test_model_picker_in_the_chat_header(
    qtbot: QtBot, window: MainWindow, damaged_head: Path, screenshot_dir: Path
) -> None:
    chat, models = window.chat, window.models
    qtbot.waitUntil(lambda: models.scans_done >= 1 and not models.busy, timeout=LONG_WAIT)
    models.show_model(damaged_head)
    picker = chat.model_picker

    def items() -> list[tuple[str, str]]:
        model = picker.model()
        return [
            (model.index(row, 0).data(), model.index(row, 1).data())
            for row in range(model.rowCount())
        ]

    # The two local models, then the row that adds a remote server (issue 17).
    qtbot.waitUntil(lambda: len(items()) == 3 and "no MTP" in str(items()), timeout=LONG_WAIT)
    (demo, demo_about), (damaged, damaged_about), (add_remote, _) = items()
    assert demo == "Demo model" and damaged == "damaged-head"
    assert add_remote == "Add remote server…"
    assert demo_about.startswith("Qwen3.5 dense · ") and demo_about.endswith("· FP16 · MTP")
    assert damaged_about.endswith("· no MTP")
    assert picker.currentText() == "Demo model"  # closed: the name only
    # The path, shown as typed (a folder name may hold '<'): plain_tooltip's literal form.
    assert plain_tooltip(str(damaged_head)) == picker.itemData(1, Qt.ItemDataRole.ToolTipRole)
    window.resize(1024, 700)
    picker.showPopup()
    QApplication.processEvents()
    popup = picker.view().window()
    assert popup.width() >= picker.view().columnWidth(0) + picker.view().columnWidth(1)
    assert window.grab().save(str(screenshot_dir / "chat-model-picker-1024x700.png"))
    assert popup.grab().save(str(screenshot_dir / "chat-model-picker-popup.png"))
    picker.hidePopup()

    # Choosing in the header is choosing in Settings: the chat loads that model.
    picker.setCurrentIndex(1)
    picker.activated.emit(1)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == damaged_head,
        timeout=LONG_WAIT,
    )
    assert chat.settings_panel.model_combo.currentText() == "damaged-head"
    assert "plain decoding" in chat.model_status.text()
    # While an answer is written the picker is off: the answer needs its model.
    seen: list[bool] = []
    window.engine_process.chunks.connect(lambda _rid, _batch: seen.append(picker.isEnabled()))
    _send(qtbot, chat, "Count from 1 to 8.")
    assert seen and not any(seen)
    assert picker.isEnabled()


@pytest.mark.subprocess
def test_compare_shows_mtp_at_work_beside_plain_decoding(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    chat.new_chat()
    assert not chat.compare_button.isEnabled()
    assert "Send a message first" in chat.compare_button.toolTip()
    _send(qtbot, chat, "Count from 1 to 20.")
    assert chat.compare_button.isEnabled()
    qtbot.mouseClick(chat.compare_button, Qt.MouseButton.LeftButton)
    dialog = chat.compare_dialog
    assert dialog is not None and dialog.isVisible()
    assert not chat.compare_button.isEnabled()  # one comparison at a time
    qtbot.waitUntil(lambda: not dialog.running, timeout=LONG_WAIT)
    counting = " ".join(str(i) for i in range(1, 21))
    assert dialog.plain.text.split() == dialog.mtp.text.split() == counting.split()
    # The plain side has no drafts; MTP's kept guesses are tinted.
    assert dialog.plain.answer.drafted_ranges == []
    assert dialog.mtp.answer.drafted_ranges
    plain_stats, mtp_stats = dialog.plain.stats, dialog.mtp.stats
    assert plain_stats is not None and mtp_stats is not None
    assert plain_stats.method == PLAIN and mtp_stats.method.uses_mtp_head
    assert mtp_stats.acceptance_rate > 0.5
    assert f"{NBSP}tok/{WORD_JOINER}s" in dialog.plain.status.text()
    assert "drafts accepted" in dialog.mtp.status.text()
    summary = dialog.summary.text()
    assert "as fast as plain decoding" in summary and "the same answer" in summary
    # On the demo model: why MTP loses here, and what it measured on a full-size model.
    assert dialog.demo_note.isVisible()
    assert dialog.demo_note.text() == demo_mtp_note()
    assert "benchmark figures from benchmarks/" in dialog.demo_note.text()
    assert full_size_details() == dialog.demo_note.toolTip()
    assert dialog.grab().save(str(screenshot_dir / "chat-compare.png"))
    # The chat itself is untouched: still its one exchange.
    assert len(chat.transcript.messages) == 2
    dialog.reject()
    qtbot.waitUntil(lambda: chat.compare_dialog is None, timeout=10_000)
    assert chat.compare_button.isEnabled()
