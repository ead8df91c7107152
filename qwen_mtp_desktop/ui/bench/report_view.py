"""A report as the Benchmark panel shows it, without widgets: chart data, verdict, local time."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from qwen_mtp_desktop.core.decoding.method import PLAIN
from qwen_mtp_desktop.core.measure.fullsize_figures import demo_mtp_note
from qwen_mtp_desktop.core.measure.records import (
    BenchReport,
    ModeSummary,
    Report,
    Winner,
)
from qwen_mtp_desktop.core.measure.reports import fmt
from qwen_mtp_desktop.core.measure.validate import method_label
from qwen_mtp_desktop.core.measure.verdicts import ALL_WORKLOADS, method_verdict, row_method
from qwen_mtp_desktop.core.models.library import is_demo_model
from qwen_mtp_desktop.ui.bench.charts import Bar, Series, Workload


def chart_data(report: Report, prompt_set: str | None = None) -> tuple[list[Bar], list[Series]]:
    """Throughput bars and acceptance series for a report (one prompt set, or all)."""
    if report["kind"] == "validate":
        timed = [r["timing"] for r in report["results"] if r["timing"] is not None]
        method = row_method(report["settings"])
        lookup = method.drafts_vary
        bars: list[Bar] = []
        summary = report["summary"]
        base, mtp = summary["baseline_decode_tokens_per_s"], summary["mtp_decode_tokens_per_s"]
        if timed and base and mtp:
            # Speeds only (the banner gives the speed-up, a median of per-prompt ratios).
            bars = [
                Bar("plain", base["median"], base["min"], base["max"], "plain"),
                Bar(
                    method.short_label,
                    mtp["median"],
                    mtp["min"],
                    mtp["max"],
                    "lookup" if lookup else "mtp",
                ),
            ]
        positions = summary["acceptance_by_position"]
        if lookup:  # its drafts per step vary: no per-position curve (the table has its rate)
            return bars, []
        series = [Series(f"n={method.drafts}", tuple(positions))] if positions else []
        return bars, series
    modes = report["modes"]
    if prompt_set is not None:
        modes = next(e["modes"] for e in report["per_set"] if e["prompt_set"] == prompt_set)
    best = row_method(report["recommendation"])
    bars = []
    series = []
    for mode in modes:
        speed = mode["decode_tokens_per_s"]
        if speed is None:
            continue
        method = row_method(mode)
        note = ""  # the speed-up has its own chart: one statistic per chart
        if method.is_plain:
            kind = "plain"
        else:
            kind = (
                "diverged"
                if not mode["identical"]
                else "lookup"
                if method.drafts_vary
                else "best"
                if method == best
                else "mtp"
            )
            if not mode["identical"]:
                note = "differs"
            if not method.drafts_vary:  # lookup's drafts per step vary; the table has it
                series.append(Series(f"n={method.drafts}", tuple(mode["acceptance_by_position"])))
        # A bar's label is short: "plain" (the banner names which plain path was the
        # baseline), "n=2", "n=2 · openvino-genai", "lookup K=4".
        label = mode["label"].replace("MTP ", "") if method.uses_mtp_head else method.short_label
        bars.append(
            Bar(
                label,
                speed["median"],
                speed["min"],
                speed["max"],
                kind,
                note,
            )
        )
    return bars, series


def _methods(modes: list[ModeSummary]) -> tuple[tuple[str, float, str], ...]:
    """Plain (1.0), the fastest identical MTP depth and prompt lookup, as chart bars, named
    by their short labels (the winner is named the same way)."""
    methods: list[tuple[str, float, str]] = [(PLAIN.short_label, 1.0, "plain")]
    measured = [
        (row_method(m), speedup["median"])
        for m in modes
        if (speedup := m["speedup"]) and m["identical"]
    ]
    mtp = [(method, median) for method, median in measured if method.uses_mtp_head]
    best = max(mtp, key=lambda pair: pair[1], default=None)
    if best is not None:
        methods.append((best[0].short_label, best[1], "mtp"))
    for method, median in measured:
        if method.kind == "lookup":
            methods.append((method.short_label, median, "lookup"))
    return tuple(methods)


def _short(winner: Winner) -> str:
    return row_method(winner).short_label


def workload_data(report: Report) -> list[Workload]:
    """Each workload's methods for the comparison chart with its winner, and with several
    workloads a first group for all of them with the overall winner: both from
    `method_verdict`, which the banner names too (bench reports with prompt lookup)."""
    if report["kind"] != "bench":
        return []
    verdict = method_verdict(report)
    winners = dict(verdict["workloads"])
    out = []
    for entry in report.get("per_set", []):
        modes = entry["modes"]
        if "winner" not in entry or not any(row_method(m).drafts_vary for m in modes):
            continue
        name = entry["prompt_set"]
        out.append(Workload(name, _methods(modes), _short(winners[name])))
    if len(out) > 1:
        overall = _short(verdict["overall"])
        out.insert(0, Workload(ALL_WORKLOADS, _methods(report["modes"]), overall))
    return out


def _speed(winner: Winner) -> str:
    return f" ({winner['speedup']:.2f}x)" if winner.get("speedup") else ""


def _workload_detail(report: BenchReport, overall: Winner) -> str:
    """Which method wins which workload, when they differ from the overall winner."""
    verdict = method_verdict(report)
    others = [(name, w) for name, w in verdict["workloads"] if w["label"] != overall["label"]]
    if not others:
        return ""
    parts = [f"{name}: {w['label']}{_speed(w)}" for name, w in others]
    return (
        f" Other workloads have other winners ({'; '.join(parts)}); Auto in the chat "
        "chooses per turn."
    )


def verdict(report: Report) -> tuple[str, str, str]:
    """(status, title, detail) for the banner; on the demo model, with why MTP loses there and
    what it measured on a full-size model (core.measure.fullsize_figures)."""
    status, title, detail = _verdict(report)
    if is_demo_report(report):
        detail += f"\n\n{demo_mtp_note()}"
    return status, title, detail


def is_demo_report(report: Report) -> bool:
    model = report.get("model")
    path = model.get("path") if isinstance(model, dict) else None
    return isinstance(path, str) and is_demo_model(Path(path))


def _verdict(report: Report) -> tuple[str, str, str]:
    if report["kind"] == "validate":
        summary = report["summary"]
        name = method_label(report["settings"])
        what = row_method(report["settings"]).label
        if summary["all_identical"]:
            detail = (
                f"{what} reproduced plain greedy decoding token for token on all "
                f"{summary['prompts']} prompts ({report['settings']['max_new_tokens']} new "
                f"tokens, exact f32 numerics); {fmt(summary['acceptance_rate'], '{:.0%}')} of "
                "drafts accepted."
            )
            speedup = summary["speedup"]
            if speedup:
                detail += f" Speed: {speedup['median']:.2f}x plain decoding."
            return "ok", f"Validation passed: {name} output is identical", detail
        # A prompt whose output differs has its divergence.
        first, div = next(
            (r, found)
            for r in report["results"]
            if not r["identical"] and (found := r["divergence"]) is not None
        )
        margin = div["baseline_margin"]
        kind = {
            "near_tie": "a numerical near-tie, not a fault",
            "fault": "a clear margin: a real fault",
            "unknown": "margin unknown",
        }[div["verdict"]]
        detail = (
            f"Different on {summary['prompts'] - summary['identical_prompts']} of "
            f"{summary['prompts']} prompts. First: “{first['prompt'][:60]}” at token "
            f"{div['position']}: plain {div['baseline_token']!r} vs {name} "
            f"{div['mtp_token']!r} "
            f"(logit margin {fmt(margin, '{:.4f}')}, {kind})."
        )
        status = "warning" if div["verdict"] == "near_tie" else "error"
        return status, f"Validation failed: {name} changed the output", detail
    return _bench_verdict(report)


def _bench_verdict(report: BenchReport) -> tuple[str, str, str]:
    """The overall winner of `method_verdict` (the chart's "all workloads" winner), with the
    MTP recommendation's reason and the workloads that another method wins."""
    rec = report["recommendation"]
    overall = method_verdict(report)["overall"]
    detail = rec["reason"]
    if row_method(overall).drafts_vary:
        # The MTP recommendation's reason is Auto's starting point, said as such.
        label = overall["label"]
        detail = (
            f"{label[:1].upper()}{label[1:]} was the fastest method over all prompts: "
            f"{overall['speedup']:.2f}x plain decoding, "
            f"{fmt(overall['acceptance_rate'], '{:.0%}')} of drafts accepted. Without prompt "
            f"lookup (Auto's starting point): {detail}"
        )
    baseline = report.get("baseline")  # reports from before it was measured have none
    if baseline:
        detail += f" Speed-ups are against {baseline['label']}, {baseline['reason']}."
    detail += _workload_detail(report, overall)
    if not row_method(overall).is_plain:
        return "ok", f"Recommended: {overall['label']}{_speed(overall)}", detail
    lookup = any(row_method(m).drafts_vary for m in report["modes"])
    if rec["mtp_slower"]:
        slower = "MTP and prompt lookup are" if lookup else "MTP is"
        return "warning", f"Recommended: plain decoding ({slower} slower here)", detail
    return "error", "Recommended: plain decoding", detail


def local_time(created: str, pattern: str = "%d %b %H:%M") -> str:
    """A report's UTC timestamp in the user's time zone ("30 Nov 01:16")."""
    try:
        moment = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return created
    return moment.astimezone().strftime(pattern)
