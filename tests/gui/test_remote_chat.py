"""Remote models in the chat window: a real `qwen-mtp-desktop serve` process on the demo model,
the real window offscreen, the real chat store."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.turns import DEMO_SINGLE_TURN_NOTE
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.remote import client as remote_client
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint, load_endpoints
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.units import plain_figures
from qwen_mtp_desktop.ui.chat.options.panel import REMOTE_DECODING_NOTE
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.remote.dialog import RemoteServerDialog
from qwen_mtp_desktop.ui.chat.remote.picker import ADD
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.remote_server import (
    KEY,
    canned_server,
    kill_tree,
    never_accepting,
    serving,
    throttled,
)

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000
PROMPT = "Count from 1 to 12."


@pytest.fixture
def demo_model() -> Path:
    return demo_model_dir()


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    qtbot.waitUntil(
        lambda: chat.store_ready and chat._loaded is not None and chat.remote_models.loaded,
        timeout=LONG_WAIT,
    )
    yield window
    window.close()


def _send(qtbot: QtBot, chat: ChatPanel, text: str) -> None:
    count = len(chat.transcript.messages)
    chat.composer.set_text(text)
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == count + 2, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: not chat.generating, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)


def _choose(qtbot: QtBot, chat: ChatPanel, ref: Path | str) -> None:
    index = chat.model_picker.findData(str(ref), Qt.ItemDataRole.UserRole)
    assert index >= 0, f"{ref} is not in the picker"
    chat.model_picker.activated.emit(index)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == Path(ref),
        timeout=LONG_WAIT,
    )


def _add_remote(
    qtbot: QtBot, chat: ChatPanel, url: str, key: str | None, name: str = "other PC"
) -> RemoteEndpoint:
    """Add a server as a user does: picker > Add remote server…, Test connection, Save."""
    chat.model_picker.activated.emit(chat.model_picker.findData(ADD, Qt.ItemDataRole.UserRole))
    dialog = chat.remote_dialog
    assert isinstance(dialog, RemoteServerDialog) and dialog.isVisible()
    dialog.url_edit.setText(url)
    if key:
        dialog.key_edit.setText(key)
    dialog.name_edit.setText(name)
    qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.test_button.isEnabled(), timeout=30_000)
    assert "Connected" in dialog.status.text(), dialog.status.text()
    assert dialog.model_combo.currentText() == "demo-model"
    dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
    endpoint = next(e for e in chat.remote_models.endpoints if e.name == name)
    qtbot.waitUntil(lambda: chat._loaded is not None and chat._loaded.model_dir == endpoint.ref)
    return endpoint


def test_chat_with_a_remote_server_like_a_local_model(
    qtbot: QtBot, window: MainWindow, demo_model: Path, screenshot_dir: Path
) -> None:
    chat = window.chat
    _send(qtbot, chat, PROMPT)  # the local model first: the reference answer
    local_answer = chat.transcript.messages[-1].content
    assert local_answer.split()[:12] == [str(i) for i in range(1, 13)]

    with serving(demo_model) as (_process, url):
        chat.new_chat()
        endpoint = _add_remote(qtbot, chat, url, KEY)
        assert endpoint.has_key
        # Saved without the key; the key is in memory only here (no keychain on this machine),
        # and the dialog said so.
        saved = load_endpoints().endpoints
        assert [e.base_url for e in saved] == [url] and saved[0].has_key
        assert KEY not in (app_paths().config_dir / "remote_endpoints.json").read_text()
        qtbot.waitUntil(lambda: "No system keychain" in chat.remote_models.key_note)
        assert "demo-model on http://127.0.0.1" in chat.model_status.text()
        assert chat.model_picker.currentText() == "other PC"
        # The settings' model box names the server; its greedy setting is kept (a remote
        # model is not "a model without MTP", which would open sampling).
        assert chat.settings_panel.model_combo.currentText() == "other PC (remote)"
        assert chat.settings_panel.mtp_problem == ""
        assert chat.settings_panel.settings.temperature == 0
        # No generation_config.json to read for a server: the chat's own values apply.
        label = chat.settings_panel.model_default_label.text()
        assert label == "A remote server's own defaults are not known here: the values below apply."

        _send(qtbot, chat, PROMPT)
        answer = chat.transcript.messages[-1]
        assert answer.content == local_answer  # the same greedy decoding, over HTTP
        # As read (the label keeps "tok/s" whole with a word joiner and no-break spaces).
        figures = plain_figures(answer.stats_label.text())
        for needle in ("remote · other PC", "tok/s", "TTFT", "MTP n=1", "accepted"):
            assert needle in figures, figures

        # Regenerate works the same and replaces the answer.
        answer.action.emit("regenerate")
        qtbot.waitUntil(
            lambda: (
                not chat.generating
                and len(chat.transcript.messages) == 2
                and chat.transcript.messages[-1] is not answer
            ),
            timeout=LONG_WAIT,
        )
        qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
        regenerated = chat.transcript.messages[-1]
        assert regenerated.content == local_answer
        assert "remote · other PC" in regenerated.stats_label.text()
        # The server kept the conversation's state: its cached_tokens reach the stats line.
        assert "reused" in regenerated.stats_label.text(), regenerated.stats_label.text()
        window.resize(1024, 700)
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / "remote-chat-answer-1024x700.png"))

    conversation = chat.conversation
    assert conversation is not None and conversation.model_dir == str(endpoint.ref)
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        messages = store.messages(conversation.id)
    stats = messages[-1].stats
    assert stats is not None and messages[-1].status == "complete"
    assert stats["remote"]["endpoint"] == "other PC" and stats["remote"]["timing"] == "client"
    assert stats["remote"]["server_stats"]["mode"] == "mtp"
    assert stats["ttft_s"] > 0 and stats["decode_tokens_per_s"] > 0
    assert stats["acceptance_rate"] == stats["remote"]["server_stats"]["acceptance_rate"]


def test_demo_model_over_serve_says_it_read_the_last_message_only(
    qtbot: QtBot, window: MainWindow, demo_model: Path
) -> None:
    """serve answers the demo model's turn 2 from the last message alone and says so (header
    X-Single-Turn: 1 and a "notice"); the chat shows that notice under the answer, in the
    words the local chat's demo banner uses, and again when the chat is opened later."""
    chat = window.chat
    with serving(demo_model) as (_process, url):
        chat.new_chat()
        _add_remote(qtbot, chat, url, KEY)
        _send(qtbot, chat, PROMPT)
        first = chat.transcript.messages[-1]
        assert first.problem.isHidden()  # turn 1: nothing was left out, nothing to say
        _send(qtbot, chat, "Now count from 1 to 5.")
        second = chat.transcript.messages[-1]
        notice = second.error_label.text()
        assert second.problem.severity == "notice" and not second.problem.isHidden()
        assert DEMO_SINGLE_TURN_NOTE in notice
        assert "2 earlier messages were left out of this request." in notice
    conversation = chat.conversation
    assert conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        stored = store.messages(conversation.id)[-1]
    assert stored.stats is not None and DEMO_SINGLE_TURN_NOTE in stored.stats["remote"]["notice"]
    # Opened again (the server is gone by now): the stored answer still says it.
    chat.new_chat()
    chat.open_conversation(conversation.id)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 4, timeout=LONG_WAIT)
    assert DEMO_SINGLE_TURN_NOTE in chat.transcript.messages[-1].error_label.text()
    assert chat.transcript.messages[1].problem.isHidden()


def test_wrong_key_and_server_killed_mid_answer(
    qtbot: QtBot, window: MainWindow, demo_model: Path
) -> None:
    chat = window.chat
    with serving(demo_model) as (process, url):
        endpoint = _add_remote(qtbot, chat, url, KEY)
        # A wrong key: the server's 401, said plainly under the answer.
        chat.remote_models.save(endpoint, "not-the-key", keep_key=False)
        _send(qtbot, chat, PROMPT)
        error = chat.transcript.messages[-1].error_label.text()
        assert "The server refused the API key (HTTP 401)" in error
        assert "not-the-key" not in error

        chat.remote_models.save(endpoint, KEY, keep_key=False)
        cut: list[int] = []

        def kill_on_first_text(_request: int, _chunks: object) -> None:
            if not cut:
                cut.append(1)
                kill_tree(process.pid)

        chat._router.chunks.connect(kill_on_first_text)
        with throttled(process):
            _send(qtbot, chat, "Count from 1 to 20.")
    answer = chat.transcript.messages[-1]
    assert cut
    assert answer.content.startswith("1") and len(answer.content.split()) < 20
    assert "closed before the answer was complete" in answer.error_label.text()
    assert "partial answer is kept" in answer.error_label.text()
    conversation = chat.conversation
    assert conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        stored = store.messages(conversation.id)[-1]
    assert stored.content == answer.content and stored.status != "complete"


def _live_lines(chat: ChatPanel) -> list[str]:
    """The figures line as read after each batch of a remote answer (the test's slot runs
    after the chat's own, which updates it)."""
    lines: list[str] = []
    chat._router.chunks.connect(
        lambda _rid, _chunks: lines.append(plain_figures(chat.live_stats.text()))
    )
    return lines


def test_a_remote_answer_shows_its_stream_rate_live_and_the_servers_count_at_the_end(
    qtbot: QtBot, window: MainWindow, demo_model: Path, screenshot_dir: Path
) -> None:
    """Issue 44, minor 7 (LM Studio item 5): while a remote answer streams, the live line
    shows the stream's own rate in what it counts, chunks (`serve` sends its `usage` only
    after the last text, and a chunk is not a token: with MTP one holds several), never
    tokens guessed from characters; the answer's line then has the server's token count."""
    chat = window.chat
    chat.settings_panel.max_tokens_spin.setValue(400)
    window.resize(1024, 700)
    live = _live_lines(chat)
    shot = screenshot_dir / "remote-chat-streaming-1024x700.png"
    taken: list[str] = []

    def screenshot(_rid: int, _chunks: object) -> None:
        if not taken and len(live) >= 6 and "chunks/s" in live[-1]:
            assert window.grab().save(str(shot))
            taken.append(live[-1])

    chat._router.chunks.connect(screenshot)
    with serving(demo_model) as (process, url):
        _add_remote(qtbot, chat, url, KEY)
        with throttled(process, duty=0.2):
            _send(qtbot, chat, "Count from 1 to 120.")
    shown = [text for text in live if text]
    assert shown, "no live line while the answer streamed"
    assert all("about" not in text and "tok/s" not in text for text in shown), shown
    assert any(
        re.search(r"\bfrom other PC .* [\d.]+ chunks/s .* \d+ chunks .* TTFT", t) for t in shown
    )
    assert taken, shown
    conversation = chat.conversation
    assert conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        stats = store.messages(conversation.id)[-1].stats
    assert stats is not None and stats["remote"]["tokens_reported"] is True
    tokens = stats["generated_tokens"]  # the server's usage.completion_tokens
    final = plain_figures(chat.transcript.messages[-1].stats_label.text())
    assert f"{tokens:,} tokens" in final and "tok/s" in final, final
    assert chat.live_stats.text() == ""  # the live estimate gave way to the answer's line


def test_a_server_that_streams_usage_shows_its_token_count_live(
    qtbot: QtBot, window: MainWindow
) -> None:
    """A server that sends `usage` with each text event (vLLM's continuous usage stats): the
    live line shows its token count and tok/s, not chunks."""
    events = [
        {"choices": [{"delta": {"content": f"word{i} "}}], "usage": {"completion_tokens": 3 * i}}
        for i in range(1, 9)
    ]
    events.append({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 25}})
    chat = window.chat
    live = _live_lines(chat)
    with canned_server() as (url, handler):
        handler.body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()
        handler.body += b"data: [DONE]\n\n"
        handler.pace_s = 0.15
        chat.remote_models.save(
            RemoteEndpoint("c0ffee", "vLLM box", url, "qwen", False), None, keep_key=True
        )
        qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
        _choose(qtbot, chat, "remote:c0ffee")
        _send(qtbot, chat, "Say eight words.")
    shown = [text for text in live if text]
    assert all("chunk" not in text and "about" not in text for text in shown), shown
    counts = [int(m.group(1)) for t in shown if (m := re.search(r"(\d+) tokens", t))]
    assert counts and set(counts) <= {3 * i for i in range(1, 9)}, shown
    assert any(re.search(r"[\d.]+ tok/s .* \d+ tokens .* TTFT", t) for t in shown), shown
    final = plain_figures(chat.transcript.messages[-1].stats_label.text())
    assert "25 tokens" in final, final  # the server's count at the end, not the live one


def test_unreachable_server_times_out_without_freezing_the_window(
    qtbot: QtBot, window: MainWindow, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_client, "CONNECT_TIMEOUT_S", 2.0)
    chat = window.chat
    # The heartbeat's gaps while the network waits: the dialog's Test connection and a turn.
    gaps: dict[str, list[float]] = {"other": [], "test connection": [], "answer": []}
    phase = ["other"]
    last = [time.monotonic()]

    def beat() -> None:
        now = time.monotonic()
        gaps[phase[0]].append(now - last[0])
        last[0] = now

    heartbeat = QTimer()
    heartbeat.setInterval(10)
    heartbeat.timeout.connect(beat)
    with never_accepting() as url:
        heartbeat.start()
        # Test connection in the dialog: the error comes back, the window keeps painting.
        chat.model_picker.activated.emit(chat.model_picker.findData(ADD, Qt.ItemDataRole.UserRole))
        dialog = chat.remote_dialog
        assert isinstance(dialog, RemoteServerDialog)
        dialog.url_edit.setText(url)
        qtbot.wait(100)  # the dialog is built and shown; from here on the network waits
        phase[0] = "test connection"
        qtbot.mouseClick(dialog.test_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.test_button.isEnabled(), timeout=30_000)
        phase[0] = "other"
        assert "did not answer within 2 s" in dialog.status.text()
        dialog.model_combo.setCurrentText("demo-model")
        dialog.buttons.button(dialog.buttons.StandardButton.Save).click()
        endpoint = chat.remote_models.endpoints[-1]
        qtbot.waitUntil(lambda: chat._loaded is not None and chat._loaded.model_dir == endpoint.ref)
        started = time.monotonic()
        chat.composer.set_text(PROMPT)
        qtbot.wait(100)
        phase[0] = "answer"
        qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: chat.generating, timeout=LONG_WAIT)
        qtbot.waitUntil(lambda: not chat.generating, timeout=LONG_WAIT)
        phase[0] = "other"
        took = time.monotonic() - started
        qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
        heartbeat.stop()
    error = chat.transcript.messages[-1].error_label.text()
    assert "did not answer within 2 s" in error and "Check the address" in error
    assert 1.5 < took < 15
    for name in ("test connection", "answer"):
        beats = sorted(gaps[name])
        worst, median = beats[-1], beats[len(beats) // 2]
        print(
            f"heartbeat during {name}: {len(beats)} beats of 10 ms, median gap "
            f"{median * 1000:.0f} ms, worst {worst * 1000:.0f} ms"
        )
        assert len(beats) > 50  # it kept beating through the 2 s wait
        assert worst < 0.2, f"the GUI thread stalled {worst * 1000:.0f} ms during {name}"


def test_screenshots_of_the_picker_and_the_add_dialog(
    qtbot: QtBot, window: MainWindow, screenshot_dir: Path
) -> None:
    chat = window.chat
    url = "http://192.168.1.20:8000/v1"
    chat.remote_models.save(
        RemoteEndpoint("a1b2c3", "GPU server", url, "Qwen3.5-9B-int4", True), None, keep_key=True
    )
    chat.remote_models.save(
        RemoteEndpoint("d4e5f6", "OVMS team", "http://ovms.lan:8000/v3", "qwen35", False),
        None,
        keep_key=True,
    )
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    _choose(qtbot, chat, "remote:a1b2c3")
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        chat.model_picker.showPopup()
        QApplication.processEvents()
        view = chat.model_picker.view()
        assert view.isVisible()
        assert window.grab().save(str(screenshot_dir / f"remote-picker-{width}x{height}.png"))
        assert (
            view.window()
            .grab()
            .save(str(screenshot_dir / f"remote-picker-list-{width}x{height}.png"))
        )
        chat.model_picker.hidePopup()
        chat.model_picker.activated.emit(chat.model_picker.findData(ADD, Qt.ItemDataRole.UserRole))
        dialog = chat.remote_dialog
        assert isinstance(dialog, RemoteServerDialog)
        dialog.url_edit.setText(url)
        dialog.model_combo.addItems(["Qwen3.5-9B-int4", "Qwen3.5-2B-int4"])
        dialog._show("Connected to http://192.168.1.20:8000/v1: 2 models (Qwen3.5-9B-int4, …).")
        QApplication.processEvents()
        assert dialog.grab().save(str(screenshot_dir / f"remote-add-dialog-{width}x{height}.png"))
        # Everything in the dialog fits: no field squeezed below its size hint.
        for widget in (dialog.url_edit, dialog.key_edit, dialog.model_combo, dialog.test_button):
            assert widget.width() >= widget.minimumSizeHint().width()
        dialog.reject()
        # The header keeps the title, picker and status within the window.
        assert chat.model_picker.geometry().right() <= chat.width()


def test_chat_options_for_a_remote_model_offer_only_what_applies(
    qtbot: QtBot, window: MainWindow, demo_model: Path, screenshot_dir: Path
) -> None:
    """Issue 44, minor 11: with a remote model, Device, the MTP head, Draft tokens, Prompt
    lookup and Validate are disabled with one note saying why, "Model's defaults" is neither
    ticked nor tickable beside "the values below apply", and the chat's own choices for them
    are kept: back on the local model they are as they were."""
    chat = window.chat
    panel = chat.settings_panel
    chat.settings_toggle.setChecked(True)
    local = panel.settings
    assert local.mtp and not local.prompt_lookup and local.model_sampling
    applying = (panel.device_combo, panel.mtp_check, panel.depth_spin, panel.lookup_check)
    assert all(w.isEnabled() for w in applying) and panel.validate_button.isEnabled()
    assert panel.mtp_check.isChecked() and not panel.mtp_note.isVisible()
    with serving(demo_model) as (_process, url):
        _add_remote(qtbot, chat, url, KEY)
        qtbot.waitUntil(lambda: not panel.device_combo.isEnabled(), timeout=10_000)
        assert not any(w.isEnabled() for w in applying)
        assert not panel.validate_button.isEnabled()
        assert not panel.mtp_check.isChecked() and not panel.lookup_check.isChecked()
        assert panel.mtp_note.isVisible() and panel.mtp_note.text() == REMOTE_DECODING_NOTE
        note = panel.model_default_label.text()
        assert note.endswith("the values below apply.")
        check = panel.model_default_check
        assert not check.isChecked() and not check.isEnabled()
        assert panel.temperature_spin.isEnabled()  # the values below do apply
        assert "remote server samples" in panel.sampling_hint.text()
        for width, height in ((1024, 700), (1600, 1000)):
            window.resize(width, height)
            QApplication.processEvents()
            assert window.grab().save(str(screenshot_dir / f"remote-options-{width}x{height}.png"))
        # A change made here keeps the chat's choices for what a server decides.
        panel.max_tokens_spin.setValue(300)
        kept = panel.settings
        assert kept.max_new_tokens == 300
        assert (kept.mtp, kept.prompt_lookup, kept.device) == (True, False, local.device)
        assert kept.model_sampling
        _choose(qtbot, chat, demo_model)
    qtbot.waitUntil(lambda: panel.device_combo.isEnabled(), timeout=10_000)
    assert all(w.isEnabled() for w in applying) and panel.validate_button.isEnabled()
    assert panel.mtp_check.isChecked() and not panel.mtp_note.isVisible()
    assert panel.settings.mtp and panel.settings.max_new_tokens == 300
