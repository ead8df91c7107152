"""`bench`: plain decoding vs MTP at several draft depths and prompt lookup, per prompt set;
recommends and stores the best depth and the winning method per workload."""

from __future__ import annotations

import argparse
import json
from typing import Any

from qwen_mtp_desktop.commands import EXIT_OK, CommandError, bounded_int, whole_number
from qwen_mtp_desktop.commands.validate import (
    ProgressPrinter,
    add_common_arguments,
    save_and_export,
)
from qwen_mtp_desktop.core.decoding.method import (
    DEFAULT_LOOKUP_DRAFTS,
    DEFAULT_NGRAM,
    MAX_LOOKUP_DRAFTS,
    MAX_NGRAM,
    DecodingMethod,
)
from qwen_mtp_desktop.core.measure.verdicts import method_verdict


def _depths(text: str) -> tuple[int, ...]:
    from qwen_mtp_desktop.core.errors import MeasurementError
    from qwen_mtp_desktop.core.measure.bench import parse_depths

    try:
        return parse_depths(text)
    except MeasurementError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> int:
    return whole_number(text, 0, 100)


def _cmd_bench(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.measure.bench import run_benchmark
    from qwen_mtp_desktop.core.measure.prompt_sets import default_prompt_set_name, load_prompt_set
    from qwen_mtp_desktop.core.measure.recommendations import save_recommendation
    from qwen_mtp_desktop.core.measure.reports import fmt, fmt_spread

    specs = [s for spec in (args.prompts or []) for s in spec.split(",") if s.strip()]
    try:
        sets = [
            load_prompt_set(spec.strip())
            for spec in specs or [default_prompt_set_name(args.model_dir)]
        ]
        report = run_benchmark(
            args.model_dir,
            sets,
            depths=args.depths,
            runs=args.runs,
            warmup=args.warmup,
            max_new_tokens=args.max_new_tokens,
            device=args.device,
            exact_numerics=args.exact_numerics,
            cache_dir=app_paths().compile_cache_dir,
            compare_genai_mtp=args.compare_genai,
            progress=ProgressPrinter(),
            # `--lookup-tokens 0` leaves prompt lookup out.
            lookup=DecodingMethod.lookup(args.lookup_tokens, args.max_ngram_size)
            if args.lookup_tokens
            else None,
        )
    except UserFacingError as exc:
        raise CommandError(str(exc)) from exc
    written = save_and_export(report, args)
    if not args.no_save:
        try:
            save_recommendation(report)
        except OSError as exc:
            raise CommandError(f"the recommendation could not be saved: {exc}") from exc
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return EXIT_OK
    print(f"baseline: {report['baseline']['label']} ({report['baseline']['reason']})")
    tables = [(f"prompt set {e['prompt_set']}", e["modes"]) for e in report["per_set"]]
    if report["comparison"]:
        tables.append(("other decoding paths, all prompt sets", report["comparison"]))
    for title, modes in tables:
        print(f"{title}:")
        print(
            f"  {'mode':<28} {'decode tok/s (min-max)':<26} {'speed-up (min-max)':<22} "
            f"{'accepted':>8}  identical"
        )
        for mode in modes:
            speedup = fmt_spread(mode["speedup"], "{:.2f}x") if mode["speedup"] else "1.00x"
            print(
                f"  {mode['label']:<28} {fmt_spread(mode['decode_tokens_per_s']):<26} "
                f"{speedup:<22} {fmt(mode['acceptance_rate'], '{:.0%}'):>8}  "
                f"{'yes' if mode['identical'] else 'NO'}"
            )
    for entry in report["per_set"]:
        winner = entry["winner"]
        speedup = f" ({winner['speedup']:.2f}x)" if winner["speedup"] is not None else ""
        print(f"winner on {entry['prompt_set']}: {winner['label']}{speedup}")
    overall = method_verdict(report)["overall"]  # what the Benchmark page's banner names
    speedup = f" ({overall['speedup']:.2f}x)" if overall["speedup"] is not None else ""
    print(f"overall winner: {overall['label']}{speedup}")
    rec = report["recommendation"]
    print(f"recommendation (Auto's starting MTP depth): {rec['label']}. {rec['reason']}")
    for path in written:
        print(f"report: {path}")
    return EXIT_OK


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "bench",
        help="measure plain vs MTP at several depths vs prompt lookup, per workload",
        description="Benchmark plain decoding against MTP at each draft depth: warm-up, then N "
        "rounds with the modes interleaved, medians with min-max of decode speed (TTFT "
        "excluded), per-round speed-up ratios and acceptance. Plain decoding runs on every "
        "backend the app has (openvino-genai's stateful SDPA pipeline and the app's own "
        "decoder); the fastest is the baseline every speed-up is measured against. Recommends "
        "the fastest depth whose output stayed identical (or plain decoding) and stores it for "
        "the chat's 'auto' depth. Prompt lookup runs beside them, and each prompt set "
        "(workload) gets a winner: plain, MTP n=k or prompt lookup.",
    )
    add_common_arguments(parser)
    parser.add_argument(
        "--prompts",
        action="append",
        metavar="SET",
        help="prompt set name(s) or JSON file(s), comma-separated or repeated; results are "
        "reported per set (default: demo for the demo model, else chat)",
    )
    parser.add_argument(
        "--depths",
        type=_depths,
        default=(1, 2, 3, 4),
        metavar="1,2,3,4",
        help="MTP draft depths to try (default 1,2,3,4)",
    )
    parser.add_argument(
        "--runs",
        type=bounded_int(1, 1000),
        default=3,
        metavar="N",
        help="measured rounds (default 3)",
    )
    parser.add_argument(
        "--warmup", type=_non_negative, default=1, metavar="N", help="warm-up rounds (default 1)"
    )
    parser.add_argument(
        "--exact-numerics",
        action="store_true",
        help="benchmark with f32 exact numerics (default: the device's normal precision, "
        "as in the chat)",
    )
    parser.add_argument(
        "--compare-genai",
        action="store_true",
        help="also run openvino-genai's own MTP at each depth (listed under 'other decoding "
        "paths'; the chat uses the app's decoder when the model allows)",
    )
    parser.add_argument(
        "--lookup-tokens",
        type=bounded_int(0, MAX_LOOKUP_DRAFTS),
        default=DEFAULT_LOOKUP_DRAFTS,
        metavar="K",
        help=f"prompt lookup's drafts per step (default {DEFAULT_LOOKUP_DRAFTS}; 0 leaves "
        "prompt lookup out)",
    )
    parser.add_argument(
        "--max-ngram-size",
        type=bounded_int(1, MAX_NGRAM),
        default=DEFAULT_NGRAM,
        metavar="N",
        help=f"prompt lookup's longest n-gram (default {DEFAULT_NGRAM})",
    )
    parser.set_defaults(func=_cmd_bench)
