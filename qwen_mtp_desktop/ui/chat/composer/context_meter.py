"""The context meter by the message box: the conversation's tokens against the model's context
length (core.chat.context_usage), amber above 85 % and red when full, the tooltip saying what the
numbers are and what happens at the limit. It only shows numbers it is given, plus an estimate
for the message being typed from its length in characters (`set_typed`): nothing here tokenizes
or reads a file, so a 50,000-word paste costs nothing more."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

from qwen_mtp_desktop.core.chat.context_usage import ContextUsage
from qwen_mtp_desktop.core.units import keep_units

#: The bar's colour per level; the label keeps the theme's text colour except when it warns.
LEVEL_COLOURS = {"ok": "#3b82f6", "warning": "#d97706", "full": "#dc2626"}


class ContextMeter(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextMeter")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.label = QLabel()
        self.label.setObjectName("muted")
        self.bar = QProgressBar()
        self.bar.setTextVisible(False)
        self.bar.setRange(0, 1000)
        self.bar.setFixedSize(96, 6)
        self.bar.setAccessibleName("Context used")
        layout.addWidget(self.label, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.bar, 0, Qt.AlignmentFlag.AlignVCenter)
        self.usage: ContextUsage | None = None
        self._conversation: ContextUsage | None = None
        self._typed_chars = 0
        self.level = ""
        self.show_usage(None)

    def show_usage(self, usage: ContextUsage | None) -> None:
        """The conversation's usage (None: nothing to show, e.g. no model chosen yet); the
        message being typed is added to it."""
        self._conversation = usage
        self._show(usage.with_typed(self._typed_chars) if usage is not None else None)

    def set_typed(self, characters: int) -> None:
        """The message box holds `characters` (its estimate is added to the conversation's)."""
        if characters == self._typed_chars:
            return
        self._typed_chars = characters
        self.show_usage(self._conversation)

    def _show(self, usage: ContextUsage | None) -> None:
        self.usage = usage
        if usage is None or (usage.total == 0 and usage.limit is None):
            self.setVisible(False)
            return
        self.setVisible(True)
        level = "full" if usage.full else "warning" if usage.warning else "ok"
        share = usage.share
        text = usage.text()
        if level == "full":
            text = "Context full: " + text
        elif level == "warning":
            text = "Context nearly full: " + text
        self.label.setText(keep_units(text))
        self.bar.setVisible(share is not None)
        self.bar.setValue(min(int((share or 0) * 1000), 1000))
        if level != self.level:
            self.level = level
            colour = LEVEL_COLOURS[level]
            self.bar.setStyleSheet(
                "QProgressBar { border: none; border-radius: 3px;"
                " background: rgba(128, 128, 128, 60); }"
                f" QProgressBar::chunk {{ border-radius: 3px; background: {colour}; }}"
            )
            self.label.setStyleSheet("" if level == "ok" else f"color: {colour};")
        tip = usage.explanation()
        self.setToolTip(tip)
        self.label.setToolTip(tip)
        self.bar.setToolTip(tip)
