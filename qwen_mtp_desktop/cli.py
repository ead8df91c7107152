"""Command line: no arguments opens the app; subcommands run the same core headless.

Every command prints a one-line reason and exits non-zero on bad input; no traceback is shown
(the full one goes to the log file).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from qwen_mtp_desktop import APP_ID, __version__
from qwen_mtp_desktop.core.privacy import block_telemetry

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure the user can act on; its message is printed as one line."""


def _cmd_doctor(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.environment import doctor

    report = doctor()
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2))
        return EXIT_OK if report.runtime_usable else EXIT_FAILED
    width = max(len(name) for name in report.versions)
    print(f"Qwen MTP Desktop {report.app_version} on {report.platform}")
    for name, version in report.versions.items():
        print(f"  {name:<{width}}  {version or 'not installed'}")
    print(f"OpenVINO release family: {report.release_family.message}")
    devices = ", ".join(f"{d.name} ({d.full_name})" for d in report.devices) or "none"
    print(f"Devices: {devices}")
    print(f"Export toolkit: {report.export_toolkit}")
    for label, folder in report.dirs.items():
        print(f"{label.capitalize()} dir: {folder}")
    for note in report.notes:
        print(f"note: {note}")
    if report.runtime_usable:
        print("Chat runtime: usable")
        return EXIT_OK
    print("Chat runtime: NOT usable")
    for problem in report.problems:
        print(f"problem: {problem}")
    return EXIT_FAILED


def _cmd_demo_model_build(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CommandError(f"{out} already exists and is not an empty folder; choose a new one")
    if args.export_to is not None and args.export_to.exists() and any(args.export_to.iterdir()):
        raise CommandError(f"{args.export_to} already exists and is not empty; choose a new one")
    try:
        from qwen_mtp_desktop.devtools.tiny_model import build_checkpoint
    except ImportError as exc:
        raise CommandError(
            f"the model builder needs the export toolkit ({exc.name} is missing): "
            "pip install 'qwen-mtp-desktop[export]'"
        ) from exc

    def progress(message: str) -> None:
        print(message, flush=True)

    result = build_checkpoint(
        out, moe=args.moe, train_steps=args.train_steps, seed=args.seed, progress=progress
    )
    print(
        f"built {result.path} ({result.parameters:,} parameters, MTP {result.mtp_parameters:,}) "
        f"in {result.seconds:.1f} s"
    )
    if args.export_to is not None:
        from qwen_mtp_desktop.core.export import ExportError, ExportOptions, run_export

        options = ExportOptions(weight_format=args.weight_format)
        try:
            exported = run_export(str(out), args.export_to, options)
        except ExportError as exc:
            print(exc.log_tail, file=sys.stderr)
            raise CommandError(str(exc)) from exc
        print(f"exported {exported.output_dir} in {exported.seconds:.1f} s")
    return EXIT_OK


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _cmd_generate(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.engine import (
        Engine,
        EngineError,
        GenerationSettings,
        LoadOptions,
        Message,
    )
    from qwen_mtp_desktop.core.paths import app_paths

    messages: list[Message] = []
    if args.system:
        messages.append(Message("system", args.system))
    messages.append(Message("user", args.prompt))
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens,
        num_assistant_tokens=args.num_assistant_tokens,
        thinking=args.think,
    )
    options = LoadOptions(
        device=args.device, mtp=not args.no_mtp, cache_dir=app_paths().compile_cache_dir
    )
    engine = Engine()
    try:
        loaded = engine.load(args.model_dir, options)
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        generation = engine.generate(messages, settings)
        try:
            for chunk in generation:
                if not args.json:
                    if chunk.reasoning:
                        sys.stderr.write(chunk.reasoning)
                        sys.stderr.flush()
                    if chunk.answer:
                        sys.stdout.write(chunk.answer)
                        sys.stdout.flush()
        except KeyboardInterrupt:
            generation.close()
            raise
    except EngineError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        engine.unload()
    stats = generation.stats
    assert stats is not None
    if args.json:
        payload = {
            "model_dir": str(loaded.model_dir),
            "text": generation.answer,
            "reasoning": generation.reasoning,
            "load_s": loaded.load_s,
            "stats": stats.to_json_dict(),
        }
        print(json.dumps(payload, indent=2))
    else:
        print()
        summary = (
            f"{stats.generated_tokens} tokens, {stats.decode_tokens_per_s:.1f} tok/s, "
            f"TTFT {stats.ttft_s * 1000:.0f} ms, "
        )
        if stats.mode == "mtp":
            summary += (
                f"MTP n={stats.num_assistant_tokens}: {stats.acceptance_rate:.0%} of drafts "
                f"accepted ({stats.mean_accepted_per_step:.2f} per step)"
            )
        else:
            summary += "baseline (no MTP)"
        print(summary, file=sys.stderr)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=APP_ID,
        description="Local Qwen3.5 chat on OpenVINO with multi-token-prediction speed-up. "
        "Without a command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--model", type=Path, help="open the app with this model directory")
    parser.add_argument("--screenshot", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--quit-after-ms", type=int, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    doctor = commands.add_parser("doctor", help="check the runtime, versions and devices")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(func=_cmd_doctor)

    gen = commands.add_parser("generate", help="answer one prompt, streaming to stdout")
    gen.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    gen.add_argument("prompt", metavar="PROMPT")
    gen.add_argument("--system", help="system prompt")
    gen.add_argument("--max-new-tokens", type=_positive_int, default=512)
    depth = gen.add_mutually_exclusive_group()
    depth.add_argument(
        "--num-assistant-tokens",
        type=_positive_int,
        default=1,
        metavar="K",
        help="MTP draft tokens per step (default 1; more is not validated for every model)",
    )
    depth.add_argument("--no-mtp", action="store_true", help="plain decoding, no MTP head")
    gen.add_argument("--device", default="CPU", help="OpenVINO device (CPU, GPU, NPU, AUTO)")
    gen.add_argument(
        "--think",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="let Qwen3.5 think before answering (reasoning goes to stderr)",
    )
    gen.add_argument("--json", action="store_true", help="print one JSON object at the end")
    gen.set_defaults(func=_cmd_generate)

    demo = commands.add_parser("demo-model", help="build the offline tiny Qwen3.5+MTP model")
    demo_commands = demo.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    build = demo_commands.add_parser("build", help="build (and optionally train) a checkpoint")
    build.add_argument("out", type=Path, help="new folder for the Hugging Face checkpoint")
    build.add_argument("--moe", action="store_true", help="Qwen3.5-MoE instead of dense")
    build.add_argument(
        "--train-steps", type=int, default=0, help="joint training steps (0: random)"
    )
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--export-to", type=Path, help="also export it to this OpenVINO folder")
    build.add_argument(
        "--weight-format",
        choices=["fp32", "fp16", "int8", "int4"],
        default="fp16",
        help="weight format of the export (default fp16)",
    )
    build.set_defaults(func=_cmd_demo_model_build)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    block_telemetry()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from qwen_mtp_desktop.app import run_gui

        return run_gui(
            model=args.model, screenshot=args.screenshot, quit_after_ms=args.quit_after_ms
        )
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
