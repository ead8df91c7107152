"""Chat options › When too long (issue 44, "what LM Studio users reach for" 1): a chat that
outgrows its model's context either stops with the count (the default: nothing is left out
unasked) or leaves out its oldest turns and says so on the answer. The real window and engine
host, on the tool model (a model that reads the whole conversation) with its context cut to 400
tokens in config.json, where the app reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from tests.gui.test_chat_organizing import _open
from tests.gui.test_chat_panel import LONG_WAIT, _send
from tests.models import TOOL_MODEL, short_context_copy

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG = "Count from 1 to 20. " + "Please count carefully and slowly. " * 40


def test_a_chat_too_long_for_its_model_stops_or_leaves_out_its_oldest_turns(
    qtbot: QtBot, tmp_path: Path, screenshot_dir: Path
) -> None:
    model = short_context_copy(TOOL_MODEL, tmp_path / "tool-model-400", 400)
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.default_model = str(model)
    store.save()
    window = _open(qtbot)
    chat = window.chat
    panel = chat.settings_panel
    chat.settings_toggle.setChecked(True)
    combo = panel.overflow_combo
    assert combo.currentData() == "stop" and combo.currentText() == "Stop and say so"
    assert [combo.itemText(i) for i in range(combo.count())] == [
        "Stop and say so",
        "Skip the middle",
        "Skip the oldest",
    ]
    panel.max_tokens_spin.setValue(24)
    _send(qtbot, chat, LONG)
    _send(qtbot, chat, LONG)  # too long now: refused, with the count
    refused = chat.transcript.messages[-1]
    qtbot.waitUntil(lambda: "tokens long" in refused.error_label.text(), timeout=LONG_WAIT)
    assert "reads at most 400" in refused.error_label.text()
    assert "Chat options › When too long" in refused.error_label.text()

    combo.setCurrentIndex(combo.findData("rolling_window"))
    assert panel.settings.context_overflow == "rolling_window"
    _send(qtbot, chat, "Count from 1 to 5.")
    answer = chat.transcript.messages[-1]
    stats = answer._stats
    assert stats is not None and stats["left_out_messages"] >= 2
    assert stats["prompt_tokens"] + 24 <= 400
    assert "earlier messages not read (too long for the context)" in answer.stats_label.text()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"chat_overflow_{width}.png"))
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    window.close()
    # The choice is the chat's: it comes back with the chat.
    again = _open(qtbot)
    assert again.chat.settings_panel.overflow_combo.currentData() == "rolling_window"
    again.close()
