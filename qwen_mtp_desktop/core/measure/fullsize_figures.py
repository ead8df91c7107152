"""What MTP measured on a full-size model: the one home of the benchmark figures the app quotes
where the demo model's own MTP results would mislead (Compare, Validate, the Benchmark verdict,
the demo banner). The demo model's whole answer takes milliseconds, so MTP's fixed cost per step
always loses there; these figures say what it does on a model of real size.

Copied from benchmarks/results/fullsize.md ("A quiet machine (2026-12-03)", depths 1-3 of that
`benchmarks/fullsize.py` run): change them there and here together.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FullSizeFigures:
    """Speed-ups of the app's MTP decoder over the fastest plain decoding, at depths 1-3."""

    model: str
    source: str
    machine: str
    #: Every draft accepted (the `agree` variant): the best MTP can do.
    all_accepted: tuple[float, float, float]
    #: About 80 % of drafts accepted at n=1 (the `bigram` variant): a realistic middle; the
    #: best depth in that run, and its lowest and highest per-round speed-up.
    realistic_acceptance: float
    realistic_best: float
    realistic_rounds: tuple[float, float]
    #: No draft accepted (the `random` variant): what drafting costs when it never pays.
    none_accepted: tuple[float, float, float]
    #: Auto over a conversation on that model, against the plain setting (it switched to
    #: plain in the first turn), and when that was measured (benchmarks/adaptive.py).
    auto_none_accepted: float
    auto_measured: str


FULL_SIZE = FullSizeFigures(
    model="Qwen3.5-0.8B geometry, INT4",
    source="benchmarks/fullsize.py, 2026-12-03",
    machine="a 2-core VM",
    all_accepted=(1.93, 2.16, 2.85),
    realistic_acceptance=0.90,
    realistic_best=1.91,
    realistic_rounds=(1.73, 2.10),
    none_accepted=(0.47, 0.41, 0.40),
    auto_none_accepted=0.93,
    auto_measured="2026-11-30",
)

#: Why MTP loses on the demo model, in one sentence.
DEMO_TOO_SMALL = (
    "The demo model is too small for MTP to win: its whole answer takes a few milliseconds, so "
    "the fixed cost of each MTP step outweighs the tokens it saves."
)


def _depths(values: tuple[float, ...]) -> str:
    return " / ".join(f"{v:.2f}x" for v in values)


def full_size_summary(figures: FullSizeFigures = FULL_SIZE) -> str:
    """One sentence: what MTP gave on a full-size model, named as benchmark figures."""
    return (
        f"On a full-size model ({figures.model}) MTP was {figures.realistic_best:.2f}x-"
        f"{figures.all_accepted[-1]:.2f}x as fast as plain decoding: benchmark figures from "
        f"{figures.source}, on {figures.machine}."
    )


def demo_banner_note(figures: FullSizeFigures = FULL_SIZE) -> str:
    """The demo banner's two lines: the demo is too small, and the full-size figures, short."""
    return (
        f"The demo is too small for MTP to win. Benchmark figures on a full-size model "
        f"({figures.model}; benchmarks/, {figures.machine}): {figures.realistic_best:.2f}x-"
        f"{figures.all_accepted[-1]:.2f}x as fast as plain decoding."
    )


def full_size_details(figures: FullSizeFigures = FULL_SIZE) -> str:
    """The figures behind the summary, line by line (tooltips, the Compare note)."""
    return "\n".join(
        (
            f"Benchmark figures from {figures.source}: {figures.model}, on {figures.machine}.",
            f"Every draft accepted: {_depths(figures.all_accepted)} plain decoding's speed at "
            "MTP n=1 / 2 / 3.",
            f"About {figures.realistic_acceptance:.0%} of drafts accepted: up to "
            f"{figures.realistic_best:.2f}x ({figures.realistic_rounds[0]:.2f}x-"
            f"{figures.realistic_rounds[1]:.2f}x across the run's rounds).",
            f"No draft accepted: {_depths(figures.none_accepted)}; Auto then decodes plain "
            f"({figures.auto_none_accepted:.2f}x of the plain setting over a conversation, "
            f"measured {figures.auto_measured}).",
        )
    )


def demo_mtp_note(figures: FullSizeFigures = FULL_SIZE) -> str:
    """What to read into an MTP result measured on the demo model: the reason and the
    full-size figures, in two sentences."""
    return f"{DEMO_TOO_SMALL} {full_size_summary(figures)}"


__all__ = [
    "DEMO_TOO_SMALL",
    "FULL_SIZE",
    "FullSizeFigures",
    "demo_banner_note",
    "demo_mtp_note",
    "full_size_details",
    "full_size_summary",
]
