"""The chat's header, in two rows: the Chats toggle, the title, "Tools: N" (while the chat
enables MCP servers) and the Drafts and Chat options toggles; under them the model picker (as
users know it from LM Studio and Jan) with Eject and what the model decodes with, in one plain
sentence (details in its tooltip)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QToolButton,
    QTreeView,
    QVBoxLayout,
)

from qwen_mtp_desktop.core.models.library import display_name
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.ui.chat.options.panel import CHAT_OPTIONS
from qwen_mtp_desktop.ui.chat.remote.picker import append_remote_rows, picker_action
from qwen_mtp_desktop.ui.widgets.elided_label import ElidedLabel
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from qwen_mtp_desktop.workers.remote_models import is_remote

#: The model picker is never narrower than this, however narrow the header.
PICKER_MIN_WIDTH = 160


class ChatHeader(QFrame):
    """Signals:
    model_chosen(Path): the user picked another model in the picker (a folder, or a remote
        endpoint's reference).
    remote_action(str): the user picked "Add remote server…" or "Edit <name>…"
        (ui.chat.remote.picker's ADD or EDIT).
    """

    model_chosen = Signal(object)
    remote_action = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("chatHeader")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 8, 12, 6)
        layout.setSpacing(4)
        self.title_label = ElidedLabel("New chat")  # a long title yields to the buttons
        self.title_label.setMinimumWidth(120)  # ...but keeps a few words
        self.title_label.setObjectName("chatTitle")
        # Auto's reason in a plain sentence, wrapped rather than cut; details in the tooltip.
        self.model_status = QLabel()
        self.model_status.setObjectName("muted")
        self.model_status.setWordWrap(True)
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
        # "Chat options", not "Settings": File > Settings (Ctrl+,) is the app's.
        self.settings_toggle = QToolButton()
        self.settings_toggle.setText(CHAT_OPTIONS)
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setChecked(False)
        self.settings_toggle.setToolTip(
            "Show or hide this chat's options: model, decoding, sampling, system prompt"
        )
        self.chats_toggle = QToolButton()
        self.chats_toggle.setText("Chats")
        self.chats_toggle.setCheckable(True)
        self.chats_toggle.setChecked(True)
        self.chats_toggle.setToolTip("Show or hide the list of chats")
        # Tools cost every prompt their definitions and change what the model answers, so a
        # chat that enables servers says so where it is always seen (issue 44).
        self.tools_button = QToolButton()
        self.tools_button.setObjectName("toolsMarker")
        self.tools_button.setVisible(False)
        # The same choice as Settings > Model: name, size, precision, MTP.
        self.model_picker = QComboBox()
        self.model_picker.setObjectName("modelPicker")
        # As wide as the longest name, within what the header can spare (resizeEvent).
        self.model_picker.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
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
        for toggle in (self.chats_toggle, self.drafts_toggle, self.settings_toggle):
            toggle.setObjectName("headerToggle")  # on and off drawn apart in both themes
        top = QHBoxLayout()
        top.addWidget(self.chats_toggle)
        top.addWidget(self.title_label, 1)
        top.addWidget(self.tools_button)
        top.addWidget(self.drafts_toggle)
        top.addWidget(self.settings_toggle)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_picker)
        model_row.addWidget(self.eject_button)
        model_row.addWidget(self.busy_bar)
        model_row.addWidget(self.model_status, 1)
        layout.addLayout(top)
        layout.addLayout(model_row)

    def show_tools(self, servers: Sequence[str]) -> None:
        """ "Tools: N" with the servers' names in its tooltip, shown while the chat enables any
        (`servers`); hidden when it enables none."""
        self.tools_button.setVisible(bool(servers))
        self.tools_button.setText(f"Tools: {len(servers)}")
        names = "\n".join(servers)  # server names are the user's text: plain, never markup
        self.tools_button.setToolTip(
            plain_tooltip(f"MCP servers this chat enables:\n{names}\nClick for its tool options.")
        )

    def show_status(self, text: str, details: str = "") -> None:
        """What the model decodes with; `details` (Auto's technical reason) in the tooltip."""
        plain_label(self.model_status).setText(text)  # a remote server names its models
        self.model_status.setToolTip(plain_tooltip(details or text))

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # Names are not cut on a wide window; on a narrow one the status keeps its room.
        self.model_picker.setMaximumWidth(max(PICKER_MIN_WIDTH, int(self.width() * 0.45)))

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
            name.setToolTip(plain_tooltip(str(path)))
            about = QStandardItem(details.get(path, ""))
            about.setToolTip(plain_tooltip(str(path)))
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
