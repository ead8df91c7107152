"""Small file helpers shared by every writer: nothing is ever left half-written."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so readers see the old file or the new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp_name).replace(path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp_name).unlink()
        raise


def write_user_file(path: Path, text: str) -> None:
    """Write a file the user named (an export, a report): atomically, and never in place of a
    device node, a FIFO or a symbolic link (the rename would replace it with a regular file)."""
    from qwen_mtp_desktop.core.safe_files import check_output_target

    check_output_target(path)
    atomic_write_text(path, text)
