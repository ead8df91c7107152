"""The chat's header: the Chats toggle, the title, the model picker (as users know it from LM
Studio and Jan) with the model's status, and the Drafts and Settings toggles."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QFrame, QHBoxLayout, QProgressBar, QToolButton, QTreeView

from qwen_mtp_desktop.core.model_library import display_name
from qwen_mtp_desktop.ui.elided_label import ElidedLabel


class ChatHeader(QFrame):
    """Signals:
    model_chosen(Path): the user picked another model in the picker.
    """

    model_chosen = Signal(object)

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
        layout.addWidget(self.chats_toggle)
        layout.addWidget(self.title_label)
        layout.addSpacing(12)
        layout.addWidget(self.model_picker)
        layout.addWidget(self.model_status)
        layout.addWidget(self.busy_bar)
        layout.addStretch(1)
        layout.addWidget(self.drafts_toggle)
        layout.addWidget(self.settings_toggle)

    def fill_picker(self, current: Path, models: list[Path], details: dict[Path, str]) -> None:
        """The picker's models (the current one first when it is not in the library), each with
        what it is ("Qwen3.5 dense · 1.8 MB · FP16 · MTP"). Rebuilt only when that changed."""
        models = models if current in models else [current, *models]
        key = (current, tuple(models), tuple(sorted(details.items())))
        if key == self._picker_key:
            return
        self._picker_key = key
        picker = self.model_picker
        picker.blockSignals(True)
        model = QStandardItemModel(0, 2, picker)
        for path in models:
            name = QStandardItem(display_name(path))
            name.setData(str(path), Qt.ItemDataRole.UserRole)
            name.setToolTip(str(path))
            about = QStandardItem(details.get(path, ""))
            about.setToolTip(str(path))
            about.setForeground(self.palette().placeholderText())
            model.appendRow([name, about])
        picker.setModel(model)
        picker.setCurrentIndex(models.index(current))
        view = picker.view()
        assert isinstance(view, QTreeView)
        view.resizeColumnToContents(0)
        view.resizeColumnToContents(1)
        view.setMinimumWidth(view.columnWidth(0) + view.columnWidth(1) + 24)
        picker.blockSignals(False)

    def _on_picker(self, index: int) -> None:
        path = Path(self.model_picker.itemData(index, Qt.ItemDataRole.UserRole))
        self.model_chosen.emit(path)
