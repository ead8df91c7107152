"""Text from outside the app (MCP servers, model output, remote servers) shown as text, never
as HTML (issue 45): a QLabel's default AutoText, and every tooltip, render whatever looks like
HTML, so a tool named `<img src="/etc/passwd">` would show a heading, a link or a local file."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def plain_label(label: QLabel) -> QLabel:
    """`label`, set to show its text as typed whatever it holds; returned for chaining."""
    label.setTextFormat(Qt.TextFormat.PlainText)
    return label


def plain_tooltip(text: str) -> str:
    """A tooltip showing `text` literally. Qt has no plain-text tooltip, and escaping alone
    is not enough (text without tags shows its `&lt;` as typed): escaped text in a paragraph
    is rich text that reads as `text`, its line breaks and spaces kept."""
    if not text:
        return ""
    return f"<p style='white-space:pre-wrap'>{html.escape(text)}</p>"


__all__ = ["plain_label", "plain_tooltip"]
