"""A remote answer's live figures (core.remote.progress): the unit is what the stream counts,
the server's tokens when it streams `usage` with its text, else chunks."""

from __future__ import annotations

from qwen_mtp_desktop.core.remote.inbox import Batch, Inbox
from qwen_mtp_desktop.core.remote.progress import StreamProgress
from qwen_mtp_desktop.core.units import NBSP, WORD_JOINER, keep_units


def test_without_streamed_usage_the_rate_is_in_chunks() -> None:
    progress = StreamProgress(first_s=0.2, last_s=1.2, chunks=41)
    # 40 chunks after the first, over the second between the first and the latest.
    assert progress.figures() == ["40.0 chunks/s", "41 chunks", "TTFT 200 ms"]


def test_streamed_usage_gives_tokens_and_tok_s() -> None:
    progress = StreamProgress(first_s=0.1, last_s=1.1, chunks=10, tokens=31, tokens_s=1.1)
    assert progress.figures() == ["30.0 tok/s", "31 tokens", "TTFT 100 ms"]


def test_no_rate_before_a_second_chunk_and_nothing_before_the_first() -> None:
    assert StreamProgress().figures() == []
    assert StreamProgress(first_s=0.05, last_s=0.05, chunks=1).figures() == [
        "1 chunk",
        "TTFT 50 ms",
    ]


def test_the_inbox_carries_the_latest_streamed_count_of_a_batch() -> None:
    inbox: Inbox[str] = Inbox()
    inbox.put_text("a", "", 1.0, 2)
    inbox.put_text("b", "", 2.0, 5)
    inbox.put_text("c", "", 3.0)  # an event without usage leaves the last count standing
    batch = inbox.take(0)
    assert isinstance(batch, Batch)
    assert (batch.events, batch.tokens, batch.tokens_at) == (3, 5, 2.0)
    inbox.put_text("d", "", 4.0)
    later = inbox.take(0)
    assert isinstance(later, Batch) and later.tokens is None


def test_a_chunk_rate_keeps_its_unit_whole() -> None:
    assert keep_units("38.4 chunks/s") == f"38.4{NBSP}chunks/{WORD_JOINER}s"
