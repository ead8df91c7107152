"""`text_label`: the app's text label (word-wrapped unless told, styled by object name)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def text_label(
    text: str = "", name: str | None = None, *, wrap: bool = True, selectable: bool = False
) -> QLabel:
    """A QLabel showing `text`, named `name` for the stylesheet (none when empty).
    `selectable`: plain text the mouse can select (what a model's details show, for copying)."""
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setTextFormat(Qt.TextFormat.PlainText)
    return label


__all__ = ["text_label"]
