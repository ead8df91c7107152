"""The controls a message carries besides its text: the "‹ 2/3 ›" version arrows and the
inline editor a question turns into when the user edits it."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.chat.composer.message_editor import SEND_KEYS, MessageEditor


class VersionSwitcher(QWidget):
    """ "‹ 2/3 ›": which version of a message is shown, and arrows to the others (hidden while a
    message has one version).

    Signals:
        step(int): -1 for the previous version, +1 for the next.
    """

    step = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("versionSwitcher")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        self.previous = QToolButton()
        self.previous.setText("‹")
        self.previous.setObjectName("messageAction")
        self.previous.setAutoRaise(True)
        self.previous.setToolTip("Previous version (Alt+Left on the last answer)")
        self.previous.setAccessibleName("Previous version")
        self.previous.clicked.connect(lambda: self.step.emit(-1))
        self.label = QLabel()
        self.label.setObjectName("versionLabel")
        self.next = QToolButton()
        self.next.setText("›")
        self.next.setObjectName("messageAction")
        self.next.setAutoRaise(True)
        self.next.setToolTip("Next version (Alt+Right on the last answer)")
        self.next.setAccessibleName("Next version")
        self.next.clicked.connect(lambda: self.step.emit(1))
        layout.addWidget(self.previous)
        layout.addWidget(self.label)
        layout.addWidget(self.next)
        self.version = 1
        self.count = 1
        self.set_version(1, 1)

    def set_version(self, version: int, count: int) -> None:
        self.version, self.count = version, count
        self.label.setText(f"{version}/{count}")
        self.label.setAccessibleName(f"Version {version} of {count}")
        self.previous.setEnabled(version > 1)
        self.next.setEnabled(version < count)
        self.setVisible(count > 1)


class _EditBox(MessageEditor):
    """The inline editor's box: Esc (`escape`) cancels the edit."""

    def event(self, event: QEvent) -> bool:
        # Esc and Enter are this box's while it has focus, not the window's shortcuts (Esc
        # there stops the answer being written).
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and (event.key() in SEND_KEYS or event.key() == Qt.Key.Key_Escape)
        ):
            event.accept()
            return True
        return super().event(event)


class InlineEditor(QFrame):
    """A question being edited in place: Enter (or Send) answers it again from there, Esc (or
    Cancel) leaves it as it was; Shift+Enter adds a line.

    Signals:
        submitted(str): the new text (stripped, never empty).
        cancelled(): the edit was abandoned.
    """

    submitted = Signal(str)
    cancelled = Signal()

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("inlineEditor")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        self.editor = _EditBox()
        self.editor.setObjectName("composerEditor")
        self.editor.setPlainText(text)
        self.editor.setAccessibleName("Edit message")
        self.editor.setTabChangesFocus(True)
        lines = max(2, min(8, text.count("\n") + 2))
        self.editor.setFixedHeight(self.editor.fontMetrics().lineSpacing() * lines + 20)
        self.editor.submit.connect(self._submit)
        self.editor.escape.connect(self.cancelled)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        hint = QLabel("Enter sends · Esc cancels")
        hint.setObjectName("muted")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancelled)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setToolTip("Answer this message again from here (Enter)")
        self.send_button.clicked.connect(self._submit)
        self.editor.textChanged.connect(self._sync)
        buttons.addWidget(hint)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.send_button)
        layout.addWidget(self.editor)
        layout.addLayout(buttons)
        self._sync()

    @property
    def text(self) -> str:
        return self.editor.toPlainText().strip()

    def _sync(self) -> None:
        self.send_button.setEnabled(bool(self.text))

    def _submit(self) -> None:
        if self.text:
            self.submitted.emit(self.text)

    def focus(self) -> None:
        self.editor.setFocus()
        cursor = self.editor.textCursor()
        cursor.movePosition(cursor.MoveOperation.End)
        self.editor.setTextCursor(cursor)


class AnswerProblem(QFrame):
    """What went wrong with an answer, under its text: an error in a red-edged box with Retry
    and Open log (the log's path is never part of the message), or a quiet notice ("Stopped.
    The answer so far is kept.") with no buttons.

    Signals:
        retry(): answer the question again.
        open_log(): show the app's log file.
    """

    retry = Signal()
    open_log = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("answerProblem")
        layout = QHBoxLayout(self)
        self._layout = layout
        self.label = QLabel()
        self.label.setObjectName("messageError")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.retry_button = QPushButton("Retry")
        self.retry_button.setToolTip("Ask for this answer again")
        self.retry_button.clicked.connect(self.retry)
        self.log_button = QToolButton()
        self.log_button.setObjectName("messageAction")
        self.log_button.setText("Open log")
        self.log_button.setToolTip("Open the app's log file, which has the details")
        self.log_button.clicked.connect(self.open_log)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.log_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignTop)
        self.setVisible(False)

    @property
    def severity(self) -> str:
        return str(self.property("severity") or "")

    def show_problem(self, text: str, severity: str, *, actions: bool) -> None:
        """`severity`: "error" or "notice"; `actions`: offer Retry and Open log."""
        self.label.setText(text)
        for widget in (self, self.label):
            widget.setProperty("severity", severity)
            # A dynamic property does not restyle by itself: polish again.
            widget.style().unpolish(widget)
            widget.style().polish(widget)
        error = severity == "error"
        # An error's text sits inside the red edge the style draws; a notice has none.
        self._layout.setContentsMargins(*((12, 6, 6, 6) if error else (0, 0, 0, 0)))
        self.retry_button.setVisible(error and actions)
        self.log_button.setVisible(error and actions)
        self.setVisible(True)
