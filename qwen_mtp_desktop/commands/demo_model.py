"""`demo-model build`: the offline tiny Qwen3.5+MTP model builder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.commands import EXIT_OK, MAX_COUNT, CommandError, bounded_int


def _cmd_demo_model_build(args: argparse.Namespace) -> int:
    out: Path = args.out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CommandError(f"{out} already exists and is not an empty folder; choose a new one")
    if args.export_to is not None and args.export_to.exists() and any(args.export_to.iterdir()):
        raise CommandError(f"{args.export_to} already exists and is not empty; choose a new one")
    try:
        from qwen_mtp_desktop.devtools.tiny_model import (
            DEMO,
            TOOLS,
            SelfCheckError,
            build_checkpoint,
        )
    except ImportError as exc:
        raise CommandError(
            f"the model builder needs the export toolkit ({exc.name} is missing): "
            "pip install 'qwen-mtp-desktop[export]'"
        ) from exc

    def progress(message: str) -> None:
        print(message, flush=True)

    try:
        result = build_checkpoint(
            out,
            moe=args.moe,
            train_steps=args.train_steps,
            seed=args.seed,
            progress=progress,
            recipe=TOOLS if args.tools else DEMO,
        )
    except SelfCheckError as exc:
        raise CommandError(f"the trained model failed its self-check: {exc}") from exc
    print(
        f"built {result.path} ({result.parameters:,} parameters, MTP {result.mtp_parameters:,}) "
        f"in {result.seconds:.1f} s"
    )
    if args.export_to is not None:
        from qwen_mtp_desktop.core.models.export.job import run_export
        from qwen_mtp_desktop.core.models.export.options import ExportError, ExportOptions

        options = ExportOptions(weight_format=args.weight_format)
        try:
            exported = run_export(str(out), args.export_to, options)
        except ExportError as exc:
            print(exc.log_tail, file=sys.stderr)
            raise CommandError(str(exc)) from exc
        if not out.is_absolute() and exported.output_dir is not None:
            _record_source_as_given(exported.output_dir, out)
        print(f"exported {exported.output_dir} in {exported.seconds:.1f} s")
    return EXIT_OK


def _record_source_as_given(model_dir: Path, source: Path) -> None:
    """The manifest names the checkpoint as the command was given it (`make demo-model` gives
    `resources/demo-model/checkpoint`), so the committed demo model carries no builder's path."""
    import json

    from qwen_mtp_desktop.core.files.fileio import atomic_write_text
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME

    path = model_dir / MANIFEST_NAME
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["source"] = source.as_posix()
    atomic_write_text(path, json.dumps(manifest, indent=2) + "\n")


def register(commands: Any) -> None:
    demo = commands.add_parser("demo-model", help="build the offline tiny Qwen3.5+MTP model")
    demo_commands = demo.add_subparsers(dest="demo_command", metavar="ACTION", required=True)
    build = demo_commands.add_parser("build", help="build (and optionally train) a checkpoint")
    build.add_argument("out", type=Path, help="new folder for the Hugging Face checkpoint")
    build.add_argument("--moe", action="store_true", help="Qwen3.5-MoE instead of dense")
    build.add_argument(
        "--tools",
        action="store_true",
        help="train the tool-calling model (tests/tool-model) instead of the counting demo",
    )
    build.add_argument(
        "--train-steps",
        type=bounded_int(0, MAX_COUNT),
        default=0,
        help="joint training steps (0: random)",
    )
    build.add_argument("--seed", type=bounded_int(0, 2**32 - 1), default=0)
    build.add_argument("--export-to", type=Path, help="also export it to this OpenVINO folder")
    build.add_argument(
        "--weight-format",
        choices=["fp32", "fp16", "int8", "int4"],
        default="fp16",
        help="weight format of the export (default fp16)",
    )
    build.set_defaults(func=_cmd_demo_model_build)
