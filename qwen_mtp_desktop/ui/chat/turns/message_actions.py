"""What the user does to messages: edit a question in place, answer again, continue an answer
that ended early, switch versions, delete with Undo, and the keyboard's ways to the same (Up in
the empty composer, Ctrl+R, Alt+Left/Right). Each action is one store call through the chat's
ConversationController (an answer again or continued goes through the TurnController, which
starts it); the panel redraws from the shown branch the store returns (`ChatView.show_branch`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices

from qwen_mtp_desktop.core.chat.store.records import DeletedMessage, StoredMessage
from qwen_mtp_desktop.ui.chat.banners import UndoBar
from qwen_mtp_desktop.ui.chat.conversations.open_chat import ConversationController
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.chat.transcript.view import Transcript
from qwen_mtp_desktop.ui.chat.turns.controller import TurnController
from qwen_mtp_desktop.ui.chat.turns.live_figures import LiveFigures


class ChatView(Protocol):
    """What the actions need of the chat panel's view (ChatPanel offers it)."""

    transcript: Transcript
    undo_bar: UndoBar
    figures: LiveFigures

    def show_branch(self, branch: list[StoredMessage]) -> None:
        """Redraw the transcript for a new shown branch."""
        ...

    def sync_controls(self) -> None:
        """The example prompts and Compare follow the transcript."""
        ...


class MessageActions:
    """The message actions of one chat."""

    def __init__(
        self,
        view: ChatView,
        chats: ConversationController,
        turns: TurnController,
        log_file: Path,
    ) -> None:
        self._view = view
        self._chats = chats
        self._turns = turns
        self._log_file = log_file
        #: How a file is shown (an error's "Open log"); tests replace it.
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl

    def on_action(self, widget: MessageWidget, action: str) -> None:
        if action == "copy":
            widget.copy_text()
            return
        if action == "open-log":
            self.open_url(QUrl.fromLocalFile(str(self._log_file)))
            return
        if self._turns.running or widget.message_id is None:
            return
        if action == "delete":
            self.delete(widget)
        elif action == "regenerate":
            self.regenerate_from(widget)
        elif action == "continue":
            self._turns.continue_answer(widget)
        elif action == "edit":
            widget.begin_edit()

    def delete(self, widget: MessageWidget) -> None:
        """Delete at once (the figures with it), then offer Undo; the store's answer may show
        another version in its place."""
        assert widget.message_id is not None
        message_id = widget.message_id
        self._chats.messages = [m for m in self._chats.messages if m.id != message_id]
        self._view.transcript.remove_message(widget)
        # The deleted answer's figures must not stay.
        self._view.figures.show_last(self._chats.messages)
        self._view.sync_controls()

        def deleted(snapshot: DeletedMessage) -> None:
            self._view.show_branch(self._chats.messages)
            what = "Answer" if widget.role == "assistant" else "Message"
            self._view.undo_bar.offer(
                f"{what} deleted.",
                lambda: self._chats.restore_message(snapshot, self._view.show_branch),
            )

        self._chats.delete_message(message_id, deleted)

    def offer_continue(self, busy: bool) -> None:
        """Continue on the chat's last answer when it ended early, on no other, and on none
        while a turn (or Compare) runs (TurnController.may_continue)."""
        for widget in self._view.transcript.messages:
            stored = widget.stored
            offered = not busy and stored is not None and self._turns.may_continue(stored)
            widget.set_continuable(offered)

    def regenerate_from(self, assistant: MessageWidget) -> None:
        widgets = self._view.transcript.messages
        index = widgets.index(assistant)
        previous_user = next(
            (w for w in reversed(widgets[:index]) if w.role == "user" and w.message_id), None
        )
        if previous_user is None:
            return
        self.answer_again(previous_user)

    def edit_and_regenerate(self, user: MessageWidget, text: str) -> None:
        user.end_edit()
        if text == user.content:
            return  # nothing changed: no new version
        user.set_content(text)
        self.answer_again(user, text)

    def answer_again(self, user: MessageWidget, new_text: str | None = None) -> None:
        """Answer `user` again (after an edit, with its new text): what followed it becomes an
        earlier version, one store call (core.chat.turns.answer_again)."""
        if self._turns.running or user.message_id is None:
            return
        self._view.undo_bar.close()
        widgets = self._view.transcript.messages
        for widget in widgets[widgets.index(user) + 1 :]:
            self._view.transcript.remove_message(widget)
        self._turns.answer_again(user.message_id, new_text, self._view.show_branch)

    def switch_version(self, widget: MessageWidget, step: int) -> None:
        if self._turns.running or widget.message_id is None:
            return
        self._view.undo_bar.close()
        self._chats.switch_version(widget.message_id, step, self._view.show_branch)

    def edit_last(self) -> None:
        """Up in the empty composer: edit the last message of the user's in place."""
        if self._turns.running:
            return
        user = next(
            (
                w
                for w in reversed(self._view.transcript.messages)
                if w.role == "user" and w.message_id
            ),
            None,
        )
        if user is not None:
            user.begin_edit()
            self._view.transcript.ensureWidgetVisible(user)

    def regenerate_last(self) -> None:
        answer = self.last_answer()
        if answer is not None and not self._turns.running:
            self.regenerate_from(answer)

    def switch_last_answer(self, step: int) -> None:
        answer = self.last_answer()
        if answer is not None:
            self.switch_version(answer, step)

    def last_answer(self) -> MessageWidget | None:
        return next(
            (
                w
                for w in reversed(self._view.transcript.messages)
                if w.role == "assistant" and w.message_id
            ),
            None,
        )
