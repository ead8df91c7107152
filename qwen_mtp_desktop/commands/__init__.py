"""Headless commands over the same core as the app. Each module has `register(commands)`.

Every command prints a one-line reason and exits non-zero on bad input; no traceback is shown
(the full one goes to the log file).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.decoding.method import DecodingMethod

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure the user can act on; its message is printed as one line."""


#: No count the commands take (tokens, rounds, context) is meaningful above this; a larger
#: value is a typo, and passed on it would overflow a native size or run for days.
MAX_COUNT = 1_000_000


def whole_number(text: str, low: int, high: int) -> int:
    """`text` as a whole number within [low, high]; ArgumentTypeError (exit 2) otherwise."""
    shown = text if len(text) <= 40 else text[:37] + "..."
    stripped = text.strip()
    if not stripped.lstrip("+-").isascii() or len(stripped) > 40:
        raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number from {low} to {high}")
    try:
        value = int(stripped)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
    if value > high:
        raise argparse.ArgumentTypeError(f"must be at most {high:,}, got {shown}")
    return value


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type` for whole numbers within [low, high]."""

    def parse(text: str) -> int:
        return whole_number(text, low, high)

    parse.__name__ = f"whole number {low}-{high}"  # argparse names the type in its messages
    return parse


def positive_int(text: str) -> int:
    return whole_number(text, 1, MAX_COUNT)


def output_file(text: str) -> Path:
    """A file the command will write: refused up front (usage error) when it is a device, a
    FIFO, a symbolic link or a folder, before any long run starts."""
    from qwen_mtp_desktop.core.files.safe_files import UnsafeFileError, check_output_target

    path = Path(text)
    try:
        check_output_target(path)
    except UnsafeFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path


def add_lookup_arguments(parser: argparse.ArgumentParser, *, what: str) -> None:
    """`--prompt-lookup` (help: `what` it does for this command) and `--max-ngram-size`;
    `check_lookup_arguments` checks them against the draft count."""
    from qwen_mtp_desktop.core.decoding.method import DEFAULT_NGRAM, MAX_NGRAM

    parser.add_argument("--prompt-lookup", action="store_true", help=what)
    parser.add_argument(
        "--max-ngram-size",
        type=bounded_int(1, MAX_NGRAM),
        default=None,
        metavar="N",
        help=f"with --prompt-lookup: longest n-gram searched (default {DEFAULT_NGRAM})",
    )


def check_lookup_arguments(args: argparse.Namespace, draft_tokens: int | str | None) -> None:
    """The usage errors (exit 2) of `add_lookup_arguments`' options with --num-assistant-tokens."""
    from qwen_mtp_desktop.core.decoding.method import MAX_LOOKUP_DRAFTS

    if args.max_ngram_size is not None and not args.prompt_lookup:
        args.usage_error("argument --max-ngram-size: applies only with --prompt-lookup")
    if args.prompt_lookup and isinstance(draft_tokens, int) and draft_tokens > MAX_LOOKUP_DRAFTS:
        args.usage_error(
            f"argument --num-assistant-tokens: with --prompt-lookup must be at most "
            f"{MAX_LOOKUP_DRAFTS}, got {draft_tokens}"
        )


def drafting_method(args: argparse.Namespace, draft_tokens: int | None) -> DecodingMethod:
    """The drafting method `--num-assistant-tokens K`, `--prompt-lookup` and
    `--max-ngram-size N` ask for (greedy): MTP at depth K (default 1), or prompt lookup with K
    drafts per step (default 4) and n-grams up to N (default 3). The one place the CLI's
    spelling of a method becomes a `DecodingMethod` (`check_lookup_arguments` first)."""
    from qwen_mtp_desktop.core.decoding.method import (
        DEFAULT_LOOKUP_DRAFTS,
        DEFAULT_NGRAM,
        DecodingMethod,
    )

    if args.prompt_lookup:
        return DecodingMethod.lookup(
            draft_tokens or DEFAULT_LOOKUP_DRAFTS, args.max_ngram_size or DEFAULT_NGRAM
        )
    return DecodingMethod.mtp(draft_tokens or 1)
