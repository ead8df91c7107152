"""Errors the user can act on: a stable code, a plain-language message and a suggested fix."""

from __future__ import annotations


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


class ValidationError(UserFacingError):
    """Validation or benchmarking cannot run (bad prompt set, no MTP head, bad settings...)."""

    code = "VALIDATION_FAILED"


class RunCancelledError(UserFacingError):
    """The user cancelled a validation or benchmark run."""

    code = "CANCELLED"

    def __init__(self) -> None:
        super().__init__("The run was cancelled.")
