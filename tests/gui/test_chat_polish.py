"""The chat window's polish from issue 28, with the real engine on the demo model and real
widgets: error answers, the demo banner, Chat options, the header at 1024 and 1600 px, the
readable measure, quotes, the attachment thumbnail and focus after an example chip."""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QColor, QImage, QPalette, QTextFormat
from PySide6.QtWidgets import QApplication, QLabel, QTextBrowser, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.measure.fullsize_figures import (
    DEMO_TOO_SMALL,
    demo_banner_note,
    demo_mtp_note,
    full_size_details,
)
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.ui.bench.report_view import verdict
from qwen_mtp_desktop.ui.chat.composer.composer import THUMB_SIZE
from qwen_mtp_desktop.ui.chat.header import PICKER_MIN_WIDTH
from qwen_mtp_desktop.ui.chat.transcript.markdown_view import QUOTE_BACKGROUND
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.chat.transcript.view import MEASURE_CHARS
from qwen_mtp_desktop.ui.discover.dialog import DiscoverDialog
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.layout_checks import layout_problems
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send, window_idle

pytestmark = pytest.mark.gui


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open_window(qtbot)
    yield window
    window.close()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.subprocess
def test_an_error_answer_is_an_error_with_retry_and_the_log_one_click_away(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    # The chat's model is a server nobody listens on: the answer fails.
    endpoint = RemoteEndpoint(
        "c0ffee", "closed", f"http://127.0.0.1:{_closed_port()}/v1", "demo-model"
    )
    chat.remote_models.save(endpoint, None, keep_key=False)
    chat._on_model_changed(endpoint.ref)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == endpoint.ref,
        timeout=LONG_WAIT,
    )
    # The status bar names the chat's model: the remote server, not the local model.
    qtbot.waitUntil(lambda: window.model_label.text() == "Model: closed (remote)", timeout=5_000)
    _send(qtbot, chat, "Count from 1 to 3.")
    answer = chat.transcript.messages[-1]
    problem = answer.problem
    assert problem.isVisibleTo(chat) and problem.severity == "error"
    text = answer.error_label.text()
    assert "connection refused" in text
    # No absolute log path in the answer; the log is one click away instead.
    log_file = app_paths().log_file
    assert "Log file" not in text and str(log_file) not in text
    assert problem.retry_button.isVisibleTo(chat) and problem.log_button.isVisibleTo(chat)
    # Styled as an error: the error colour, not the text colour of a normal answer.
    error_colour = answer.error_label.palette().color(QPalette.ColorRole.WindowText)
    normal = answer.stats_label.palette().color(QPalette.ColorRole.WindowText)
    assert error_colour == QColor("#b3261e") and error_colour != normal
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"chat-error-{width}x{height}.png"))

    # Chat options on a short window scroll rather than squeeze a wrapped note (a remote
    # model's sampling note is three lines).
    window.resize(1024, 700)
    chat.settings_toggle.setChecked(True)
    QApplication.processEvents()
    assert layout_problems(window, chat.settings_panel) == []
    chat.settings_toggle.setChecked(False)

    opened: list[QUrl] = []
    chat.message_actions.open_url = opened.append
    problem.log_button.click()
    assert opened == [QUrl.fromLocalFile(str(log_file))]

    # The chat list says the chat's last answer failed (not "No messages").
    qtbot.waitUntil(lambda: "Failed: " in chat.conversations.list.item(0).text(), timeout=10_000)

    # Retry answers again, here after switching back to the local model.
    chat._on_model_changed(demo_model_dir())
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == demo_model_dir(),
        timeout=LONG_WAIT,
    )
    problem.retry_button.click()
    qtbot.waitUntil(lambda: chat.generating, timeout=10_000)
    qtbot.waitUntil(lambda: not chat.generating and window_idle(chat), timeout=LONG_WAIT)
    retried = chat.transcript.messages[-1]
    assert retried.content.split() == ["1", "2", "3"]
    assert not retried.problem.isVisibleTo(chat)
    assert retried.versions.label.text() == "2/2"  # the failed answer is kept as version 1


@pytest.mark.subprocess
def test_demo_banner_says_why_mtp_loses_and_can_be_hidden_for_good(qtbot: QtBot) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    banner = chat.banner_wrap
    assert banner.isVisibleTo(chat)
    assert banner.mtp_note.text() == demo_banner_note()
    assert "too small for MTP to win" in banner.mtp_note.text()
    assert "benchmarks/" in banner.mtp_note.text() and "2-core VM" in banner.mtp_note.text()
    assert DEMO_TOO_SMALL in banner.mtp_note.toolTip()
    assert full_size_details() in banner.mtp_note.toolTip()
    # The way to a real model is Discover (downloads work in an installed app; exports don't).
    assert "download a ready one" in banner.note.text()
    banner.discover_button.click()

    def discover() -> QWidget | None:
        shown = [w for w in QApplication.topLevelWidgets() if isinstance(w, DiscoverDialog)]
        return next((w for w in shown if w.isVisible()), None)

    qtbot.waitUntil(lambda: discover() is not None)
    dialog = discover()
    assert dialog is not None
    dialog.close()
    banner.hide_button.click()
    assert not banner.isVisibleTo(chat)
    chat.new_chat()  # the header redraws: the banner stays hidden
    assert not banner.isVisibleTo(chat)
    window.close()

    again = _open_window(qtbot)
    assert not again.chat.banner_wrap.isVisibleTo(again.chat)  # remembered
    again.close()


@pytest.mark.subprocess
def test_chat_options_are_named_apart_and_closing_them_brings_the_list_back(
    qtbot: QtBot, window: MainWindow
) -> None:
    chat = window.chat
    # "Settings" is the app's (File > Settings, Ctrl+,); the chat's own are "Chat options".
    assert window.settings_action.text() == "&Settings…"
    assert chat.settings_toggle.text() == "Chat options"
    assert chat.settings_panel.findChildren(QLabel)[0].text() == "Chat options"
    window.resize(1024, 700)
    QApplication.processEvents()
    assert chat.conversations.isVisibleTo(chat)
    chat.settings_toggle.click()
    QApplication.processEvents()
    # Not enough room for both: the list makes room for the options...
    assert chat.settings_panel.isVisibleTo(chat) and not chat.conversations.isVisibleTo(chat)
    chat.settings_toggle.click()
    QApplication.processEvents()
    # ...and comes back when they close.
    assert not chat.settings_panel.isVisibleTo(chat) and chat.conversations.isVisibleTo(chat)
    # A list the user closed stays closed.
    chat.chats_toggle.click()
    chat.settings_toggle.click()
    chat.settings_toggle.click()
    QApplication.processEvents()
    assert not chat.conversations.isVisibleTo(chat)


@pytest.mark.subprocess
def test_header_fits_at_1024_and_the_picker_shows_long_names_at_1600(
    qtbot: QtBot, window: MainWindow, tmp_path: Path, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 20.")
    _send(qtbot, chat, "Say 'we like apples' four times.")
    window.resize(1024, 700)
    QApplication.processEvents()
    assert chat.conversations.isVisibleTo(chat)
    title, status = chat.title_label, chat.model_status
    # The title is whole, and Auto's sentence is whole (wrapped if need be), not elided.
    assert title.fontMetrics().horizontalAdvance(title.text()) <= title.contentsRect().width()
    assert status.text().startswith("CPU  ·  Auto · ")
    assert status.heightForWidth(status.width()) <= status.height()
    assert status.fontMetrics().horizontalAdvance("·") > 0 and "…" not in status.text()

    # A model with a long name: the picker is as wide as the name where there is room.
    long_name = "Qwen3.5-0.8B-int4-asym-g64-exported-for-the-long-name-check"
    model = tmp_path / long_name
    shutil.copytree(demo_model_dir(), model)
    chat.use_model(model)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == model, timeout=LONG_WAIT
    )
    picker = chat.model_picker
    window.resize(1600, 1000)
    QApplication.processEvents()
    needed = picker.fontMetrics().horizontalAdvance(long_name)
    assert picker.currentText() == long_name and picker.width() > needed
    assert window.grab().save(str(screenshot_dir / "chat-header-1600x1000.png"))
    window.resize(1024, 700)
    QApplication.processEvents()
    # Narrow: the picker yields (its tooltip names the model), the status keeps its room.
    assert PICKER_MIN_WIDTH <= picker.width() < needed
    assert status.width() > 150
    assert window.grab().save(str(screenshot_dir / "chat-header-1024x700.png"))


@pytest.mark.subprocess
def test_answers_keep_a_readable_measure_and_quotes_look_like_quotes(
    qtbot: QtBot, window: MainWindow
) -> None:
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 20.")
    transcript = chat.transcript
    column = transcript.column_width()  # MEASURE_CHARS of the font, plus the padding
    assert column >= MEASURE_CHARS * transcript.fontMetrics().averageCharWidth()
    for width, height in ((1600, 1000), (1024, 700)):
        window.resize(width, height)
        QApplication.processEvents()
        viewport = transcript.viewport().width()
        for message in transcript.messages:
            # At most the measure, centred in the view, and never narrower than the view
            # allows when it is narrower than the measure.
            assert message.width() == min(column, viewport - 48), (width, message.width())
            left = message.mapTo(transcript.viewport(), message.rect().topLeft()).x()
            assert abs(left - (viewport - message.width() - left)) <= 2
    text = "Before.\n\n> A quoted line.\n\nAfter."
    answer = MessageWidget("assistant", dark=False, content=text)
    qtbot.addWidget(answer)
    blocks = {}
    for view in answer.findChildren(QTextBrowser):
        block = view.document().begin()
        while block.isValid():
            blocks[block.text()] = block
            block = block.next()
    quote, plain = blocks["A quoted line."], blocks["After."]
    assert quote.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel) == 1
    assert quote.blockFormat().background().color() == QUOTE_BACKGROUND
    assert plain.blockFormat().background().style().name == "NoBrush"
    quoted_text = quote.begin().fragment().charFormat().foreground().color()
    plain_text = plain.begin().fragment().charFormat().foreground()
    assert quoted_text.lightness() > 100 and plain_text.style().name == "NoBrush"


@pytest.mark.subprocess
def test_attached_image_shows_a_thumbnail_and_a_pipe_is_never_opened(
    qtbot: QtBot, window: MainWindow, tmp_path: Path
) -> None:
    composer = window.chat.composer
    composer.set_vision(True)
    photo = tmp_path / "photo.png"
    image = QImage(800, 400, QImage.Format.Format_RGB32)
    image.fill(QColor("teal"))
    assert image.save(str(photo))
    composer.set_image(photo)
    assert composer.attachment_thumb.isVisibleTo(composer)
    size = composer.attachment_thumb.pixmap().size()
    assert (size.width(), size.height()) == (THUMB_SIZE, THUMB_SIZE // 2)
    assert composer.attachment_label.text() == "Attached: photo.png"
    # A FIFO (or a device) dropped in would block the window if it were read: no thumbnail.
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    composer.set_image(fifo)
    assert not composer.attachment_thumb.isVisibleTo(composer)
    composer.set_image(None)
    assert not composer.attachment_row.isVisibleTo(composer)


@pytest.mark.subprocess
def test_after_an_example_chip_the_message_box_has_focus(qtbot: QtBot, window: MainWindow) -> None:
    chat = window.chat
    chat.new_chat()
    window.activateWindow()
    chip = chat.examples.chips[0]
    chip.setFocus()
    chip.click()
    qtbot.waitUntil(lambda: not chat.examples.isVisible(), timeout=LONG_WAIT)
    assert QApplication.focusWidget() is chat.composer.editor
    qtbot.waitUntil(lambda: not chat.generating and window_idle(chat), timeout=LONG_WAIT)


def test_benchmark_verdicts_on_the_demo_tell_the_full_size_story() -> None:
    def report(path: Path) -> dict[str, object]:
        mode = {
            "method": {"kind": "plain"},
            "decoder": "genai",
            "label": "plain",
            "identical": True,
            "speedup": None,
            "acceptance_rate": None,
            "decode_tokens_per_s": {"median": 10.0, "min": 9.0, "max": 11.0},
            "acceptance_by_position": [],
        }
        slower = dict(mode, method={"kind": "mtp", "drafts": 1}, label="MTP n=1")
        slower["speedup"] = {"median": 0.6, "min": 0.5, "max": 0.7}
        slower["acceptance_rate"] = 0.9
        from qwen_mtp_desktop.core.measure.bench import recommend

        modes = [mode, slower]
        return {
            "kind": "bench",
            "model": {"path": str(path)},
            "modes": modes,
            "per_set": [],
            "recommendation": recommend(modes),
        }

    _status, title, detail = verdict(report(demo_model_dir()))
    assert title.startswith("Recommended: plain decoding")
    assert detail.endswith(demo_mtp_note())
    _status, _title, other = verdict(report(Path("/models/Qwen3.5-9B")))
    assert DEMO_TOO_SMALL not in other
