"""The model's context length, and the check that a prompt fits before generation starts.

Without it a prompt longer than the context runs for minutes before the runtime fails (or
answers from a truncated window). The limit comes from config.json (`max_position_embeddings`,
at the top level or in `text_config`); a folder without one has no check.
"""

from __future__ import annotations

import re
from pathlib import Path

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import FileKind, int_in_range, read_json_object

#: Above any real model's context; a larger value in config.json is damage, not a limit.
MAX_CONTEXT = 16 * 1024 * 1024


def context_length(model_dir: Path) -> int | None:
    try:
        config = read_json_object(model_dir / "config.json", kind=FileKind("config.json", ""))
    except (OSError, ValueError):
        return None
    text = config.get("text_config")
    for source in (text if isinstance(text, dict) else {}, config):
        value = int_in_range(source.get("max_position_embeddings"), 1, MAX_CONTEXT)
        if value is not None:
            return value
    return None


#: How `check_fits` words the count, read back by `overflow_tokens`.
_TOO_LONG = re.compile(r"^The conversation is ([\d,]{1,12}) tokens long;")


def overflow_tokens(message: str) -> int | None:
    """The prompt tokens a `check_fits` error counted (so the context meter can show the
    engine's count, not an estimate), or None for any other message."""
    found = _TOO_LONG.match(message)
    return int(found.group(1).replace(",", "")) if found else None


def check_fits(prompt_tokens: int, limit: int | None, *, code: str = "CONTEXT_TOO_LONG") -> None:
    """Raise when the prompt leaves no room for even one answer token."""
    if limit is not None and prompt_tokens >= limit:
        raise UserFacingError(
            f"The conversation is {prompt_tokens:,} tokens long; this model reads at most "
            f"{limit:,} (its context length), and needs room for the answer.",
            "Start a new chat, or delete or shorten earlier messages.",
            code=code,
        )
