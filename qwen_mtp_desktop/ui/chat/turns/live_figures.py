"""The figures line under the transcript: live tok/s, TTFT and MTP acceptance while an answer
streams (ui.chat.turns.controller.Stream makes them), the last answer's legend after, or a
problem."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QLabel

from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.units import keep_units
from qwen_mtp_desktop.ui.figures import LEGEND, stats_tooltip
from qwen_mtp_desktop.ui.widgets.elided_label import ElidedLabel
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label


class LiveFigures(QObject):
    """The figures line while an answer streams (live tok/s, TTFT, acceptance) or a problem,
    and the legend explaining the figures under the answers, one line (it is elided; the whole
    text is its tooltip). A finished answer's figures are on its own stats line only, never
    repeated here. Two labels the panel places: the line beside Compare, the legend under it.

    Signals:
        last_answer(object): a chat or branch was shown: its last answer's stats record (a
            dict), or None when it has no answer (the status bar's "last answer").
    """

    last_answer = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        # Plain: a problem quotes tool and server errors (MCP stderr, a remote's message).
        self.label = plain_label(QLabel())
        self.label.setObjectName("liveStats")
        self.label.setWordWrap(True)
        self.label.setContentsMargins(20, 4, 20, 0)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setVisible(False)
        # What the figures mean, one line, shown while figures are (tooltips say more).
        self.legend = ElidedLabel(LEGEND)
        self.legend.setObjectName("legend")
        self.legend.setContentsMargins(20, 0, 20, 0)
        self.legend.setVisible(False)

    def _set(self, text: str, tooltip: str = "") -> None:
        self.label.setText(text)
        self.label.setToolTip(tooltip)
        self.label.setVisible(bool(text))

    def show_figures(self, text: str) -> None:
        """The live answer's figures, with the legend and a tooltip explaining them."""
        self._set(keep_units(text), stats_tooltip(text))
        self.legend.setVisible(True)

    def show_waiting(self) -> None:
        self._set("Waiting for the first token…")

    def answered(self) -> None:
        """The answer finished: its figures are on its own line now; the legend stays."""
        self._set("")
        self.legend.setVisible(True)

    def show_last(self, messages: list[StoredMessage]) -> None:
        """A chat or branch shown: the legend while one of its answers shows figures."""
        self._set("")
        self.legend.setVisible(any(m.role == "assistant" and m.stats for m in messages))
        answers = [m for m in messages if m.role == "assistant"]
        self.last_answer.emit(answers[-1].stats if answers and answers[-1].stats else None)

    def clear(self) -> None:
        self._set("")
        self.legend.setVisible(False)

    def show_problem(self, text: str, severity: str = "error") -> None:
        self._set(("Warning: " if severity == "warning" else "Problem: ") + text)
        self.legend.setVisible(False)
