"""The memory API requests may hold: bodies while they arrive, requests while they wait.

A request counts by its body's bytes while the body arrives. Once parsed, it is reduced to
what the engine needs (the messages' text and the settings; images go to files) and counts
by what that holds until its turn ends. Past the budget a request is refused with 429 (retry
later): waiting requests cannot pile memory up, whatever their count. Before this, a request
kept its whole parsed body while it waited, and 30 MB of free-form JSON held hundreds of MB
(each tiny JSON value is a Python object), times the queue's length.

Also here, the early refusals of what could never be answered: JSON with more values than any
real request (refused before the parser builds them), and messages with more text than the
model's context could hold even at MAX_CHARS_PER_TOKEN characters per token.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.server.http.errors import RATE_LIMIT, RETRY_AFTER_S, ApiError

#: Bodies arriving and requests waiting together (a 32 MiB body is the largest single one).
DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024
#: JSON values in one request: 10,000 messages with content parts stay well below.
MAX_JSON_VALUES = 200_000
#: No tokenizer makes tokens this long on average; more text cannot fit the context.
MAX_CHARS_PER_TOKEN = 32
#: What a message costs beyond its text (the objects around it).
_MESSAGE_OVERHEAD = 200


class MemoryBudget:
    """Bytes shared by every request of one server (thread-safe: turns end on their own
    threads)."""

    def __init__(self, limit_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.limit = limit_bytes
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def reservation(self) -> Reservation:
        return Reservation(self)

    def _resize(self, reservation: Reservation, size: int) -> bool:
        with self._lock:
            delta = size - reservation.bytes
            if delta > 0 and self._used + delta > self.limit:
                return False
            self._used += delta
            reservation.bytes = size
            return True


class Reservation:
    """One request's share of a MemoryBudget; `release()` gives it back (idempotent)."""

    def __init__(self, budget: MemoryBudget) -> None:
        self._budget = budget
        self.bytes = 0

    def resize(self, size: int) -> None:
        """Hold `size` bytes from now on; ApiError 429 when the budget cannot give them."""
        if not self._budget._resize(self, size):
            raise ApiError(
                429,
                f"The server holds as much request data as it allows "
                f"({self._budget.limit // 2**20} MiB, requests arriving or waiting for the "
                "engine); retry in a moment.",
                type=RATE_LIMIT,
                code="queue_full",
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )

    def grow(self, size: int) -> None:
        self.resize(self.bytes + size)

    def release(self) -> None:
        self._budget._resize(self, 0)


def retained_bytes(messages: Sequence[Message], settings: GenerationSettings | None = None) -> int:
    """What a planned request holds while it waits: its text, as Python stores it (a single
    character beyond Latin-1 makes a string take 2 or 4 bytes per character), and its
    structured-output schema or forced-call grammar (up to MAX_CONSTRAINT_CHARS of text), its
    tool calls and its tools."""
    held = sum(sys.getsizeof(m.content) + _MESSAGE_OVERHEAD for m in messages)
    held += sum(
        sys.getsizeof(call.arguments) + sys.getsizeof(call.name) + _MESSAGE_OVERHEAD
        for m in messages
        for call in m.tool_calls
    )
    constraint = settings.method.constraint if settings is not None else None
    if constraint is not None:
        held += sys.getsizeof(constraint.source) + _MESSAGE_OVERHEAD
    if settings is not None and settings.tools_json:
        held += sys.getsizeof(settings.tools_json)
    return held


def check_text_fits(messages: Sequence[Message], context_tokens: int | None) -> None:
    """ApiError 400 when the messages hold more text than `context_tokens` could ever hold."""
    if context_tokens is None:
        return
    chars = sum(
        len(m.content) + sum(len(call.arguments) for call in m.tool_calls) for m in messages
    )
    most = context_tokens * MAX_CHARS_PER_TOKEN
    if chars > most:
        raise ApiError(
            400,
            f"The messages hold {chars:,} characters; this model reads at most "
            f"{context_tokens:,} tokens (its context length), far less than that text. "
            "Send a shorter conversation.",
            code="context_length_exceeded",
            param="messages",
        )
