"""A chat's context overflow policy (core.prompt.context_limit.overflow_views and
core.engine.context_fit): which messages each policy keeps, checked on generated
conversations, and the bisection that finds the fewest turns to leave out."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.core.engine.context_fit import Encoded, fit_context
from qwen_mtp_desktop.core.prompt.context_limit import (
    OVERFLOW_POLICIES,
    OverflowPolicy,
    left_out_note,
    overflow_views,
)

TURN = st.lists(st.sampled_from(["assistant", "tool"]), max_size=3).map(
    lambda rest: ["user", *rest]
)
ROLES = st.tuples(st.integers(0, 2), st.lists(TURN, max_size=8)).map(
    lambda parts: ["system"] * parts[0] + [role for turn in parts[1] for role in turn]
)
POLICIES = st.sampled_from(OVERFLOW_POLICIES)


def _turn_starts(roles: Sequence[str]) -> list[int]:
    return [i for i, role in enumerate(roles) if role == "user"]


@given(ROLES, POLICIES)
def test_each_view_leaves_out_one_more_whole_turn_and_keeps_what_must_stay(
    roles: list[str], policy: OverflowPolicy
) -> None:
    views = overflow_views(roles, policy)
    assert views[0] == list(range(len(roles)))
    starts = _turn_starts(roles)
    system = [i for i, role in enumerate(roles[: starts[0] if starts else len(roles)])]
    last_turn = list(range(starts[-1], len(roles))) if starts else []
    first_turn = list(range(starts[0], starts[1])) if len(starts) > 1 else last_turn
    if policy == "stop" or len(starts) < 2:
        assert views == [list(range(len(roles)))]
        return
    droppable = len(starts) - (2 if policy == "truncate_middle" else 1)
    assert len(views) == droppable + 1
    for before, after in itertools.pairwise(views):
        assert set(after) < set(before)
        # One whole turn less: the dropped messages are one user message and what follows it.
        gone = sorted(set(before) - set(after))
        assert roles[gone[0]] == "user" and "user" not in [roles[i] for i in gone[1:]]
        assert gone == list(range(gone[0], gone[-1] + 1))
    for view in views:
        assert set(system) <= set(view) and set(last_turn) <= set(view)
        if policy == "truncate_middle":
            assert set(first_turn) <= set(view)
        for i in view:  # no answer or tool result kept without the question it follows
            owner = max((s for s in starts if s <= i), default=None)
            assert owner is None or owner in view
        assert view == sorted(view)


@given(ROLES, POLICIES, st.lists(st.integers(1, 50), min_size=40, max_size=40), st.integers(0, 400))
def test_the_fewest_turns_are_left_out_that_fit(
    roles: list[str], policy: OverflowPolicy, sizes: list[int], budget: int
) -> None:
    messages = [Message(role, f"m{i}") for i, role in enumerate(roles)]  # type: ignore[arg-type]
    calls: list[int] = []

    def encode(kept: Sequence[Message]) -> Encoded:
        calls.append(len(kept))
        return "".join(m.content for m in kept), [0] * sum(sizes[int(m.content[1:])] for m in kept)

    kept, left_out, encoded = fit_context(messages, policy, budget, encode)
    views = overflow_views(roles, policy)
    fitting = [v for v in views if sum(sizes[i] for i in v) <= budget]
    expected = fitting[0] if fitting else views[-1]
    assert [int(m.content[1:]) for m in kept] == expected
    assert left_out == len(messages) - len(expected)
    assert len(calls) <= 2 + max(len(views), 1).bit_length()  # bisection, not one per turn
    # The chosen messages' prompt comes back, so the turn need not render it again.
    assert (encoded is None) == (len(views) == 1)
    assert encoded is None or encoded[0] == "".join(m.content for m in kept)


def test_the_note_counts_what_was_not_read() -> None:
    assert left_out_note(0) == "" and left_out_note(None) == "" and left_out_note(True) == ""
    assert left_out_note(1) == "1 earlier message not read (too long for the context)"
    assert left_out_note(1234).startswith("1,234 earlier messages")
