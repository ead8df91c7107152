"""The model's context length, and the check that a prompt fits before generation starts.

Without it a prompt longer than the context runs for minutes before the runtime fails (or
answers from a truncated window). The limit comes from config.json (`max_position_embeddings`,
at the top level or in `text_config`); a folder without one has no check. What a chat does
when its conversation outgrows the context is its overflow policy (`overflow_views`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import FileKind, int_in_range, read_json_object

#: Above any real model's context; a larger value in config.json is damage, not a limit.
MAX_CONTEXT = 16 * 1024 * 1024


def context_length(model_dir: Path) -> int | None:
    try:
        config = read_json_object(model_dir / "config.json", kind=FileKind("config.json", ""))
    except (OSError, ValueError):
        return None
    text = config.get("text_config")
    for source in (text if isinstance(text, dict) else {}, config):
        value = int_in_range(source.get("max_position_embeddings"), 1, MAX_CONTEXT)
        if value is not None:
            return value
    return None


#: How `check_fits` words the count, read back by `overflow_tokens`.
_TOO_LONG = re.compile(r"^The conversation is ([\d,]{1,12}) tokens long;")


def overflow_tokens(message: str) -> int | None:
    """The prompt tokens a `check_fits` error counted (so the context meter can show the
    engine's count, not an estimate), or None for any other message."""
    found = _TOO_LONG.match(message)
    return int(found.group(1).replace(",", "")) if found else None


def check_fits(prompt_tokens: int, limit: int | None, *, code: str = "CONTEXT_TOO_LONG") -> None:
    """Raise when the prompt leaves no room for even one answer token."""
    if limit is not None and prompt_tokens >= limit:
        raise UserFacingError(
            f"The conversation is {prompt_tokens:,} tokens long; this model reads at most "
            f"{limit:,} (its context length), and needs room for the answer.",
            "Start a new chat, or delete or shorten earlier messages.",
            code=code,
        )


#: What a chat does when its conversation no longer fits the model's context (LM Studio's
#: "context overflow policy"): refuse with the count (nothing is left out silently), or leave
#: out whole earlier turns, oldest first, keeping the system prompt and the latest turn, and
#: under "truncate_middle" the first turn too (where a task is usually stated).
OverflowPolicy = Literal["stop", "truncate_middle", "rolling_window"]
#: Each policy in the app's words (Chat options › When too long).
OVERFLOW_WORDS: dict[OverflowPolicy, str] = {
    "stop": "Stop and say so",
    "truncate_middle": "Skip the middle",
    "rolling_window": "Skip the oldest",
}
OVERFLOW_POLICIES: tuple[OverflowPolicy, ...] = tuple(OVERFLOW_WORDS)
#: The fix the chat gives for a conversation too long for its model (`check_fits`'s is the
#: API's, where there is no such option).
CHAT_OVERFLOW_FIX = (
    "Start a new chat, delete or shorten earlier messages, or let the chat leave some out "
    "(Chat options › When too long)."
)


def overflow_views(roles: Sequence[str], policy: OverflowPolicy) -> list[list[int]]:
    """The messages to keep (indices into `roles`), from leaving nothing out to leaving out
    all it may; each view leaves out one more whole turn (a user message and everything up to
    the next, so no answer or tool result is kept without its question). Leading system
    messages and the latest turn always stay. Under "stop" only the whole conversation."""
    everything = list(range(len(roles)))
    if policy == "stop":
        return [everything]
    lead = 0
    while lead < len(roles) and roles[lead] in ("system", "developer"):
        lead += 1
    starts = [i for i in range(lead, len(roles)) if roles[i] == "user"]
    if len(starts) < 2:
        return [everything]
    turns = [range(a, b) for a, b in zip(starts, [*starts[1:], len(roles)], strict=True)]
    head = list(range(starts[0]))  # the system prompt (and anything before the first question)
    pinned = [*head, *(turns[0] if policy == "truncate_middle" else ())]
    droppable = turns[1:-1] if policy == "truncate_middle" else turns[:-1]
    views = [everything]
    for dropped in range(1, len(droppable) + 1):
        kept = [i for turn in droppable[dropped:] for i in turn]
        views.append(sorted({*pinned, *kept, *turns[-1]}))
    return views


def left_out_note(count: object) -> str:
    """What an answer's figures say when earlier messages were left out to fit ("" when none
    were, or for a record without the figure)."""
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        return ""
    noun = "message" if count == 1 else "messages"
    return f"{count:,} earlier {noun} not read (too long for the context)"
