"""The chat's header: the Chats toggle, the title, the model picker (as users know it from LM
Studio and Jan) with the model's status and Eject, and the Drafts and Settings toggles."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QFrame, QHBoxLayout, QProgressBar, QToolButton, QTreeView

from qwen_mtp_desktop.core.model_library import display_name
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.ui.chat.remote_picker import append_remote_rows, picker_action
from qwen_mtp_desktop.ui.elided_label import ElidedLabel
from qwen_mtp_desktop.workers.remote_chat import is_remote


class ChatHeader(QFrame):
    """Signals:
    model_chosen(Path): the user picked another model in the picker (a folder, or a remote
        endpoint's reference).
    remote_action(str): the user picked "Add remote server…" or "Edit <name>…"
        (ui.chat.remote_picker's ADD or EDIT).
    """

    model_chosen = Signal(object)
    remote_action = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("chatHeader")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(20, 10, 12, 10)
        self.title_label = ElidedLabel("New chat")  # a long title yields to the buttons
        self.title_label.setMinimumWidth(120)  # ...but keeps a few words
        self.title_label.setObjectName("chatTitle")
        self.model_status = ElidedLabel()  # Auto's reason can be long; the tooltip has it all
        self.model_status.setObjectName("muted")
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)
        self.busy_bar.setFixedSize(90, 6)
        self.busy_bar.setTextVisible(False)
        self.busy_bar.setVisible(False)
        self.eject_button = QToolButton()
        self.eject_button.setText("Eject")
        self.eject_button.setToolTip(
            "Unload the model to free its memory; the next message loads it again"
        )
        self.eject_button.setVisible(False)
        self.drafts_toggle = QToolButton()
        self.drafts_toggle.setText("Drafts")
        self.drafts_toggle.setCheckable(True)
        self.drafts_toggle.setToolTip(
            "Show drafted tokens: tint the text that came from accepted MTP drafts"
        )
        self.settings_toggle = QToolButton()
        self.settings_toggle.setText("Settings")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setChecked(False)
        self.settings_toggle.setToolTip("Show or hide this chat's settings")
        self.chats_toggle = QToolButton()
        self.chats_toggle.setText("Chats")
        self.chats_toggle.setCheckable(True)
        self.chats_toggle.setChecked(True)
        self.chats_toggle.setToolTip("Show or hide the list of chats")
        # The same choice as Settings > Model: name, size, precision, MTP.
        self.model_picker = QComboBox()
        self.model_picker.setObjectName("modelPicker")
        self.model_picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_picker.setMinimumContentsLength(10)
        self.model_picker.setToolTip("The model this chat uses")
        # Closed: the name. Open: name and what it is, in two columns.
        picker_view = QTreeView()
        picker_view.setHeaderHidden(True)
        picker_view.setRootIsDecorated(False)
        picker_view.setItemsExpandable(False)
        picker_view.setAllColumnsShowFocus(True)
        self.model_picker.setView(picker_view)
        self.model_picker.activated.connect(self._on_picker)
        self._picker_key: tuple[object, ...] = ()
        #: The last local model chosen: listed beside the remote ones to switch back to.
        self._local_model: Path | None = None
        layout.addWidget(self.chats_toggle)
        layout.addWidget(self.title_label)
        layout.addSpacing(12)
        layout.addWidget(self.model_picker)
        layout.addWidget(self.model_status)
        layout.addWidget(self.busy_bar)
        layout.addWidget(self.eject_button)
        layout.addStretch(1)
        layout.addWidget(self.drafts_toggle)
        layout.addWidget(self.settings_toggle)

    def fill_picker(
        self,
        current: Path,
        models: list[Path],
        details: dict[Path, str],
        endpoints: list[RemoteEndpoint],
    ) -> None:
        """The picker's models (the current local one first when it is not in the library),
        each with what it is ("Qwen3.5 dense · 1.8 MB · FP16 · MTP"), then the remote servers
        and their actions. Rebuilt only when that changed."""
        if not is_remote(current):
            self._local_model = current
        local = self._local_model
        in_list = local is None or local in models
        local_models = list(models) if in_list or local is None else [local, *models]
        key = (current, tuple(local_models), tuple(sorted(details.items())), tuple(endpoints))
        if key == self._picker_key:
            return
        self._picker_key = key
        picker = self.model_picker
        picker.blockSignals(True)
        model = QStandardItemModel(0, 2, picker)
        for path in local_models:
            name = QStandardItem(display_name(path))
            name.setData(str(path), Qt.ItemDataRole.UserRole)
            name.setToolTip(str(path))
            about = QStandardItem(details.get(path, ""))
            about.setToolTip(str(path))
            about.setForeground(self.palette().placeholderText())
            model.appendRow([name, about])
        append_remote_rows(model, endpoints, current, self.palette())
        picker.setModel(model)
        picker.setCurrentIndex(max(picker.findData(str(current), Qt.ItemDataRole.UserRole), 0))
        view = picker.view()
        assert isinstance(view, QTreeView)
        view.resizeColumnToContents(0)
        view.resizeColumnToContents(1)
        view.setMinimumWidth(view.columnWidth(0) + view.columnWidth(1) + 24)
        picker.blockSignals(False)

    def refill(self) -> None:
        """Build the picker again at the next fill (after an action row was picked, so the
        chosen model shows again, not the action)."""
        self._picker_key = ()

    def _on_picker(self, index: int) -> None:
        action = picker_action(self.model_picker, index)
        if action is not None:
            self.remote_action.emit(action)
            return
        path = Path(self.model_picker.itemData(index, Qt.ItemDataRole.UserRole))
        self.model_chosen.emit(path)
