"""The Benchmark panel's banner, its per-workload chart and its History line name the same
winners: all come from `core.measure.bench.method_verdict`. Checked on generated benchmark reports
(hypothesis) and on the report that once showed "Recommended: plain" beside a chart naming
prompt lookup the winner."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.measure.reports import headline
from qwen_mtp_desktop.core.measure.verdicts import (
    ALL_WORKLOADS,
    method_verdict,
    row_method,
    workload_winner,
)
from qwen_mtp_desktop.ui.bench.charts import ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.bench.report_view import chart_data, verdict, workload_data

pytestmark = pytest.mark.gui

SETS = ("code", "chat", "list", "summarise", "edit")


def _mode(kind: str, depth: int | None, speedup: float | None, identical: bool) -> dict[str, Any]:
    method = {
        "plain": PLAIN,
        "mtp": DecodingMethod.mtp(depth or 1),
        "lookup": DecodingMethod.lookup(depth or 4),
    }[kind]
    label = "plain · openvino-genai" if method.is_plain else method.label
    spread = None if speedup is None else {"median": speedup, "min": speedup, "max": speedup}
    return {
        "method": method.to_record(),
        "decoder": "genai" if kind != "mtp" else "app",
        "label": label,
        "identical": identical,
        "speedup": spread,
        "acceptance_rate": None if kind == "plain" else 0.5,
        "decode_tokens_per_s": {"median": 10.0, "min": 9.0, "max": 11.0},
        "acceptance_by_position": [] if kind == "plain" else [0.5],
    }


speedups = st.one_of(st.none(), st.floats(0.3, 3.0, allow_nan=False))
modes = st.builds(
    lambda mtp, lookup: [
        _mode("plain", None, None, True),
        *(_mode("mtp", d + 1, s, ident) for d, (s, ident) in enumerate(mtp)),
        _mode("lookup", 4, lookup[0], lookup[1]),
    ],
    st.lists(st.tuples(speedups, st.booleans()), min_size=1, max_size=3),
    st.tuples(speedups, st.booleans()),
)


def _recommend(all_modes: list[dict[str, Any]]) -> dict[str, Any]:
    from qwen_mtp_desktop.core.measure.bench import recommend

    return recommend(all_modes)


@st.composite
def reports(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(SETS), min_size=1, max_size=5, unique=True))
    per_set = []
    for name in names:
        set_modes = draw(modes)
        per_set.append(
            {"prompt_set": name, "modes": set_modes, "winner": workload_winner(set_modes)}
        )
    all_modes = per_set[0]["modes"] if len(per_set) == 1 else draw(modes)
    return {
        "kind": "bench",
        "modes": all_modes,
        "per_set": per_set,
        "recommendation": _recommend(all_modes),
    }


@settings(max_examples=200, deadline=None)
@given(reports())
def test_banner_and_chart_name_the_same_winners(report: dict[str, Any]) -> None:
    status, title, detail = verdict(report)
    chart = workload_data(report)
    overall = method_verdict(report)["overall"]
    history_line, ok = headline(report)  # the History list's line for the same report
    if row_method(overall).is_plain:
        assert title.startswith("Recommended: plain decoding"), title
        assert history_line.startswith("best: plain") and not ok
    else:
        assert title.startswith(f"Recommended: {overall['label']} ("), title
        assert status == "ok" and ok
        assert history_line.startswith(f"best: {overall['label']} ("), history_line
    short = row_method(overall).short_label  # the chart names methods by short labels
    if len(chart) > 1:  # the chart's first group is all workloads, with the same winner
        assert chart[0].name == ALL_WORKLOADS and chart[0].winner == short
    elif len(chart) == 1:  # one workload: its winner is the overall one
        assert chart[0].winner == short
    for workload in chart:  # the winner is one of the bars, outlined
        assert workload.winner in [label for label, _value, _kind in workload.methods]
    # Every workload the chart names another winner for, the banner names too.
    for workload in chart[1:] if len(chart) > 1 else chart:
        entry = next(e for e in report["per_set"] if e["prompt_set"] == workload.name)
        assert workload.winner == row_method(entry["winner"]).short_label
        if workload.winner != short:
            winner = entry["winner"]["label"]
            assert f"{workload.name}: {winner}" in detail, (workload, detail)


def test_prompt_lookup_winning_overall_is_what_the_banner_recommends() -> None:
    """The case from issue 20: MTP slower than plain, prompt lookup faster on every set."""
    sets = []
    for name, lookup in (("edit", 2.1), ("summarise", 1.4)):
        set_modes = [
            _mode("plain", None, None, True),
            _mode("mtp", 1, 0.8, True),
            _mode("lookup", 4, lookup, True),
        ]
        sets.append({"prompt_set": name, "modes": set_modes, "winner": workload_winner(set_modes)})
    all_modes = [
        _mode("plain", None, None, True),
        _mode("mtp", 1, 0.8, True),
        _mode("lookup", 4, 1.7, True),
    ]
    report = {
        "kind": "bench",
        "modes": all_modes,
        "per_set": sets,
        "recommendation": _recommend(all_modes),
    }
    assert report["recommendation"]["label"] == "plain"  # Auto's MTP start: plain
    status, title, detail = verdict(report)
    assert (status, title) == ("ok", "Recommended: prompt lookup K=4, n-gram 3 (1.70x)")
    assert detail.startswith(
        "Prompt lookup K=4, n-gram 3 was the fastest method over all prompts: 1.70x"
    )
    chart = workload_data(report)
    assert [w.name for w in chart] == [ALL_WORKLOADS, "edit", "summarise"]
    assert {w.winner for w in chart} == {"lookup K=4"}


@settings(max_examples=100, deadline=None)
@given(reports())
def test_each_chart_shows_one_statistic_for_its_bars_and_labels(report: dict[str, Any]) -> None:
    """Issue 28: a bar of median tok/s labelled with a median of per-round ratios could say
    "1.11x" under a bar lower than plain's. The speed chart shows speeds only; the workload
    chart's bars and labels are both the per-round-ratio median."""
    bars, _series = chart_data(report)
    speeds = [m for m in report["modes"] if m["decode_tokens_per_s"] is not None]
    assert [bar.median for bar in bars] == [m["decode_tokens_per_s"]["median"] for m in speeds]
    assert all(bar.note in ("", "differs") for bar in bars), [bar.note for bar in bars]
    assert "median tokens/s" in ThroughputChart.title
    assert "median of the per-round ratios" in WorkloadChart.title
    for workload in workload_data(report):
        entry = next((e for e in report["per_set"] if e["prompt_set"] == workload.name), None)
        modes = entry["modes"] if entry is not None else report["modes"]
        by_label = {row_method(m).short_label: m for m in modes}
        for label, value, kind in workload.methods:
            expected = 1.0 if kind == "plain" else by_label[label]["speedup"]["median"]
            assert value == expected, (label, value, expected)
