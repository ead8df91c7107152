"""In-page links of the project's READMEs name headings that exist (the benchmarks README's
table linked to a "Multi-turn" section nobody had written)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchor_follows_github() -> None:
    assert anchor("Sampling exactness and speed") == "sampling-exactness-and-speed"
    why = "why-the-decoding-loop-is-the-apps-own"
    assert anchor("Why the decoding loop is the app's own") == why
    assert anchor("Results: a quiet machine (2026-12-03)") == "results-a-quiet-machine-2026-12-03"


@pytest.mark.parametrize("readme", ["README.md", "benchmarks/README.md"])
def test_every_in_page_link_names_a_heading(readme: str) -> None:
    text = (ROOT / readme).read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # no headings in code blocks
    headings = {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links, "no in-page links found: the pattern is wrong"
    assert links <= headings, sorted(links - headings)
