"""Read-only text widgets for chat messages: Markdown, code with highlighting, plain streams.

Model output is untrusted: Markdown is rendered with raw HTML disabled, no image or other
resource is ever loaded, and links are only reported (the chat asks before opening them).
"""

from __future__ import annotations

import functools
import html
from typing import Any

from PySide6.QtCore import QByteArray, QSize, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QResizeEvent,
    QTextCharFormat,
    QTextCursor,
)
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.chat.transcript.markdown_view import (
    MARKDOWN_FEATURES,
    append_code,
    append_markdown,
)

__all__ = ["MARKDOWN_FEATURES", "AutoHeightText", "CodeBlock"]

STREAM_BLOCK_CHARS = 600
#: A streamed line without any whitespace is broken here anyway: Qt's line breaking of one
#: unbreakable paragraph costs more per character the longer it gets (issue 19).
STREAM_HARD_BREAK_CHARS = 2000


class AutoHeightText(QTextBrowser):
    """A QTextBrowser that is exactly as tall as its text, for stacking in a scroll area.

    Signals:
        link_requested(QUrl): the user clicked a link (never opened here).
    """

    link_requested = Signal(QUrl)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setTextInteractionFlags(
            Qt.TextInteractionFlag.TextBrowserInteraction
            | Qt.TextInteractionFlag.TextSelectableByKeyboard
        )
        self.viewport().setAutoFillBackground(False)
        self.setStyleSheet("QTextBrowser { background: transparent; }")
        self.document().setDocumentMargin(2)
        self.anchorClicked.connect(self.link_requested)
        self.document().documentLayout().documentSizeChanged.connect(self._fit_height)

    def loadResource(self, type: int, name: QUrl | str) -> object:  # noqa: N802 (Qt override)
        # Never load images or anything else a model's output points at. An empty (not a
        # null) result matters: on a null one QTextDocument falls back to reading local files
        # and data: URLs itself, so `![](file:///home/you/photo.png)` would show that file.
        return QByteArray()

    def set_markdown(self, text: str) -> None:
        self.document().clear()
        append_markdown(self.document(), text)

    def append_markdown(self, text: str) -> None:
        """Render more Markdown below what is shown (cost: this text only)."""
        append_markdown(self.document(), text)

    def append_code(self, code: str, language: str) -> None:
        append_code(self.document(), code, language, monospace_font().family())

    def append_plain(self, text: str, tint: QColor | None = None) -> None:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        fmt = QTextCharFormat()
        if tint is not None:
            fmt.setBackground(tint)
        # Qt lays out a whole paragraph again on every insertion, so a paragraph that keeps
        # growing makes each streamed chunk slower. Past a few hundred characters, start a new
        # block at a word boundary, and past a few thousand anyway (the finished answer is
        # rendered again as a whole). Long texts go in in pieces so the rule holds for them too.
        for start in range(0, len(text), STREAM_BLOCK_CHARS):
            piece = text[start : start + STREAM_BLOCK_CHARS]
            length = cursor.block().length()
            if length > STREAM_HARD_BREAK_CHARS or (
                length > STREAM_BLOCK_CHARS
                and (piece[:1].isspace() or cursor.block().text()[-1:].isspace())
            ):
                cursor.insertBlock()
                piece = piece.lstrip(" ")
            cursor.insertText(piece, fmt)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt override)
        return QSize(super().sizeHint().width(), self._content_height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        self._fit_height()

    def _content_height(self) -> int:
        return int(self.document().size().height()) + 4

    def _fit_height(self) -> None:
        height = self._content_height()
        if self.height() != height:
            self.setFixedHeight(height)


def monospace_font() -> QFont:
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setPointSizeF(max(font.pointSizeF(), 9.5))
    return font


def highlight_html(code: str, language: str, dark: bool) -> str:
    """Code as HTML with inline colours (pygments); plain escaped text if the lexer is unknown."""
    from pygments import highlight

    lexer = _lexer(language or "text")
    if lexer is None:
        return f"<pre>{html.escape(code)}</pre>"
    rendered: str = highlight(code, lexer, _formatter(dark))
    return rendered


@functools.lru_cache(maxsize=64)
def _lexer(language: str) -> Any:
    """One lexer per language (made once: a stream of many code blocks reuses it)."""
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(language)
    except ClassNotFound:
        return None


@functools.lru_cache(maxsize=2)
def _formatter(dark: bool) -> Any:
    """The HTML formatter per theme: building its style sheet costs more than a short block."""
    from pygments.formatters import HtmlFormatter

    # No background of the style's own: it would paint every line in a colour of its own (a
    # stripe per line on the code block's themed background).
    return HtmlFormatter(
        nowrap=False, noclasses=True, nobackground=True, style="monokai" if dark else "default"
    )


class CodeBlock(QFrame):
    """A fenced code block: language, a Copy button and the highlighted code.

    While streaming, code is appended as plain text; `finish()` highlights it once.
    """

    def __init__(self, language: str, dark: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        self._dark = dark
        self._highlighted = False  # finish() ran: the view shows the theme's colours
        self.language = language
        self.code = ""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        header = QWidget()
        header.setObjectName("codeHeader")
        header_layout = QHBoxLayout(header)
        header_layout.setContentsMargins(10, 4, 4, 4)
        label = QLabel(language or "code")
        label.setTextFormat(Qt.TextFormat.PlainText)  # the info string is model output
        label.setObjectName("codeLanguage")
        self.language_label = label
        self.copy_button = QPushButton("Copy")
        self.copy_button.setObjectName("codeCopy")
        self.copy_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.copy_button.clicked.connect(self._copy)
        header_layout.addWidget(label)
        header_layout.addStretch(1)
        header_layout.addWidget(self.copy_button)
        self.view = AutoHeightText()
        self.view.setFont(monospace_font())
        self.view.setLineWrapMode(QTextBrowser.LineWrapMode.NoWrap)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.view.document().setDocumentMargin(8)
        layout.addWidget(header)
        layout.addWidget(self.view)

    def append(self, text: str) -> None:
        self.code += text
        self.view.append_plain(text)

    def set_code(self, code: str) -> None:
        self.code = code
        self._highlighted = False
        self.view.setPlainText(code)

    def finish(self) -> None:
        self.view.setHtml(highlight_html(self.code, self.language, self._dark))
        self.view.setFont(monospace_font())
        self._highlighted = True

    def set_dark(self, dark: bool) -> None:
        """The theme changed: highlight again in its colours (pygments writes them inline)."""
        if dark != self._dark:
            self._dark = dark
            if self._highlighted:
                self.finish()

    def _copy(self) -> None:
        QApplication.clipboard().setText(self.code)
        self.copy_button.setText("Copied")


class FoldedText(QFrame):
    """A toggle with a summary and, folded under it (by default), a text: an answer's
    thinking, a tool call's arguments and result."""

    def __init__(
        self, names: tuple[str, str, str], summary: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        frame, toggle, text = names  # object names, for the stylesheet
        self.setObjectName(frame)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setObjectName(toggle)
        self.toggle.setCheckable(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle.setText(summary)
        self.toggle.toggled.connect(self._on_toggled)
        self.text = AutoHeightText()
        self.text.setObjectName(text)
        self.text.setVisible(False)
        layout.addWidget(self.toggle)
        layout.addWidget(self.text)

    @property
    def expanded(self) -> bool:
        return bool(self.toggle.isChecked())

    def _on_toggled(self, shown: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)
        self.text.setVisible(shown)
