"""Command line: no arguments opens the app; subcommands (qwen_mtp_desktop.commands) run the
same core headless."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from qwen_mtp_desktop import APP_ID
from qwen_mtp_desktop.commands import EXIT_FAILED, CommandError, bounded_int, output_file
from qwen_mtp_desktop.core.system.privacy import block_telemetry

COMMAND_NAMES = ("doctor", "generate", "serve", "models", "export", "validate", "bench",
                 "demo_model")  # fmt: skip


def __getattr__(name: str) -> tuple[ModuleType, ...]:
    """`COMMAND_MODULES`, imported when first asked for: opening the window needs none of
    them, and they import much of the core (issue 28's start time)."""
    if name != "COMMAND_MODULES":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    modules = tuple(import_module(f"qwen_mtp_desktop.commands.{n}") for n in COMMAND_NAMES)
    globals()[name] = modules
    return modules


def _command_modules() -> tuple[ModuleType, ...]:
    modules = globals().get("COMMAND_MODULES")  # set by __getattr__, or by a test
    return modules if modules is not None else __getattr__("COMMAND_MODULES")


class VersionAction(argparse.Action):
    """`--version`: app version, git revision, build kind and runtime versions, then exit."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str = argparse.SUPPRESS,
        default: str = argparse.SUPPRESS,
        help: str | None = None,
    ) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from qwen_mtp_desktop.core.system.buildinfo import build_info

        print(build_info().version_text())
        parser.exit()


def build_parser(*, commands: bool = True) -> argparse.ArgumentParser:
    """The command line; without `commands`, only the options that open the window."""
    parser = argparse.ArgumentParser(
        prog=APP_ID,
        description="Local Qwen3.5 chat on OpenVINO with multi-token-prediction speed-up. "
        "Without a command, opens the app.",
    )
    parser.add_argument(
        "--version",
        action=VersionAction,
        help="show the version, git revision and runtime versions, then exit",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="headless check: chat with the bundled demo model with and without MTP, compare "
        "the outputs, print one line, exit 0 if they are identical and drafts were accepted",
    )
    parser.add_argument("--model", type=Path, help="open the app with this model directory")
    parser.add_argument("--screenshot", type=output_file, help=argparse.SUPPRESS)
    parser.add_argument("--quit-after-ms", type=bounded_int(0, 86_400_000), help=argparse.SUPPRESS)
    if not commands:
        parser.set_defaults(command=None)
        return parser
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        module.register(subparsers)
    return parser


def _window_options(
    parser: argparse.ArgumentParser, arguments: list[str]
) -> argparse.Namespace | None:
    """The options when they only open the window (no command, no help), read without
    building every command's parser: some import what their defaults come from, which would
    delay the window (issue 28). None when a command or help is asked for."""
    if any(argument in ("-h", "--help") for argument in arguments):
        return None
    options, rest = parser.parse_known_args(arguments)
    return None if rest else options


def main(argv: Sequence[str] | None = None) -> int:
    block_telemetry()
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(commands=False)
    args = _window_options(parser, arguments)
    if args is None:
        parser = build_parser()
        args = parser.parse_args(arguments)
    if args.self_test:
        if args.command is not None:
            parser.error("--self-test takes no command")
        from qwen_mtp_desktop.commands.self_test import main_self_test

        return main_self_test()
    if args.command is None:
        from qwen_mtp_desktop.app import run_gui

        if args.model is not None and not args.model.expanduser().is_dir():
            # Never fall back to the demo model silently: the user asked for this one.
            what = "is not a folder" if args.model.expanduser().exists() else "does not exist"
            parser.error(f"--model {args.model} {what}; give the folder of an exported model")

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
