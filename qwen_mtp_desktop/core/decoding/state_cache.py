"""Conversation states kept between turns, so a turn prefills only the tokens it has not seen.

Qwen3.5 mixes attention layers (a KV cache per token: can be cut at any position) with Gated
DeltaNet layers (one fixed-size recurrent state for the whole sequence: cannot be cut, only
restored from a copy taken at that position). A sequence the decoder has processed is kept as:

- its token ids, and the target's final hidden state at each position (what the MTP head reads;
  kept so the MTP head can catch up after plain turns without running the target again);
- its attention caches: in the infer request while it is the *live* sequence (no copy at all),
  as arrays once it is put aside for another conversation;
- `Snapshot`s of the recurrent state at chosen positions: the end of every prompt (regenerate
  resumes there without any model call: the snapshot keeps that position's logits) and the end
  of every answer, i.e. the start of the next prompt (an edited message resumes at the latest
  snapshot before it).

A prefill also keeps a snapshot where a later prompt is likely to part from this one: at the
start of a message that follows a long enough stretch (`resume_points`). A new conversation or
API request that opens with the same system prompt and tools block as an earlier one resumes at
the end of that block instead of prefilling it again.

A new prompt resumes from the snapshot with the most tokens that is at or before the first
token where the prompt and a kept sequence differ, in whichever kept sequence has it. Working
on token ids, not text, keeps it exact whatever the chat template re-renders: a template that
changes earlier tokens (Qwen3.5 drops earlier answers' thinking) only moves the resume point
back.

Everything kept counts against one byte budget; the least recently used sequences go first,
then the oldest snapshots of the live one. No OpenVINO here: arrays in, arrays out.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

#: Snapshots kept per sequence: the newest `RECENT_SNAPSHOTS` always, older ones thinned so
#: their positions stay spread out (an edit far back resumes a bit earlier, never from zero).
MAX_SNAPSHOTS = 16
RECENT_SNAPSHOTS = 6
#: A live sequence is put aside (its caches copied out) before another replaces it when that
#: saves at least this many tokens of prefill later. Copying a token's cache entries costs
#: about 25 us on Qwen3.5-0.8B against about 10 ms to prefill it, so nearly all are worth it.
MIN_TOKENS_WORTH_SAVING = 32
#: A regenerate or edit drops the live sequence's tail; a copy of the whole sequence is kept
#: first only when that tail is long (the old version may be continued; a short one is cheaper
#: to prefill again than the copy of everything before it).
MIN_TAIL_WORTH_SAVING = 1024
#: A message start becomes a resume point when at least this many tokens lie between it and
#: the previous one: prefilling fewer again costs little (about 2 s on Qwen3.5-0.8B on a
#: 2-core CPU), while each snapshot holds the model's recurrent state (~19 MB there).
MIN_TOKENS_BETWEEN_RESUME_POINTS = 256


@dataclass(eq=False)
class Snapshot:
    """The recurrent state after `position` tokens (raw arrays, in the order of the model's
    state ports), and at a prompt's end the logits of its last position."""

    position: int
    recurrent: tuple[npt.NDArray[Any], ...]
    logits: npt.NDArray[np.float32] | None = None

    @property
    def nbytes(self) -> int:
        size = sum(int(a.nbytes) for a in self.recurrent)
        return size + (int(self.logits.nbytes) if self.logits is not None else 0)


@dataclass(eq=False)
class SavedCaches:
    """A sequence's attention caches copied out of the infer requests."""

    target: list[npt.NDArray[Any]]
    #: The MTP head's cache (positions 0 .. draft_positions - 1), or empty.
    draft: list[npt.NDArray[Any]]
    draft_positions: int

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (*self.target, *self.draft))


@dataclass(eq=False)
class SequenceState:
    """A token sequence the model has processed, and what of its state is kept."""

    ids: npt.NDArray[np.int64]
    #: Final hidden state per position ([len(ids), hidden], the device's raw bits).
    hidden: npt.NDArray[Any]
    snapshots: list[Snapshot] = field(default_factory=list)
    #: None while the caches live only in the infer requests (the live sequence).
    caches: SavedCaches | None = None
    last_used: int = 0

    @property
    def nbytes(self) -> int:
        size = int(self.ids.nbytes) + int(self.hidden.nbytes)
        size += sum(s.nbytes for s in self.snapshots)
        return size + (self.caches.nbytes if self.caches is not None else 0)

    def snapshot_at_or_before(self, position: int, *, prompt_end: int) -> Snapshot | None:
        """The latest snapshot usable for a prompt of `prompt_end` tokens that agrees with this
        sequence on its first `position` tokens: at most `position`, and before the prompt's
        end unless it carries the logits there."""
        best = None
        for snapshot in self.snapshots:
            at = snapshot.position
            usable = at < prompt_end or (at == prompt_end and snapshot.logits is not None)
            if at <= position and usable and (best is None or at > best.position):
                best = snapshot
        return best

    def add_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshots = [s for s in self.snapshots if s.position != snapshot.position]
        self.snapshots.append(snapshot)
        self.snapshots.sort(key=lambda s: s.position)
        while len(self.snapshots) > MAX_SNAPSHOTS:
            self.snapshots.remove(_least_useful(self.snapshots[:-RECENT_SNAPSHOTS]))


def _least_useful(older: Sequence[Snapshot]) -> Snapshot:
    """Of the older snapshots, the one whose removal leaves the smallest gap (the first is
    kept: it bounds how far back an edit must go)."""
    if len(older) < 3:
        return older[-1]
    gaps = [older[i + 1].position - older[i - 1].position for i in range(1, len(older) - 1)]
    return older[1 + gaps.index(min(gaps))]


@dataclass(frozen=True)
class Resume:
    """Where a prompt can start: `position` tokens are already in `source`'s state."""

    source: SequenceState
    snapshot: Snapshot
    position: int
    #: Tokens the prompt shares with the source (the resume point may be earlier).
    common: int


@dataclass(frozen=True)
class CacheReport:
    """What the cache holds, for the model's details."""

    sequences: int
    tokens: int
    snapshots: int
    bytes: int
    budget_bytes: int
    #: Turns that reused at least one token / all turns, since the model loaded.
    reused_turns: int = 0
    turns: int = 0


def resume_points(
    total: int, *, stable_prefix: int | None = None, message_starts: Sequence[int] = ()
) -> tuple[int, ...]:
    """Where a prefill of a `total`-token prompt stops to keep a snapshot, in order: the
    stable prefix (where the next turn's prompt parts from this one), and each message start
    at least `MIN_TOKENS_BETWEEN_RESUME_POINTS` after the previous chosen one (the first: the
    end of the system prompt and tools block). A function of the prompt alone, so a prompt
    splits at the same points whether it is prefilled cold or resumed part-way."""
    points: set[int] = set()
    last = 0
    for start in sorted(set(message_starts)):
        if 0 < start < total and start - last >= MIN_TOKENS_BETWEEN_RESUME_POINTS:
            points.add(start)
            last = start
    if stable_prefix is not None and 0 < stable_prefix < total:
        points.add(stable_prefix)
    return tuple(sorted(points))


def common_prefix(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64]) -> int:
    import numpy as np

    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


class StateCache:
    """The kept sequences of one loaded model: at most one live (its caches in the requests)
    and any number put aside, under `budget_bytes`. Used by one decoding thread at a time."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.live: SequenceState | None = None
        self.aside: list[SequenceState] = []
        self._clock = itertools.count(1)
        self.turns = 0
        self.reused_turns = 0

    def clear(self) -> None:
        self.live = None
        self.aside = []

    def touch(self, sequence: SequenceState) -> None:
        sequence.last_used = next(self._clock)

    def best_resume(self, prompt: npt.NDArray[np.int64]) -> Resume | None:
        """The resume point with the most tokens over every kept sequence (the live one wins a
        tie: it needs no copy)."""
        best: Resume | None = None
        for source in [s for s in (self.live,) if s is not None] + self.aside:
            common = common_prefix(source.ids, prompt)
            snapshot = source.snapshot_at_or_before(common, prompt_end=len(prompt))
            if snapshot is None or snapshot.position == 0:
                continue
            if best is None or snapshot.position > best.position:
                best = Resume(source, snapshot, snapshot.position, common)
        return best

    def put_aside(self, sequence: SequenceState) -> None:
        """Keep a sequence whose caches were copied out; sequences it extends are merged into
        it (their snapshots stay valid: same tokens)."""
        assert sequence.caches is not None
        for other in list(self.aside):
            if len(other.ids) <= len(sequence.ids) and common_prefix(
                other.ids, sequence.ids
            ) == len(other.ids):
                for snapshot in other.snapshots:
                    if not any(s.position == snapshot.position for s in sequence.snapshots):
                        sequence.add_snapshot(snapshot)
                self.aside.remove(other)
        self.touch(sequence)
        self.aside.append(sequence)

    def drop(self, sequence: SequenceState) -> None:
        if sequence is self.live:
            self.live = None
        elif sequence in self.aside:
            self.aside.remove(sequence)

    @property
    def nbytes(self) -> int:
        seen: set[int] = set()
        total = 0
        for sequence in [s for s in (self.live,) if s is not None] + self.aside:
            total += int(sequence.ids.nbytes) + int(sequence.hidden.nbytes)
            total += sequence.caches.nbytes if sequence.caches is not None else 0
            for snapshot in sequence.snapshots:
                if id(snapshot) not in seen:  # a restored sequence shares its snapshots
                    seen.add(id(snapshot))
                    total += snapshot.nbytes
        return total

    def fit_budget(self) -> None:
        """Drop the least recently used sequences put aside, then the live sequence's oldest
        snapshots (never its newest: the next turn resumes there), until within budget."""
        while self.nbytes > self.budget_bytes and self.aside:
            oldest = min(self.aside, key=lambda s: s.last_used)
            log.info("state cache: dropping a %d-token sequence (budget)", len(oldest.ids))
            self.aside.remove(oldest)
        live = self.live
        while live is not None and self.nbytes > self.budget_bytes and len(live.snapshots) > 1:
            live.snapshots.pop(0)
        if self.nbytes > self.budget_bytes and live is not None:
            log.info("state cache: the live sequence alone exceeds the budget; dropping it")
            self.live = None

    def record_turn(self, reused: int) -> None:
        self.turns += 1
        if reused > 0:
            self.reused_turns += 1

    def report(self) -> CacheReport:
        sequences = [s for s in (self.live,) if s is not None] + self.aside
        return CacheReport(
            sequences=len(sequences),
            tokens=sum(len(s.ids) for s in sequences),
            snapshots=len({id(x) for s in sequences for x in s.snapshots}),
            bytes=self.nbytes,
            budget_bytes=self.budget_bytes,
            reused_turns=self.reused_turns,
            turns=self.turns,
        )
