"""keep_units: a number and its unit never end up on two lines of a wrapped label."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.units import NBSP, WORD_JOINER, join_figures, keep_units, plain_figures


def test_numbers_and_units_are_glued() -> None:
    text = "MTP n=2  ·  75% drafts accepted  ·  41.2 tok/s  ·  TTFT 120 ms  ·  40 tokens  ·  1.2 s"
    assert keep_units(text) == (
        f"MTP n=2  ·  75% drafts accepted  ·  41.2{NBSP}tok/{WORD_JOINER}s  ·  "
        f"TTFT{NBSP}120{NBSP}ms  ·  "
        f"40{NBSP}tokens  ·  1.2{NBSP}s"
    )
    assert keep_units("Needs about 1.40 GB of 8 GB") == f"Needs about 1.40{NBSP}GB of 8{NBSP}GB"


def test_words_that_only_start_like_units_stay_breakable() -> None:
    assert (
        keep_units("3 sheep, 2 s/step, 4 bytes, 5 sessions")
        == "3 sheep, 2 s/step, 4 bytes, 5 sessions"
    )


@given(st.text(alphabet=st.sampled_from(list("0123456789 .abkmsgtoBKMGT/%"))))
def test_only_spaces_change(text: str) -> None:
    kept = keep_units(text)
    assert plain_figures(kept) == text
    assert len(kept) == len(text)


def test_figures_wrap_only_after_a_dot_and_never_leave_the_last_one_alone() -> None:
    joined = join_figures(["MTP n=2", "41.2 tok/s", "15 tokens", "0.2 s"])
    assert joined.replace(NBSP, " ") == "MTP n=2  ·  41.2 tok/s  ·  15 tokens  ·  0.2 s"
    # A dot is glued to the figure before it (no line starts with "·"), and the last pair
    # has no break opportunity (no plain space).
    dots = [i for i, c in enumerate(joined) if c == "·"]
    assert dots and all(joined[i - 2 : i] == NBSP * 2 for i in dots), joined
    assert " " not in joined[joined.index("15 tokens".replace(" ", NBSP)) :]
    assert join_figures(["plain decoding"]) == "plain decoding"


def test_a_count_names_its_noun_in_the_right_number() -> None:
    from qwen_mtp_desktop.core.units import count

    assert [count(n, "token") for n in (0, 1, 2, 1024)] == [
        "0 tokens",
        "1 token",
        "2 tokens",
        "1,024 tokens",
    ]


def test_short_times_read_in_milliseconds() -> None:
    """Issue 44, minor 7: no "0.0 s" and no "TTFT 0 ms" for times that were measured."""
    from qwen_mtp_desktop.core.units import duration, ttft_text

    assert duration(0.0004) == "0.4 ms" and duration(0.042) == "42 ms"
    assert duration(0.1) == "0.1 s" and duration(12.345) == "12.3 s"
    assert duration(0.21, places=2) == "0.21 s"
    assert ttft_text(0.0006) == "0.6 ms" and ttft_text(0.041) == "41 ms"
    assert ttft_text(1.2044) == "1,204 ms"
