"""The scrolling list of messages, with auto-scroll that yields to the user."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QPushButton, QScrollArea, QVBoxLayout, QWidget

from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget

#: The readable measure: at most about this many characters per line of an answer; on a
#: wider window the messages stand in a centred column.
MEASURE_CHARS = 90
#: The message's own padding and the column's least side margin, in pixels.
MESSAGE_PADDING, SIDE_MARGIN = 28, 24


class Transcript(QScrollArea):
    """Messages top to bottom. While an answer streams the view follows it, unless the user
    scrolled up; scrolling back to the bottom resumes following.

    Signals:
        earlier_requested(): the user wants to see older messages that are not built yet.
    """

    earlier_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._container = QWidget()
        self._container.setObjectName("transcriptContainer")
        self._layout = QVBoxLayout(self._container)
        self._layout.setContentsMargins(24, 16, 24, 16)
        self._layout.setSpacing(10)
        self.earlier_button = QPushButton()
        self.earlier_button.setObjectName("earlierButton")
        self.earlier_button.clicked.connect(self.earlier_requested)
        self._layout.addWidget(self.earlier_button, 0, Qt.AlignmentFlag.AlignHCenter)
        self._layout.addStretch(1)
        self.hidden_count = 0
        self._chat_model = ""
        self.set_hidden_count(0)
        self.setWidget(self._container)
        self.follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range_changed)

    def column_width(self) -> int:
        """The widest the messages get: MEASURE_CHARS of the font, plus their padding."""
        return MEASURE_CHARS * self.fontMetrics().averageCharWidth() + MESSAGE_PADDING

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        side = max(SIDE_MARGIN, (self.viewport().width() - self.column_width()) // 2)
        self._layout.setContentsMargins(side, 16, side, 16)
        super().resizeEvent(event)

    @property
    def messages(self) -> list[MessageWidget]:
        found = []
        for index in range(self._layout.count()):
            item = self._layout.itemAt(index)
            widget = item.widget() if item is not None else None
            if isinstance(widget, MessageWidget):
                found.append(widget)
        return found

    def add_message(self, widget: MessageWidget) -> None:
        widget.set_chat_model(self._chat_model)
        self._layout.insertWidget(self._layout.count() - 1, widget)

    def set_chat_model(self, model_dir: str) -> None:
        """The chat's model now: answers another model wrote name it in their figures."""
        self._chat_model = model_dir
        for widget in self.messages:
            widget.set_chat_model(model_dir)

    def add_messages(self, widgets: list[MessageWidget]) -> None:
        self._container.setUpdatesEnabled(False)
        for widget in widgets:
            self.add_message(widget)
        self._container.setUpdatesEnabled(True)
        self.follow = True

    def prepend_messages(self, widgets: list[MessageWidget]) -> None:
        """Older messages go above the ones shown, keeping the view where the user is."""
        bar = self.verticalScrollBar()
        from_bottom = bar.maximum() - bar.value()
        self.follow = False
        for offset, widget in enumerate(widgets):
            widget.set_chat_model(self._chat_model)
            self._layout.insertWidget(1 + offset, widget)
        self._container.adjustSize()
        bar.setValue(bar.maximum() - from_bottom)

    def set_hidden_count(self, count: int) -> None:
        self.hidden_count = count
        self.earlier_button.setVisible(count > 0)
        self.earlier_button.setText(f"Show earlier messages ({count} more)" if count else "")

    def remove_message(self, widget: MessageWidget) -> None:
        self._layout.removeWidget(widget)
        widget.hide()  # gone from view now, not when the event loop next deletes it
        widget.deleteLater()

    def clear(self) -> None:
        for widget in self.messages:
            self.remove_message(widget)
        self.set_hidden_count(0)
        self.follow = True

    def scroll_to_bottom(self) -> None:
        self.follow = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self.follow = value >= bar.maximum() - 8

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self.follow:
            self.verticalScrollBar().setValue(maximum)
