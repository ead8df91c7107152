"""The list of conversations: pinned first, then newest first, each with when it was last
used; searchable, with pin/rename/delete/export actions."""

from __future__ import annotations

import time
from datetime import date, datetime, timedelta
from functools import partial

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.store.records import ConversationSummary, SearchMatch
from qwen_mtp_desktop.ui.chat.conversations.rows import LINE_ROLE, ChatRowDelegate
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip


def _when(timestamp: float) -> str:
    age = time.time() - timestamp
    if age < 60:
        return "just now"
    if age < 3600:
        return f"{int(age // 60)} min ago"
    if age < 86400:
        return time.strftime("%H:%M", time.localtime(timestamp))
    return time.strftime("%d %b", time.localtime(timestamp))


def last_used(timestamp: float, now: float | None = None) -> str:
    """When a chat was last used, short as chat lists say it: "14:02" today, "Yesterday",
    a weekday within the past week, "3 Dec" this year, "3 Dec 2025" before. A time in the
    future (a clock set back) reads as its date, never as "-2 min"."""
    when = datetime.fromtimestamp(timestamp)
    today = datetime.fromtimestamp(time.time() if now is None else now).date()
    day = when.date()
    if day == today:
        return when.strftime("%H:%M")
    if day == today - timedelta(days=1):
        return "Yesterday"
    if today - timedelta(days=7) < day < today:
        return when.strftime("%A")
    return _day_month(day) + ("" if day.year == today.year else f" {day.year}")


def _day_month(day: date) -> str:
    return f"{day.day} {day.strftime('%b')}"  # "3 Dec": no zero padding on any OS


def _found_in(match: SearchMatch | None) -> str:
    """The tooltip's line on a search's match: where it is, and its snippet whole."""
    if match is None:
        return ""
    where = "your message" if match.role == "user" else "an answer"
    if not match.shown:
        where = f"an earlier version of {where}"
    return f"\nFound in {where}: {match.snippet.text}"


_pin_icons: dict[bool, QIcon] = {}


def pin_icon(dark: bool = False) -> QIcon:
    """A small drawn push pin (the same on every platform; no emoji font needed)."""
    if dark not in _pin_icons:
        ratio, size = 2.0, 14
        pixmap = QPixmap(int(size * ratio), int(size * ratio))
        pixmap.setDevicePixelRatio(ratio)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor("#e0a030" if dark else "#c0392b")
        needle = QPen(QColor("#8a8f99"), 1.6)
        needle.setCapStyle(Qt.PenCapStyle.RoundCap)
        painter.setPen(needle)
        painter.drawLine(QPointF(7, 7), QPointF(3, 12.5))  # the needle
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(color)
        painter.drawEllipse(QRectF(5, 1.5, 7.5, 7.5))  # the head
        painter.end()
        _pin_icons[dark] = QIcon(pixmap)
    return _pin_icons[dark]


class ConversationList(QFrame):
    """Signals:
    new_requested(): the user wants a new chat.
    selected(int): a conversation was chosen.
    match_opened(int, int): a search result was chosen: its conversation, the message that
        matched.
    search_changed(str): the search text settled (debounced).
    action(str, int): "pin", "unpin", "rename", "delete", "export-md" or "export-json" for a
        conversation.
    """

    new_requested = Signal()
    selected = Signal(int)
    match_opened = Signal(int, int)
    search_changed = Signal(str)
    action = Signal(str, int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("conversationList")
        self.setFixedWidth(230)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 12, 10, 10)
        layout.setSpacing(8)
        self.new_button = QPushButton("New chat")
        self.new_button.setObjectName("newChat")
        self.new_button.setToolTip("New chat (Ctrl+N)")
        self.new_button.clicked.connect(self.new_requested)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search chats")
        self.search.setClearButtonEnabled(True)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(200)
        self._debounce.timeout.connect(lambda: self.search_changed.emit(self.search.text()))
        self.search.textChanged.connect(lambda _text: self._debounce.start())
        self.list = QListWidget()
        self.list.setObjectName("conversations")
        self.list.setWordWrap(False)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.itemClicked.connect(self._on_clicked)
        self.rows = ChatRowDelegate(self.list)
        self.list.setItemDelegate(self.rows)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._current: int | None = None
        self._pinned: set[int] = set()
        #: In a search's results: each chat's matching message in its shown branch.
        self._found: dict[int, int] = {}
        self._dark = False

    def set_dark(self, dark: bool) -> None:
        """The pin mark's colours for the theme (the next redraw uses them)."""
        self._dark = dark
        self.rows.dark = dark

    def is_pinned(self, conversation_id: int) -> bool:
        return conversation_id in self._pinned

    def set_conversations(self, items: list[ConversationSummary], current: int | None) -> None:
        self.list.clear()
        self._current = current
        self._pinned = {summary.id for summary in items if summary.pinned}
        self._found = {
            s.id: s.match.message_id for s in items if s.match is not None and s.match.shown
        }
        for summary in items:
            preview = " ".join(summary.preview.split()) if summary.preview else "No messages"
            if len(preview) > 34:
                preview = preview[:33] + "…"
            # Each row says when it was last used, before its preview (elided at the right);
            # a search's result, before the snippet of the message that matched.
            when = f"{last_used(summary.updated_at)} · "
            line = ((when, False), *summary.match.snippet.parts) if summary.match else None
            second = when + (summary.match.snippet.text if summary.match else preview)
            item = QListWidgetItem(f"{summary.title}\n{second}")
            item.setData(Qt.ItemDataRole.UserRole, summary.id)
            item.setData(LINE_ROLE, line or ((second, False),))
            pinned = "Pinned · " if summary.pinned else ""
            item.setToolTip(
                plain_tooltip(
                    f"{summary.title}\n{pinned}{summary.message_count} messages · last used "
                    f"{_when(summary.updated_at)}{_found_in(summary.match)}"
                )
            )
            if summary.pinned:
                item.setIcon(pin_icon(self._dark))
            self.list.addItem(item)
            if summary.id == current:
                self.list.setCurrentItem(item)

    def set_current(self, conversation_id: int | None) -> None:
        self._current = conversation_id
        for row in range(self.list.count()):
            item = self.list.item(row)
            if item.data(Qt.ItemDataRole.UserRole) == conversation_id:
                self.list.setCurrentItem(item)
                return
        self.list.clearSelection()

    def _on_clicked(self, item: QListWidgetItem) -> None:
        conversation_id = int(item.data(Qt.ItemDataRole.UserRole))
        found = self._found.get(conversation_id)
        if found is not None:  # a search's result opens at its match, even the open chat
            self.match_opened.emit(conversation_id, found)
        elif conversation_id != self._current:
            self.selected.emit(conversation_id)

    def menu_entries(self, conversation_id: int) -> list[tuple[str, str]]:
        """The context menu's (action, label) pairs for a chat: Pin or Unpin first."""
        pin = ("unpin", "Unpin") if conversation_id in self._pinned else ("pin", "Pin to top")
        return [
            pin,
            ("rename", "Rename…"),
            ("export-md", "Export as Markdown…"),
            ("export-json", "Export as JSON…"),
            ("delete", "Delete"),
        ]

    def _menu(self, position: QPoint) -> None:
        item = self.list.itemAt(position)
        if item is None:
            return
        conversation_id = int(item.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        for key, label in self.menu_entries(conversation_id):
            menu.addAction(label, partial(self.action.emit, key, conversation_id))
        menu.exec(self.list.mapToGlobal(position))
