"""Owner-only files and folders on POSIX (issue 29).

Conversations are private: the chat database with its WAL and shared-memory files, the logs
(they name models and, with debug logging, hold prompts) and the settings are created 0600 in
0700 folders, and ones an older version left readable by other users are tightened at start
(`make_tree_private`): only permission bits change, nothing is moved or rewritten. SQLite gives
the -wal and -shm files the mode of the database file, so creating that one 0600 is enough.

Links are never followed (a link planted in the data folder must not make the app change a
file elsewhere), and special files are left alone. On Windows everything here does nothing:
a user's profile folders are private there already.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
#: Group and other bits: what "private" removes.
_SHARED_BITS = 0o077
#: Entries looked at by one tree walk at start: a bound, whatever the folder holds.
MAX_ENTRIES = 20_000

_POSIX = sys.platform != "win32"


def create_private_file(path: Path) -> None:
    """Create `path` empty and owner-only unless it exists (then nothing happens)."""
    if not _POSIX:
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, flags, PRIVATE_FILE_MODE))


def open_private_text(path: Path, mode: str = "a", encoding: str = "utf-8") -> io.TextIOWrapper:
    """`path` opened for writing text ("a" appends, "w" truncates), created owner-only when
    it is new (a log, a crash dump)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    flags |= os.O_APPEND if mode == "a" else os.O_TRUNC
    fd = os.open(path, flags, PRIVATE_FILE_MODE)
    return io.TextIOWrapper(io.BufferedWriter(io.FileIO(fd, mode)), encoding=encoding)


def private_folder(folder: Path) -> Path:
    """`folder` created (with its parents) owner-only when new, and made private."""
    folder.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    make_private(folder)
    return folder


def make_private(path: Path) -> bool:
    """Remove group and other permissions from `path` (a regular file or folder, never
    through a link); True when its mode changed. Missing paths and refusals are ignored:
    this tightens, it never fails a start."""
    if not _POSIX:
        return False
    try:
        info = path.lstat()
    except OSError:
        return False
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return False  # links, FIFOs, devices, sockets: not ours to change
    mode = stat.S_IMODE(info.st_mode)
    if not mode & _SHARED_BITS:
        return False
    try:
        path.chmod(mode & ~_SHARED_BITS, follow_symlinks=False)
    except (OSError, NotImplementedError):
        return False
    return True


def make_tree_private(folder: Path, *, skip: Iterable[Path] = ()) -> int:
    """`make_private` on `folder` and everything under it (links not followed, folders in
    `skip` and their contents left as they are, at most MAX_ENTRIES entries); the count of
    paths whose mode changed."""
    if not _POSIX:
        return 0
    skipped = {_absolute(p) for p in skip}
    changed = int(make_private(folder))
    seen = 0
    for root, dirs, files in os.walk(folder, onerror=lambda _e: None):
        here = Path(root)
        kept = []
        for name in dirs:
            child = here / name
            if _absolute(child) in skipped or child.is_symlink():
                continue
            kept.append(name)
            changed += make_private(child)
        dirs[:] = kept
        for name in files:
            changed += make_private(here / name)
        seen += len(dirs) + len(files)
        if seen >= MAX_ENTRIES:
            break
    return changed


def _absolute(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()
