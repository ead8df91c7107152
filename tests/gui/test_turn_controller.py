"""The chat's turn object on its own (ui.chat.turns.controller.TurnController): the real engine
process on the demo model, a real SQLite store on its runner thread, real message widgets, no chat
panel.
A turn starts, streams into its widget and the store, stops mid-answer keeping its text, fails
(the engine process killed mid-answer) with its error in the widget and the store, and a
question is answered again as a second version."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.records import ChatSettings, StoredMessage
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.ui.chat.conversations.open_chat import ConversationController
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.chat.turns.controller import TurnController
from qwen_mtp_desktop.ui.chat.turns.model_session import ModelSession
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.model_router import ModelRouter, RemoteModels
from qwen_mtp_desktop.workers.tasks import TaskRunner

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

WAIT = 120_000
#: Greedy, plain decoding: the same answer every time (so a second version can be compared).
SETTINGS = ChatSettings(temperature=0.0, mtp=False, num_assistant_tokens=1, max_new_tokens=200)


@dataclass
class Turns:
    """A TurnController with its real collaborators, and what it emitted."""

    qtbot: QtBot
    engine_process: EngineProcess
    runner: TaskRunner
    chats: ConversationController
    turns: TurnController
    database: Path
    widgets: list[MessageWidget] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    ended: list[bool] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def send(self, text: str) -> StoredMessage:
        """Send `text`; the stored user message (the turn is then running)."""
        users: list[StoredMessage] = []
        with self.qtbot.waitSignal(self.turns.started, timeout=WAIT):
            self.turns.send(
                text,
                None,
                model_dir=demo_model_dir(),
                system_prompt="",
                settings=SETTINGS,
                shown=users.append,
            )
        assert self.turns.running
        return users[0]

    def wait_stored(self) -> None:
        self.qtbot.waitUntil(lambda: not self.turns.running, timeout=WAIT)
        self.qtbot.waitUntil(lambda: self.runner.pending == 0, timeout=WAIT)

    def stored_message(self, message_id: int) -> StoredMessage:
        """The message as the database has it (read on the store's runner, after the writes
        queued before it)."""
        store = self.chats.store
        assert store is not None
        read: list[StoredMessage] = []
        self.runner.submit(lambda: store.get_message(message_id), read.append)
        self.qtbot.waitUntil(lambda: bool(read), timeout=WAIT)
        return read[0]


@pytest.fixture
def harness(qtbot: QtBot, tmp_path: Path) -> Iterator[Turns]:
    engine_process = EngineProcess(coalesce_ms=30)
    runner = TaskRunner("chat-store")
    router = ModelRouter(engine_process, RemoteModels(runner))
    database = tmp_path / "chats.sqlite3"
    chats = ConversationController(runner, database)

    def chat_state() -> tuple[Path, ChatSettings, int]:
        conversation = chats.conversation
        return demo_model_dir(), SETTINGS, conversation.id if conversation else 0

    model = ModelSession(router, runner, chat_state)
    made: list[MessageWidget] = []

    def answer_widget(answer: StoredMessage) -> MessageWidget:
        widget = MessageWidget("assistant", dark=False)
        qtbot.addWidget(widget)
        widget.begin_stream()
        made.append(widget)
        return widget

    turns = TurnController(router, chats, model, answer_widget)
    harness = Turns(qtbot, engine_process, runner, chats, turns, database, made)
    turns.figures.connect(harness.figures.append)
    turns.answered.connect(harness.records.append)
    turns.ended.connect(harness.ended.append)
    turns.problem.connect(harness.problems.append)
    qtbot.waitUntil(lambda: chats.store is not None, timeout=WAIT)
    model.ensure()
    qtbot.waitUntil(lambda: model.loaded is not None, timeout=WAIT)
    yield harness
    turns.close()
    assert router.shutdown()
    store = chats.store
    if store is not None:
        runner.submit(store.close)
    assert runner.shutdown()
    assert engine_process.shutdown()


def test_a_turn_streams_into_its_widget_and_the_store(harness: Turns) -> None:
    user = harness.send("Count from 1 to 20.")
    stream = harness.turns.stream
    assert stream is not None and stream.message_id is not None
    harness.wait_stored()
    widget = harness.widgets[-1]
    assert widget.content.split()[:3] == ["1", "2", "3"]
    assert harness.ended == [True] and not harness.problems
    # Live figures while it streamed, then the stats record of what decoded it.
    assert harness.figures and all(f.startswith("Generating") for f in harness.figures)
    assert any("tokens" in f for f in harness.figures)
    (record,) = harness.records
    assert record["model_dir"] == str(demo_model_dir()) and record["generated_tokens"] > 0
    # The store has the whole answer, complete, and the widget stands for it.
    stored = harness.stored_message(stream.message_id)
    assert stored.content == widget.content and stored.status == "complete"
    assert (
        stored.stats is not None and stored.stats["generated_tokens"] == record["generated_tokens"]
    )
    assert harness.chats.messages[-1].id == stored.id and widget.stored == stored
    assert harness.chats.messages[0].id == user.id


def test_flush_writes_the_text_so_far_before_the_end(harness: Turns) -> None:
    harness.send("Count from 1 to 100.")
    stream = harness.turns.stream
    assert stream is not None and stream.message_id is not None
    message_id = stream.message_id
    partial: list[StoredMessage] = []

    def on_first_figures(_text: str) -> None:
        if partial or not harness.turns.running:
            return
        harness.turns.flush()  # what the flush timer does every STORE_FLUSH_MS
        store = harness.chats.store
        assert store is not None
        # The runner runs tasks in order: this read sees the append flush() queued.
        harness.runner.submit(lambda: store.get_message(message_id), partial.append)

    harness.turns.figures.connect(on_first_figures)
    harness.wait_stored()
    assert partial, "the answer ended before its first figures"
    final = harness.stored_message(message_id)
    assert partial[0].content and final.content.startswith(partial[0].content)
    assert partial[0].status != "complete" and final.status == "complete"


def test_stop_mid_answer_keeps_the_text_and_says_so(harness: Turns) -> None:
    harness.send("Count from 1 to 200.")
    stream = harness.turns.stream
    assert stream is not None and stream.message_id is not None
    harness.turns.figures.connect(lambda _text: harness.turns.stop())
    harness.wait_stored()
    widget = harness.widgets[-1]
    (record,) = harness.records
    assert record["finish_reason"] == "cancelled"
    assert record["generated_tokens"] < SETTINGS.max_new_tokens
    assert harness.ended == [True]
    assert "Stopped. The answer so far is kept." in widget.error_label.text()
    stored = harness.stored_message(stream.message_id)
    assert stored.content == widget.content and stored.content.startswith("1")
    assert stored.status == "complete" and stored.stats is not None


def long_question(seed: int) -> str:
    """About 17,000 tokens: the demo model reads it for seconds before its first token."""
    return " ".join(f"word{(i * seed) % 97}" for i in range(6000))


def test_stop_while_a_long_question_is_read_ends_the_turn_and_says_so(harness: Turns) -> None:
    """Stop during the prefill stops the model call itself (the engine process's decoder),
    instead of waiting for the prompt to be read and the first token to come."""
    harness.send(long_question(1))
    harness.wait_stored()
    reading_s = harness.records[-1]["ttft_s"]  # how long such a question takes to read here
    harness.send(long_question(2))
    QTimer.singleShot(int(reading_s * 1000 * 0.3), harness.turns.stop)
    harness.wait_stored()
    record = harness.records[-1]
    assert record["finish_reason"] == "cancelled"
    assert record["generated_tokens"] == 0  # the prefill call was stopped: no first token
    widget = harness.widgets[-1]
    assert "Stopped while the prompt was being read" in widget.error_label.text()
    assert "TTFT" not in widget.stats_label.text()  # no first token, so no time to it
    assert widget.content == ""
    harness.send("Count from 1 to 5.")  # the engine is free at once
    harness.wait_stored()
    assert harness.records[-1]["finish_reason"] in ("eos", "length")
    assert harness.widgets[-1].content


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_failed_turn_keeps_its_text_and_stores_its_error(harness: Turns) -> None:
    harness.send("Count from 1 to 200.")
    stream = harness.turns.stream
    assert stream is not None and stream.message_id is not None
    killed: list[int] = []

    def kill_on_first_text(_text: str) -> None:
        pid = harness.engine_process.pid
        if not killed and pid is not None:
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)  # a native crash, as far as the window can tell

    harness.turns.figures.connect(kill_on_first_text)
    harness.wait_stored()
    assert killed and harness.ended == [False] and not harness.records
    widget = harness.widgets[-1]
    assert "inference engine stopped" in widget.error_label.text()
    stored = harness.stored_message(stream.message_id)
    assert stored.status != "complete" and stored.error
    assert stored.content == widget.content and stored.content.startswith("1")
    # The restarted engine reloads the model; the next turn runs there.
    harness.qtbot.waitUntil(lambda: harness.engine_process.loaded_model is not None, timeout=WAIT)
    harness.send("Count from 1 to 5.")
    harness.wait_stored()
    assert harness.ended == [False, True]


def test_answer_again_is_a_second_version_and_waits_for_the_running_turn(
    harness: Turns,
) -> None:
    user = harness.send("Count from 1 to 10.")
    begun: list[list[StoredMessage]] = []
    harness.turns.answer_again(user.id, None, begun.append)  # one turn at a time: refused
    harness.wait_stored()
    assert not begun and len(harness.widgets) == 1
    first = harness.widgets[0]

    with harness.qtbot.waitSignal(harness.turns.started, timeout=WAIT):
        harness.turns.answer_again(user.id, None, begun.append)
    (branch,) = begun
    assert [m.id for m in branch] == [user.id]  # the earlier answer is a version now
    harness.wait_stored()
    again = harness.widgets[-1]
    assert again is not first and again.content == first.content  # greedy: the same answer
    answer = harness.chats.messages[-1]
    assert (answer.version, answer.version_count) == (2, 2)
    assert harness.ended == [True, True]


def test_stop_while_the_question_waits_for_the_engine_ends_it_as_stopped(harness: Turns) -> None:
    """A question queued behind other work (here another answer; a model loading is the
    same queue) and stopped there ends as a stopped answer, not as a failure."""
    from qwen_mtp_desktop.core.engine import GenerationSettings, Message

    engine = harness.engine_process
    busy = engine.start_generation(
        [Message("user", long_question(3))], GenerationSettings(max_new_tokens=4)
    )
    harness.send("Count from 1 to 5.")
    harness.turns.stop()
    harness.wait_stored()
    engine.cancel(busy)
    (record,) = harness.records
    assert record["finish_reason"] == "cancelled"
    assert record["generated_tokens"] == 0 and record["prompt_tokens"] == 0
    assert harness.ended == [True] and not harness.problems
    widget = harness.widgets[-1]
    assert "Stopped before the model began to read the prompt." in widget.error_label.text()
    assert "TTFT" not in widget.stats_label.text()
    stream_message = harness.chats.messages[-1]
    stored = harness.stored_message(stream_message.id)
    assert stored.status == "complete" and stored.stats is not None
    harness.send("Count from 1 to 5.")  # the engine answers the next question
    harness.wait_stored()
    assert harness.records[-1]["finish_reason"] in ("eos", "length")
