"""Changing the models folder (Settings > Data folders): what is allowed and what it does.

Nothing is moved, copied or deleted. The new folder receives new exports from the next start;
the models already in the old folder stay there and stay listed, because the old folder is
added to the library's folders. The user is told exactly that.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.model_library import resolved
from qwen_mtp_desktop.core.paths import AppPaths, resources_dir
from qwen_mtp_desktop.core.settings import Settings

#: Longest path accepted (Linux PATH_MAX; Windows long paths are shorter still).
MAX_PATH_CHARS = 4096


@dataclass(frozen=True)
class FolderChange:
    folder: Path
    #: What happens, in the user's words.
    message: str


class FolderChoiceError(ValueError):
    """The chosen folder cannot be the models folder; the message says why and what to do."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


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


def apply_models_folder(settings: Settings, folder: Path, paths: AppPaths) -> FolderChange:
    """Point the settings at `folder` (checked by `check_models_folder`) and keep the old
    folder in the library, so its models stay listed. Does not touch the file system."""
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
        f"{old} stay where they are: nothing is moved, copied or deleted.{kept}",
    )
