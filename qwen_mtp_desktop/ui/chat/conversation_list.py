"""The list of conversations: newest first, searchable, with rename/delete/export actions."""

from __future__ import annotations

import time
from functools import partial

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
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

from qwen_mtp_desktop.core.chats.records import ConversationSummary


def _when(timestamp: float) -> str:
    age = time.time() - timestamp
    if age < 60:
        return "just now"
    if age < 3600:
        return f"{int(age // 60)} min ago"
    if age < 86400:
        return time.strftime("%H:%M", time.localtime(timestamp))
    return time.strftime("%d %b", time.localtime(timestamp))


class ConversationList(QFrame):
    """Signals:
    new_requested(): the user wants a new chat.
    selected(int): a conversation was chosen.
    search_changed(str): the search text settled (debounced).
    action(str, int): "rename", "delete", "export-md" or "export-json" for a conversation.
    """

    new_requested = Signal()
    selected = Signal(int)
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
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._current: int | None = None

    def set_conversations(self, items: list[ConversationSummary], current: int | None) -> None:
        self.list.clear()
        self._current = current
        for summary in items:
            preview = " ".join(summary.preview.split()) if summary.preview else "No messages"
            if len(preview) > 34:
                preview = preview[:33] + "…"
            item = QListWidgetItem(f"{summary.title}\n{preview}")
            item.setData(Qt.ItemDataRole.UserRole, summary.id)
            item.setToolTip(
                f"{summary.title}\n{summary.message_count} messages · {_when(summary.updated_at)}"
            )
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
        if conversation_id != self._current:
            self.selected.emit(conversation_id)

    def _menu(self, position: QPoint) -> None:
        item = self.list.itemAt(position)
        if item is None:
            return
        conversation_id = int(item.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        for key, label in (
            ("rename", "Rename…"),
            ("export-md", "Export as Markdown…"),
            ("export-json", "Export as JSON…"),
            ("delete", "Delete"),
        ):
            menu.addAction(label, partial(self.action.emit, key, conversation_id))
        menu.exec(self.list.mapToGlobal(position))
