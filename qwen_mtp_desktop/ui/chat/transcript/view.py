"""The scrolling list of messages, with auto-scroll that yields to the user."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QPushButton, QScrollArea, QVBoxLayout, QWidget

from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget

#: The readable measure: at most about this many characters per line of an answer; on a
#: wider window the messages stand in a centred column.
MEASURE_CHARS = 90
#: The message's own padding and the column's least side margin, in pixels.
MESSAGE_PADDING, SIDE_MARGIN = 28, 24
#: How long a message found by a search stays marked, and how long the view keeps it in place
#: while the messages around it settle their heights (rich text lays out after it is shown).
FOUND_MARK_MS, FOUND_SETTLE_MS = 2000, 800
#: The room left above a message scrolled to.
FOUND_MARGIN = 12


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
        #: A message scrolled to (a search's match): held in view while the layout settles.
        self._target: MessageWidget | None = None
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
        if widget is self._target:
            self._target = None
        self._layout.removeWidget(widget)
        widget.hide()  # gone from view now, not when the event loop next deletes it
        widget.deleteLater()

    def clear(self) -> None:
        self._target = None
        for widget in self.messages:
            self.remove_message(widget)
        self.set_hidden_count(0)
        self.follow = True

    def scroll_to_bottom(self) -> None:
        self._target = None
        self.follow = True
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def show_message(self, message_id: int | None) -> bool:
        """Scroll to the message stored as `message_id`, building earlier pages until it is
        there, and mark it a moment (a search's match); without one, or when it is not in the
        chat, to the bottom. Whether it was found."""
        widget = self._find(message_id)
        while widget is None and message_id is not None and self.hidden_count:
            hidden = self.hidden_count
            self.earlier_requested.emit()  # the panel builds the page above, now
            if self.hidden_count == hidden:
                break
            widget = self._find(message_id)
        if widget is None:
            self.scroll_to_bottom()
            return False
        self.follow = False
        self._target = widget
        self._container.adjustSize()
        self._scroll_to_target()
        QTimer.singleShot(FOUND_SETTLE_MS, self._release_target)
        self._mark_found(widget, True)
        # With `widget` as the context the timer dies with it (or with the whole view, when
        # the window closes first): the untint never touches a deleted message.
        QTimer.singleShot(FOUND_MARK_MS, widget, lambda: self._mark_found(widget, False))
        return True

    def _find(self, message_id: int | None) -> MessageWidget | None:
        if message_id is None:
            return None
        return next((w for w in self.messages if w.message_id == message_id), None)

    def _scroll_to_target(self) -> None:
        if self._target is not None:
            bar = self.verticalScrollBar()
            bar.setValue(max(self._target.y() - FOUND_MARGIN, 0))

    def _release_target(self) -> None:
        self._target = None

    def _mark_found(self, widget: MessageWidget, found: bool) -> None:
        # The stylesheet tints a message whose "found" property is set (ui.widgets.style).
        if widget in self.messages:
            widget.setProperty("found", found)
            widget.style().unpolish(widget)
            widget.style().polish(widget)

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self.follow = value >= bar.maximum() - 8

    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._target is not None:
            self._scroll_to_target()
        elif self.follow:
            self.verticalScrollBar().setValue(maximum)
