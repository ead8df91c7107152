"""Sanity checks for the benchmark scripts' `--smoke` runs.

A smoke run takes the same code path as a real run with tiny sizes, so a script that no longer
fits the code under it fails in `make test` instead of on the day someone needs its numbers.
Its numbers mean nothing (too few tokens, a busy machine); what is checked is that they exist
and are sane: finite and positive, with every expected row present.
"""

from __future__ import annotations

import math
import sys


class SmokeCheck:
    """Collects problems; `finish()` reports them and gives the process exit code."""

    def __init__(self, script: str) -> None:
        self.script = script
        self.problems: list[str] = []
        self.checked = 0

    def require(self, condition: bool, problem: str) -> None:
        self.checked += 1
        if not condition:
            self.problems.append(problem)

    def positive(self, what: str, value: object) -> None:
        """`value` must be a finite number above zero (speeds, times, sizes)."""
        ok = (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value > 0
        )
        self.require(ok, f"{what} is {value!r}, expected a finite positive number")

    def fraction(self, what: str, value: object) -> None:
        """`value` must be a number in [0, 1] (acceptance rates)."""
        ok = isinstance(value, int | float) and math.isfinite(value) and 0 <= value <= 1
        self.require(ok, f"{what} is {value!r}, expected a number from 0 to 1")

    def finish(self) -> int:
        if self.problems:
            print(f"{self.script} smoke check FAILED:", file=sys.stderr)
            for problem in self.problems:
                print(f"  - {problem}", file=sys.stderr)
            return 1
        print(f"{self.script} smoke check passed ({self.checked} checks)")
        return 0
