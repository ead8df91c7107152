"""An answer's tool calls in the transcript: one folded row per call (tool, server, status,
time), unfolded to its arguments and result; the call waiting for permission shows Allow once,
Always allow this tool and Deny. The same view shows a live turn (ui.chat.turns.tool_turns) and a
stored answer (its stats record's "tool_calls", read by core.chat.tools)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.tools import ToolRound, TracedCall, call_summary, trace_from_record
from qwen_mtp_desktop.ui.chat.transcript.text_views import FoldedText
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label, plain_tooltip

#: Characters of a result shown unfolded (the model got up to core.tools.mcp.client's bound).
SHOWN_RESULT = 4000


def call_details(call: TracedCall) -> str:
    result = call.result
    if len(result) > SHOWN_RESULT:
        result = result[:SHOWN_RESULT] + f"\n… ({len(result) - SHOWN_RESULT:,} more characters)"
    label = "Result" if call.status == "ok" else "Outcome"
    return f"Arguments:\n{call.arguments_shown}\n\n{label}:\n{result or '(none yet)'}"


class ToolCallRow(FoldedText):
    """One call: a toggle with its summary, its details folded under it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(("toolCall", "toolCallToggle", "toolCallDetails"), "", parent)
        self.toggle.setAutoRaise(True)
        self.details = self.text

    def show_call(self, call: TracedCall) -> None:
        self.toggle.setText(call_summary(call))
        # The model's tool name and arguments: shown as typed, never as HTML.
        self.toggle.setToolTip(plain_tooltip(f"{call.function}: {call.arguments[:300]}"))
        self.details.setPlainText(call_details(call))


class ToolCallsView(QFrame):
    """Signals: decided(str): the user's answer to the call waiting for permission ("once",
    "always" or "deny")."""

    decided = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCalls")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self.rows: list[ToolCallRow] = []
        self.consent = QFrame()
        self.consent.setObjectName("toolConsent")
        consent = QVBoxLayout(self.consent)
        consent.setContentsMargins(8, 4, 8, 4)
        self.question = plain_label(QLabel())  # the model's tool name and arguments
        self.question.setWordWrap(True)
        buttons = QHBoxLayout()
        self.allow_once = QPushButton("Allow once")
        self.allow_always = QPushButton("Always allow this tool")
        self.deny = QPushButton("Deny")
        for button, answer in (
            (self.allow_once, "once"),
            (self.allow_always, "always"),
            (self.deny, "deny"),
        ):
            button.clicked.connect(lambda _=False, a=answer: self.decided.emit(a))
            buttons.addWidget(button)
        buttons.addStretch(1)
        consent.addWidget(self.question)
        consent.addLayout(buttons)
        self.consent.setVisible(False)
        self._layout.addWidget(self.consent)

    def show_rounds(self, rounds: Sequence[ToolRound]) -> None:
        """Every call of these rounds, in order; rows keep their folding."""
        calls = [call for done in rounds for call in done.calls]
        while len(self.rows) < len(calls):
            row = ToolCallRow()
            self._layout.insertWidget(len(self.rows), row)
            self.rows.append(row)
        while len(self.rows) > len(calls):
            self.rows.pop().deleteLater()
        for row, call in zip(self.rows, calls, strict=True):
            row.show_call(call)
        asking = next((c for c in calls if c.status == "asking"), None)
        self.consent.setVisible(asking is not None)
        if asking is not None:
            self.question.setText(
                f"The model wants to run {asking.tool!r} from {asking.server!r} with "
                f"{_short(asking.arguments)}. Allow it?"
            )
            self.allow_once.setFocus()
        self.setVisible(bool(calls))


def _short(arguments: str, limit: int = 200) -> str:
    text = " ".join(arguments.split())
    return text if len(text) <= limit else text[:limit] + "…"


def view_of(widget: QWidget) -> ToolCallsView:
    """The message widget's tool calls view, made (above its text) when first needed."""
    view = widget.findChild(ToolCallsView)
    if view is None:
        view = ToolCallsView()
        widget.add_section(view)  # type: ignore[attr-defined]
    return view


def show_stored_calls(widget: QWidget, stats: dict[str, Any]) -> None:
    """A stored answer's tool calls (its stats record), folded."""
    rounds = trace_from_record(stats.get("tool_calls"))
    if rounds or widget.findChild(ToolCallsView) is not None:
        view_of(widget).show_rounds(rounds)
