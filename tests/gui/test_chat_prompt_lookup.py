"""The chat's decoding-method choice with the real engine on the demo model: prompt lookup
answers like plain decoding, says how many drafts it proposed and accepted, and the choice is
kept with the chat."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


def _choose(panel: object, method: str) -> None:
    """Pick a decoding method as a user would: MTP box, depth (0 = Auto), lookup box."""
    from qwen_mtp_desktop.ui.chat.options.panel import ChatSettingsPanel

    assert isinstance(panel, ChatSettingsPanel)
    panel.lookup_check.setChecked(method == "lookup")
    if method != "lookup":
        panel.mtp_check.setChecked(method != "plain")
    if method in ("auto", "mtp"):
        panel.depth_spin.setValue(0 if method == "auto" else 1)
    chosen = panel.method()
    assert (chosen if chosen == "auto" else chosen.kind) == method


def test_prompt_lookup_in_the_chat(qtbot: QtBot, screenshot_dir: Path) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    panel = chat.settings_panel
    chat.settings_toggle.setChecked(True)
    assert panel.method() == "auto" and not panel.lookup_spin.isVisible()
    assert panel.method() == panel.settings.method  # the settings' one mapping
    assert panel.lookup_check.isEnabled() and not panel.lookup_check.isChecked()
    prompt = "Say 'we like apples' four times."

    _choose(panel, "plain")
    qtbot.waitUntil(lambda: chat._loaded is not None and not chat._loaded.mtp,
                    timeout=LONG_WAIT)  # fmt: skip
    _send(qtbot, chat, prompt)
    plain_answer = chat.transcript.messages[-1].content

    _choose(panel, "lookup")
    assert panel.lookup_spin.isVisible() and panel.ngram_spin.isVisible()
    assert not panel.depth_spin.isVisible() and not panel.temperature_spin.isEnabled()
    panel.lookup_spin.setValue(5)
    settings = panel.settings
    assert settings.prompt_lookup and settings.lookup_tokens == 5
    assert panel.method() == DecodingMethod.lookup(5, 3)
    # Prompt lookup needs no MTP head: the model stays loaded without it here.
    assert "prompt lookup K=5" in chat.model_status.text()
    _send(qtbot, chat, prompt)
    answer = chat.transcript.messages[-1]
    assert answer.content == plain_answer
    stats = chat._messages[-1].stats
    assert stats is not None and stats["method"] == DecodingMethod.lookup(5, 3).to_record()
    assert stats["decoding"] == "fixed"
    assert 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    line = answer.stats_label.text()
    assert "prompt lookup K=5, n-gram 3" in line and f"{stats['drafted_tokens']} drafts" in line
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"chat_prompt_lookup_{width}.png"))

    # The choice belongs to the chat: back to Auto, and the stored settings follow.
    _choose(panel, "auto")
    assert panel.settings.num_assistant_tokens == "auto" and not panel.settings.prompt_lookup
    assert panel.depth_spin.isVisible() and panel.depth_spin.text() == "Auto"
    window.close()
