"""The chat follows a theme change at run time: new messages and every message already on
screen (the transcript's and an open Compare dialog's) take the new colours."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget

if TYPE_CHECKING:
    from qwen_mtp_desktop.ui.chat.panel import ChatPanel


def restyle_chat(panel: ChatPanel, dark: bool) -> None:
    """Code blocks are highlighted again and answers rendered again in the new palette (Qt's
    Markdown writes a link's colour into the text, pygments a code block's)."""
    panel.dark = dark
    panel.conversations.set_dark(dark)
    panel.refresh_list()  # the chat list's pin marks
    for widget in panel.findChildren(MessageWidget):
        widget.set_dark(dark)
