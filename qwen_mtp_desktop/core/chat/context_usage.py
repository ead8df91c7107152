"""How much of the model's context a conversation fills: what the chat's context meter shows.

Counted from numbers the engine already reported, never by tokenizing in the window: the last
answer's prompt tokens plus its answer tokens are the conversation so far (its next turn
reads those again, plus the new message). Before the first answer, and for text added since,
the count is an estimate from the characters (marked as one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qwen_mtp_desktop.core.chat.store.records import StoredMessage

#: Above this share of the context the meter warns.
WARN_SHARE = 0.85
#: Characters per token for the estimate (English prose is about 4, code and other scripts
#: fewer: the estimate leans towards warning early).
CHARS_PER_TOKEN = 3.5
#: The chat template's tokens around each message (role markers, newlines).
TOKENS_PER_MESSAGE = 5


@dataclass(frozen=True)
class ContextUsage:
    tokens: int
    #: The model's context length (None: unknown, no meter).
    limit: int | None
    #: True when any part of `tokens` is an estimate from characters.
    estimated: bool

    @property
    def share(self) -> float | None:
        return self.tokens / self.limit if self.limit else None

    @property
    def warning(self) -> bool:
        share = self.share
        return share is not None and share >= WARN_SHARE

    @property
    def full(self) -> bool:
        return self.limit is not None and self.tokens >= self.limit

    def text(self) -> str:
        """ "1,234 / 262,144 tokens" (with "about" for an estimate)."""
        about = "about " if self.estimated else ""
        if self.limit is None:
            return f"{about}{self.tokens:,} tokens"
        return f"{about}{self.tokens:,} / {self.limit:,} tokens"

    def explanation(self) -> str:
        """The meter's tooltip: what it counts and what happens at the limit."""
        if self.limit is None:
            return (
                "Tokens in this conversation. The model's context length is not known, so "
                "there is no limit to show."
            )
        counted = (
            "estimated from the characters until the model has answered"
            if self.estimated
            else "the last answer's prompt and answer tokens, as the engine counted them"
        )
        text = (
            f"This conversation fills {self.share:.0%} of the model's context "
            f"({self.tokens:,} of {self.limit:,} tokens; {counted}). Every turn reads the "
            "whole conversation."
        )
        if self.full:
            return (
                f"{text} It is full: the model cannot answer another message in this chat. "
                "Start a new chat, or delete or shorten earlier messages."
            )
        if self.warning:
            return (
                f"{text} Nearly full: a long answer will be cut short when the context fills, "
                f"and at {self.limit:,} tokens the model cannot answer at all. Start a new "
                "chat soon, or delete or shorten earlier messages."
            )
        return text


def estimate_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN + 0.999)


def conversation_usage(
    messages: Sequence[StoredMessage], system_prompt: str, limit: int | None
) -> ContextUsage:
    """The shown branch's tokens: the last counted answer's prompt + answer tokens, plus an
    estimate for what came after it; all estimated when no answer was counted."""
    counted = 0
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        stats = messages[index].stats
        if messages[index].role == "assistant" and stats:
            prompt, generated = (
                _count(stats.get("prompt_tokens")),
                _count(stats.get("generated_tokens")),
            )
            if prompt and generated is not None:
                counted, start = prompt + generated, index + 1
                break
    estimated = start == 0 and bool(messages or system_prompt)
    tokens = counted
    if start == 0 and system_prompt:
        tokens += estimate_tokens(system_prompt) + TOKENS_PER_MESSAGE
    for message in messages[start:]:
        tokens += estimate_tokens(message.content) + TOKENS_PER_MESSAGE
        estimated = True
    return ContextUsage(tokens, limit, estimated)


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
