"""Errors the user can act on: a stable code, a plain-language message and a suggested fix."""

from __future__ import annotations

import logging
from typing import TypeVar

log = logging.getLogger(__name__)


class UserFacingError(Exception):
    """Base of every error whose message is shown to the user as-is (never a traceback)."""

    code: str = "ERROR"

    def __init__(self, message: str, fix: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return f"{self.message} {self.fix}".strip() if self.fix else self.message


class MeasurementError(UserFacingError):
    """Validation or benchmarking cannot run (bad prompt set, no MTP head, bad settings...)."""

    code = "VALIDATION_FAILED"


class RunCancelledError(UserFacingError):
    """The user cancelled a validation or benchmark run."""

    code = "CANCELLED"

    def __init__(self) -> None:
        super().__init__("The run was cancelled.")


E = TypeVar("E", bound=UserFacingError)


def as_user_error(exc: BaseException, kind: type[E]) -> E:
    """The one path from an exception to what the user sees: `exc` itself when it already is a
    `kind`, else an INTERNAL `kind` that names it (a bug: its traceback goes to the log)."""
    if isinstance(exc, kind):
        return exc
    log.error("unexpected error", exc_info=exc)
    return kind(
        f"Unexpected error: {type(exc).__name__}: {exc}",
        "Details are in the log file.",
        code="INTERNAL",
    )


def native_error_line(exc: BaseException) -> str:
    """The first line of a native runtime error that says what went wrong: OpenVINO starts
    its messages with "Check ..." and "Exception from <source file>" lines."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Check ", "Exception from")):
            return line[:300]
    return text.splitlines()[0][:300] if text else type(exc).__name__
