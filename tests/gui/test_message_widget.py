"""Streaming into a message renders the same thing as showing the finished text."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.ui.chat.message_widget import MessageWidget
from qwen_mtp_desktop.ui.chat.text_views import AutoHeightText, CodeBlock

pytestmark = pytest.mark.gui

ANSWER = (
    "Here is **bold** text.\n\n- one\n- two\n\n```python\nprint('hi')\nx = 1\n```\n"
    "And after.\n\n```\nplain\n```"
)


def _kinds(widget: MessageWidget) -> list[str]:
    out = []
    for index in range(widget._body.count()):
        child = widget._body.itemAt(index).widget()
        if isinstance(child, CodeBlock):
            out.append(f"code:{child.language}:{child.code}")
        elif isinstance(child, AutoHeightText):
            out.append(f"text:{child.toPlainText()}")
    return out


@pytest.mark.parametrize("step", [1, 3, 7, 50])
def test_streamed_answer_matches_full_render(qtbot: QtBot, step: int) -> None:
    streamed = MessageWidget("assistant", dark=False)
    qtbot.addWidget(streamed)
    streamed.begin_stream()
    for start in range(0, len(ANSWER), step):
        streamed.append(ANSWER[start : start + step])
    # While streaming, the finished code block is already its own highlighted widget.
    assert any(kind.startswith("code:python:") for kind in _kinds(streamed))
    streamed.end_stream()
    full = MessageWidget("assistant", dark=False, content=ANSWER)
    qtbot.addWidget(full)
    assert streamed.content == ANSWER
    assert _kinds(streamed) == _kinds(full)
    assert "code:python:print('hi')\nx = 1" in _kinds(full)


def test_drafted_ranges_merge_and_tint(qtbot: QtBot) -> None:
    widget = MessageWidget("assistant", dark=False)
    qtbot.addWidget(widget)
    widget.begin_stream()
    widget.append("1 2 ", drafted=2)
    widget.append("3 4 ", drafted=0)
    widget.append("5 6 ", drafted=4)
    widget.end_stream()
    assert widget.drafted_ranges == [(0, 2), (8, 12)]
