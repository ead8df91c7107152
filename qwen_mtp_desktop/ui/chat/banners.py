"""The notes above the transcript: the demo model's banner, the acceptance-health warning, and
the non-modal "deleted · Undo" bar."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from qwen_mtp_desktop.core.chat.turns import DEMO_SINGLE_TURN_NOTE
from qwen_mtp_desktop.core.measure.acceptance_health import HealthWarning
from qwen_mtp_desktop.core.measure.fullsize_figures import (
    DEMO_TOO_SMALL,
    demo_banner_note,
    full_size_details,
)
from qwen_mtp_desktop.core.models.library import DEMO_MODEL_NOTE
from qwen_mtp_desktop.core.settings.store import UI_DEMO_BANNER_HIDDEN

#: How long "Message deleted · Undo" stays (the next action in the chat also ends it).
UNDO_SECONDS = 12


class DemoBanner(QWidget):
    """What the demo model is, why MTP cannot win on it (with what MTP measured on a
    full-size model), and (once a chat has answers) why it reads one turn only. Dismissable:
    `dismissed` is remembered by the panel.

    Signals:
    discover_requested(): "Find a model" was clicked (the Discover list: downloads, exports).
    dismissed(): "Hide" was clicked.
    """

    discover_requested = Signal()
    dismissed = Signal()

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 0)
        self.frame = QFrame()
        self.frame.setObjectName("demoBanner")
        layout.addWidget(self.frame)
        row = QHBoxLayout(self.frame)
        row.setContentsMargins(14, 8, 10, 8)
        self.note = QLabel(DEMO_MODEL_NOTE)
        self.note.setWordWrap(True)
        # MTP looks useless on this model (Compare, Validate, Benchmark): say why up front.
        self.mtp_note = QLabel(demo_banner_note())
        self.mtp_note.setWordWrap(True)
        self.mtp_note.setObjectName("muted")
        self.mtp_note.setToolTip(f"{DEMO_TOO_SMALL}\n\n{full_size_details()}")
        self.turn_note = QLabel(DEMO_SINGLE_TURN_NOTE)
        self.turn_note.setWordWrap(True)
        self.turn_note.setObjectName("muted")
        self.turn_note.setVisible(False)
        texts = QVBoxLayout()
        texts.setSpacing(4)
        texts.addWidget(self.note)
        texts.addWidget(self.mtp_note)
        texts.addWidget(self.turn_note)
        # Discover, not the export wizard: an installed app cannot export, and a download
        # is the quicker way to a real model anyway.
        self.discover_button = QPushButton("Find a model…")
        self.discover_button.clicked.connect(self.discover_requested)
        self.hide_button = QPushButton("Hide")
        self.hide_button.setToolTip("Hide this note (it stays hidden)")
        self.hide_button.clicked.connect(self._on_hide)
        #: Where the dismissal is remembered (the app settings' ui_state; `remember_in`).
        self._state: dict[str, str] = {}
        buttons = QVBoxLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.discover_button)
        buttons.addWidget(self.hide_button)
        buttons.addStretch(1)
        row.addLayout(texts, 1)
        row.addLayout(buttons)

    def remember_in(self, ui_state: dict[str, str]) -> None:
        self._state = ui_state

    @property
    def hidden_by_user(self) -> bool:
        return self._state.get(UI_DEMO_BANNER_HIDDEN) == "1"

    def show_for(self, demo: bool) -> None:
        """Shown for the demo model until the user hides it."""
        self.setVisible(demo and not self.hidden_by_user)

    def _on_hide(self) -> None:
        self._state[UI_DEMO_BANNER_HIDDEN] = "1"
        self.setVisible(False)
        self.dismissed.emit()


class HealthBanner(QWidget):
    """Shown when live MTP acceptance fell far below the measured one.

    Signals: revalidate_requested(): "Re-validate" was clicked (the banner hides).
    """

    revalidate_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 0)
        self.frame = QFrame()
        self.frame.setObjectName("healthBanner")
        layout.addWidget(self.frame)
        row = QHBoxLayout(self.frame)
        row.setContentsMargins(14, 8, 10, 8)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.revalidate_button = QPushButton("Re-validate")
        self.revalidate_button.setToolTip(
            "Check MTP against plain decoding on this model again and measure its acceptance"
        )
        self.revalidate_button.clicked.connect(self._on_revalidate)
        row.addWidget(self.text, 1)
        row.addWidget(self.revalidate_button)
        self.setVisible(False)

    def show_warning(self, text: str) -> None:
        self.text.setText(text)
        self.setVisible(True)

    def show_health(self, warning: HealthWarning) -> None:
        """Live acceptance fell far below the measured one: say so, and what Revalidate checks."""
        self.revalidate_button.setToolTip(
            f"Check prompt lookup against plain decoding on the {warning.workload} prompts "
            "again and measure its acceptance there"
            if warning.reference.compares_workloads
            else "Check MTP against plain decoding on this model again and measure its acceptance"
        )
        self.show_warning(warning.text)

    def _on_revalidate(self) -> None:
        self.setVisible(False)
        self.revalidate_requested.emit()


class UndoBar(QFrame):
    """ "Message deleted · Undo": non-modal, above the composer, gone after UNDO_SECONDS or
    when the user does something else in the chat."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("undoBar")
        row = QHBoxLayout(self)
        row.setContentsMargins(20, 6, 20, 6)
        self.text = QLabel()
        self.text.setAccessibleName("Deleted")
        self.undo_button = QPushButton("Undo")
        self.undo_button.setToolTip("Put back what was deleted, exactly as it was")
        self.undo_button.clicked.connect(self._on_undo)
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self.close)
        row.addWidget(self.text, 1)
        row.addWidget(self.undo_button)
        row.addWidget(self.close_button)
        self._undo: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.close)
        self.setVisible(False)

    def offer(self, text: str, undo: Callable[[], None]) -> None:
        self.text.setText(text)
        self._undo = undo
        self.setVisible(True)
        self._timer.start(UNDO_SECONDS * 1000)

    @property
    def offering(self) -> bool:
        return self._undo is not None

    def close(self) -> bool:
        """Withdraw the offer (the deletion stays)."""
        self._undo = None
        self._timer.stop()
        self.setVisible(False)
        return True

    def _on_undo(self) -> None:
        undo = self._undo
        self.close()
        if undo is not None:
            undo()
