"""Tools > Remote servers…: the one place that lists the saved remote servers (name, model,
address, whether a key is kept) with Add, Edit and Remove. Remove asks first; a chat that
used a removed server says so when it is opened (workers.model_router: REMOTE_GONE) and keeps
its messages.

Add and Edit open the remote server dialog (ui.chat.remote.dialog); saving and removing go
through `RemoteModels` (written off the GUI thread), so the model picker follows at once.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.ui.chat.remote.dialog import RemoteServerDialog, ask_to_remove
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip
from qwen_mtp_desktop.workers.remote_models import RemoteModels

EMPTY_TEXT = (
    "No remote servers yet. Add one to chat with a model on another computer or server "
    "(another PC running 'qwen-mtp-desktop serve', OpenVINO Model Server, vLLM, llama.cpp)."
)
COLUMNS = ("Name", "Model", "Address", "API key")


class RemoteServersDialog(QDialog):
    """Non-modal; one at a time (the chat panel keeps it). `editor` and `confirm`: the open
    add/edit dialog and removal question, for tests."""

    def __init__(self, remote: RemoteModels, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._remote = remote
        self.editor: RemoteServerDialog | None = None
        self.confirm: QMessageBox | None = None
        self.setWindowTitle("Remote servers")
        self.setMinimumWidth(560)
        intro = QLabel(
            "Servers the chat's model picker offers beside the local models. Edit changes the "
            "address, key, model or name; Remove forgets a server and its key."
        )
        intro.setObjectName("muted")
        intro.setWordWrap(True)
        self.table = QTreeWidget()
        self.table.setObjectName("remoteServers")
        self.table.setColumnCount(len(COLUMNS))
        self.table.setHeaderLabels(list(COLUMNS))
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.table.header()
        header.setStretchLastSection(False)
        for column in (0, 1, 3):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._sync)
        self.table.itemDoubleClicked.connect(lambda _item, _column: self.edit_selected())
        self.empty_label = QLabel(EMPTY_TEXT)
        self.empty_label.setWordWrap(True)
        self.empty_label.setObjectName("muted")
        self.add_button = QPushButton("Add…")
        self.add_button.clicked.connect(self.add)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_selected)
        self.remove_button = QPushButton("Remove…")
        self.remove_button.clicked.connect(self.remove_selected)
        row = QHBoxLayout()
        for button in (self.add_button, self.edit_button, self.remove_button):
            row.addWidget(button)
        row.addStretch(1)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        # Empty, the note takes the list's place (at the top, not floating mid-dialog).
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.empty_label, 1)
        layout.addLayout(row)
        layout.addWidget(self.buttons)
        remote.changed.connect(self._fill)
        self._fill()
        self.resize(720, 360)

    # ------------------------------------------------------------------------ the list

    def _fill(self) -> None:
        selected = self.selected()
        self.table.clear()
        for endpoint in self._remote.endpoints:
            item = QTreeWidgetItem(
                [
                    endpoint.name,
                    endpoint.model,
                    endpoint.base_url,
                    "kept" if endpoint.has_key else "none",
                ]
            )
            item.setData(0, Qt.ItemDataRole.UserRole, endpoint.id)
            item.setToolTip(2, plain_tooltip(endpoint.base_url))
            item.setToolTip(
                0, plain_tooltip(f"{endpoint.model} at {urlsplit(endpoint.base_url).netloc}")
            )
            self.table.addTopLevelItem(item)
            if selected is not None and endpoint.id == selected.id:
                self.table.setCurrentItem(item)
        first = self.table.topLevelItem(0)
        if self.table.currentItem() is None and first is not None:
            self.table.setCurrentItem(first)
        empty = not self._remote.endpoints
        self.table.setVisible(not empty)
        self.empty_label.setVisible(empty)
        self._sync()

    def _sync(self) -> None:
        chosen = self.selected() is not None
        self.edit_button.setEnabled(chosen)
        self.remove_button.setEnabled(chosen)

    def selected(self) -> RemoteEndpoint | None:
        item = self.table.currentItem()
        if item is None:
            return None
        ident = item.data(0, Qt.ItemDataRole.UserRole)
        return self._remote.find(ident) if isinstance(ident, str) else None

    def select(self, ident: str) -> None:
        for index in range(self.table.topLevelItemCount()):
            item = self.table.topLevelItem(index)
            if item is not None and item.data(0, Qt.ItemDataRole.UserRole) == ident:
                self.table.setCurrentItem(item)

    # ------------------------------------------------------------------------ actions

    def _open_editor(self, endpoint: RemoteEndpoint | None) -> RemoteServerDialog:
        editor = RemoteServerDialog(self._remote, endpoint, self)
        editor.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        editor.accepted.connect(
            lambda: self.select(editor.result_endpoint.id) if editor.result_endpoint else None
        )
        self.editor = editor
        editor.open()
        return editor

    def add(self) -> RemoteServerDialog:
        return self._open_editor(None)

    def edit_selected(self) -> RemoteServerDialog | None:
        endpoint = self.selected()
        return self._open_editor(endpoint) if endpoint is not None else None

    def remove_selected(self) -> QMessageBox | None:
        endpoint = self.selected()
        if endpoint is None:
            return None
        self.confirm = ask_to_remove(self, endpoint, lambda: self._remote.remove(endpoint.id))
        return self.confirm
