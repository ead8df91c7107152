"""The box a message is written in, the composer's and a question's inline editor alike:
Enter sends, Shift+Enter adds a line, Esc leaves (stops the answer, or cancels the edit)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QPlainTextEdit

#: The keys that send (without Shift, which adds a line).
SEND_KEYS = (Qt.Key.Key_Return, Qt.Key.Key_Enter)


class MessageEditor(QPlainTextEdit):
    """Signals:
    submit(): Enter (or keypad Enter) without Shift.
    escape(): Esc.
    """

    submit = Signal()
    escape = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        if event.key() in SEND_KEYS and not (event.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.submit.emit()
            return
        if event.key() == Qt.Key.Key_Escape:
            self.escape.emit()
            return
        super().keyPressEvent(event)
