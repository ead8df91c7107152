"""The chat's thinking budget (issue 43, item 4): an option beside "Thinking mode", enabled only
with it; a budget the engine enforces by ending the thinking for the model, so its answer
still comes; kept with the chat's settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

PROMPT = "Count from 1 to 20."


def test_the_thinking_budget_ends_the_thinking(qtbot: QtBot, screenshot_dir: Path) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    panel = chat.settings_panel
    chat.settings_toggle.setChecked(True)
    spin = panel.thinking_budget_spin
    panel.thinking_check.setChecked(False)
    assert not spin.isEnabled() and spin.text() == "no limit"
    assert panel.settings.thinking_budget is None
    panel.thinking_check.setChecked(True)
    assert spin.isEnabled()

    _send(qtbot, chat, PROMPT)  # thinking, no budget: the model's own length
    free = chat.transcript.messages[-1]
    free_reasoning = free.thinking.content
    assert free_reasoning.startswith("The user wants") and len(free_reasoning.split()) > 4

    spin.setValue(3)
    assert panel.settings.thinking_budget == 3 and panel.settings.thinking
    _send(qtbot, chat, PROMPT)
    cut = chat.transcript.messages[-1]
    assert free_reasoning.startswith(cut.thinking.content.rstrip("\n"))
    assert len(cut.thinking.content) < len(free_reasoning)
    assert cut.content.startswith("1 2 3"), cut.content
    stats = chat._messages[-1].stats
    assert stats is not None and stats["reasoning_tokens"] == 3 + 2
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"chat_thinking_budget_{width}.png"))

    spin.setValue(0)  # back to no limit
    assert panel.settings.thinking_budget is None
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    window.close()
