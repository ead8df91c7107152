"""keep_units: a number and its unit never end up on two lines of a wrapped label."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.units import NBSP, keep_units


def test_numbers_and_units_are_glued() -> None:
    text = "MTP n=2  ·  75% drafts accepted  ·  41.2 tok/s  ·  TTFT 120 ms  ·  40 tokens  ·  1.2 s"
    assert keep_units(text) == (
        f"MTP n=2  ·  75% drafts accepted  ·  41.2{NBSP}tok/s  ·  TTFT{NBSP}120{NBSP}ms  ·  "
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
    assert kept.replace(NBSP, " ") == text
    assert len(kept) == len(text)
