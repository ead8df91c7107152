"""A conversation made to fit the model's context under a chat's overflow policy
(core.prompt.context_limit.overflow_views): the fewest earlier turns left out that let its
prompt fit. Leaving out turns changes the prompt's start, so the next turn's prefill cannot
reuse the kept state from there on: that is the price of a rolling window, paid only once a
chat has outgrown its model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qwen_mtp_desktop.core.engine.types import Message
from qwen_mtp_desktop.core.prompt.context_limit import OverflowPolicy, overflow_views


def fit_context(
    messages: Sequence[Message],
    policy: OverflowPolicy,
    budget: int,
    prompt_tokens: Callable[[Sequence[Message]], int],
) -> tuple[Sequence[Message], int]:
    """(the messages to send, how many were left out): the whole conversation when its prompt
    is at most `budget` tokens (`prompt_tokens` renders and counts), else the first view of
    `overflow_views` that is; when none is, the view that leaves out the most (the context
    check then refuses it with its count)."""
    views = overflow_views([m.role for m in messages], policy)
    if len(views) == 1 or prompt_tokens(messages) <= budget:
        return messages, 0

    def fits(index: int) -> bool:
        return prompt_tokens([messages[i] for i in views[index]]) <= budget

    # Each view leaves out more than the one before, so the first that fits is found by
    # bisection: a few renders of a long chat, not one per turn. views[low] never fits.
    low, high = 0, len(views) - 1
    if fits(high):
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(middle) else (middle, high)
    kept = views[high]
    return [messages[i] for i in kept], len(messages) - len(kept)
