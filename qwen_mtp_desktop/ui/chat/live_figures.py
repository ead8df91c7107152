"""The answer being streamed and the figures line under the transcript: live tok/s, TTFT and
MTP acceptance while it streams, the last answer's figures after, or a problem."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel

from qwen_mtp_desktop.core.chat_session import Turn
from qwen_mtp_desktop.core.chats.records import StoredMessage
from qwen_mtp_desktop.core.decoding.stats import speculative_stats
from qwen_mtp_desktop.core.engine import LoadedModel, StepChunk
from qwen_mtp_desktop.core.units import keep_units
from qwen_mtp_desktop.ui.chat.message_widget import MessageWidget, format_stats
from qwen_mtp_desktop.ui.figures import LEGEND, stats_tooltip


class Stream:
    """The answer being generated: its widget, store id and text not yet written."""

    def __init__(self, request_id: int, widget: MessageWidget, turn: Turn) -> None:
        self.request_id = request_id
        self.widget = widget
        #: This answer's settings and, under Auto, its policy and decision.
        self.turn = turn
        self.settings = turn.settings
        self.message_id: int | None = None
        self.pending_answer: list[str] = []
        self.pending_reasoning: list[str] = []
        self.sizes: list[int] = []
        self.first_t: float | None = None
        self.last_t = 0.0
        self.started = time.monotonic()

    def take(self, chunks: list[StepChunk]) -> None:
        """Add a batch of chunks: one widget update per batch (its cost is per call)."""
        answer: list[str] = []
        reasoning: list[str] = []
        drafted: list[tuple[int, int]] = []
        offset = 0
        for chunk in chunks:
            if chunk.drafted_answer_chars:
                drafted.append((offset, offset + chunk.drafted_answer_chars))
            answer.append(chunk.answer)
            reasoning.append(chunk.reasoning)
            offset += len(chunk.answer)
            if chunk.token_ids:
                self.sizes.append(len(chunk.token_ids))
                if self.first_t is None:
                    self.first_t = chunk.elapsed_s
                self.last_t = chunk.elapsed_s
        answer_text, reasoning_text = "".join(answer), "".join(reasoning)
        self.widget.append(answer_text, reasoning_text, drafted)
        self.pending_answer.append(answer_text)
        self.pending_reasoning.append(reasoning_text)

    def take_pending(self) -> tuple[str, str]:
        """The text not yet written to the store (and forget it)."""
        answer, reasoning = "".join(self.pending_answer), "".join(self.pending_reasoning)
        self.pending_answer, self.pending_reasoning = [], []
        return answer, reasoning

    @property
    def has_pending(self) -> bool:
        return any(self.pending_answer) or any(self.pending_reasoning)

    def live_text(self, loaded: LoadedModel | None) -> str:
        """ "Generating · 41.2 tok/s · 37 tokens · TTFT 80 ms · MTP n=2 · 71% drafts accepted"."""
        tokens = sum(self.sizes)
        parts = [f"{tokens} tokens"]
        if self.first_t is not None:
            parts.append(f"TTFT {self.first_t * 1000:.0f} ms")
            span = self.last_t - self.first_t
            if span > 0 and len(self.sizes) > 1:
                parts.insert(0, f"{(tokens - self.sizes[0]) / span:.1f} tok/s")
        settings = self.settings
        if loaded is not None and settings.prompt_lookup:
            # Proposed drafts are counted at the end (core.decoding.prompt_lookup);
            # accepted ones show.
            accepted = tokens - len(self.sizes)
            parts.append(
                f"prompt lookup K={settings.num_assistant_tokens}: {accepted} drafts accepted"
            )
        elif loaded is not None and loaded.mode == "mtp" and not settings.plain:
            n = settings.num_assistant_tokens
            drafted, accepted, _ = speculative_stats(self.sizes, n, "mtp", settings.max_new_tokens)
            steps = len(self.sizes) - 1
            parts.append(f"MTP n={n}")
            if drafted:
                parts.append(
                    f"{accepted / drafted:.0%} drafts accepted ({accepted / steps:.2f}/step)"
                )
        elif loaded is not None:
            parts.append("plain decoding")
        return "Generating  ·  " + "  ·  ".join(parts)


class LiveFigures(QObject):
    """The figures line and, while figures show, the one-line legend explaining them (two
    labels the panel places: the line beside Compare, the legend under it)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setObjectName("liveStats")
        self.label.setWordWrap(True)
        self.label.setContentsMargins(20, 4, 20, 0)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # What the figures mean, one line, shown while figures are (tooltips say more).
        self.legend = QLabel(LEGEND)
        self.legend.setObjectName("legend")
        self.legend.setWordWrap(True)
        self.legend.setContentsMargins(20, 0, 20, 0)
        self.legend.setVisible(False)

    def show_figures(self, text: str) -> None:
        """The live or last answer's figures, with the legend and a tooltip explaining them."""
        self.label.setText(keep_units(text))
        self.label.setToolTip(stats_tooltip(text))
        self.legend.setVisible(True)

    def show_waiting(self) -> None:
        self.label.setText("Waiting for the first token…")

    def show_last(self, messages: list[StoredMessage]) -> None:
        """The figures of the shown branch's last answer, or none: never another version's
        or another chat's."""
        last = next((m for m in reversed(messages) if m.role == "assistant" and m.stats), None)
        if last is None or last.stats is None:
            self.clear()
        else:
            self.show_figures("Last answer  ·  " + format_stats(last.stats))

    def clear(self) -> None:
        self.label.setText("")
        self.label.setToolTip("")
        self.legend.setVisible(False)

    def show_problem(self, text: str, severity: str = "error") -> None:
        self.label.setText(("Warning: " if severity == "warning" else "Problem: ") + text)
        self.label.setToolTip("")
        self.legend.setVisible(False)
