"""Headless commands over the same core as the app. Each module has `register(commands)`.

Every command prints a one-line reason and exits non-zero on bad input; no traceback is shown
(the full one goes to the log file).
"""

from __future__ import annotations

import argparse

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
