"""Streaming into a message renders the same thing as showing the finished text."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.units import plain_figures
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget, format_stats
from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock

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


def test_stats_line_names_openvino_genai_only_when_it_decoded_the_turn() -> None:
    from qwen_mtp_desktop.ui.chat.transcript.message import format_stats

    base = {
        "method": DecodingMethod.mtp(2).to_record(),
        "acceptance_rate": 0.75,
        "mean_accepted_per_step": 1.5,
        "decode_tokens_per_s": 41.25,
        "ttft_s": 0.12,
        "generated_tokens": 30,
    }
    fast = format_stats({**base, "decoder": "app"})
    # Figures are joined with no-break spaces where a line must not break (units.join_figures).
    assert plain_figures(fast).startswith(
        "MTP n=2  ·  75% drafts accepted (1.50/step)  ·  41.2 tok/s"
    )
    assert "openvino-genai" not in fast
    assert plain_figures(format_stats({**base, "decoder": "genai"})).startswith(
        "MTP n=2 via openvino-genai  ·  "
    )
    # Records from before the fast decoder have no "decoder" and read as before.
    assert format_stats(base) == fast
    assert format_stats({"method": PLAIN.to_record(), "decoder": "app"}) == "plain decoding"
    # Rows from before DecodingMethod ("mode", "baseline" for plain) read the same.
    old = {k: v for k, v in base.items() if k != "method"}
    assert format_stats({**old, "mode": "mtp", "num_assistant_tokens": 2}) == format_stats(base)
    assert format_stats({"mode": "baseline", "decoder": "app"}) == "plain decoding"
    lookup = {"method": DecodingMethod.lookup(3, 2).to_record(), "drafted_tokens": 8}
    assert plain_figures(format_stats({**lookup, "accepted_tokens": 2})) == (
        "prompt lookup K=3, n-gram 2  ·  8 drafts, 25% accepted"
    )


def test_an_answer_stopped_before_its_first_token_shows_no_time_to_it(qtbot: QtBot) -> None:
    """Stop while the prompt is read ends the turn with no token: the stats line must not
    claim a TTFT, and the notice must not speak of an answer "so far"."""
    stopped = {
        "method": PLAIN.to_record(),
        "finish_reason": "cancelled",
        "ttft_s": 0.0,
        "prompt_tokens": 2_000,
        "generated_tokens": 0,
        "total_s": 1.7,
    }
    widget = MessageWidget("assistant", stats=stopped, dark=False)
    qtbot.addWidget(widget)
    assert "TTFT" not in plain_figures(widget.stats_label.text())
    assert "0 tokens" in plain_figures(widget.stats_label.text())
    assert widget.error_label.text().startswith("Stopped while the prompt was being read")
    # Stopped while it waited for the engine (a model loading): the prompt was never read.
    waited = MessageWidget("assistant", stats={**stopped, "prompt_tokens": 0}, dark=False)
    qtbot.addWidget(waited)
    assert waited.error_label.text() == "Stopped before the model began to read the prompt."
    assert "prompt tokens" not in plain_figures(waited.stats_label.text())
    partial = MessageWidget(
        "assistant", dark=False, content="One, two", stats={**stopped, "generated_tokens": 3}
    )
    qtbot.addWidget(partial)
    assert "TTFT 0.0 ms" in plain_figures(partial.stats_label.text())
    assert partial.error_label.text() == "Stopped. The answer so far is kept."
    mtp = {**stopped, "method": DecodingMethod.mtp(2).to_record(), "acceptance_rate": 0.0}
    assert plain_figures(format_stats(mtp)).startswith("MTP n=2  ·  0 tokens")  # no drafts made
    one = MessageWidget(
        "assistant", dark=False, content="One", stats={**stopped, "generated_tokens": 1}
    )
    qtbot.addWidget(one)
    assert "1 token " in plain_figures(one.stats_label.text()) + " "
    assert "1 tokens" not in plain_figures(one.stats_label.text())


@pytest.mark.parametrize("step", [1, 5, 0])
def test_single_line_breaks_show_as_line_breaks(qtbot: QtBot, step: int) -> None:
    """Issue 44, minor 5: "Line one\\nLine two" is two lines, streamed or shown whole; code
    blocks and lists are unchanged."""
    answer = "Line one\nLine two\nLine three\nLine four\n\n- a\n- b\n\n```\nx\ny\n```\nend"
    widget = MessageWidget("assistant", dark=False, content=answer if not step else "")
    qtbot.addWidget(widget)
    if step:
        widget.begin_stream()
        for start in range(0, len(answer), step):
            widget.append(answer[start : start + step])
        widget.end_stream()
    kinds = _kinds(widget)
    assert kinds[0].startswith("text:Line one\nLine two\nLine three\nLine four\n"), kinds
    assert "\\" not in kinds[0]
    assert "code::x\ny" in kinds


@pytest.mark.parametrize(
    ("method", "sentence"),
    [
        (
            DecodingMethod.lookup(),
            "Prompt lookup: about as fast as plain decoding on the last answers",
        ),
        (PLAIN, "Plain decoding: MTP was about as fast on this model in the last turns"),
        (DecodingMethod.mtp(1), "MTP n=1: measuring whether MTP pays on this model"),
    ],
)
def test_auto_s_sentence_and_the_method_are_not_said_twice(
    qtbot: QtBot, method: DecodingMethod, sentence: str
) -> None:
    """Found beside issue 44: under Auto the figures line said "Prompt lookup: ..." and then
    "prompt lookup K=4, n-gram 3" (and "Plain decoding: ..." then "plain decoding"): the
    label was left out only when the sentence began with it exactly, case included."""
    stats = {
        "method": method.to_record(),
        "auto": {"summary": f"{method.short_label}: x", "sentence": sentence},
        "generated_tokens": 12,
        "drafted_tokens": 8,
        "accepted_tokens": 4,
        "tokens_per_s": 50.0,
        "total_s": 0.3,
    }
    widget = MessageWidget("assistant", stats=stats, dark=False)
    qtbot.addWidget(widget)
    text = plain_figures(widget.stats_label.text()).lower()
    name = {"plain": "plain decoding", "lookup": "prompt lookup", "mtp": "mtp n=1"}[method.kind]
    assert text.count(name) == 1, text


def test_a_tie_with_mtp_is_not_called_slower() -> None:
    """Found beside issue 44: Auto chose plain decoding with MTP predicted at 1.0x and said
    "MTP was slower"; a tie within measurement noise is said as one."""
    from qwen_mtp_desktop.core.auto.policy import Decision
    from qwen_mtp_desktop.core.chat.decoding_words import auto_sentence

    def said(mtp: float | None) -> str:
        return auto_sentence(Decision(PLAIN, "x, MTP would be 1.0x", 1.0, mtp_speedup=mtp))

    assert said(1.0) == "Plain decoding: MTP was about as fast on this model in the last turns"
    assert said(0.97).startswith("Plain decoding: MTP was about as fast")
    assert said(0.8) == "Plain decoding: MTP was slower on this model in the last turns"
