"""The chat header's model picker, remote part: one row per remote endpoint beside the local
models, then "Add remote server…", while a remote model is chosen "Edit <name>…", and
"Remote servers…" (ui.chat.remote.servers) once there are any.

Rows keep their model reference (a folder path, or core.remote.endpoints.remote_ref) in
Qt.UserRole like the local rows; action rows keep an ACTION value there instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QWidget

from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint, endpoint_id
from qwen_mtp_desktop.ui.chat.remote.dialog import RemoteServerDialog
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip
from qwen_mtp_desktop.workers.remote_models import RemoteModels

ADD = "action:add-remote"
EDIT = "action:edit-remote"
MANAGE = "action:manage-remote"
MANAGE_TEXT = "Remote servers…"
GONE_TEXT = "Removed server"
ADD_TEXT = "Add remote server…"


def _host(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def append_remote_rows(
    model: QStandardItemModel, endpoints: list[RemoteEndpoint], current: Path, palette: QPalette
) -> None:
    """Rows for the endpoints and the add / edit actions, after the local models' rows."""
    muted = palette.placeholderText()
    for endpoint in endpoints:
        name = QStandardItem(endpoint.name)
        name.setData(str(endpoint.ref), Qt.ItemDataRole.UserRole)
        tip = f"{endpoint.model} at {endpoint.base_url}"
        name.setToolTip(plain_tooltip(tip))
        about = QStandardItem(f"remote · {endpoint.model} · {_host(endpoint.base_url)}")
        about.setToolTip(plain_tooltip(tip))
        about.setForeground(muted)
        model.appendRow([name, about])
    current_id = endpoint_id(current)
    if current_id is not None and all(e.id != current_id for e in endpoints):
        # The chat's server was removed: the picker names that, not another model.
        gone = QStandardItem(GONE_TEXT)
        gone.setData(str(current), Qt.ItemDataRole.UserRole)
        gone.setToolTip("This chat's remote server is no longer in the list: pick another model")
        about = QStandardItem("remote · no longer in the list")
        about.setForeground(muted)
        model.appendRow([gone, about])
    rows = [(ADD, ADD_TEXT, "Chat with a model on an OpenAI-compatible server")]
    chosen = next((e for e in endpoints if e.id == current_id), None)
    if chosen is not None:
        rows.append((EDIT, f"Edit {chosen.name}…", "Change or remove this remote server"))
    if endpoints:
        rows.append((MANAGE, MANAGE_TEXT, "Every saved remote server, to edit or remove"))
    for action, text, tip in rows:
        item = QStandardItem(text)
        item.setData(action, Qt.ItemDataRole.UserRole)
        item.setToolTip(tip)
        model.appendRow([item, QStandardItem("")])


def picker_action(picker: QComboBox, index: int) -> str | None:
    value = picker.itemData(index, Qt.ItemDataRole.UserRole)
    return value if value in (ADD, EDIT, MANAGE) else None


def open_remote_dialog(
    action: str,
    remote: RemoteModels,
    current: Path,
    parent: QWidget,
    chosen: Callable[[Path], object],
) -> RemoteServerDialog:
    """The add or edit dialog for the picker's action row (the caller opens it); saved, the
    chat takes that server's model (`chosen`; removed, the next turn's load says it is gone)."""
    ident = endpoint_id(current)
    endpoint = remote.find(ident) if action == EDIT and ident is not None else None
    dialog = RemoteServerDialog(remote, endpoint, parent)

    def saved() -> None:
        if dialog.result_endpoint is not None:
            chosen(dialog.result_endpoint.ref)

    dialog.accepted.connect(saved)
    return dialog
