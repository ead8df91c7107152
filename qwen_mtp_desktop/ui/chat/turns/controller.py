"""A chat's turns of the model, one at a time: `TurnController` starts each (after a message is
sent, or to answer a question again), streams it into its message widget, writes it to the
store as it comes, stops it, and ends it with its stats or its error. `Stream` is the answer
being written.

The chat panel and its message actions call this object; what the panel shows around a turn
(the Send/Stop button, the picker, the figures line) follows its signals.

Streamed text reaches the database at most every STORE_FLUSH_MS, so a crash loses at most that
much of an answer, and the store marks the answer incomplete on the next start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from qwen_mtp_desktop.core.chat.continuation import can_continue, continued_from
from qwen_mtp_desktop.core.chat.store.records import ChatSettings, StoredMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.turns import Turn, chat_history, single_turn
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import DraftTally, GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, LoadedModel, Message, StepChunk
from qwen_mtp_desktop.core.models.library import is_demo_model
from qwen_mtp_desktop.core.prompt.context_limit import CHAT_OVERFLOW_FIX
from qwen_mtp_desktop.core.units import count, join_figures, ttft_text
from qwen_mtp_desktop.ui.chat.conversations.open_chat import AnswerWrite, ConversationController
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget, stopped_notice
from qwen_mtp_desktop.ui.chat.turns.model_session import ModelSession
from qwen_mtp_desktop.workers.model_router import ModelRouter, is_remote

STORE_FLUSH_MS = 500

#: The panel's part in starting a turn: the answer's widget, added to the transcript.
AnswerWidget = Callable[[StoredMessage], MessageWidget]


class TurnTools(Protocol):
    """A turn's tool loop (ui.chat.turns.tool_turns offers it): offered tools before a turn starts,
    continuing a turn whose answer called tools, the calls kept in the answer's record, and
    Stop while a tool waits or runs."""

    def plan(self, turn: Turn, history: list[Message]) -> Turn: ...

    def take_over(self, stream: Stream, stats: GenerationStats) -> bool: ...

    def annotate(self, stream: Stream, record: dict[str, object]) -> None: ...

    def stop(self) -> bool: ...


class Stream:
    """The answer being generated: its widget, store id and text not yet written."""

    def __init__(self, request_id: int, widget: MessageWidget, turn: Turn) -> None:
        self.request_id = request_id
        self.widget = widget
        #: This answer's settings and, under Auto, its policy and decision.
        self.turn = turn
        self.settings = turn.settings
        self.message_id: int | None = None
        #: A continued answer's "continued" record entry (core.chat.continuation), else None.
        self.continued: dict[str, object] | None = None
        self.pending_answer: list[str] = []
        self.pending_reasoning: list[str] = []
        self.sizes: list[int] = []
        self.tokens = 0  # sum(sizes), kept as chunks arrive
        #: The live figures' draft counts: per batch, not per answer so far (issue 45, item 10).
        self._tally: DraftTally | None = None
        self.first_t: float | None = None
        self.last_t = 0.0
        self.started = time.monotonic()

    def take(self, chunks: list[StepChunk]) -> None:
        """Add a batch of chunks: one widget update per batch (its cost is per call)."""
        answer_text, reasoning_text = self.widget.append_chunks(chunks)
        for chunk in chunks:
            if chunk.token_ids:
                self.sizes.append(len(chunk.token_ids))
                self.tokens += len(chunk.token_ids)
                if self.first_t is None:
                    self.first_t = chunk.elapsed_s
                self.last_t = chunk.elapsed_s
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
        tokens = self.tokens
        parts = [count(tokens, "token")]
        if self.first_t is not None:
            parts.append(f"TTFT {ttft_text(self.first_t)}")
            span = self.last_t - self.first_t
            if span > 0 and len(self.sizes) > 1:
                parts.insert(0, f"{(tokens - self.sizes[0]) / span:.1f} tok/s")
        method = self.settings.method
        if loaded is not None and method.uses_mtp_head and not loaded.mtp:
            method = PLAIN  # no MTP head loaded: the engine decodes plain
        if loaded is None:
            pass
        elif method.drafts_vary:
            # Prompt lookup's proposed drafts are counted at the end
            # (core.decoding.prompt_lookup); accepted ones show.
            parts.append(f"{method.label}: {tokens - len(self.sizes)} drafts accepted")
        elif not method.is_plain:
            drafted, accepted = self._drafts(method)
            steps = len(self.sizes) - 1
            parts.append(method.label)
            if drafted:
                # At depth 1 a step keeps at most one guess: per step would repeat the share.
                per_step = f" ({accepted / steps:.2f}/step)" if method.drafts > 1 else ""
                parts.append(f"{accepted / drafted:.0%} drafts accepted{per_step}")
        else:
            parts.append(method.label)
        return "Generating  ·  " + join_figures(parts)

    def _drafts(self, method: DecodingMethod) -> tuple[int, int]:
        """(drafted, accepted) so far, as speculative_stats counts them, for the new steps only."""
        tally = self._tally
        if tally is None or tally.method != method:
            tally = self._tally = DraftTally(method, self.settings.max_new_tokens)
        tally.add(self.sizes[tally.steps :])
        return tally.drafted, tally.accepted


class TurnController(QObject):
    """The chat's turns: one runs at a time (`running`), through the chat's `ModelRouter`.

    Signals:
        started(): a turn began streaming into its widget (the chat is busy).
        figures(str): the running answer's live figures ("Generating  ·  41.2 tok/s · …").
        answered(dict): an answer finished (stopped ones too); its stats record.
        ended(bool): the turn ended: True when it finished or was stopped, False on a failure
            (the widget says what went wrong).
        stored(): an ended answer's last text and stats are in the store and the shown branch.
        problem(str): an engine failure that belongs to no running turn.
    """

    started = Signal()
    figures = Signal(str)
    answered = Signal(object)
    ended = Signal(bool)
    stored = Signal()
    problem = Signal(str)

    def __init__(
        self,
        router: ModelRouter,
        chats: ConversationController,
        model: ModelSession,
        answer_widget: AnswerWidget,
        parent: QObject | None = None,
        *,
        explain: Callable[[EngineError], EngineError] = lambda error: error,
    ) -> None:
        super().__init__(parent)
        self._router = router
        self._chats = chats
        self._model = model
        self._answer_widget = answer_widget
        #: A failed turn's error as the user reads it (a vanished model folder named).
        self._explain = explain
        self._stream: Stream | None = None
        #: The MCP tool loop, when the chat has one (the panel sets it).
        self.tools: TurnTools | None = None
        self._request_text = ""  # the running answer's request (acceptance health)
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(STORE_FLUSH_MS)
        self._flush_timer.timeout.connect(self.flush)
        router.chunks.connect(self._on_chunks)
        router.finished.connect(self._on_finished)
        router.failed.connect(self._on_failed)

    @property
    def running(self) -> bool:
        return self._stream is not None

    @property
    def stream(self) -> Stream | None:
        """The answer being written (None between turns)."""
        return self._stream

    # ------------------------------------------------------------------------ starting

    def send(
        self,
        text: str,
        image: Path | None,
        *,
        model_dir: Path,
        system_prompt: str,
        settings: ChatSettings,
        shown: Callable[[StoredMessage], None],
    ) -> None:
        """Store the user's message (and, for a new chat, the chat), then answer it; `shown`
        gets the stored message before its answer starts."""

        def begun(user: StoredMessage, answer: StoredMessage) -> None:
            shown(user)
            self.start(answer)

        self._chats.send(
            text,
            image,
            model_dir=str(model_dir),
            system_prompt=system_prompt,
            settings=settings,
            done=begun,
        )

    def answer_again(
        self,
        message_id: int,
        new_text: str | None,
        shown: Callable[[list[StoredMessage]], None],
    ) -> None:
        """Answer a question again (after an edit, with its new text): what followed it
        becomes an earlier version (core.chat.turns.answer_again); `shown` gets the new
        shown branch before the answer starts."""
        if self.running:
            return

        def begun(branch: list[StoredMessage], answer: StoredMessage) -> None:
            shown(branch)
            self.start(answer)

        self._chats.answer_again(message_id, new_text, begun)

    def may_continue(self, message: StoredMessage) -> bool:
        """Whether Continue is offered on `message` now: no turn runs, the answer ended early
        (core.chat.continuation), and the model is local (a server would start a new answer
        instead of writing on after the text)."""
        return (
            not self.running
            and not is_remote(self._model.model_dir)
            and can_continue(message, self._chats.messages)
        )

    def continue_answer(self, widget: MessageWidget) -> None:
        """Continue the answer `widget` shows where it ended (stopped, cut by the token limit
        or interrupted): the model writes on after its text, into the same message."""
        ended = widget.stored
        if ended is None or not self.may_continue(ended):
            return
        self._chats.resume(ended.id, lambda answer: self.start(answer, (widget, ended)))

    def start(
        self, answer: StoredMessage, continued: tuple[MessageWidget, StoredMessage] | None = None
    ) -> None:
        """Generate into `answer`, the empty message the store has begun for it: the one
        place a turn starts (send, regenerate and edit all come here). `continued`: the
        widget and the stored answer as it ended, which `answer` continues."""
        if self._chats.store is None:
            return
        conversation = self._chats.conversation
        if conversation is None or conversation.id != answer.conversation_id:
            # The user left that chat while its turn was being stored: no answer is coming.
            self._chats.discard_answer(answer.id)
            return
        self._model.ensure()
        # The model reads the shown branch: after a version switch, that version's turns
        # (a continued answer last, its text the start of what the model writes).
        history = chat_history(conversation.system_prompt, self._chats.messages)
        if is_demo_model(self._model.model_dir):
            history = single_turn(history)  # its answers go wrong with earlier turns
        turn = self._model.plan_turn(history)
        if continued is not None:
            turn.settings = replace(turn.settings, continue_final=True)
        elif self.tools is not None:
            turn = self.tools.plan(turn, history)
        # The request answered: the acceptance health check reads its workload kind.
        self._request_text = next((m.content for m in reversed(history) if m.role == "user"), "")
        request_id = self._router.start_generation(history, turn.settings)
        if continued is None:
            widget = self._answer_widget(answer)
        else:
            widget = continued[0]
            widget.resume_stream()  # its text stays; what follows streams after it
        stream = Stream(request_id, widget, turn)
        stream.message_id = widget.message_id = answer.id
        if continued is not None:
            stream.continued = continued_from(continued[1])
        self._stream = stream
        self._flush_timer.start()
        self.started.emit()

    # ------------------------------------------------------------------------ running

    def stop(self) -> None:
        """Stop the running answer at its next step; what it wrote is kept."""
        if self.tools is not None and self.tools.stop():
            return  # a tool was waiting or running: the answer ended as stopped
        if self._stream is not None:
            self._router.cancel(self._stream.request_id)

    def flush(self) -> None:
        """Write the streamed text the store does not have yet."""
        stream = self._stream
        if stream is None or not stream.has_pending or stream.message_id is None:
            return
        answer, reasoning = stream.take_pending()
        self._chats.append(stream.message_id, answer, reasoning)

    def close(self) -> None:
        """Stop the running answer and write what is pending (the window is closing)."""
        self.stop()
        self.flush()

    def _on_chunks(self, request_id: int, chunks: list[StepChunk]) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            return
        stream.take(chunks)
        remote = self._router.live_text(stream.request_id)
        if remote is not None:  # no token ids from a server: its figures come at the end
            self.figures.emit("Generating  ·  " + remote)
        else:
            self.figures.emit(stream.live_text(self._model.loaded))

    # ------------------------------------------------------------------------ ending

    def _on_finished(self, request_id: int, stats: GenerationStats) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            return
        if self.tools is not None and self.tools.take_over(stream, stats):
            return  # the answer called tools: they run, then the model goes on
        self.finish(stats)

    def finish(self, stats: GenerationStats) -> None:
        """End the running answer with `stats` (the engine's, or the tool loop's when it
        stops while a tool waits or runs)."""
        stream = self._stream
        if stream is None:
            return
        widget = stream.widget
        widget.end_stream()
        loaded = self._model.loaded
        record = stream.turn.finish(
            stats, loaded.model_dir if loaded else None, widget.drafted_ranges
        )
        if stream.continued is not None:
            record["continued"] = stream.continued  # the figures are the continuation's
        if self.tools is not None:
            self.tools.annotate(stream, record)
        widget.set_stats(record)
        self.answered.emit(record)
        self._model.observe(stats, self._request_text)
        if stats.finish_reason == "cancelled":
            widget.show_notice(stopped_notice(record))
        self._end(
            stream,
            lambda store, mid, a, r: store.finish_message(
                mid, record, "complete", model=record["model"], answer_delta=a, reasoning_delta=r
            ),
            answered=True,
        )

    def _on_failed(self, request_id: int, error: EngineError) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            self.problem.emit(error.message)
            return
        widget = stream.widget
        widget.end_stream()
        error = self._explain(error)
        if error.code == "CONTEXT_TOO_LONG":  # the chat has a choice the API has not
            error = EngineError(error.message, CHAT_OVERFLOW_FIX, code=error.code)
        widget.show_error(f"{error.message} {error.fix}".strip())  # its Open log: the details
        message = error.message

        def fail(store: ChatStore, message_id: int, answer: str, reasoning: str) -> None:
            if answer or reasoning:
                store.append_to_message(message_id, answer, reasoning)
            store.fail_message(message_id, message)

        self._end(stream, fail, answered=False)

    def _end(self, stream: Stream, write: AnswerWrite, *, answered: bool) -> None:
        self._stream = None
        self._flush_timer.stop()
        answer, reasoning = stream.take_pending()

        def done() -> None:
            # The widget now stands for the stored answer (version arrows, branch redraws).
            messages = self._chats.messages
            if messages and messages[-1].id == stream.message_id:
                stream.widget.stored = messages[-1]
            self.stored.emit()

        if stream.message_id is not None:
            self._chats.finish(stream.message_id, write, answer, reasoning, done)
        self.ended.emit(answered)


__all__ = ["STORE_FLUSH_MS", "AnswerWidget", "Stream", "TurnController", "TurnTools"]
