"""Compare: the same prompt decoded plain and with MTP, side by side, so a user sees MTP at work
on any model: both speeds, the drafted text tinted, and whether the two answers are the same.

It runs on the chat's engine process, one request after the other (plain first, so MTP does not
win by a warm cache alone), and ignores every other request's chunks (the chat's own work).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.chat.turns import chat_history, single_turn
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, Message, StepChunk
from qwen_mtp_desktop.core.measure.fullsize_figures import demo_mtp_note, full_size_details
from qwen_mtp_desktop.core.units import count, keep_units, ttft_text
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.figures import stats_tooltip
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label

if TYPE_CHECKING:
    from qwen_mtp_desktop.workers.engine_process import EngineProcess


def compare_history(
    system_prompt: str, messages: Sequence[StoredMessage], demo: bool
) -> list[Message]:
    """What Compare sends: the chat's shown branch up to its last message of the user's (for
    the demo model that message alone, as it reads chats)."""
    history = chat_history(system_prompt, messages)
    last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
    history = history[: last_user + 1]
    return single_turn(history) if history and demo else history


def compare_blocked(decodes_mtp: bool, messages: Sequence[StoredMessage], busy: bool) -> str:
    """Why Compare cannot run now ("" when it can): it needs a message to run, a model that
    decodes with MTP, and a free engine."""
    if not decodes_mtp:
        return "Compare needs a model that can decode with MTP."
    if not any(m.role == "user" for m in messages):
        return "Send a message first: Compare runs your last message again."
    if busy:
        return "Wait for the answer being written."
    return ""


def compared_methods(method: DecodingMethod) -> tuple[DecodingMethod, DecodingMethod]:
    """(plain, MTP) as Compare runs them for a chat that decodes with `method`: greedy (MTP
    decodes greedily; the repetition penalty stays), MTP at the chat's depth (n=1 when the
    chat runs another method)."""
    sampling = Sampling(repetition_penalty=method.sampling.repetition_penalty)
    depth = method.drafts if method.uses_mtp_head else 1
    return DecodingMethod.plain(sampling), DecodingMethod.mtp(depth, sampling)


COMPARE_TIP = (
    "Run your last message again with plain decoding and with MTP, side by side: "
    "both speeds, and the text MTP's guesses wrote"
)


def _per_step(stats: GenerationStats) -> str:
    """ " (1.62/step)" where it informs: at depth 1 a step keeps at most one guess, so the
    accepted share already says it."""
    return f" ({stats.mean_accepted_per_step:.2f}/step)" if stats.method.drafts > 1 else ""


def compare_summary(plain: GenerationStats, mtp: GenerationStats, same_text: bool) -> str:
    """One line: how much faster MTP was, how many drafts were kept, and whether the text
    is the same."""
    parts = []
    if plain.decode_tokens_per_s > 0 and mtp.decode_tokens_per_s > 0:
        ratio = mtp.decode_tokens_per_s / plain.decode_tokens_per_s
        parts.append(
            f"MTP wrote {ratio:.2f}x as fast as plain decoding "
            f"({mtp.decode_tokens_per_s:.1f} vs {plain.decode_tokens_per_s:.1f} tok/s)"
        )
    parts.append(f"{mtp.acceptance_rate:.0%} drafts accepted{_per_step(mtp)}")
    parts.append(
        "the same answer, as it should be"
        if same_text
        else "the answers differ (sampling, or a numerics difference: see Benchmark › Validate)"
    )
    return keep_units("  ·  ".join(parts))


class _Side(QFrame):
    """One column: a title, the streaming answer (drafts tinted) and its figures."""

    def __init__(self, title: str, dark: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareSide")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        heading = QLabel(title)
        heading.setObjectName("sectionTitle")
        self.answer = MessageWidget("assistant", dark=dark)
        self.answer.set_show_drafts(True)
        self.answer.keep_actions("copy")
        self.answer.action.connect(
            lambda action: self.answer.copy_text() if action == "copy" else None
        )
        self.status = QLabel("Waiting…")
        self.status.setObjectName("muted")
        self.status.setWordWrap(True)
        layout.addWidget(heading)
        layout.addWidget(self.answer)
        layout.addWidget(self.status)
        layout.addStretch(1)
        self.text = ""
        self.stats: GenerationStats | None = None

    def add(self, chunks: Sequence[StepChunk]) -> None:
        self.text += self.answer.append_chunks(chunks)[0]


class CompareDialog(QDialog):
    """Signals:
    compared(): both runs ended (finished or failed).
    """

    compared = Signal()

    def __init__(
        self,
        engine_process: EngineProcess,
        history: Sequence[Message],
        settings: GenerationSettings,
        parent: QWidget | None = None,
        *,
        dark: bool = False,
        demo: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare plain decoding and MTP")
        self.resize(900, 560)
        self._engine_process = engine_process
        self._history = list(history)
        self._settings = settings
        self._plain_method, self._mtp_method = compared_methods(settings.method)
        prompt = next((m.content for m in reversed(history) if m.role == "user"), "")
        intro = QLabel(
            f"The same message, decoded twice: plain (one token per step), then "
            f"{self._mtp_method.label} (the MTP head guesses ahead, the model keeps what it "
            f"would have written). Tinted text came from kept guesses.\n\n“{prompt}”"
        )
        intro.setWordWrap(True)
        self.plain = _Side("Plain decoding", dark)
        self.mtp = _Side(self._mtp_method.label, dark)
        columns = QWidget()
        row = QHBoxLayout(columns)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(16)
        row.addWidget(self.plain, 1)
        row.addWidget(self.mtp, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(columns)
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.summary.setObjectName("sectionTitle")
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # On the demo model MTP loses whatever it guesses: say why, and what it measured on
        # a model of real size, before the figures below are read as MTP's worth.
        self.demo_note = QLabel(demo_mtp_note() if demo else "")
        self.demo_note.setObjectName("muted")
        self.demo_note.setWordWrap(True)
        self.demo_note.setToolTip(full_size_details() if demo else "")
        self.demo_note.setVisible(demo)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(scroll, 1)
        layout.addWidget(self.summary)
        layout.addWidget(self.demo_note)
        layout.addWidget(self.buttons)
        self._request: int | None = None
        self._side: _Side | None = None
        self._connected = True
        self.running = False
        engine_process.chunks.connect(self._on_chunks)
        engine_process.finished.connect(self._on_finished)
        engine_process.failed.connect(self._on_failed)

    def start(self) -> None:
        self.running = True
        self._run(self.plain, replace(self._settings, method=self._plain_method, within_turn=None))

    def _run(self, side: _Side, settings: GenerationSettings) -> None:
        self._side = side
        side.status.setText("Writing…")
        side.answer.begin_stream()
        self._request = self._engine_process.start_generation(self._history, settings)

    def _on_chunks(self, request_id: int, chunks: list[StepChunk]) -> None:
        if request_id == self._request and self._side is not None:
            self._side.add(chunks)

    def _on_finished(self, request_id: int, stats: GenerationStats) -> None:
        side = self._side
        if request_id != self._request or side is None:
            return
        side.answer.end_stream()
        side.stats = stats
        figures = (
            f"{stats.decode_tokens_per_s:.1f} tok/s  ·  TTFT {ttft_text(stats.ttft_s)}  ·  "
            f"{count(stats.generated_tokens, 'token')}"
        )
        if not stats.method.is_plain:
            accepted = f"{stats.acceptance_rate:.0%} drafts accepted{_per_step(stats)}"
            figures = f"{accepted}  ·  {figures}"
        side.status.setText(keep_units(figures))
        side.status.setToolTip(stats_tooltip(figures))
        if side is self.plain:
            self._run(self.mtp, replace(self._settings, method=self._mtp_method, within_turn=None))
            return
        self._end()
        assert self.plain.stats is not None
        self.summary.setText(
            compare_summary(self.plain.stats, stats, self.plain.text == self.mtp.text)
        )

    def _on_failed(self, request_id: int, error: EngineError) -> None:
        side = self._side
        if request_id != self._request or side is None:
            return
        side.answer.end_stream()
        plain_label(side.status).setText(f"Failed: {error.message}")
        self.summary.setText("The comparison did not finish.")
        self._end()

    def _end(self) -> None:
        self._request = None
        self._side = None
        self.running = False
        self.compared.emit()

    def reject(self) -> None:
        if self._request is not None:
            self._engine_process.cancel(self._request)
        self._disconnect()
        super().reject()

    def _disconnect(self) -> None:
        if not self._connected:
            return
        self._connected = False
        for signal, slot in (
            (self._engine_process.chunks, self._on_chunks),
            (self._engine_process.finished, self._on_finished),
            (self._engine_process.failed, self._on_failed),
        ):
            signal.disconnect(slot)
