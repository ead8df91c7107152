"""Small file helpers: writes that are never left half-written, and a folder's size."""

from __future__ import annotations

import contextlib
import os
import stat
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
    from qwen_mtp_desktop.core.files.safe_files import check_output_target

    check_output_target(path)
    atomic_write_text(path, text)


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under `folder` (links are not followed; what cannot be read
    is left out)."""
    total = 0
    for dirpath, _dirs, files in os.walk(folder, onerror=lambda _e: None):
        for name in files:
            try:
                info = os.lstat(Path(dirpath) / name)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total
