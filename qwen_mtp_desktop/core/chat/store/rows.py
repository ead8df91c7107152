"""Rows of the chat database read as records, whatever a damaged or crafted file holds.

SQLite keeps any value in any column (declared types are only affinities), so a crafted file can
hold wrong types, extreme numbers, bytes that are not UTF-8 and JSON that is not JSON. The store
reads every row through here, and a value that cannot be what its column means gets a safe
stand-in (the text of bytes, time 0, default settings, no stats), so reading never raises.
`core.chat.store.repair` finds and reports such damage when the file is opened; values that would
make later writes fail (NULLs, roles outside the CHECK) it repairs in the file itself.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from pathlib import Path
from typing import Any, cast

from qwen_mtp_desktop.core.chat.store.records import (
    ROLES,
    STATUSES,
    ChatSettings,
    Conversation,
    ConversationSummary,
    MessageStatus,
    SearchMatch,
    StoredMessage,
)
from qwen_mtp_desktop.core.chat.store.stats import clean_stats
from qwen_mtp_desktop.core.engine import Role
from qwen_mtp_desktop.core.files.safe_files import parse_json_text

log = logging.getLogger(__name__)

#: Times a chat can carry: 1970 to the end of the year 9999 (what dates can show).
MAX_TIME = 253_402_300_799.0
#: Longest image path kept (Linux PATH_MAX).
MAX_PATH_CHARS = 4096
DEFAULT_ROLE: Role = "assistant"


def text(value: object, default: str = "") -> str:
    """A column's text: bytes that are not UTF-8 decoded with U+FFFD, numbers as written."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None:
        return default
    return str(value)


def optional_text(value: object) -> str | None:
    return None if value is None else text(value)


def timestamp(value: object) -> float:
    """Seconds since 1970 within what a date can show; 0 for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        if math.isfinite(number) and 0.0 <= number <= MAX_TIME:
            return number
    return 0.0


#: What SQLite stores as an integer: a value outside it cannot be written back.
_INT64 = (-(2**63), 2**63 - 1)


def integer(value: object, default: int = 0) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT64[0] <= value <= _INT64[1] else default
    return default


def next_position(value: object) -> int:
    """The position after `value` (a damaged one counts as 0), never past what SQLite holds."""
    return min(integer(value) + 1, _INT64[1])


def optional_id(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def role(value: object) -> Role | None:
    return cast(Role, value) if isinstance(value, str) and value in ROLES else None


def path_text(value: object) -> str | None:
    """A path as stored (an image, a model folder): None when it cannot name a file (a NUL,
    more than MAX_PATH_CHARS)."""
    path = optional_text(value)
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        return None
    return path


def image_path(value: object) -> Path | None:
    path = path_text(value)
    return Path(path) if path is not None else None


def json_dict(value: object, what: str) -> dict[str, Any] | None:
    """A JSON object column (settings, stats), bounded by parse_json_text; None otherwise."""
    if value is None:
        return None
    try:
        parsed = parse_json_text(text(value))
    except (ValueError, RecursionError):
        log.warning("ignoring unreadable %s JSON in the chat store", what)
        return None
    return parsed if isinstance(parsed, dict) else None


def stats(value: object) -> dict[str, Any] | None:
    raw = json_dict(value, "stats")
    return clean_stats(raw) if raw is not None else None


def conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=int(row["id"]),
        title=text(row["title"]),
        created_at=timestamp(row["created_at"]),
        updated_at=timestamp(row["updated_at"]),
        model_dir=path_text(row["model_dir"]),
        system_prompt=text(row["system_prompt"]),
        settings=ChatSettings.from_dict(json_dict(row["settings_json"], "settings") or {}),
        pinned=integer(row["pinned"]) == 1,
    )


def summary(
    row: sqlite3.Row, preview: str, match: SearchMatch | None = None
) -> ConversationSummary:
    return ConversationSummary(
        id=int(row["id"]),
        title=text(row["title"]),
        created_at=timestamp(row["created_at"]),
        updated_at=timestamp(row["updated_at"]),
        model_dir=path_text(row["model_dir"]),
        message_count=integer(row["message_count"]),
        preview=preview,
        preview_role=role(row["preview_role"]),
        pinned=integer(row["pinned"]) == 1,
        match=match,
    )


def message(row: sqlite3.Row) -> StoredMessage:
    status = text(row["status"])
    error = optional_text(row["error"])
    kind = role(row["role"])
    if kind is None:  # repair rewrites these on open; a row changed since reads like this
        error = f"This message was damaged in the chat file (role {text(row['role'])[:40]!r})."
        status = "error"
    return StoredMessage(
        id=int(row["id"]),
        conversation_id=integer(row["conversation_id"]),
        position=integer(row["position"]),
        role=kind or DEFAULT_ROLE,
        content=text(row["content"]),
        reasoning=text(row["reasoning"]),
        image_path=image_path(row["image_path"]),
        created_at=timestamp(row["created_at"]),
        status=cast(MessageStatus, status) if status in STATUSES else "error",
        error=error,
        stats=stats(row["stats_json"]),
        parent_id=optional_id(row["parent_id"]),
        selected=row["selected"] == 1,
        version=max(integer(row["version"], 1), 1),
        version_count=max(integer(row["version_count"], 1), 1),
    )
