"""Where a prefill stops to keep a snapshot (core.decoding.state_cache.resume_points), and how
kept sequences are searched for the longest resumable prefix (issue 41, item 3): pure
functions of token ids, checked over generated prompts."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding import state_cache
from qwen_mtp_desktop.core.decoding.state_cache import (
    MIN_TOKENS_BETWEEN_RESUME_POINTS as SPACING,
)
from qwen_mtp_desktop.core.decoding.state_cache import (
    SequenceState,
    Snapshot,
    StateCache,
    resume_points,
)

TOTALS = st.integers(0, 5000)
STARTS = st.lists(st.integers(-10, 5200), max_size=40)


@given(total=TOTALS, starts=STARTS, stable=st.none() | st.integers(-10, 5200))
def test_points_are_inside_the_prompt_ordered_and_chosen_from_what_was_given(
    total: int, starts: list[int], stable: int | None
) -> None:
    points = resume_points(total, stable_prefix=stable, message_starts=starts)
    assert list(points) == sorted(set(points))
    assert all(0 < p < total for p in points)
    assert set(points) <= {*starts, *([stable] if stable is not None else [])}
    if stable is not None and 0 < stable < total:
        assert stable in points


@given(total=TOTALS, starts=STARTS)
def test_message_starts_kept_are_spaced_and_none_is_skipped_needlessly(
    total: int, starts: list[int]
) -> None:
    points = resume_points(total, message_starts=starts)
    gaps = np.diff([0, *points])
    assert all(gap >= SPACING for gap in gaps)
    # Greedy from the start: a skipped message start is closer than SPACING to the last kept.
    for start in {s for s in starts if 0 < s < total} - set(points):
        previous = max((p for p in points if p < start), default=0)
        assert start - previous < SPACING


def test_the_end_of_a_long_system_prompt_is_kept_and_a_short_one_is_not() -> None:
    assert resume_points(4000, message_starts=[0, 3000, 3050]) == (3000,)
    assert resume_points(4000, message_starts=[0, SPACING - 1, 3050]) == (3050,)
    assert resume_points(4000, message_starts=[0, 300], stable_prefix=3990) == (300, 3990)


@given(
    prefix=st.lists(st.integers(0, 9), min_size=1, max_size=60),
    tail_a=st.lists(st.integers(10, 19), max_size=30),
    tail_b=st.lists(st.integers(20, 29), max_size=30),
    kept=st.integers(1, 60),
)
def test_a_prompt_resumes_from_any_kept_sequence_at_the_latest_shared_snapshot(
    prefix: list[int], tail_a: list[int], tail_b: list[int], kept: int
) -> None:
    """Two conversations put aside share `prefix`; each has a snapshot where the prefix ends
    (or earlier); a new prompt with the prefix and its own tail resumes there, from either."""
    kept = min(kept, len(prefix))
    cache = StateCache(budget_bytes=1 << 30)
    for tail in (tail_a, tail_b):
        ids = np.array(prefix + tail, dtype=np.int64)
        sequence = SequenceState(ids, np.zeros((len(ids), 2), np.float32))
        sequence.add_snapshot(Snapshot(kept, (np.zeros(3, np.float32),)))
        cache.aside.append(sequence)
    prompt = np.array([*prefix, 99, 98], dtype=np.int64)
    resume = cache.best_resume(prompt)
    assert resume is not None and resume.position == kept
    assert resume.common == len(prefix)
    # A prompt that parts before the snapshot cannot use it.
    assert cache.best_resume(np.array([*prefix[: kept - 1], 99], dtype=np.int64)) is None


def test_the_threshold_is_read_when_points_are_chosen(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Tests on the tiny demo model lower it; the decoder must see the lowered value."""
    monkeypatch.setattr(state_cache, "MIN_TOKENS_BETWEEN_RESUME_POINTS", 4)
    assert resume_points(100, message_starts=[0, 5, 7, 12]) == (5, 12)
