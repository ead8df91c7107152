"""Markdown into a QTextDocument with no resource ever loaded, and appended in pieces.

Qt's text layout loads an image the moment it lays one out, reading a local path itself when
the resource hook gives nothing usable, so `![](/dev/tty)` would block the GUI thread and
`![](file:///home/you/photo.png)` would show that file. By construction no image reaches a
document that is laid out: Markdown is parsed into a detached document (no layout, so nothing
is loaded), every image it produced - whatever syntax made it - is replaced by a text
placeholder, and only then is the result copied into the view's document.
"""

from __future__ import annotations

import re

from PySide6.QtGui import (
    QColor,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextDocumentFragment,
    QTextFormat,
)

from qwen_mtp_desktop.core.chat.link_display import visible

MARKDOWN_FEATURES = QTextDocument.MarkdownFeature(
    QTextDocument.MarkdownFeature.MarkdownNoHTML.value
    | QTextDocument.MarkdownFeature.MarkdownDialectGitHub.value
)


#: Pixels between Markdown pieces appended to one document (a blank line's worth).
PARAGRAPH_GAP = 10


def image_placeholder(source: str) -> str:
    shown = visible(source, limit=80)
    return f"[image not loaded: {shown}]" if shown else "[image not loaded]"


def image_positions(document: QTextDocument) -> list[tuple[int, str]]:
    """(position, source) of every image character in `document`."""
    found: list[tuple[int, str]] = []
    block = document.begin()
    while block.isValid():
        pieces = block.begin()
        while not pieces.atEnd():
            fragment = pieces.fragment()
            if fragment.charFormat().isImageFormat():
                name = fragment.charFormat().toImageFormat().name()
                found.extend((fragment.position() + i, name) for i in range(fragment.length()))
            pieces += 1
        block = block.next()
    return found


#: Quote blocks ("> ..."): a tint behind them and muted text, readable on light and dark.
QUOTE_BACKGROUND = QColor(127, 127, 127, 30)
QUOTE_TEXT = QColor(128, 128, 128)
QUOTE_INDENT = 14


def _quote_format(original: QTextBlockFormat) -> QTextBlockFormat:
    """Only what makes a quote look like one (merged, so a list item stays in its list)."""
    level = original.intProperty(QTextFormat.Property.BlockQuoteLevel)
    quoted = QTextBlockFormat()
    quoted.setProperty(QTextFormat.Property.BlockQuoteLevel, level)
    quoted.setBackground(QUOTE_BACKGROUND)
    quoted.setLeftMargin(QUOTE_INDENT * level)
    quoted.setRightMargin(QUOTE_INDENT)
    return quoted


def style_quotes(document: QTextDocument) -> None:
    """Qt only indents a Markdown quote: tint it and mute its text, so it reads as a quote."""
    block = document.begin()
    while block.isValid():
        level = block.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel)
        if level > 0:
            cursor = QTextCursor(block)
            cursor.mergeBlockFormat(_quote_format(block.blockFormat()))
            cursor.movePosition(
                QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor
            )
            muted = QTextCharFormat()
            muted.setForeground(QUOTE_TEXT)
            cursor.mergeCharFormat(muted)
        block = block.next()


_FENCES = ("```", "~~~")
#: A line that starts a block of its own (a list item, heading, table row, fence, rule or
#: setext underline): the line before it keeps its ending, or a literal backslash would show.
_BLOCK_START = re.compile(r"\s*(?:[-*+]\s|\d{1,9}[.)]\s|#|\||```|~~~|[-=_*]{2,}\s*$)")


def hard_line_breaks(text: str) -> str:
    """`text` with each single line break inside a paragraph made a hard one (a trailing
    backslash), so "Line one\nLine two" shows as two lines, as the model wrote it; Markdown
    would join them. Lines inside a code fence, table rows, blank lines and the lines before
    them are left alone. One pass over the lines: linear in the text's length."""
    lines = text.split("\n")
    fence = ""
    for index, line in enumerate(lines[:-1]):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        opener = next((mark for mark in _FENCES if stripped.startswith(mark)), "")
        if opener:
            fence = opener
            continue
        following = lines[index + 1].strip()
        if (
            not stripped
            or not following
            or _BLOCK_START.match(following)
            or (following.startswith(">") and not stripped.startswith(">"))
            or stripped.startswith("|")
            or stripped.endswith("\\")
            or line.startswith(("    ", "\t"))
            or stripped.startswith("#")
        ):
            continue
        lines[index] = line.rstrip() + "\\"
    return "\n".join(lines)


def markdown_document(text: str) -> QTextDocument:
    """`text` parsed into a detached document whose images are all text placeholders, and
    whose quote blocks are styled; a single line break stays a line break."""
    document = QTextDocument()
    document.setMarkdown(hard_line_breaks(text), MARKDOWN_FEATURES)
    style_quotes(document)
    for position, source in reversed(image_positions(document)):
        cursor = QTextCursor(document)
        cursor.setPosition(position)
        cursor.setPosition(position + 1, QTextCursor.MoveMode.KeepAnchor)
        cursor.insertText(image_placeholder(source), QTextCharFormat())
    return document


def append_markdown(document: QTextDocument, text: str) -> None:
    """Render `text` at the end of `document` (cost: this text only)."""
    source = markdown_document(text)
    fragment = QTextDocumentFragment(source)
    cursor = QTextCursor(document)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    separate = not document.isEmpty()
    if separate:
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
    start = cursor.position()
    cursor.insertFragment(fragment)
    # The fragment's first block merges into the block it lands in and takes that block's
    # format: a quote there would lose its tint and indent, so give quotes theirs back.
    target, block = document.findBlock(start), source.begin()
    while target.isValid() and block.isValid():
        if block.blockFormat().intProperty(QTextFormat.Property.BlockQuoteLevel) > 0:
            QTextCursor(target).mergeBlockFormat(_quote_format(block.blockFormat()))
        target, block = target.next(), block.next()
    if separate:  # the gap a blank line makes between paragraphs
        first = QTextCursor(document)
        first.setPosition(start)
        spaced = first.blockFormat()
        spaced.setTopMargin(max(spaced.topMargin(), PARAGRAPH_GAP))
        first.setBlockFormat(spaced)


def append_code(document: QTextDocument, code: str, language: str, mono_family: str) -> None:
    """A code block as plain monospace text inside `document` (used past the number of code
    blocks that get their own widget, so 5,000 fences cost text, not 5,000 widgets)."""
    cursor = QTextCursor(document)
    cursor.movePosition(QTextCursor.MoveOperation.End)
    block = QTextBlockFormat()
    block.setBackground(QColor(127, 127, 127, 40))
    block.setLeftMargin(8)
    chars = QTextCharFormat()
    chars.setFontFamilies([mono_family])
    label = QTextCharFormat(chars)
    label.setForeground(QColor(127, 127, 127))
    lines = [language or "code", *code.split("\n")]
    for index, line in enumerate(lines):
        spaced = QTextBlockFormat(block)  # a gap above and below the block, not between lines
        spaced.setTopMargin(8 if index == 0 else 0)
        spaced.setBottomMargin(8 if index == len(lines) - 1 else 0)
        if index or not document.isEmpty():
            cursor.insertBlock(spaced, chars)
        else:
            cursor.setBlockFormat(spaced)
        cursor.insertText(line, label if index == 0 else chars)
