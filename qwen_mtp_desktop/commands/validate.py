"""`validate`: check that MTP decoding reproduces plain greedy decoding, then time both.

Exit status: 0 when every prompt gave identical output, 1 otherwise (or when it could not run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.commands import (
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    add_lookup_arguments,
    bounded_int,
    check_lookup_arguments,
    drafting_method,
    output_file,
    positive_int,
)
from qwen_mtp_desktop.core.decoding.method import MAX_MTP_DEPTH

if TYPE_CHECKING:  # the measurement code is imported when a command runs
    from qwen_mtp_desktop.core.measure.records import Report


class ProgressPrinter:
    """One stderr line per step of a long run ("[3/12] count-up: MTP decoding (n=1)")."""

    def __init__(self) -> None:
        self._last = ""

    def __call__(self, progress: Any) -> None:
        if progress.message != self._last:  # a step's start and end share one message
            print(f"[{progress.done}/{progress.total}] {progress.message}", file=sys.stderr)
            self._last = progress.message


def save_and_export(report: Report, args: argparse.Namespace) -> list[Path]:
    """Keep the report in the model's history (unless --no-save) and write --export files."""
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.measure.acceptance_health import save_reference
    from qwen_mtp_desktop.core.measure.report_markdown import export_report
    from qwen_mtp_desktop.core.measure.reports import save_report

    written: list[Path] = []
    try:
        if not args.no_save:
            written.append(save_report(report))
            save_reference(report)  # what the chat's acceptance health check compares with
        for target in args.export or []:
            written.append(export_report(report, target))
    except (OSError, UserFacingError) as exc:
        raise CommandError(f"the report could not be written: {exc}") from exc
    return written


def _cmd_validate(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.measure.prompt_sets import default_prompt_set_name, load_prompt_set
    from qwen_mtp_desktop.core.measure.reports import fmt
    from qwen_mtp_desktop.core.measure.validate import method_label, run_validation
    from qwen_mtp_desktop.core.measure.verdicts import row_method

    check_lookup_arguments(args, args.num_assistant_tokens)

    try:
        prompt_set = load_prompt_set(args.prompts or default_prompt_set_name(args.model_dir))
        report = run_validation(
            args.model_dir,
            prompt_set,
            max_new_tokens=args.max_new_tokens,
            method=drafting_method(args, args.num_assistant_tokens),
            device=args.device,
            timing=not args.no_timing,
            progress=ProgressPrinter(),
        )
    except UserFacingError as exc:
        raise CommandError(str(exc)) from exc
    written = save_and_export(report, args)
    summary = report["summary"]
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        label = method_label(report["settings"])
        for result in report["results"]:
            mtp = result["mtp"]
            line = f"{'same' if result['identical'] else 'DIFF'}  {result['prompt_id']}: "
            line += f"{result['baseline_tokens']} tokens, {fmt(mtp['acceptance_rate'], '{:.0%}')}"
            line += " of drafts accepted"
            if result["timing"] is not None:
                timing = result["timing"]
                line += (
                    f", plain {timing['baseline']['decode_tokens_per_s']:.1f} tok/s, "
                    f"{label} {timing['mtp']['decode_tokens_per_s']:.1f} tok/s "
                    f"({fmt(timing['speedup'], '{:.2f}x')})"
                )
            print(line)
            div = result["divergence"]
            if div is not None:
                print(
                    f"      first difference at token {div['position']}: plain "
                    f"{div['baseline_token']!r} vs {label} {div['mtp_token']!r}, logit margin "
                    f"{fmt(div['baseline_margin'], '{:.4f}')} ({div['verdict'].replace('_', '-')})"
                )
        verdict = "identical" if summary["all_identical"] else "NOT identical"
        print(
            f"{row_method(report['settings']).label} output {verdict} to plain decoding on "
            f"{summary['identical_prompts']}/"
            f"{summary['prompts']} prompts; acceptance {fmt(summary['acceptance_rate'], '{:.1%}')}"
        )
        for path in written:
            print(f"report: {path}")
    return EXIT_OK if summary["all_identical"] else EXIT_FAILED


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    parser.add_argument(
        "--max-new-tokens",
        type=positive_int,
        metavar="N",
        help=("tokens to generate per prompt (default: the prompt set's own length)"),
    )
    parser.add_argument("--device", default="CPU", help="OpenVINO device (CPU, GPU, NPU)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--export",
        type=output_file,
        action="append",
        metavar="FILE",
        help="also write the report to FILE (.md for Markdown, else JSON); repeatable",
    )
    parser.add_argument(
        "--no-save", action="store_true", help="do not keep the report in the model's history"
    )


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "validate",
        help="check that MTP (or prompt lookup) output equals plain greedy decoding "
        "(exit 0 only if identical)",
        description="Decode each prompt greedily with and without the MTP head (or prompt "
        "lookup, with --prompt-lookup) (exact f32 "
        "numerics), compare the token ids, then time both modes. Exit status 0 only when every "
        "prompt is identical.",
    )
    add_common_arguments(parser)
    parser.add_argument(
        "--prompts",
        metavar="SET",
        help="built-in prompt set name (demo, chat, code, list, summarise) or a JSON file "
        "(default: demo for the demo model, else chat)",
    )
    parser.add_argument(
        "--num-assistant-tokens",
        type=bounded_int(1, MAX_MTP_DEPTH),
        default=1,
        metavar="K",
        help="draft tokens per step (default 1)",
    )
    add_lookup_arguments(
        parser,
        what="validate prompt lookup (n-gram drafts from the prompt) instead of the MTP head",
    )
    parser.add_argument(
        "--no-timing", action="store_true", help="only compare outputs, skip the timed pass"
    )
    parser.set_defaults(func=_cmd_validate, usage_error=parser.error)
