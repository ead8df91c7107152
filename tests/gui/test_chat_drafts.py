"""Issue 28: the Drafts toggle marks drafted spans inside the rendered answer and keeps the
Markdown rendered (it used to switch every answer to raw text). Real MessageWidgets offscreen,
generated Markdown (hypothesis), and the real demo model streaming with Drafts on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QTextDocument
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.ui.chat.transcript.draft_marks import DraftMarks
from qwen_mtp_desktop.ui.chat.transcript.markdown_view import markdown_document
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock
from tests.gui.test_chat_panel import _open_window, _send

pytestmark = pytest.mark.gui


def documents(widget: MessageWidget) -> Iterator[QTextDocument]:
    """The message's rendered documents in reading order."""
    body = widget._body
    for index in range(body.count()):
        item = body.itemAt(index)
        shown = item.widget() if item is not None else None
        if isinstance(shown, CodeBlock):
            yield shown.view.document()
        elif isinstance(shown, AutoHeightText):
            yield shown.document()


def tinted_runs(widget: MessageWidget) -> list[str]:
    """The texts of the runs of tinted characters, in reading order."""
    runs: list[str] = []
    for document in documents(widget):
        last = -2
        block = document.begin()
        while block.isValid():
            piece = block.begin()
            while not piece.atEnd():
                fragment = piece.fragment()
                if fragment.charFormat().background().style() != Qt.BrushStyle.NoBrush:
                    if fragment.position() == last:
                        runs[-1] += fragment.text()
                    else:
                        runs.append(fragment.text())
                    last = fragment.position() + fragment.length()
                piece += 1
            block = block.next()
    return runs


def span(source: str, word: str, after: int = 0) -> tuple[int, int]:
    start = source.index(word, after)
    return start, start + len(word)


ANSWER = """## Results table

The run was **really fast** and `cheap`, see below.

- first item here
- second item

```python
print("speedy")
```

Done now.
"""


def test_markdown_renders_with_drafted_spans_marked(qtbot: QtBot) -> None:
    ranges = [
        span(ANSWER, "Results"),
        span(ANSWER, "really fast"),
        span(ANSWER, "cheap"),
        span(ANSWER, "second"),
        span(ANSWER, "print"),
        span(ANSWER, "Done"),
    ]
    widget = MessageWidget("assistant", dark=False, content=ANSWER)
    qtbot.addWidget(widget)
    widget.set_stats({"drafted_ranges": [list(r) for r in ranges]})
    assert tinted_runs(widget) == []  # Drafts off: nothing tinted
    widget.set_show_drafts(True)
    assert tinted_runs(widget) == ["Results", "really fast", "cheap", "second", "print", "Done"]
    # ... and the Markdown is rendered: heading, bold, list, a code block of its own.
    texts = [d.toPlainText() for d in documents(widget)]
    shown = "\n".join(texts)
    for raw in ("##", "**", "```", "`cheap`", "- first"):
        assert raw not in shown
    first = next(documents(widget))
    assert first.begin().blockFormat().headingLevel() == 2
    assert first.begin().text() == "Results table"
    bold = first.find("really fast")
    assert bold.charFormat().fontWeight() == QFont.Weight.Bold
    assert first.find("first item here").block().textList() is not None
    body = widget._body
    code = [body.itemAt(i).widget() for i in range(body.count())]
    code = [w for w in code if isinstance(w, CodeBlock)]
    assert len(code) == 1 and code[0].code == 'print("speedy")'
    # Off again: the same rendering without tint.
    widget.set_show_drafts(False)
    assert tinted_runs(widget) == []
    assert "Results table" in next(documents(widget)).toPlainText()


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
PIECE = st.tuples(st.sampled_from(["plain", "bold", "italic", "code"]), WORD, st.booleans())
BLOCK = st.tuples(
    st.sampled_from(["paragraph", "heading", "list", "fence", "fence-many"]),
    st.lists(PIECE, min_size=1, max_size=6),
)


def build(blocks: list[tuple[str, list[tuple[str, str, bool]]]]) -> tuple[str, list, list]:
    """Markdown source, drafted ranges (each drafted word) and the drafted words in order."""
    source = ""
    ranges: list[tuple[int, int]] = []
    words: list[str] = []
    marks = {"plain": "", "bold": "**", "italic": "*", "code": "`"}
    for kind, pieces in blocks:
        if kind.startswith("fence"):
            source += "```py\n"
            separator = "\n" if kind == "fence-many" else " "
            for index, (_style, word, drafted) in enumerate(pieces):
                if index:
                    source += separator
                if drafted:
                    ranges.append((len(source), len(source) + len(word)))
                    words.append(word)
                source += word
            source += "\n```\n\n"
            continue
        source += {"paragraph": "", "heading": "### ", "list": "- "}[kind]
        for index, (style, word, drafted) in enumerate(pieces):
            if index:
                source += " "
            source += marks[style]
            if drafted:
                ranges.append((len(source), len(source) + len(word)))
                words.append(word)
            source += word + marks[style]
        source += "\n\n"
    return source, ranges, words


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(BLOCK, min_size=1, max_size=8))
def test_generated_markdown_marks_exactly_the_drafted_words(
    qtbot: QtBot, blocks: list[tuple[str, list[tuple[str, str, bool]]]]
) -> None:
    source, ranges, words = build(blocks)
    widget = MessageWidget("assistant", dark=True, content=source)
    qtbot.addWidget(widget)
    widget.set_stats({"drafted_ranges": [list(r) for r in ranges]})
    widget.set_show_drafts(True)
    assert tinted_runs(widget) == words, source
    shown = "\n".join(d.toPlainText() for d in documents(widget))
    assert "**" not in shown and "```" not in shown and "###" not in shown


def test_a_code_block_right_after_another_marks_its_own_words(qtbot: QtBot) -> None:
    """Found by the test above: the second block's fence info string ("py") matched its code's
    first letter when the first block's closing fence was taken for its opening one."""
    source, ranges, words = build(
        [("fence", [("plain", "a", False)]), ("fence", [("plain", "y", True)])]
    )
    widget = MessageWidget("assistant", dark=True, content=source)
    qtbot.addWidget(widget)
    widget.set_stats({"drafted_ranges": [list(r) for r in ranges]})
    widget.set_show_drafts(True)
    assert tinted_runs(widget) == words == ["y"]


def test_streamed_answer_with_drafts_on_renders_and_marks(qtbot: QtBot) -> None:
    widget = MessageWidget("assistant", dark=False)
    qtbot.addWidget(widget)
    widget.begin_stream()
    widget.set_show_drafts(True)
    # Each chunk: (text, drafted: a count from its start, or (start, end) ranges within it)
    chunks: list[tuple[str, int | list[tuple[int, int]]]] = [
        ("## Head", 0),
        ("ing\n\nA **bo", [(5, 11)]),
        ("ld** move.\n\n", 0),
        ("```py\n", 0),
        ("x = 1\n", 5),
        ("```\n\nEnd.", 0),
    ]
    for text, drafted in chunks[:2]:
        widget.append(text, drafted=drafted)
    # The open paragraph streams as plain text, its drafted part tinted already.
    assert tinted_runs(widget) == ["A **bo"]
    for text, drafted in chunks[2:]:
        widget.append(text, drafted=drafted)
    # While it streams, finished segments are rendered and marked already.
    assert "Heading" in next(documents(widget)).toPlainText()
    assert "A **bo" not in next(documents(widget)).toPlainText()
    widget.end_stream()
    assert tinted_runs(widget) == ["A bo", "x = 1"]
    assert next(documents(widget)).begin().blockFormat().headingLevel() == 2


def test_marking_cost_is_linear_in_the_answer_length(qtbot: QtBot) -> None:
    """The alignment alone, on documents of n and 4n characters (one interleaved run)."""
    unit = "Some **bold** text with `code` and a [link](https://example.com/x).\n\n"

    def cost(repeats: int) -> float:
        text = unit * repeats
        document = markdown_document(text)
        ranges = [(i, i + 3) for i in range(0, len(text), 7)]
        marks = DraftMarks(ranges, QColor(0, 200, 0, 90))
        marks.feed(text)
        began = time.perf_counter()
        marks.mark(document)
        elapsed = time.perf_counter() - began
        assert marks.unmatched == 0
        return elapsed

    small, large = [], []
    for _ in range(5):
        small.append(cost(400))  # 27,600 characters
        large.append(cost(1600))
    ratio = min(large) / min(small)
    # Linear is 4x, quadratic 16x; the margin is for a loaded machine's noise.
    assert ratio < 8, f"4x the text cost {ratio:.1f}x"


@pytest.mark.subprocess
def test_demo_model_answer_streams_with_drafts_on(qtbot: QtBot, screenshot_dir: Path) -> None:
    window = _open_window(qtbot)
    chat = window.chat
    chat.drafts_toggle.setChecked(True)
    _send(qtbot, chat, "Count from 1 to 30.")
    answer = chat.transcript.messages[-1]
    assert answer.drafted_ranges, "an MTP answer on the demo model has accepted drafts"
    runs = tinted_runs(answer)
    drafted = "".join(answer.content[a:b] for a, b in answer.drafted_ranges)
    tinted = "".join(runs)
    assert tinted and len(tinted) <= len(drafted)
    # Every tinted run is drafted text (the demo answers plain text: 1:1 with the source).
    assert all(run.strip() in drafted for run in runs)
    window.resize(1024, 700)
    qtbot.wait(200)
    assert window.grab().save(str(screenshot_dir / "chat_drafts_on_1024x700.png"))
    chat.drafts_toggle.setChecked(False)
    assert tinted_runs(answer) == []
    window.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(BLOCK, min_size=1, max_size=6), st.lists(st.integers(1, 40), min_size=1))
def test_generated_markdown_streamed_in_generated_chunks(
    qtbot: QtBot, blocks: list[tuple[str, list[tuple[str, str, bool]]]], cuts: list[int]
) -> None:
    source, ranges, words = build(blocks)
    widget = MessageWidget("assistant", dark=False)
    qtbot.addWidget(widget)
    widget.begin_stream()
    widget.set_show_drafts(True)
    drafted_chars = sum(high - low for low, high in ranges)
    position, cut = 0, 0
    while position < len(source):
        end = min(position + cuts[cut % len(cuts)], len(source))
        cut += 1
        inside = [
            (max(low, position) - position, min(high, end) - position)
            for low, high in ranges
            if low < end and high > position
        ]
        widget.append(source[position:end], drafted=inside)
        position = end
        # While streaming: never more tinted than drafted, nothing tinted that is not.
        assert sum(len(run) for run in tinted_runs(widget)) <= drafted_chars
    assert widget.drafted_ranges == ranges
    widget.end_stream()
    assert tinted_runs(widget) == words, source
