"""`export SOURCE [OUT]`: preflight, export with the MTP head, verify, write the manifest.

The same core as the export wizard. It refuses a non-empty OUT unless --force (which replaces
the folder only after the new export succeeded). Exit status 0 means exported and verified; on
any failure one line says why (with the exporter's log tail on stderr when there is one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.commands import EXIT_FAILED, EXIT_OK, CommandError, positive_int


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def _group_size(text: str) -> int:
    if text.strip() == "-1":
        return -1
    return positive_int(text)


def _cmd_export(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.models.export.job import ExportJob, ExportRequest
    from qwen_mtp_desktop.core.models.export.options import (
        ExportError,
        ExportOptions,
        default_destination,
        parse_source,
    )
    from qwen_mtp_desktop.core.models.export.preflight.checkpoint import inspect_checkpoint_folder
    from qwen_mtp_desktop.core.models.export.preflight.checks import first_failure
    from qwen_mtp_desktop.core.models.export.preflight.checks import run_preflight as preflight
    from qwen_mtp_desktop.core.models.export.progress import ProgressEvent
    from qwen_mtp_desktop.core.models.export.staging import cleanup_stale_exports
    from qwen_mtp_desktop.core.units import format_bytes

    try:
        source = parse_source(args.source, args.revision)
        changes: dict[str, Any] = {
            "group_size": args.group_size,
            "sym": args.sym,
            "ratio": args.ratio,
            "trust_remote_code": args.trust_remote_code,
            "mtp_weight_format": args.mtp_weight_format,
        }
        if args.group_size_fallback is not None:
            changes["group_size_fallback"] = args.group_size_fallback
        options = ExportOptions.recommended(args.weight_format, **changes)
        options.check()
    except ExportError as exc:
        raise CommandError(str(exc)) from exc
    out = (args.out or default_destination(source, options)).expanduser().absolute()
    cleanup_stale_exports([out.parent])

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr)

    if source.kind == "hub":
        from qwen_mtp_desktop.core.models.export.hub import hub_cache_dir, inspect_hub_checkpoint

        checkpoint = inspect_hub_checkpoint(source.value, source.revision)
        cache: Path | None = hub_cache_dir()
    else:
        checkpoint = inspect_checkpoint_folder(Path(source.value))
        cache = None
    report = preflight(checkpoint, options, out, overwrite=args.force, hf_cache=cache)
    for item in report.items:
        if item.status == "warn" or (item.status == "fail" and item is not report.failures[0]):
            say(f"preflight {item.status}: {item.message} {item.fix}".rstrip())
    if not report.ok:
        if args.json:
            print(json.dumps({"status": "preflight_failed", "preflight": report.to_json_dict()}))
        raise CommandError(first_failure(report))
    if report.estimate is not None:
        est = report.estimate
        say(
            f"exporting {source.display} -> {out} ({options.weight_format}, MTP "
            f"{options.mtp_weight_format}); estimated output {format_bytes(est.output_bytes)}, "
            f"peak RAM {format_bytes(est.peak_ram_bytes)}"
        )

    last_label: list[str] = [""]

    def on_event(event: ProgressEvent) -> None:
        if event.label != last_label[0]:
            last_label[0] = event.label
            say(f"[{event.overall:4.0%}] {event.label}")

    def on_line(line: str) -> None:
        if args.verbose:
            print(f"  | {line}", file=sys.stderr)

    request = ExportRequest(
        source, out, options, overwrite=args.force, verify_generation=not args.no_generation_check
    )
    outcome = ExportJob(request, on_line=on_line, on_event=on_event).run()
    if args.json:
        payload: dict[str, Any] = outcome.to_json_dict()
        payload["preflight"] = report.to_json_dict()
        print(json.dumps(payload, indent=2))
    if outcome.status != "succeeded":
        if outcome.log_tail and not args.json:
            print(outcome.log_tail, file=sys.stderr)
        raise CommandError(outcome.reason())
    verification = outcome.verification
    if verification is not None:
        for check in verification.items:
            say(f"verify {check.status}: {check.message}")
    if not args.json:
        print(
            f"exported {out} in {outcome.seconds:.1f} s, "
            f"peak memory {format_bytes(outcome.peak_rss_bytes)}"
        )
    if verification is not None and not verification.ok:
        raise CommandError(outcome.reason())
    return EXIT_OK if outcome.succeeded else EXIT_FAILED


def register(commands: Any) -> None:
    cmd = commands.add_parser(
        "export",
        help="export a Qwen3.5 checkpoint to OpenVINO with its MTP head, verified",
        description="Export a Qwen3.5 checkpoint (Hugging Face model id or local folder) to an "
        "OpenVINO model folder with its MTP head, then verify it. OUT defaults to the app's "
        "Models folder.",
    )
    cmd.add_argument("source", metavar="SOURCE", help="hub id (org/name[@rev]) or a folder")
    cmd.add_argument("out", metavar="OUT", nargs="?", type=Path, help="new model folder")
    cmd.add_argument(
        "--weight-format",
        choices=["fp16", "int8", "int4"],
        default="int4",
        help="weights of the main model (default int4)",
    )
    cmd.add_argument("--group-size", type=_group_size, metavar="N", help="INT4 group size")
    cmd.add_argument("--sym", action="store_true", help="symmetric quantization")
    cmd.add_argument("--ratio", type=_ratio, metavar="R", help="share of INT4 layers (0-1]")
    cmd.add_argument(
        "--group-size-fallback",
        choices=["error", "ignore", "adjust"],
        help="layers that fit no group (default for int4: ignore)",
    )
    cmd.add_argument(
        "--mtp-weight-format",
        choices=["default", "same", "none", "int8", "int4"],
        default="default",
        help="MTP head compression: default (like the main model with its RoPE frequencies "
        "in full precision; optimum-intel's choice except for int8), like the main model, none "
        "(fp16), int8 or int4",
    )
    cmd.add_argument("--revision", help="hub revision (branch, tag or commit)")
    cmd.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run code shipped with the checkpoint (Qwen3.5 does not need it)",
    )
    cmd.add_argument(
        "--force", action="store_true", help="replace OUT if it exists (after success)"
    )
    cmd.add_argument(
        "--no-generation-check",
        action="store_true",
        help="skip loading the result to compare MTP with plain decoding",
    )
    cmd.add_argument("--json", action="store_true", help="print one JSON object at the end")
    cmd.add_argument("--quiet", action="store_true", help="no progress on stderr")
    cmd.add_argument("--verbose", action="store_true", help="stream the exporter's log")
    cmd.set_defaults(func=_cmd_export)
