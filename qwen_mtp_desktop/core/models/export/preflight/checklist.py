"""One item of the preflight checklist: pass / warn / fail, each with a fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class CheckItem:
    """One line of a checklist. `key` is stable (tests and the UI use it)."""

    key: str
    status: Status
    title: str
    message: str
    fix: str = ""

    def to_json_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "status": self.status,
            "title": self.title,
            "message": self.message,
            "fix": self.fix,
        }
