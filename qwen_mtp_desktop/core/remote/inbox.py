"""The hand-over between a remote answer's reader thread and whoever consumes the answer.

A server can send text far faster than a terminal or a window shows it. A plain queue of one
item per event then grows without bound (tens of thousands of events after a few seconds), and
a Stop that waits its turn behind them takes minutes. Here:

- text waiting for the consumer is bounded (`max_pending_chars`): the reader thread waits, so
  it stops reading the socket and TCP slows the server down;
- the consumer takes everything that is waiting as one batch (at most `max_batch_chars`), so
  it wakes once per batch, not once per event;
- `close()` (Stop) ends the hand-over at once: the consumer's next `take` returns `CLOSED`
  whatever is still waiting, and a reader blocked on a full inbox wakes and gives up.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

E = TypeVar("E")

#: Text the reader may hold for the consumer before it waits (characters).
MAX_PENDING_CHARS = 256 * 1024
#: Text handed over in one batch at most (characters): one write to a terminal stays short.
MAX_BATCH_CHARS = 64 * 1024


@dataclass(frozen=True)
class Batch:
    """Text of one or more events, in arrival order; `first_at`/`last_at`: when the first and
    the last of them arrived (time.monotonic()); `events`: how many events it holds;
    `tokens`: the server's completion token count as of the latest of them that carried one
    (servers that stream `usage` with their text), and `tokens_at` when that one arrived."""

    answer: str
    reasoning: str
    first_at: float
    last_at: float
    events: int
    tokens: int | None = None
    tokens_at: float = 0.0


class Closed:
    """What `take` returns once the inbox was closed (the answer was stopped)."""


CLOSED = Closed()


class Inbox(Generic[E]):
    """Text pieces from the reader, then one end value (`E`), or CLOSED after `close()`."""

    def __init__(
        self, max_pending_chars: int = MAX_PENDING_CHARS, max_batch_chars: int = MAX_BATCH_CHARS
    ) -> None:
        self._max_pending = max_pending_chars
        self._max_batch = max_batch_chars
        self._cond = threading.Condition()
        self._pieces: deque[tuple[str, str, float, int | None]] = deque()
        self._pending = 0
        self._end: E | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def put_text(self, answer: str, reasoning: str, at: float, tokens: int | None = None) -> bool:
        """Hand text over (`tokens`: the server's count so far, when the event said it); waits
        while the consumer is behind. False once closed."""
        with self._cond:
            while self._pending >= self._max_pending and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._pieces.append((answer, reasoning, at, tokens))
            self._pending += len(answer) + len(reasoning)
            self._cond.notify_all()
            return True

    def put_end(self, end: E) -> None:
        """The last item, after the text already put (only the first end counts)."""
        with self._cond:
            if self._end is None:
                self._end = end
            self._cond.notify_all()

    def close(self) -> None:
        """Stop: whatever waits is dropped, the consumer and the reader are woken."""
        with self._cond:
            self._closed = True
            self._pieces.clear()
            self._pending = 0
            self._cond.notify_all()

    def take(self, timeout: float | None = None) -> Batch | E | Closed | None:
        """The waiting text as one Batch, else the end, else CLOSED; None after `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not (self._closed or self._pieces or self._end is not None):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._cond.wait(remaining)
            if self._closed:
                return CLOSED
            if self._pieces:
                return self._batch()
            return self._end

    def _batch(self) -> Batch:
        answers: list[str] = []
        reasonings: list[str] = []
        size = events = 0
        first_at = last_at = tokens_at = self._pieces[0][2]
        tokens: int | None = None
        while self._pieces and (not events or size < self._max_batch):
            answer, reasoning, last_at, counted = self._pieces.popleft()
            answers.append(answer)
            reasonings.append(reasoning)
            size += len(answer) + len(reasoning)
            events += 1
            if counted is not None:
                tokens, tokens_at = counted, last_at
        self._pending -= size
        self._cond.notify_all()  # the reader may go on
        return Batch(
            "".join(answers), "".join(reasonings), first_at, last_at, events, tokens, tokens_at
        )
