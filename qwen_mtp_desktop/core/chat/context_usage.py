"""How much of the model's context a conversation fills: what the chat's context meter shows.

Counted from numbers the engine already reported, never by tokenizing in the window: the last
answer's prompt tokens plus its answer tokens are the conversation so far (its next turn
reads those again, plus the new message); an answer refused because the conversation did not
fit gives the engine's count of that prompt. Before the first answer, and for text added
since (the message being typed too), the count is an estimate from the characters (marked as
one): counting characters is instant even for a 50,000-word paste.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.prompt.context_limit import overflow_tokens

#: Above this share of the context the meter warns.
WARN_SHARE = 0.85
#: Characters per token for the estimate (English prose is about 4, code and other scripts
#: fewer: the estimate leans towards warning early).
CHARS_PER_TOKEN = 3.5
#: The chat template's tokens around each message (role markers, newlines).
TOKENS_PER_MESSAGE = 5


@dataclass(frozen=True)
class ContextUsage:
    #: The conversation's tokens (what the next turn reads before the new message).
    tokens: int
    #: The model's context length (None: unknown, no meter).
    limit: int | None
    #: True when any part of `tokens` is an estimate from characters.
    estimated: bool
    #: The message being typed, estimated from its characters (0: the box is empty).
    typed: int = 0

    def with_typed(self, characters: int) -> ContextUsage:
        """This conversation's usage with a message of `characters` in the box."""
        typed = estimate_chars(characters) + TOKENS_PER_MESSAGE if characters > 0 else 0
        return replace(self, typed=typed)

    @property
    def total(self) -> int:
        return self.tokens + self.typed

    @property
    def share(self) -> float | None:
        return self.total / self.limit if self.limit else None

    @property
    def warning(self) -> bool:
        share = self.share
        return share is not None and share >= WARN_SHARE

    @property
    def full(self) -> bool:
        return self.limit is not None and self.total >= self.limit

    def text(self) -> str:
        """ "1,234 / 262,144 tokens" (with "about" for an estimate)."""
        about = "about " if self.estimated or self.typed else ""
        if self.limit is None:
            return f"{about}{self.total:,} tokens"
        return f"{about}{self.total:,} / {self.limit:,} tokens"

    def explanation(self) -> str:
        """The meter's tooltip: what it counts and what happens at the limit."""
        typed = (
            f" The message being typed adds about {self.typed:,} tokens (estimated from its "
            "characters; the model counts them when it is sent)."
            if self.typed
            else ""
        )
        if self.limit is None:
            return (
                "Tokens in this conversation. The model's context length is not known, so "
                f"there is no limit to show.{typed}"
            )
        counted = (
            "estimated from the characters until the model has answered"
            if self.estimated
            else "the last answer's prompt and answer tokens, as the engine counted them"
        )
        text = (
            f"This conversation fills {self.share:.0%} of the model's context "
            f"({self.total:,} of {self.limit:,} tokens; {counted}).{typed} Every turn reads "
            "the whole conversation."
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


def estimate_chars(characters: int) -> int:
    """Tokens in a text of `characters`, estimated (rounded up)."""
    return int(characters / CHARS_PER_TOKEN + 0.999)


def estimate_tokens(text: str) -> int:
    return estimate_chars(len(text))


def conversation_usage(
    messages: Sequence[StoredMessage], system_prompt: str, limit: int | None
) -> ContextUsage:
    """The shown branch's tokens: the last counted answer's prompt + answer tokens (or the
    prompt tokens of an answer refused for not fitting), plus an estimate for what came after
    it; all estimated when no answer was counted."""
    counted = 0
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        stats, error = messages[index].stats, messages[index].error
        refused = overflow_tokens(error) if messages[index].role == "assistant" and error else None
        if refused is not None:
            # The engine refused this turn: its count of the prompt (the conversation up to
            # this answer), the number the error beside the meter says.
            counted, start = refused, index + 1
            break
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
