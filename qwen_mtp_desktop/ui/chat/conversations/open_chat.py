"""The open chat and its store: every chat-store operation the chat panel makes, one trip to the
store's TaskRunner thread per user action, and the chat's shown branch kept in step.

No SQL runs on the GUI thread: each method submits one function to the runner and hands its
result to a callback on the GUI thread. A failure goes to `failed` (one error path).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from qwen_mtp_desktop.core.chat.store.records import (
    ChatSettings,
    Conversation,
    ConversationSummary,
    DeletedConversation,
    DeletedMessage,
    MessageStatus,
    StoredMessage,
)
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.turns import answer_again, start_conversation, start_turn
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Writes a finished or failed answer: (store, message id, last answer text, last reasoning).
AnswerWrite = Callable[[ChatStore, int, str, str], Any]


class ConversationController(QObject):
    """The chat the panel shows: `conversation` (None for a new chat) and `messages`, its shown
    branch (the answer being streamed joins it when it ends).

    Signals:
        ready(ChatStore): the store opened.
        open_failed(str): the store could not be opened.
        failed(str): a store operation failed (what to tell the user).
    """

    ready = Signal(object)
    open_failed = Signal(str)
    failed = Signal(str)

    def __init__(self, runner: TaskRunner, database: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.store: ChatStore | None = None
        self.conversation: Conversation | None = None
        self.messages: list[StoredMessage] = []
        #: Counts the chats shown (opened, created, cleared): see `_showing`.
        self._shown = 0
        runner.submit(lambda: ChatStore(database), self._opened, self._open_failed)

    # ------------------------------------------------------------------------ plumbing

    def _opened(self, store: ChatStore) -> None:
        self.store = store
        self.ready.emit(store)

    def _open_failed(self, exc: Exception) -> None:
        log.error("chat store failed to open: %s", exc)
        self.open_failed.emit(f"Chat history could not be opened: {exc}")

    def _error(self, exc: Exception) -> None:
        log.error("chat store operation failed: %s", exc)
        self.failed.emit(f"A chat could not be saved or read: {exc}")

    def _require_store(self) -> ChatStore:
        if self.store is None:
            raise RuntimeError("the chat store is not open yet")
        return self.store

    def submit(
        self,
        work: Callable[[ChatStore], T],
        done: Callable[[T], None] | None = None,
    ) -> None:
        """Run `work(store)` on the store thread, then `done(result)` here."""
        store = self._require_store()
        self.runner.submit(lambda: work(store), done, self._error)

    def is_current(self, conversation_id: int) -> bool:
        return self.conversation is not None and self.conversation.id == conversation_id

    # ------------------------------------------------------------------------ chats

    def list_chats(
        self, search: str | None, done: Callable[[list[ConversationSummary]], None]
    ) -> None:
        self.submit(lambda store: store.list_conversations(search), done)

    def clear(self) -> None:
        """A new, not yet stored chat."""
        self.conversation = None
        self.messages = []
        self._shown += 1

    def _showing(self) -> Callable[[], bool]:
        """Whether the chat shown now is still the one shown when this was asked. Not object
        identity: a settings change replaces the open chat's `Conversation` (`updated`) while
        its messages stay, and a message stored meanwhile must still join them."""
        shown = self._shown
        return lambda: shown == self._shown

    def open(
        self, conversation_id: int, done: Callable[[Conversation, list[StoredMessage]], None]
    ) -> None:
        def shown(loaded: tuple[Conversation, list[StoredMessage]]) -> None:
            self.conversation, messages = loaded
            self.messages = list(messages)
            self._shown += 1
            done(*loaded)

        self.submit(
            lambda store: (
                store.get_conversation(conversation_id),
                store.messages(conversation_id),
            ),
            shown,
        )

    def rename(
        self, conversation_id: int, title: str, done: Callable[[Conversation], None]
    ) -> None:
        self.submit(lambda store: store.rename(conversation_id, title), done)

    def set_pinned(
        self, conversation_id: int, pinned: bool, done: Callable[[Conversation], None]
    ) -> None:
        self.submit(lambda store: store.set_pinned(conversation_id, pinned), done)

    def delete_chat(
        self, conversation_id: int, done: Callable[[DeletedConversation], None]
    ) -> None:
        def deleted(snapshot: DeletedConversation) -> None:
            if self.is_current(snapshot.conversation.id):
                self.clear()
            done(snapshot)

        self.submit(lambda store: store.delete(conversation_id), deleted)

    def restore_chat(
        self, deleted: DeletedConversation, done: Callable[[Conversation], None]
    ) -> None:
        self.submit(lambda store: store.restore(deleted), done)

    def export(self, conversation_id: int, path: Path, markdown: bool) -> None:
        def write(store: ChatStore) -> None:
            from qwen_mtp_desktop.core.files.fileio import write_user_file

            text = (store.export_markdown if markdown else store.export_json)(conversation_id)
            write_user_file(path, text)

        self.submit(write)

    def save_settings(self, settings: ChatSettings, done: Callable[[Conversation], None]) -> None:
        if self.conversation is not None:
            conversation_id = self.conversation.id
            self.submit(lambda store: store.update_settings(conversation_id, settings), done)

    def save_system_prompt(self, text: str, done: Callable[[Conversation], None]) -> None:
        if self.conversation is not None:
            conversation_id = self.conversation.id
            self.submit(lambda store: store.set_system_prompt(conversation_id, text), done)

    def save_model_dir(self, model_dir: Path, done: Callable[[Conversation], None]) -> None:
        if self.conversation is not None:
            conversation_id = self.conversation.id
            self.submit(lambda store: store.set_model_dir(conversation_id, str(model_dir)), done)

    def updated(self, conversation: Conversation) -> bool:
        """Take a stored change of the open chat; whether it was the open one."""
        if self.is_current(conversation.id):
            self.conversation = conversation
            return True
        return False

    # ------------------------------------------------------------------------ turns

    def send(
        self,
        text: str,
        image: Path | None,
        *,
        model_dir: str,
        system_prompt: str,
        settings: ChatSettings,
        done: Callable[[StoredMessage, StoredMessage], None],
    ) -> None:
        """Store the user's message (and, for a new chat, the chat) and begin its answer."""
        if self.conversation is None:

            def created(result: tuple[Conversation, StoredMessage, StoredMessage]) -> None:
                conversation, user, answer = result
                self.conversation = conversation
                self.messages = [user]
                self._shown += 1
                done(user, answer)

            self.submit(
                lambda store: start_conversation(
                    store,
                    text,
                    image,
                    model_dir=model_dir,
                    system_prompt=system_prompt,
                    settings=settings,
                ),
                created,
            )
            return
        conversation = self.conversation
        still_shown = self._showing()

        def stored(result: tuple[StoredMessage, StoredMessage]) -> None:
            if still_shown():
                self.messages.append(result[0])
            done(*result)

        self.submit(lambda store: start_turn(store, conversation.id, text, image), stored)

    def answer_again(
        self,
        message_id: int,
        new_text: str | None,
        done: Callable[[list[StoredMessage], StoredMessage], None],
    ) -> None:
        """Regenerate from a question (with `new_text`: edit it first); earlier versions stay."""

        def begun(result: tuple[list[StoredMessage], StoredMessage]) -> None:
            branch, answer = result
            if self.is_current(answer.conversation_id):
                self.messages = branch
            done(branch, answer)

        self.submit(lambda store: answer_again(store, message_id, new_text), begun)

    def switch_version(
        self, message_id: int, step: int, done: Callable[[list[StoredMessage]], None]
    ) -> None:
        still_shown = self._showing()

        def switched(branch: list[StoredMessage]) -> None:
            if still_shown():
                self.messages = branch
                done(branch)

        self.submit(lambda store: store.switch_version(message_id, step), switched)

    def delete_message(self, message_id: int, done: Callable[[DeletedMessage], None]) -> None:
        """Delete a message; `done` gets what undo needs. The shown branch is read again with
        it, so a version shown in its place (and its stats) comes back at once."""
        still_shown = self._showing()

        def deleted(result: tuple[DeletedMessage, list[StoredMessage]]) -> None:
            if still_shown():
                self.messages = result[1]
                done(result[0])

        self.submit(
            lambda store: (
                snapshot := store.delete_message(message_id),
                store.messages(snapshot.conversation.id),
            ),
            deleted,
        )

    def restore_message(
        self, deleted: DeletedMessage, done: Callable[[list[StoredMessage]], None]
    ) -> None:
        def restored(branch: list[StoredMessage]) -> None:
            if self.is_current(deleted.conversation.id):
                self.messages = branch
                done(branch)

        self.submit(lambda store: store.restore_messages(deleted), restored)

    def resume(self, message_id: int, done: Callable[[StoredMessage], None]) -> None:
        """An ended answer streaming again (Continue): `done` gets it once the store has it."""
        still_shown = self._showing()

        def resumed(message: StoredMessage) -> None:
            if still_shown():
                done(message)
                return
            # The user left the chat meanwhile: the answer ends again as it was.
            stats = message.stats
            status: MessageStatus = "complete" if stats is not None else "incomplete"
            model = stats.get("model") if stats is not None else None
            self.submit(lambda store: store.finish_message(message.id, stats, status, model=model))

        self.submit(lambda store: store.resume_message(message_id), resumed)

    def discard_answer(self, answer_id: int) -> None:
        """An answer begun for a chat the user has left: nothing will be written to it."""
        self.submit(lambda store: store.delete_message(answer_id))

    # ------------------------------------------------------------------------ streaming

    def append(self, message_id: int, answer: str, reasoning: str) -> None:
        self.submit(lambda store: store.append_to_message(message_id, answer, reasoning))

    def finish(
        self,
        message_id: int,
        write: AnswerWrite,
        answer: str,
        reasoning: str,
        done: Callable[[], None],
    ) -> None:
        """Write the answer's end (its last text) with `write`, then add it to the shown
        branch if its chat is still the one open."""
        still_shown = self._showing()

        def finish(store: ChatStore) -> StoredMessage:
            write(store, message_id, answer, reasoning)
            return store.get_message(message_id)

        def finished(message: StoredMessage) -> None:
            if still_shown():  # a continued answer takes its own place
                self.messages = [m for m in self.messages if m.id != message.id] + [message]
            done()

        self.submit(finish, finished)
