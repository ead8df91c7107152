"""Chat options' "Presets" section: save this chat's system prompt and sampling settings under a
name, apply a preset to the chat, rename or delete one, and choose the preset new chats start
from (core.settings.presets; kept app-wide in the settings file by the main window).

Signals:
    apply_requested(ChatPreset): the user wants the chat to take this preset's values.
    changed(list, object): the presets (list[ChatPreset]) or the preset new chats start from
        (a name or None) changed; the receiver saves them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.settings.presets import (
    MAX_PRESETS,
    ChatPreset,
    PresetError,
    check_preset_name,
    find_preset,
)

NO_PRESETS = "No presets yet"


class PresetOptions(QFrame):
    apply_requested = Signal(object)
    changed = Signal(list, object)

    def __init__(
        self,
        current: Callable[[], tuple[ChatSettings, str]],
        parent: QWidget | None = None,
    ) -> None:
        """`current()`: the open chat's settings and system prompt (what "Save as…" keeps)."""
        super().__init__(parent)
        self.setObjectName("presetOptions")
        self._current = current
        self._presets: list[ChatPreset] = []
        self._default: str | None = None
        #: The open name or confirm dialog (tests drive it; one at a time).
        self.name_dialog: QInputDialog | None = None
        self.confirm: QMessageBox | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(6)
        title = QLabel("Presets")
        title.setObjectName("sectionTitle")
        layout.addWidget(title)
        self.combo = QComboBox()
        self.combo.setToolTip("A preset: a system prompt with sampling settings")
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(10)
        self.combo.currentIndexChanged.connect(self._sync)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setToolTip(
            "Give this chat the preset's system prompt and settings (its model and decoding "
            "method stay)"
        )
        self.apply_button.clicked.connect(self.apply_selected)
        top = QHBoxLayout()
        top.setSpacing(6)
        top.addWidget(self.combo, 1)
        top.addWidget(self.apply_button)
        layout.addLayout(top)
        self.save_button = QPushButton("Save as…")
        self.save_button.setToolTip(
            "Keep this chat's system prompt and sampling settings as a preset"
        )
        self.save_button.clicked.connect(self.ask_save)
        self.rename_button = QPushButton("Rename…")
        self.rename_button.clicked.connect(self.ask_rename)
        self.delete_button = QPushButton("Delete…")
        self.delete_button.clicked.connect(self.ask_delete)
        buttons = QHBoxLayout()
        buttons.setSpacing(6)
        for button in (self.save_button, self.rename_button, self.delete_button):
            buttons.addWidget(button)
        layout.addLayout(buttons)
        self.default_check = QCheckBox("New chats start with this preset")
        self.default_check.toggled.connect(self._on_default_toggled)
        layout.addWidget(self.default_check)
        self.status = QLabel()
        self.status.setObjectName("muted")
        self.status.setWordWrap(True)
        self.status.setVisible(False)
        layout.addWidget(self.status)
        self._sync()

    # ------------------------------------------------------------------------ state

    @property
    def presets(self) -> list[ChatPreset]:
        return list(self._presets)

    @property
    def default(self) -> str | None:
        return self._default

    def set_presets(self, presets: Sequence[ChatPreset], default: str | None) -> None:
        """Show these presets (as loaded), keeping the selected one when it is still there."""
        self._presets = list(presets)
        self._default = default if find_preset(presets, default) is not None else None
        self._fill(self.selected_name() or self._default)

    def selected(self) -> ChatPreset | None:
        return find_preset(self._presets, self.selected_name())

    def selected_name(self) -> str | None:
        name = self.combo.currentData()
        return name if isinstance(name, str) else None

    def default_preset(self) -> ChatPreset | None:
        """The preset new chats start from, or None."""
        return find_preset(self._presets, self._default)

    def _fill(self, selected: str | None) -> None:
        self.combo.blockSignals(True)
        self.combo.clear()
        if not self._presets:
            self.combo.addItem(NO_PRESETS)
        for preset in self._presets:
            self.combo.addItem(preset.name, preset.name)
            self.combo.setItemData(
                self.combo.count() - 1,
                describe(preset.values, preset.system_prompt) or preset.name,
                role=Qt.ItemDataRole.ToolTipRole,
            )
        chosen = find_preset(self._presets, selected)
        if chosen is not None:
            self.combo.setCurrentIndex(self.combo.findData(chosen.name))
        self.combo.blockSignals(False)
        self._sync()

    def _sync(self) -> None:
        has = self.selected() is not None
        self.combo.setEnabled(bool(self._presets))
        for button in (self.apply_button, self.rename_button, self.delete_button):
            button.setEnabled(has)
        self.default_check.setEnabled(has)
        self.default_check.blockSignals(True)
        name = self.selected_name()
        self.default_check.setChecked(
            has and name is not None and name.casefold() == (self._default or "").casefold()
        )
        self.default_check.blockSignals(False)

    def _say(self, text: str, *, error: bool = False) -> None:
        self.status.setStyleSheet("color: #c0392b;" if error else "")
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def _changed(self, selected: str | None) -> None:
        self._fill(selected)
        self.changed.emit(list(self._presets), self._default)

    # ------------------------------------------------------------------------ actions

    def apply_selected(self) -> None:
        preset = self.selected()
        if preset is not None:
            self.apply_requested.emit(preset)
            self._say(f"This chat now uses “{preset.name}”.")

    def _ask_name(self, title: str, label: str, text: str, done: Callable[[str], object]) -> None:
        dialog = QInputDialog(self)
        dialog.setWindowTitle(title)
        dialog.setLabelText(label)
        dialog.setTextValue(text)
        dialog.textValueSelected.connect(done)
        dialog.finished.connect(dialog.deleteLater)
        self.name_dialog = dialog
        dialog.open()

    def ask_save(self) -> None:
        """Ask for a name, then keep the chat's settings under it (a preset of that name is
        updated)."""
        self._ask_name("Save preset", "Name for this chat's prompt and settings:", "", self.save_as)

    def save_as(self, name: str) -> ChatPreset | None:
        settings, prompt = self._current()
        try:
            preset = ChatPreset.of_chat(name, settings, prompt)
        except PresetError as exc:
            self._say(_error_text(exc), error=True)
            return None
        existing = find_preset(self._presets, preset.name)
        if existing is not None:
            self._presets[self._presets.index(existing)] = preset
            self._say(f"Updated “{preset.name}” with this chat's prompt and settings.")
        elif len(self._presets) >= MAX_PRESETS:
            self._say(f"There are {MAX_PRESETS} presets already: delete one first.", error=True)
            return None
        else:
            self._presets.append(preset)
            self._say(f"Saved “{preset.name}”.")
        if existing is not None and self._default == existing.name:
            self._default = preset.name
        self._changed(preset.name)
        return preset

    def ask_rename(self) -> None:
        preset = self.selected()
        if preset is not None:
            self._ask_name("Rename preset", "New name:", preset.name, self.rename_selected)

    def rename_selected(self, name: str) -> ChatPreset | None:
        preset = self.selected()
        if preset is None:
            return None
        try:
            renamed = preset.renamed(check_preset_name(name))
        except PresetError as exc:
            self._say(_error_text(exc), error=True)
            return None
        other = find_preset(self._presets, renamed.name)
        if other is not None and other is not preset:
            self._say(f"There is a preset named “{other.name}” already.", error=True)
            return None
        self._presets[self._presets.index(preset)] = renamed
        if self._default is not None and self._default.casefold() == preset.name.casefold():
            self._default = renamed.name
        self._say(f"Renamed to “{renamed.name}”.")
        self._changed(renamed.name)
        return renamed

    def ask_delete(self) -> None:
        """Ask first: a deleted preset cannot be brought back."""
        preset = self.selected()
        if preset is None:
            return
        box = QMessageBox(
            QMessageBox.Icon.Question,
            "Delete preset",
            f"Delete the preset “{preset.name}”? Chats that used it keep their settings.",
            QMessageBox.StandardButton.Cancel,
            self,
        )
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.buttonClicked.connect(
            lambda button: self.delete_preset(preset.name) if button is delete else None
        )
        box.finished.connect(box.deleteLater)
        self.confirm = box
        box.open()

    def delete_preset(self, name: str) -> None:
        preset = find_preset(self._presets, name)
        if preset is None:
            return
        self._presets.remove(preset)
        if self._default is not None and self._default.casefold() == preset.name.casefold():
            self._default = None
        self._say(f"Deleted “{preset.name}”.")
        self._changed(self._presets[0].name if self._presets else None)

    def _on_default_toggled(self, checked: bool) -> None:
        name = self.selected_name()
        if name is None:
            return
        if checked:
            self._default = name
            self._say(f"New chats start with “{name}”.")
        elif self._default is not None and self._default.casefold() == name.casefold():
            self._default = None
            self._say("New chats start with the settings last used.")
        self._changed(name)


def describe(values: Mapping[str, Any], prompt: str) -> str:
    """A preset's (or a model's defaults') values and system prompt in one line."""
    parts = []
    if values.get("model_sampling"):
        parts.append("the model's sampling defaults")
    elif "temperature" in values:
        parts.append(
            "greedy"
            if values["temperature"] == 0
            else f"temperature {values['temperature']:g}, top-p {values.get('top_p', 0):g}, "
            f"top-k {values.get('top_k', 0)}"
        )
    if "max_new_tokens" in values:
        parts.append(f"up to {values['max_new_tokens']} tokens")
    if values.get("thinking"):
        parts.append("thinking")
    if prompt:
        parts.append(f"prompt: {prompt[:80]}{'…' if len(prompt) > 80 else ''}")
    return " · ".join(parts)


def _error_text(exc: PresetError) -> str:
    return f"{exc.message} {exc.fix}".strip()
