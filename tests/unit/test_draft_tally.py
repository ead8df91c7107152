"""The chat's live draft counts (core.decoding.stats.DraftTally, issue 45 item 10): counted as
steps arrive, they equal `speculative_stats` over the whole answer at every batch, for any
steps, depth and token budget, so the live figures never disagree with the final ones."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import DraftTally, speculative_stats


@settings(max_examples=400, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(1, 6), max_size=12), max_size=12),
    depth=st.integers(0, 4),
    budget=st.one_of(st.none(), st.integers(1, 60)),
)
def test_the_tally_is_speculative_stats_at_every_batch(
    batches: list[list[int]], depth: int, budget: int | None
) -> None:
    method = DecodingMethod.mtp(depth) if depth else PLAIN
    tally = DraftTally(method, budget)
    sizes: list[int] = []
    for batch in batches:
        sizes += batch
        tally.add(batch)
        drafted, accepted, _ = speculative_stats(sizes, method, budget)
        assert (tally.drafted, tally.accepted) == (drafted, accepted)
        assert tally.steps == len(sizes) and tally.generated == sum(sizes)
