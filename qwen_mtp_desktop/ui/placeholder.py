"""A panel that says plainly what will appear in its place."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class PlaceholderPanel(QWidget):
    def __init__(self, title: str, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(96, 48, 96, 48)
        layout.addStretch(1)
        heading = QLabel(title)
        heading.setObjectName("panelHeading")
        heading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        body = QLabel(text)
        body.setObjectName("panelBody")
        body.setWordWrap(True)
        body.setAlignment(Qt.AlignmentFlag.AlignCenter)
        layout.addWidget(heading)
        layout.addSpacing(8)
        layout.addWidget(body)
        layout.addStretch(2)
