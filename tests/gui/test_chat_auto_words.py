"""Auto's sentence under an answer says what Auto measured (issue 44, minor 8): on the demo
model, which is sent only the last message, a prompt-lookup answer never reads as copying "from
the conversation", a first lookup turn reads as a trial, and an answer that repeated little says
so beside its low acceptance. Real window, real engine host."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.decoding_words import LOW_LOOKUP_ACCEPTANCE
from qwen_mtp_desktop.core.chat.turns import DEMO_EXAMPLES
from tests.gui.test_chat_panel import _open_window, _send

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


def test_auto_sentence_on_the_demo_says_what_auto_measured(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    assert chat.settings_panel.method() == "auto"
    lookup_answers = []
    # The demo's own chips, repeated: their answers repeat their prompts, so Auto's replays
    # find prompt lookup worth trying within a few turns.
    for text in DEMO_EXAMPLES * 3:
        _send(qtbot, chat, text)
        answer = chat.transcript.messages[-1]
        stats = answer._stats or {}
        auto = stats.get("auto")
        assert isinstance(auto, dict), stats
        line = answer.stats_label.text()
        assert line.startswith(f"Auto · {auto['sentence']}")
        assert "conversation" not in line, line
        if stats["method"]["kind"] == "lookup":
            lookup_answers.append((answer, stats, line))
        if lookup_answers:
            break
    assert lookup_answers, "Auto never tried prompt lookup on the demo's chips"
    answer, stats, line = lookup_answers[0]
    # The first lookup turn is a trial of what the last answers' replays found.
    assert "Prompt lookup: trying it, as the last answers repeated earlier text" in line
    drafted, accepted = stats["drafted_tokens"], stats["accepted_tokens"]
    low = accepted < LOW_LOOKUP_ACCEPTANCE * max(drafted, 1)
    assert ("little of this answer did" in line) == low, (line, drafted, accepted)
    shown = f"{accepted / drafted:.0%} accepted" if drafted else "no match found"
    assert shown in line
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        chat.transcript.scroll_to_bottom()
        QApplication.processEvents()
        assert window.grab().save(str(screenshot_dir / f"auto-lookup-{width}x{height}.png"))
    window.close()
