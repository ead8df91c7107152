"""Command-line number options shared by the benchmark scripts, as argparse types.

A typo in an option ("--depths 1,x", "--kept 0") ends in argparse's one-line usage error
(exit code 2) before any model is loaded, never in a traceback half-way through a run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from qwen_mtp_desktop.commands import whole_number


def whole_numbers(minimum: int = 1, maximum: int | None = None) -> Callable[[str], list[int]]:
    """Whole numbers separated by commas ("1,2,3"), each from `minimum` to `maximum`."""
    span = f"from {minimum} to {maximum}" if maximum is not None else f"at least {minimum}"

    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"give whole numbers separated by commas, like 1,2,3 (not {text!r})"
            ) from None
        if not values:
            raise argparse.ArgumentTypeError("give at least one number")
        if any(v < minimum or (maximum is not None and v > maximum) for v in values):
            raise argparse.ArgumentTypeError(f"every number must be {span} (not {text!r})")
        return values

    return parse


def fractions(text: str) -> list[float]:
    """Fractions strictly between 0 and 1, separated by commas ("0.3,0.7")."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"give fractions separated by commas, like 0.3,0.7 (not {text!r})"
        ) from None
    if not values or not all(0 < v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"every fraction must be between 0 and 1 (not {text!r})")
    return values


def at_least(minimum: int) -> Callable[[str], int]:
    """One whole number of at least `minimum` (the app's own command-line parser)."""

    def parse(text: str) -> int:
        return whole_number(text, minimum, sys.maxsize)

    return parse
