"""A conversation made to fit the model's context under a chat's overflow policy
(core.prompt.context_limit.overflow_views): the fewest earlier turns left out that let its
prompt fit. Leaving out turns changes the prompt's start, so the next turn's prefill cannot
reuse the kept state from there on: that is the price of a rolling window, paid only once a
chat has outgrown its model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qwen_mtp_desktop.core.engine.types import Message
from qwen_mtp_desktop.core.prompt.context_limit import OverflowPolicy, overflow_views

#: A prompt as rendered and its token ids.
Encoded = tuple[str, list[int]]


def fit_context(
    messages: Sequence[Message],
    policy: OverflowPolicy,
    budget: int,
    encode: Callable[[Sequence[Message]], Encoded],
) -> tuple[Sequence[Message], int, Encoded | None]:
    """(the messages to send, how many were left out, their prompt and ids when fitting them
    rendered it): the whole conversation when its prompt is at most `budget` tokens (`encode`
    renders and tokenizes), else the first view of `overflow_views` that is; when none is, the
    view that leaves out the most (the context check then refuses it with its count)."""
    views = overflow_views([m.role for m in messages], policy)
    if len(views) == 1:
        return messages, 0, None
    encoded: dict[int, Encoded] = {}  # by view: the chosen one's is not rendered again

    def fits(index: int) -> bool:
        encoded[index] = encode([messages[i] for i in views[index]])
        return len(encoded[index][1]) <= budget

    if fits(0):
        return messages, 0, encoded[0]
    # Each view leaves out more than the one before, so the first that fits is found by
    # bisection: a few renders of a long chat, not one per turn. views[low] never fits.
    low, high = 0, len(views) - 1
    if fits(high):
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if fits(middle) else (middle, high)
    kept = views[high]
    return [messages[i] for i in kept], len(messages) - len(kept), encoded[high]
