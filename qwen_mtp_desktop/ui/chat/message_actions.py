"""What the user does to messages: edit a question in place, answer again, switch versions,
delete with Undo, and the keyboard's ways to the same (Up in the empty composer, Ctrl+R,
Alt+Left/Right). Each action is one store call through the panel's ConversationController;
the panel redraws from the shown branch the store returns (ChatPanel._show_branch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwen_mtp_desktop.core.chats.records import DeletedMessage, StoredMessage
from qwen_mtp_desktop.ui.chat.message_widget import MessageWidget

if TYPE_CHECKING:
    from qwen_mtp_desktop.ui.chat.chat_panel import ChatPanel


class MessageActions:
    """The message actions of one chat panel."""

    def __init__(self, panel: ChatPanel) -> None:
        self._panel = panel

    def on_action(self, widget: MessageWidget, action: str) -> None:
        if action == "copy":
            widget.copy_text()
            return
        if self._panel.generating or widget.message_id is None:
            return
        if action == "delete":
            self.delete(widget)
        elif action == "regenerate":
            self.regenerate_from(widget)
        elif action == "edit":
            widget.begin_edit()

    def delete(self, widget: MessageWidget) -> None:
        """Delete at once (the figures with it), then offer Undo; the store's answer may show
        another version in its place."""
        assert widget.message_id is not None
        message_id = widget.message_id
        self._panel._chats.messages = [m for m in self._panel._messages if m.id != message_id]
        self._panel.transcript.remove_message(widget)
        # The deleted answer's figures must not stay.
        self._panel.figures.show_last(self._panel._messages)
        self._panel._sync_examples()
        self._panel._sync_compare()

        def deleted(snapshot: DeletedMessage) -> None:
            self._panel._show_branch(self._panel._messages)
            what = "Answer" if widget.role == "assistant" else "Message"
            self._panel.undo_bar.offer(
                f"{what} deleted.",
                lambda: self._panel._chats.restore_message(snapshot, self._panel._show_branch),
            )

        self._panel._chats.delete_message(message_id, deleted)

    def regenerate_from(self, assistant: MessageWidget) -> None:
        widgets = self._panel.transcript.messages
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
        earlier version, one store call (core.chat_session.answer_again)."""
        if self._panel.generating or user.message_id is None:
            return
        self._panel.undo_bar.close()
        widgets = self._panel.transcript.messages
        for widget in widgets[widgets.index(user) + 1 :]:
            self._panel.transcript.remove_message(widget)

        def begun(branch: list[StoredMessage], answer: StoredMessage) -> None:
            self._panel._show_branch(branch)
            self._panel._start_generation(answer)

        self._panel._chats.answer_again(user.message_id, new_text, begun)

    def switch_version(self, widget: MessageWidget, step: int) -> None:
        if self._panel.generating or widget.message_id is None:
            return
        self._panel.undo_bar.close()
        self._panel._chats.switch_version(widget.message_id, step, self._panel._show_branch)

    def edit_last(self) -> None:
        """Up in the empty composer: edit the last message of the user's in place."""
        if self._panel.generating:
            return
        user = next(
            (
                w
                for w in reversed(self._panel.transcript.messages)
                if w.role == "user" and w.message_id
            ),
            None,
        )
        if user is not None:
            user.begin_edit()
            self._panel.transcript.ensureWidgetVisible(user)

    def regenerate_last(self) -> None:
        answer = self.last_answer()
        if answer is not None and not self._panel.generating:
            self.regenerate_from(answer)

    def switch_last_answer(self, step: int) -> None:
        answer = self.last_answer()
        if answer is not None:
            self.switch_version(answer, step)

    def last_answer(self) -> MessageWidget | None:
        return next(
            (
                w
                for w in reversed(self._panel.transcript.messages)
                if w.role == "assistant" and w.message_id
            ),
            None,
        )
