"""An answer continued where it ended (LM Studio's Continue): which answers may be, and what the
continued answer's record says about it.

An answer may be continued when it is the chat's last message, has text, called no tools, and
ended early: stopped by the user ("cancelled"), cut by the token limit ("length"), or left
"incomplete" by a window closed mid-answer. The engine writes on after its text
(`GenerationSettings.continue_final`), into the same stored message; its record keeps the new
part's figures and says, under "continued", how much came before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.units import count

#: How an answer ended for it to be continued: its stats' finish_reason, or "incomplete".
CONTINUABLE_ENDS = ("cancelled", "length", "incomplete")


def how_it_ended(message: StoredMessage) -> str | None:
    """ "cancelled", "length" or "incomplete" for an answer that ended early, else None."""
    if message.role != "assistant":
        return None
    if message.status == "incomplete":
        return "incomplete"
    reason = message.stats.get("finish_reason") if message.stats else None
    if message.status == "complete" and reason in ("cancelled", "length"):
        return str(reason)
    return None


def can_continue(message: StoredMessage, branch: Sequence[StoredMessage]) -> bool:
    """Whether `message` may be continued: the last of the shown branch `branch`, an answer
    with text and no tool calls that ended early, in a chat without images (those turns run
    on openvino-genai, which continues no answer)."""
    if not branch or branch[-1].id != message.id or not message.content.strip():
        return False
    if message.stats and "tool_calls" in message.stats:
        return False
    if any(m.image_path is not None for m in branch):
        return False
    return how_it_ended(message) is not None


def continued_from(message: StoredMessage) -> dict[str, Any]:
    """The "continued" entry of the continued answer's record: how the answer being continued
    ended, how many tokens it had (None when unknown: an interrupted answer has no figures),
    and how many times it has been continued."""
    stats: Mapping[str, Any] = message.stats or {}
    before = stats.get("continued")
    before = before if isinstance(before, dict) else {}
    tokens, earlier = stats.get("generated_tokens"), before.get("after_tokens", 0)
    after_tokens = None
    if _count(tokens) and _count(earlier):
        after_tokens = earlier + tokens
    times = before.get("times", 0)
    return {
        "after": how_it_ended(message),
        "after_tokens": after_tokens,
        "times": (times if _count(times) else 0) + 1,
    }


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def continued_note(entry: object) -> str:
    """The figures line's head for a continued answer ("Continued after 23 tokens"); "" for
    an answer written in one go. The figures after it are the continuation's own."""
    if not isinstance(entry, dict):
        return ""
    tokens = entry.get("after_tokens")
    if isinstance(tokens, int) and _count(tokens):
        return f"Continued after {count(tokens, 'token')}"
    return "Continued after an interruption"


__all__ = [
    "CONTINUABLE_ENDS",
    "can_continue",
    "continued_from",
    "continued_note",
    "how_it_ended",
]
