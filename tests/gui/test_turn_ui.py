"""Issue 24 items 3 and 6, issue 26 item 3 in the window (offscreen, the real engine host on the
demo model): each answer says how many prompt tokens were reused, the context meter by the
message box counts the engine's tokens and warns before the limit, Models › Memory says what
the engine keeps, Settings › Conversation memory reaches the next load, and the chat's sampling
follows the model's generation_config.json. Screenshots at 1024x700 and 1600x1000."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.context_usage import conversation_usage
from qwen_mtp_desktop.core.chat.generation_defaults import parse_generation_config
from qwen_mtp_desktop.core.chat.store.records import ChatSettings, StoredMessage
from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.prompt.context_limit import context_length
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.system.state_budget import MB
from qwen_mtp_desktop.ui.chat.composer.context_meter import ContextMeter
from qwen_mtp_desktop.ui.chat.options.panel import ChatSettingsPanel
from qwen_mtp_desktop.ui.chat.turns.model_session import ModelFacts
from qwen_mtp_desktop.ui.dialogs.settings import CUSTOM, KEEP_NOTHING
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.layout_checks import layout_problems
from tests.gui.test_chat_panel import LONG_WAIT, _send, window_idle

pytestmark = [pytest.mark.gui]

QWEN = {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}


def _window(qtbot: QtBot, width: int, height: int) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready and chat._loaded is not None, timeout=LONG_WAIT)
    return window


def _report(qtbot: QtBot, window: MainWindow) -> CacheReport | None:
    got: list[CacheReport | None] = []
    window.engine_process.state_cache.connect(got.append)
    window.engine_process.query_state_cache()
    qtbot.waitUntil(lambda: bool(got), timeout=LONG_WAIT)
    window.engine_process.state_cache.disconnect(got.append)
    return got[0]


@pytest.mark.subprocess
@pytest.mark.parametrize(("width", "height"), [(1024, 700), (1600, 1000)])
def test_reuse_meter_memory_and_model_defaults(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int
) -> None:
    window = _window(qtbot, width, height)
    chat = window.chat
    demo = demo_model_dir()
    # The demo model's generation_config.json says do_sample false: its default is greedy.
    qtbot.waitUntil(lambda: chat.model.model_facts() is not None, timeout=LONG_WAIT)
    panel = chat.settings_panel
    assert panel.model_default_check.isChecked()
    assert panel.model_default_label.text() == "the model's own (greedy)"
    assert not panel.temperature_spin.isEnabled() and panel.temperature_spin.value() == 0

    _send(qtbot, chat, "Count from 1 to 12.")
    first = chat.transcript.messages[-1]
    stored = chat._messages[-1].stats
    assert stored is not None and stored["reused_tokens"] == 0
    assert f"{stored['prompt_tokens']:,} prompt tokens" in first.stats_label.text()
    meter = chat.composer.meter
    limit = context_length(demo)
    assert limit is not None and meter.isVisible()
    used = stored["prompt_tokens"] + stored["generated_tokens"]
    assert meter.label.text().replace("\u00a0", " ") == f"{used:,} / {limit:,} tokens"
    assert meter.level == "ok" and "Every turn reads the whole conversation" in meter.toolTip()

    # Regenerate reuses everything up to the end of the question.
    chat.regenerate_last()

    def regenerated() -> bool:
        last = chat._messages[-1] if chat._messages else None
        done = last is not None and last.version == 2 and last.stats is not None
        return done and not chat.generating and window_idle(chat)

    qtbot.waitUntil(regenerated, timeout=LONG_WAIT)
    again = chat._messages[-1].stats
    assert again is not None and again["reused_tokens"] > 0
    line = chat.transcript.messages[-1].stats_label.text().replace("\u00a0", " ")
    reused = f"{again['reused_tokens']:,} of {again['prompt_tokens']:,} prompt tokens reused"
    short = f"{again['reused_tokens']:,}/{again['prompt_tokens']:,} reused"
    assert reused in line or short in line
    tip = chat.transcript.messages[-1].stats_label.toolTip()
    assert "already processed and kept" in tip and "only the new ones were prefilled" in tip
    chat.settings_toggle.setChecked(True)
    QApplication.processEvents()
    for part in (chat.settings_panel, chat.composer):
        assert not layout_problems(window, part)
    assert window.grab().save(str(screenshot_dir / f"turn-ui-chat-{width}x{height}.png"))

    # Models › Memory: what the engine keeps for the loaded model.
    window.show_panel("Models")
    window.models.show_model(demo)
    details = window.models.details
    qtbot.waitUntil(
        lambda: details.kept_label.text().startswith("Conversation memory: 1 chat kept"),
        timeout=LONG_WAIT,
    )
    assert "budget" in details.kept_label.text()
    qtbot.wait(300)  # the page lays out its wrapped labels
    details.scroll_area.ensureWidgetVisible(details.kept_label)
    QApplication.processEvents()
    assert not layout_problems(window, details)
    assert window.grab().save(str(screenshot_dir / f"turn-ui-models-{width}x{height}.png"))
    window.show_panel("Chat")

    # Settings › Conversation memory: Keep nothing, applied at the next load (after Eject).
    dialog = window.show_settings()
    assert dialog.memory_combo.currentData() is None
    assert dialog.memory_combo.currentText().startswith("Automatic: ")
    QApplication.processEvents()
    assert not layout_problems(dialog, dialog)
    assert dialog.grab().save(str(screenshot_dir / f"turn-ui-settings-{width}x{height}.png"))
    dialog.memory_combo.setCurrentIndex(dialog.memory_combo.findData(KEEP_NOTHING))
    assert not dialog.memory_spin.isEnabled()
    assert json.loads(app_paths().settings_file.read_text())["conversation_memory_mb"] == 0
    dialog.memory_combo.setCurrentIndex(dialog.memory_combo.findData(CUSTOM))
    dialog.memory_spin.setValue(1500)
    assert chat.model.state_cache_bytes() == 1500 * MB
    dialog.memory_combo.setCurrentIndex(dialog.memory_combo.findData(KEEP_NOTHING))
    assert chat.model.state_cache_bytes() == 0
    dialog.close()
    before = _report(qtbot, window)
    assert before is not None and before.budget_bytes > 0  # the running load keeps its budget
    chat.model.eject()
    qtbot.waitUntil(lambda: window.engine_process.loaded_model is None, timeout=LONG_WAIT)
    assert _report(qtbot, window) is None  # eject dropped it
    _send(qtbot, chat, "Count from 1 to 5.")
    after = _report(qtbot, window)
    assert after is not None and after.budget_bytes == 0 and after.tokens == 0
    window.close()


def test_the_meter_warns_before_the_limit_and_says_what_happens(qtbot: QtBot) -> None:
    meter = ContextMeter()
    qtbot.addWidget(meter)
    meter.show()

    def answer(prompt: int, generated: int) -> StoredMessage:
        return StoredMessage(
            1, 1, 1, "assistant", "x", "", None, 0.0, "complete", None,
            {"prompt_tokens": prompt, "generated_tokens": generated},
        )  # fmt: skip

    meter.show_usage(conversation_usage([answer(3000, 200)], "", 4096))
    assert meter.level == "ok" and meter.bar.value() == int(3200 / 4096 * 1000)
    meter.show_usage(conversation_usage([answer(3400, 200)], "", 4096))
    assert meter.level == "warning"
    assert meter.label.text().startswith("Context nearly full")
    assert "cut short" in meter.toolTip() and "Start a new chat" in meter.toolTip()
    meter.show_usage(conversation_usage([answer(4000, 96)], "", 4096))
    assert meter.level == "full" and "cannot answer another message" in meter.toolTip()
    # Before any answer: an estimate, said as one.
    meter.show_usage(conversation_usage([], "You are terse." * 10, 4096))
    assert meter.label.text().startswith("about ") and "estimated" in meter.toolTip()


def test_the_chat_follows_the_models_sampling_defaults_until_changed(qtbot: QtBot) -> None:
    panel = ChatSettingsPanel()
    qtbot.addWidget(panel)
    emitted: list[ChatSettings] = []
    panel.settings_changed.connect(emitted.append)
    panel.set_settings(ChatSettings(temperature=0.0))  # MTP on, Auto depth
    hostile = parse_generation_config({**QWEN, "top_k": 10**9, "min_p": 0.1})
    panel.set_model_sampling(hostile)
    text = panel.model_default_label.text()
    assert text.startswith("the model's own (temperature 0.6, top-p 0.95, top-k 50)")
    assert "top_k is 1000000000; it must be a whole number from 0 to 1000" in text
    assert "min_p has no chat setting" in text
    assert panel.temperature_spin.value() == 0.6 and not panel.temperature_spin.isEnabled()
    assert panel.mtp_check.isChecked()  # MTP stays on: it samples exactly
    assert "MTP samples exactly" in panel.sampling_hint.text()
    panel.model_default_check.setChecked(False)  # choose my own, starting from the model's
    assert panel.temperature_spin.isEnabled() and panel.top_p_spin.isEnabled()
    panel.temperature_spin.setValue(0.3)
    chosen = emitted[-1]
    assert not chosen.model_sampling and chosen.temperature == 0.3 and chosen.top_p == 0.95
    assert chosen.following(hostile.sampling) == chosen
    # Sampled with MTP on and Auto draft tokens: Auto decides, by sampled turns' measurements.
    assert chosen.method == "auto" and chosen.sampling.temperature == 0.3


@pytest.mark.subprocess
def test_a_chat_sends_the_models_defaults_to_the_engine(qtbot: QtBot) -> None:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.model.model_facts() is not None, timeout=LONG_WAIT)
    demo = demo_model_dir()
    chat.model.facts[demo] = ModelFacts(4096, parse_generation_config(QWEN))
    chat.settings_panel.set_settings(ChatSettings(temperature=0.0))
    sampling = chat.model.engine_settings().method.sampling
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.6, 0.95, 20)
    chat.settings_panel.set_settings(ChatSettings(temperature=0.0, model_sampling=False))
    assert chat.model.engine_settings().method.sampling.greedy
    window.close()
