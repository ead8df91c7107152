"""Prompt lookup vs MTP vs plain decoding per workload, from one interleaved run.

The app's own benchmark (`core.measure.bench.run_benchmark`, the code behind `qwen-mtp-desktop
bench` and the Benchmark page) runs every prompt of the workload prompt sets (code, chat, list,
summarise, edit) in every mode: plain decoding (both plain paths; the faster is the baseline), MTP
at each depth on the chat's decoder, and prompt lookup, in an order that rotates from prompt to
prompt and round to round, so this machine's drift hits every mode alike. Ratios are medians of
per-run ratios to the baseline run of the same prompt in the same round; "lookup / MTP" is the
median of lookup's per-run speed-up over the best MTP depth's, same prompt, same round. Decode speed
excludes the time to first token; the TTFT columns show what each path's prefill costs on these
prompts (core.auto.turn_costs prices it for Auto).

    .venv/bin/python benchmarks/methods_per_workload.py /work/fullsize/qwen3.5-0.8b-bigram-int4
    .venv/bin/python benchmarks/methods_per_workload.py MODEL --prompts-per-set 4 --rounds 3
    .venv/bin/python benchmarks/methods_per_workload.py --smoke   # demo model, tiny; checks

With random-weight full-size models (benchmarks/fullsize.py) the MTP numbers are what MTP is
worth at that geometry, but how much an answer copies its prompt is a property of a trained
model and the task: read the lookup columns on a real model before drawing conclusions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from qwen_mtp_desktop.core.decoding.method import DecodingMethod  # noqa: E402
from qwen_mtp_desktop.core.errors import UserFacingError  # noqa: E402
from qwen_mtp_desktop.core.measure.bench import run_benchmark  # noqa: E402
from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set  # noqa: E402
from qwen_mtp_desktop.core.measure.verdicts import method_verdict, row_method  # noqa: E402

WORKLOADS = ("code", "chat", "list", "summarise", "edit")


def lookup_over_mtp(report: dict[str, Any], workload: str, mtp: DecodingMethod) -> float | None:
    """Median over (round, prompt) of prompt lookup's speed-up divided by `mtp`'s."""
    runs = [r for r in report["runs"] if r["prompt_set"] == workload]
    lookup = DecodingMethod.from_record(report["settings"]["lookup"])
    chat_decoder = report["settings"]["mtp_decoder"]
    ratios = []
    for row in runs:
        if row_method(row).drafting != lookup or not row["speedup"]:
            continue
        paired = next(
            (
                r
                for r in runs
                if r["round"] == row["round"]
                and r["prompt_id"] == row["prompt_id"]
                and r["decoder"] == chat_decoder
                and row_method(r).drafting == mtp
            ),
            None,
        )
        if paired is not None and paired["speedup"]:
            ratios.append(row["speedup"] / paired["speedup"])
    return statistics.median(ratios) if ratios else None


def table(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    verdict = dict(method_verdict(report)["workloads"])
    for entry in report["per_set"]:
        modes = entry["modes"]
        base = next(m for m in modes if row_method(m).is_plain)
        mtp = [m for m in modes if row_method(m).uses_mtp_head and m["speedup"]]
        best = max(mtp, key=lambda m: m["speedup"]["median"], default=None)
        lookup = next((m for m in modes if row_method(m).kind == "lookup"), None)
        lookup_speedup = lookup["speedup"] if lookup else None
        name = entry["prompt_set"]
        rows.append(
            {
                "workload": name,
                "plain_tok_s": base["decode_tokens_per_s"]["median"],
                "plain_ttft_ms": base["ttft_s"]["median"] * 1000,
                "mtp": best["label"] if best else "–",
                "mtp_ratio": best["speedup"]["median"] if best else None,
                "mtp_ttft_ms": best["ttft_s"]["median"] * 1000 if best else None,
                "lookup_ratio": lookup_speedup["median"] if lookup_speedup else None,
                "lookup_ttft_ms": lookup["ttft_s"]["median"] * 1000 if lookup else None,
                "lookup_accepted": lookup["acceptance_rate"] if lookup else None,
                "lookup_over_mtp": (
                    lookup_over_mtp(report, name, row_method(best)) if best else None
                ),
                "identical": all(m["identical"] for m in modes),
                "winner": verdict[name]["label"],
            }
        )
    return rows


def fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def print_table(report: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    model = report["model"]["name"]
    print(f"\n## {model} on {report['device']}: {report['settings']['runs']} interleaved rounds")
    print(f"baseline: {report['baseline']['label']}")
    print(
        "| workload | plain tok/s | best MTP | MTP / plain | lookup / plain | lookup / MTP | "
        "lookup accepted | TTFT ms plain / MTP / lookup | identical | winner |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        ttft = " / ".join(
            fmt(row[k], "{:.0f}") for k in ("plain_ttft_ms", "mtp_ttft_ms", "lookup_ttft_ms")
        )
        print(
            f"| {row['workload']} | {row['plain_tok_s']:.1f} | {row['mtp']} | "
            f"{fmt(row['mtp_ratio'], '{:.2f}x')} | {fmt(row['lookup_ratio'], '{:.2f}x')} | "
            f"{fmt(row['lookup_over_mtp'], '{:.2f}x')} | "
            f"{fmt(row['lookup_accepted'], '{:.0%}')} | {ttft} | "
            f"{'yes' if row['identical'] else 'NO'} | {row['winner']} |"
        )
    for row in rows:  # one line per workload, easy to grep
        print(
            f"{row['workload']}: MTP {fmt(row['mtp_ratio'], '{:.2f}')}x, lookup "
            f"{fmt(row['lookup_ratio'], '{:.2f}')}x, lookup/MTP "
            f"{fmt(row['lookup_over_mtp'], '{:.2f}')}x, winner {row['winner']}"
        )
    overall = method_verdict(report)["overall"]
    print(f"overall winner: {overall['label']} ({report['duration_s']:.0f} s)")


def check_smoke(rows: list[dict[str, Any]], sets: tuple[str, ...]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("methods_per_workload.py")
    check.require([r["workload"] for r in rows] == list(sets), f"workloads {rows!r}")
    for row in rows:
        name = row["workload"]
        check.positive(f"{name} plain tok/s", row["plain_tok_s"])
        check.positive(f"{name} MTP / plain", row["mtp_ratio"])
        check.positive(f"{name} lookup / plain", row["lookup_ratio"])
        check.positive(f"{name} lookup / MTP", row["lookup_over_mtp"])
        check.positive(f"{name} lookup TTFT", row["lookup_ttft_ms"])
        check.require(row["identical"], f"{name}: a method changed the output")
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least, whole_numbers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", type=Path, nargs="?", help="an exported model folder")
    parser.add_argument("--sets", default=",".join(WORKLOADS), help="prompt sets (workloads)")
    parser.add_argument("--prompts-per-set", type=at_least(1), default=2)
    parser.add_argument(
        "--depths", type=whole_numbers(1, 8), default="1,2", help="MTP draft depths"
    )
    parser.add_argument("--lookup-tokens", type=at_least(1), default=4)
    parser.add_argument("--rounds", type=at_least(1), default=2)
    parser.add_argument("--max-new-tokens", type=at_least(1), default=64)
    parser.add_argument("--smoke", action="store_true", help="demo model, tiny; checks")
    args = parser.parse_args(argv)
    from qwen_mtp_desktop.core.files.paths import demo_model_dir

    if args.smoke:
        args.model_dir = args.model_dir or demo_model_dir()
        args.sets, args.prompts_per_set, args.rounds, args.max_new_tokens = "list,edit", 1, 1, 12
    if args.model_dir is None:
        parser.error("give MODEL_DIR, an exported model folder (or --smoke)")
    depths = tuple(args.depths)
    sets = tuple(s.strip() for s in args.sets.split(",") if s.strip())
    try:
        prompt_sets = [
            replace(p, prompts=p.prompts[: args.prompts_per_set])
            for p in (load_prompt_set(name) for name in sets)
        ]
        report = run_benchmark(
            args.model_dir,
            prompt_sets,
            depths=depths,
            runs=args.rounds,
            warmup=1,
            max_new_tokens=args.max_new_tokens,
            lookup=DecodingMethod.lookup(args.lookup_tokens),
        )
    except UserFacingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = table(report)
    print_table(report, rows)
    return check_smoke(rows, sets) if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
