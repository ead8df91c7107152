"""Changing the models folder (Settings > Data folders): what is allowed and what it does.

Nothing is moved, copied or deleted. The new folder receives new exports from the next start;
the models already in the old folder stay there and stay listed, because the old folder is
added to the library's folders. The user is told exactly that.

Refused (issue 29): kernel pseudo-filesystems (/proc, /sys, /dev and anything mounted as
proc, sysfs, devtmpfs, ...: they hold no files, writes go to the kernel) and the shared system
temp folders themselves (every user and program writes there, and they are emptied). Allowed
with a warning: a folder inside a temp folder or on a file system kept in memory (tmpfs),
which loses its models at the next restart or clean-up.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.files.paths import AppPaths, resources_dir
from qwen_mtp_desktop.core.models.library import resolved
from qwen_mtp_desktop.core.settings.store import Settings

#: Longest path accepted (Linux PATH_MAX; Windows long paths are shorter still).
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class FolderChange:
    folder: Path
    #: What happens, in the user's words.
    message: str


@dataclass(frozen=True)
class FolderChoice:
    folder: Path
    #: What the user should know before choosing it ("" when nothing): the folder is
    #: emptied at restart or by clean-ups.
    warning: str = ""


class FolderChoiceError(ValueError):
    """The chosen folder cannot be the models folder; the message says why and what to do."""


#: Kernel pseudo-filesystems: no files of their own; what is written goes to the kernel.
_PSEUDO_FILESYSTEMS = frozenset(
    {
        "proc", "sysfs", "devtmpfs", "devpts", "devfs", "cgroup", "cgroup2", "debugfs",
        "tracefs", "securityfs", "pstore", "bpf", "configfs", "fusectl", "efivarfs",
        "binfmt_misc", "mqueue", "hugetlbfs", "autofs", "nsfs", "rpc_pipefs",
    }
)  # fmt: skip
#: Where they live on Linux and macOS, for when the mount table cannot be read.
_PSEUDO_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
#: File systems kept in memory: emptied at every restart.
_MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _mounts() -> list[tuple[Path, str]]:
    """(mount point, file-system type) from the mount table; empty when there is none
    (Windows, macOS) or it cannot be read."""
    try:
        with Path("/proc/self/mounts").open(encoding="utf-8", errors="replace") as handle:
            lines = handle.read(4 * 1024 * 1024).splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3:  # the kernel writes a space in a path as \040
            point = fields[1].replace("\\040", " ").replace("\\011", "\t")
            found.append((Path(point), fields[2]))
    return found


def filesystem_type(path: Path) -> str | None:
    """The type of the file system `path` (resolved) is on, from the mount table; None when
    unknown. The deepest mount point holding the path wins."""
    best: tuple[int, str] | None = None
    for point, kind in _mounts():
        if _inside(path, point) and (best is None or len(point.parts) >= best[0]):
            best = (len(point.parts), kind)
    return best[1] if best is not None else None


def temp_folders() -> set[Path]:
    """The system's shared temp folders (resolved): Python's, and the POSIX ones."""
    found = {resolved(Path(tempfile.gettempdir()))}
    if sys.platform != "win32":
        found |= {resolved(Path(p)) for p in ("/tmp", "/var/tmp", "/dev/shm")}
    return found


def _check_special_places(folder: Path, key: Path) -> None:
    """Refuse kernel pseudo-filesystems and the shared temp folders themselves."""
    kind = filesystem_type(key)
    pseudo_root = next((r for r in _PSEUDO_ROOTS if _inside(key, r)), None)
    if sys.platform != "win32" and (kind in _PSEUDO_FILESYSTEMS or pseudo_root is not None):
        where = f"a {kind} file system" if kind in _PSEUDO_FILESYSTEMS else str(pseudo_root)
        raise FolderChoiceError(
            f"{folder} is on {where}, a window into the operating system's kernel, not a "
            "place for files; choose a folder on a disk."
        )
    if key in temp_folders():
        raise FolderChoiceError(
            f"{folder} is the system's shared temporary folder: every user and program writes "
            "there and it is emptied at restart; choose or create a folder of its own for "
            "models."
        )


def models_folder_warning(folder: Path) -> str:
    """What the user should know before choosing `folder` ("" when nothing). Reads the mount
    table: run it off the GUI thread."""
    key = resolved(folder)
    temp = next((t for t in sorted(temp_folders()) if _inside(key, t)), None)
    kind = filesystem_type(key)
    if temp is not None:
        return (
            f"{folder} is inside the system's temporary folder {temp}, which is emptied at "
            "restart or by clean-ups: models kept there can disappear."
        )
    if kind in _MEMORY_FILESYSTEMS:
        return (
            f"{folder} is on a file system kept in memory ({kind}): models kept there "
            "disappear at the next restart and take up RAM."
        )
    return ""


def choose_models_folder(text: str, paths: AppPaths) -> FolderChoice:
    """`check_models_folder` and the warning to show with it. Runs on a worker thread."""
    folder = check_models_folder(text, paths)
    return FolderChoice(folder, models_folder_warning(folder))


def check_models_folder(text: str, paths: AppPaths) -> Path:
    """The folder the user typed or picked, checked; FolderChoiceError when it will not do.

    Runs on a worker thread (it looks at the file system)."""
    text = text.strip()
    if not text:
        raise FolderChoiceError("Choose a folder for your models.")
    if len(text) > MAX_PATH_CHARS or not text.isprintable():
        raise FolderChoiceError(
            "That is not a usable folder path (too long, or it holds control characters)."
        )
    try:
        folder = Path(text).expanduser()
    except RuntimeError:  # "~someone" for a user this system does not know
        raise FolderChoiceError(
            f"{text} names the home folder of a user this computer does not know."
        ) from None
    if not folder.is_absolute():
        raise FolderChoiceError(f"{text} is not a full path; choose the folder with Browse…")
    key = resolved(folder)
    if key == resolved(paths.models_dir):
        raise FolderChoiceError(f"{folder} is already the models folder.")
    home = resolved(Path.home())
    refused = {
        resolved(Path(key.anchor)): "the root of a drive",
        home: "your home folder itself",
        resolved(paths.data_dir): "the app's data folder (it holds your chats)",
    }
    if key in refused:
        raise FolderChoiceError(
            f"{folder} is {refused[key]}; choose or create a folder of its own for models."
        )
    _check_special_places(folder, key)
    for inner, what in (
        (paths.config_dir, "settings"),
        (paths.cache_dir, "cache"),
        (paths.log_dir, "log"),
        (resources_dir(), "installation"),
    ):
        if _inside(key, resolved(inner)):
            raise FolderChoiceError(
                f"{folder} is inside the app's {what} folder; choose a folder of its own."
            )
    if _inside(key, resolved(paths.models_dir)) or _inside(resolved(paths.models_dir), key):
        raise FolderChoiceError(
            f"{folder} and the current models folder ({paths.models_dir}) contain one another; "
            "choose a separate folder (nothing is moved between them)."
        )
    try:
        exists = folder.exists()
        is_dir = folder.is_dir()
    except OSError as exc:
        raise FolderChoiceError(f"{folder} cannot be read ({exc.strerror or exc}).") from None
    if exists and not is_dir:
        raise FolderChoiceError(f"{folder} is a file, not a folder.")
    anchor = folder
    while not anchor.exists() and anchor.parent != anchor:
        anchor = anchor.parent
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise FolderChoiceError(f"This app cannot write in {anchor}; choose a folder you own.")
    return folder


def apply_models_folder(
    settings: Settings, folder: Path, paths: AppPaths, *, warning: str = ""
) -> FolderChange:
    """Point the settings at `folder` (checked by `check_models_folder`) and keep the old
    folder in the library, so its models stay listed. Does not touch the file system.
    `warning` (models_folder_warning) ends the message."""
    old = paths.models_dir
    settings.models_dir = str(folder)
    if resolved(folder) == resolved(paths.default_models_dir):
        settings.models_dir = None  # back to the default: no override to remember
    known = {resolved(Path(text)) for text in settings.model_folders}
    kept = ""
    if resolved(old) not in known:
        settings.model_folders.append(str(old))
        kept = f" {old} was added to the library folders, so its models stay listed."
    return FolderChange(
        folder,
        f"New exports go to {folder} from the next start of the app. Models already in "
        f"{old} stay where they are: nothing is moved, copied or deleted.{kept}"
        + (f" Note: {warning}" if warning else ""),
    )
