"""Headless commands over the same core as the app. Each module has `register(commands)`.

Every command prints a one-line reason and exits non-zero on bad input; no traceback is shown
(the full one goes to the log file).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure the user can act on; its message is printed as one line."""


#: No count the commands take (tokens, rounds, context) is meaningful above this; a larger
#: value is a typo, and passed on it would overflow a native size or run for days.
MAX_COUNT = 1_000_000
#: Draft tokens per MTP step: far beyond what pays off (the benchmark tries up to 8).
MAX_DRAFT_TOKENS = 32


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
    from qwen_mtp_desktop.core.safe_files import UnsafeFileError, check_output_target

    path = Path(text)
    try:
        check_output_target(path)
    except UnsafeFileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return path
