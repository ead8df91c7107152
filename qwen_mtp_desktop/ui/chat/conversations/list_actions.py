"""The chat list's actions (its context menu): pin / unpin, rename, delete with Undo, export as
Markdown or JSON. `ChatPanel` owns the widgets and redraws; this object asks the user and the
store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths
from PySide6.QtWidgets import QFileDialog, QInputDialog, QWidget

from qwen_mtp_desktop.core.chat.store.chat_file_names import export_filename
from qwen_mtp_desktop.core.chat.store.records import Conversation, DeletedConversation
from qwen_mtp_desktop.ui.chat.banners import UndoBar
from qwen_mtp_desktop.ui.chat.conversations.open_chat import ConversationController


def documents_folder() -> Path:
    """Where a file the user keeps goes first: their documents folder (home without one)."""
    found = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    folder = Path(found) if found else Path.home()
    return folder if folder.is_dir() else Path.home()


class ChatListActions(QObject):
    """`titles()`: the listed chats' titles by id; `stop()`: stop the open chat's answer;
    `changed(conversation or None)`: redraw after a rename (the chat), a deletion (None) or an
    undo (the chat, to open)."""

    def __init__(
        self,
        parent: QWidget,
        chats: ConversationController,
        undo_bar: UndoBar,
        *,
        titles: Callable[[], dict[int, str]],
        stop: Callable[[], None],
        renamed: Callable[[Conversation], None],
        deleted: Callable[[], None],
        restored: Callable[[Conversation], None],
    ) -> None:
        super().__init__(parent)
        self._parent, self._chats, self._undo_bar = parent, chats, undo_bar
        self._titles, self._stop = titles, stop
        self._renamed, self._deleted, self._restored = renamed, deleted, restored
        self._last_deleted: DeletedConversation | None = None

    def on_action(self, action: str, conversation_id: int) -> None:
        title = self._titles().get(conversation_id, "")
        if action in ("pin", "unpin"):
            # The chat keeps its time; the list redraws with it at (or off) the top.
            self._chats.set_pinned(conversation_id, action == "pin", self._renamed)
        elif action == "rename":
            # Opens with the current name (selected: typing replaces it, an edit keeps it).
            new_title, ok = QInputDialog.getText(self._parent, "Rename chat", "Title:", text=title)
            if ok:
                self._chats.rename(conversation_id, new_title, self._renamed)
        elif action == "delete":
            if self._chats.is_current(conversation_id):
                self._stop()
            self._chats.delete_chat(conversation_id, self._on_deleted)
        elif action in ("export-md", "export-json"):
            self.export(conversation_id, title, markdown=action == "export-md")

    def export(self, conversation_id: int, title: str, *, markdown: bool) -> None:
        """Ask where, starting in the documents folder, then write it on the store's thread."""
        suffix = ".md" if markdown else ".json"
        name = export_filename(title or f"chat-{conversation_id}", suffix)
        filename, _ = QFileDialog.getSaveFileName(
            self._parent,
            "Export chat",
            str(documents_folder() / name),
            "Markdown (*.md)" if markdown else "JSON (*.json)",
        )
        if filename:
            self._chats.export(conversation_id, Path(filename), markdown)

    def _on_deleted(self, deleted: DeletedConversation) -> None:
        self._deleted()
        self._last_deleted = deleted
        self._undo_bar.offer(f"“{deleted.conversation.title}” was deleted.", self.undo_delete)

    def undo_delete(self) -> None:
        deleted = self._last_deleted
        if deleted is None:
            return
        self._last_deleted = None
        self._chats.restore_chat(deleted, self._restored)
