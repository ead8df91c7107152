"""The Models panel's left column: the model list, the library folders, the scan status."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.folders.report import ModelReport
from qwen_mtp_desktop.core.models.library import LibraryEntry, LibraryFolder
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.models.model_row import (
    DETAIL_ROLE,
    LOADED_ROLE,
    LOADED_TEXT,
    ModelList,
    ModelRowDelegate,
)
from qwen_mtp_desktop.ui.widgets.status_icons import status_icon

PATH_ROLE = Qt.ItemDataRole.UserRole


class LibraryView(QFrame):
    """Widgets only: the panel fills them from its scans and connects their buttons."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("modelLibrary")
        # Narrower on a small window, so the details keep room for their buttons and text.
        self.setMinimumWidth(340)
        self.setMaximumWidth(420)
        side = QVBoxLayout(self)
        side.setContentsMargins(16, 18, 12, 12)
        side.setSpacing(8)
        heading = QLabel("Models")
        heading.setObjectName("panelHeading")
        side.addWidget(heading)
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        self.add_folder_button = QPushButton("Add folder…")
        self.add_folder_button.setToolTip("Add a folder that holds one model or many")
        self.rescan_button = QPushButton("Rescan")
        self.rescan_button.setToolTip("Look for new, changed or removed models now")
        self.discover_button = QPushButton("Discover…")
        self.discover_button.setToolTip(
            "The Qwen3.5 family: sizes, the memory each needs on this computer, and an export "
            "in a few clicks"
        )
        buttons.addWidget(self.add_folder_button)
        buttons.addWidget(self.rescan_button)
        buttons.addWidget(self.discover_button)
        buttons.addStretch(1)
        side.addLayout(buttons)

        # One column of two-line rows: the whole name, then what the model is (model_row.py).
        self.model_list = ModelList()
        self.model_list.setObjectName("modelList")
        self.model_list.setColumnCount(1)
        self.model_list.setHeaderHidden(True)
        self.model_list.setRootIsDecorated(False)
        self.model_list.setAlternatingRowColors(True)
        self.model_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.model_list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.model_list.setItemDelegate(ModelRowDelegate(self.model_list))
        side.addWidget(self.model_list, 1)

        folders_title = QLabel("Library folders")
        folders_title.setObjectName("sectionTitle")
        side.addSpacing(6)
        side.addWidget(folders_title)
        self.folder_list = QListWidget()
        self.folder_list.setObjectName("folderList")
        self.folder_list.setMaximumHeight(104)
        self.folder_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        side.addWidget(self.folder_list)
        folder_buttons = QHBoxLayout()
        self.remove_folder_button = QPushButton("Remove folder")
        self.remove_folder_button.setToolTip("Stop looking in this folder; its files stay")
        self.remove_folder_button.setEnabled(False)
        folder_buttons.addWidget(self.remove_folder_button)
        folder_buttons.addStretch(1)
        side.addLayout(folder_buttons)
        self.status_label = QLabel()
        self.status_label.setObjectName("muted")
        self.status_label.setWordWrap(True)
        side.addWidget(self.status_label)

    def fill_models(
        self,
        entries: Sequence[LibraryEntry],
        report: Callable[[Path], ModelReport | None],
        status: Callable[[Path], str],
        is_default: Callable[[Path], bool],
        selected: Path | None,
        loaded: Path | None = None,
    ) -> None:
        self.model_list.blockSignals(True)
        self.model_list.clear()
        for entry in entries:
            found = report(entry.path)
            item = QTreeWidgetItem(self.model_list)
            item.setData(0, PATH_ROLE, str(entry.path))
            item.setText(0, entry.name)
            item.setIcon(0, status_icon(status(entry.path)))
            tip = [entry.name, str(entry.path)]
            if found is None:
                detail = "inspecting…"
            else:
                kind = found.kind_label if found.kind != "unknown" else "unknown kind"
                mtp = "MTP head" if found.mtp.present else "no MTP head"
                detail = f"{kind} · {format_bytes(found.total_bytes)} · {mtp}"
                errors = [d for d in found.diagnostics if d.severity != "info"]
                tip += [f"{d.severity}: {d.message}" for d in errors[:4]]
            item.setData(0, DETAIL_ROLE, detail)
            is_loaded = loaded is not None and entry.path.resolve() == loaded
            item.setData(0, LOADED_ROLE, is_loaded)
            if is_loaded:
                tip.append(f"The model {LOADED_TEXT}")
            if is_default(entry.path):
                font = QFont(item.font(0))
                font.setBold(True)
                item.setFont(0, font)
                tip.append("Opens at start (the default model)")
            item.setToolTip(0, "\n".join(tip))
            if entry.path == selected:
                item.setSelected(True)
                self.model_list.setCurrentItem(item)
        self.model_list.blockSignals(False)

    def fill_folders(self, folders: Sequence[LibraryFolder]) -> None:
        self.folder_list.clear()
        metrics = self.folder_list.fontMetrics()
        for folder in folders:
            label = "App model folder" if folder.origin == "managed" else str(folder.path)
            suffix = "" if folder.exists else "  (missing)"
            # Elide the middle of long paths: the start and the folder's own name matter.
            room = self.folder_list.viewport().width() - 12 - metrics.horizontalAdvance(suffix)
            label = metrics.elidedText(label, Qt.TextElideMode.ElideMiddle, max(room, 80))
            item = QListWidgetItem(label + suffix)
            item.setData(PATH_ROLE, str(folder.path))
            item.setData(Qt.ItemDataRole.UserRole + 1, folder.origin)
            item.setToolTip(
                f"{folder.path}\n"
                + (
                    "Exports land here."
                    if folder.origin == "managed"
                    else "A folder you added; it may hold one model or many."
                )
            )
            self.folder_list.addItem(item)
        self.remove_folder_button.setEnabled(False)
