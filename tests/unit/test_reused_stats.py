"""The reused prompt tokens in stored stats: kept when sane, dropped when damaged, absent in
rows from before the figure (which still load and show as they did)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.records import stats_summary
from qwen_mtp_desktop.core.chat.store.stats import clean_stats
from qwen_mtp_desktop.ui.chat.transcript.message import format_stats, reused_text

OLD_ROW = {"mode": "mtp", "num_assistant_tokens": 1, "prompt_tokens": 40, "ttft_s": 0.2}


def _plain(text: str) -> str:
    return text.replace("\u00a0", " ")


def test_an_old_row_without_the_figure_loads_and_shows_as_before() -> None:
    cleaned = clean_stats(dict(OLD_ROW))
    assert "reused_tokens" not in cleaned and cleaned["prompt_tokens"] == 40
    assert "reused" not in format_stats(cleaned) and "prompt tokens" not in format_stats(cleaned)
    assert "reused" not in stats_summary(cleaned)


def test_the_figure_in_full_and_compact_and_in_the_export() -> None:
    stats = clean_stats({**OLD_ROW, "prompt_tokens": 6790, "reused_tokens": 6712})
    assert "6,712 of 6,790 prompt tokens reused  ·  TTFT 200 ms" in _plain(format_stats(stats))
    assert "6,712/6,790 reused" in _plain(format_stats(stats, compact=True))
    assert "6,712 of 6,790 prompt tokens reused" in stats_summary(stats)
    first = clean_stats({**OLD_ROW, "reused_tokens": 0})
    assert reused_text(first) == "40 prompt tokens"


@given(reused=st.integers(min_value=-5, max_value=10**13) | st.floats() | st.text(max_size=4))
def test_a_damaged_figure_is_dropped_never_shown(reused: object) -> None:
    cleaned = clean_stats({**OLD_ROW, "reused_tokens": reused})
    sane = isinstance(reused, int) and 0 <= reused <= 40
    assert ("reused_tokens" in cleaned) == sane
    shown = _plain(format_stats(cleaned))
    assert ("prompt tokens reused" in shown) == (sane and reused > 0)  # type: ignore[operator]
    assert clean_stats(dict(cleaned)) == cleaned
