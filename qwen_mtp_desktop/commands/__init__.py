"""Headless commands over the same core as the app. Each module has `register(commands)`.

Every command prints a one-line reason and exits non-zero on bad input; no traceback is shown
(the full one goes to the log file).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class CommandError(Exception):
    """A failure the user can act on; its message is printed as one line."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


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
