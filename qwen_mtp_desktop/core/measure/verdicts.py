"""A benchmark report's verdicts, read by everything that names a winner: each workload's
(`workload_winner`: the fastest method that kept the output identical) and the overall one
(`method_verdict`), so the Benchmark panel's banner, its per-workload chart and its History
line cannot disagree. Plain functions of the report dict, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.measure.records import BenchReport, MethodVerdict, ModeSummary, Winner


def row_method(row: Mapping[str, Any]) -> DecodingMethod:
    """The method a report row measured (its "method" record: modes, runs, winners, the
    recommendation, a validation's settings); ValueError when it names none
    (core.measure.reports.load_report checked every row of a saved report)."""
    method = DecodingMethod.from_record(row["method"])
    if method is None:
        raise ValueError(f"not a decoding method: {row['method']!r}")
    return method


def workload_winner(modes: Sequence[ModeSummary]) -> Winner:
    """The fastest method on one workload among those whose output stayed identical to plain
    decoding: MTP at some depth, prompt lookup, or plain when neither beats it."""
    drafting = [
        (measured["median"], m)
        for m in modes
        if not row_method(m).is_plain and m["identical"] and (measured := m["speedup"]) is not None
    ]
    best = max(drafting, key=lambda pair: pair[0], default=None)
    if best is None or best[0] <= 1.0:
        return {
            "method": PLAIN.to_record(),
            "label": PLAIN.short_label,
            "speedup": None,
            "acceptance_rate": None,
            "runner_up": best[1]["label"] if best is not None else None,
            "runner_up_speedup": best[0] if best is not None else None,
        }
    median, mode = best
    return {
        "method": mode["method"],
        "label": mode["label"],
        "speedup": median,
        "acceptance_rate": mode["acceptance_rate"],
        "runner_up": None,
        "runner_up_speedup": None,
    }


#: The name of the all-workloads group in `method_verdict` (and the Benchmark panel's chart).
ALL_WORKLOADS = "all workloads"


def method_verdict(report: BenchReport) -> MethodVerdict:
    """The one recommendation of a benchmark report that the Benchmark panel's banner and its
    per-workload chart both show: the overall winner (`workload_winner` over every prompt, so
    prompt lookup counts as well as MTP) and each workload's stored winner. The report's
    `recommendation` stays what it is, Auto's starting MTP depth."""
    workloads = [
        (entry["prompt_set"], entry.get("winner") or workload_winner(entry["modes"]))
        for entry in report.get("per_set", [])
    ]
    return {"overall": workload_winner(report["modes"]), "workloads": workloads}


__all__ = ["ALL_WORKLOADS", "method_verdict", "row_method", "workload_winner"]
