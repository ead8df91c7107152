"""Chat options' "This model's defaults": keep the open chat's system prompt and settings as what
new chats of its model start with, or clear them (core.settings.model_defaults; the rule a new
chat follows is core.chat.new_chat.NEW_CHAT_RULE). The main window keeps them in the settings
file, merged on write.

Signals:
    changed(str, object): the defaults of the model a key names (core.models.library.model_key)
        were saved (a ModelDefaults) or cleared (None); the receiver writes that one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QVBoxLayout, QWidget

from qwen_mtp_desktop.core.chat.new_chat import NEW_CHAT_RULE
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.prompt.context_limit import OVERFLOW_WORDS
from qwen_mtp_desktop.core.settings.model_defaults import ModelDefaults, find_model_defaults
from qwen_mtp_desktop.core.settings.presets import ChatPreset, PresetError
from qwen_mtp_desktop.ui.chat.options.presets import describe
from qwen_mtp_desktop.ui.widgets.flow_layout import FlowLayout

#: The open chat's settings and system prompt; the model's key (None: not read yet) and name;
#: the preset new chats start from.
CurrentChat = Callable[[], tuple[ChatSettings, str]]
CurrentModel = Callable[[], tuple[str | None, str]]


class ModelDefaultsOptions(QFrame):
    changed = Signal(str, object)

    def __init__(
        self,
        chat: CurrentChat,
        model: CurrentModel,
        default_preset: Callable[[], ChatPreset | None],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelDefaults")
        self._chat, self._model, self._preset = chat, model, default_preset
        self._entries: list[ModelDefaults] = []
        #: What a new, untouched chat was started with: (model key, settings, prompt); a model
        #: read later (or picked) whose key differs gives it that model's start instead.
        self._started: tuple[str | None, ChatSettings, str] | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 6)
        layout.setSpacing(6)
        title = QLabel("This model's defaults")
        title.setObjectName("sectionTitle")
        title.setToolTip(NEW_CHAT_RULE)
        layout.addWidget(title)
        self.status = QLabel()
        self.status.setObjectName("muted")
        self.status.setWordWrap(True)
        self.status.setToolTip(NEW_CHAT_RULE)
        layout.addWidget(self.status)
        self.save_button = QPushButton("Save as this model's defaults")
        self.save_button.setToolTip(
            "New chats of this model start with this chat's system prompt and settings "
            "(sampling, thinking and its budget, max new tokens, When too long). " + NEW_CHAT_RULE
        )
        self.save_button.clicked.connect(self.save)
        self.clear_button = QPushButton("Clear")
        self.clear_button.setToolTip("New chats of this model start as if none were saved")
        self.clear_button.clicked.connect(self.clear)
        buttons = FlowLayout(spacing=6)  # Clear wraps below rather than widen the column
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.clear_button)
        layout.addLayout(buttons)
        self.refresh()

    @property
    def entries(self) -> list[ModelDefaults]:
        return list(self._entries)

    def set_entries(self, entries: Sequence[ModelDefaults]) -> None:
        self._entries = list(entries)
        self.refresh()

    def current(self) -> ModelDefaults | None:
        """The defaults saved for the chat's model (None: none, or the model not read yet)."""
        return find_model_defaults(self._entries, self._model()[0])

    # ------------------------------------------------------------------------ a new chat

    def started(self, settings: ChatSettings, prompt: str) -> None:
        """A new chat was given its start for the model as known now."""
        self._started = (self._model()[0], settings, prompt)

    def opened(self) -> None:
        """A stored chat is open: it keeps its own settings."""
        self._started = None

    def restart_due(self, settings: ChatSettings, prompt: str) -> bool:
        """The new chat should start again: its model is known now (read, or another picked)
        and is not the one it started for, and the user has changed nothing since."""
        started, key = self._started, self._model()[0]
        if started is None or key is None or started[0] == key:
            return False
        return (settings, prompt) == started[1:]

    # ------------------------------------------------------------------------ actions

    def save(self) -> ModelDefaults | None:
        key, name = self._model()
        if key is None:
            return None
        settings, prompt = self._chat()
        try:
            entry = ModelDefaults.of_chat(key, name, settings, prompt)
        except PresetError as exc:
            self._say(f"{exc.message} {exc.fix}".strip())
            return None
        self._entries = [e for e in self._entries if e.model != key] + [entry]
        self.changed.emit(key, entry)
        self.refresh()
        return entry

    def clear(self) -> None:
        key = self._model()[0]
        if key is None or self.current() is None:
            return
        self._entries = [e for e in self._entries if e.model != key]
        self.changed.emit(key, None)
        self.refresh()

    def refresh(self) -> None:
        """The status and buttons for the chat's model as it is now."""
        key, name = self._model()
        entry = self.current()
        self.save_button.setEnabled(key is not None)
        self.clear_button.setEnabled(entry is not None)
        if key is None:
            self._say("Known once the model is read.")
        elif entry is not None:
            self._say(f"New chats of {name} start with: {_describe(entry)}")
        else:
            preset = self._preset()
            fallback = (
                f"the default preset “{preset.name}”"
                if preset is not None
                else "the model's own sampling"
            )
            self._say(f"None saved: new chats of {name} start with {fallback}.")

    def _say(self, text: str) -> None:
        self.status.setText(text)


def _describe(entry: ModelDefaults) -> str:
    """The saved values in one line: a preset's words, with the thinking budget and "When too
    long" that a preset does not hold."""
    values = entry.values
    parts = [describe({k: v for k, v in values.items() if k != "thinking"}, "")]
    if values.get("thinking"):
        budget = values.get("thinking_budget")
        parts.append(f"thinking up to {budget} tokens" if budget else "thinking")
    overflow = values.get("context_overflow")
    if overflow in OVERFLOW_WORDS:
        parts.append(f"when too long: {OVERFLOW_WORDS[overflow].lower()}")
    prompt = entry.system_prompt
    if prompt:
        parts.append(f"prompt “{prompt[:60]}{'…' if len(prompt) > 60 else ''}”")
    return " · ".join(part for part in parts if part)
