"""What an export may replace: only a previous export, and never the checkpoint it reads.

`export SRC OUT --force` used to remove any non-empty OUT. A previous export is recognised by
its manifest (`library.MANIFEST_NAME`, written last by every export): a folder without a valid
one, or holding files the manifest does not list, is user data and is never replaced. OUT must
not overlap SRC either: equal, inside it, or containing it.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Files an export writes besides those its manifest lists (the manifest itself).
_MAX_LISTED = 100_000


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path.expanduser()))


def overlap_problem(source: Path, destination: Path) -> str | None:
    """Why `destination` cannot take an export of `source` (they overlap), or None."""
    src, dst = _real(source), _real(destination)
    if src == dst:
        return f"The destination {destination} is the checkpoint folder itself."
    if dst.is_relative_to(src):
        return f"The destination {destination} is inside the checkpoint folder {source}."
    if src.is_relative_to(dst):
        return f"The destination {destination} contains the checkpoint folder {source}."
    return None


def replace_problem(destination: Path) -> str | None:
    """Why the non-empty folder `destination` is not a previous export that may be replaced
    (None: it is one). Every file in it must be the manifest or listed in it."""
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, read_manifest

    if destination.is_symlink():
        return f"{destination} is a symbolic link, not an export folder."
    try:
        manifest = read_manifest(destination)
    except ValueError as exc:
        return f"{destination} has a damaged export record ({exc})."
    if manifest is None or not manifest.files:
        return (
            f"{destination} is not a model exported by this app (it has no {MANIFEST_NAME} "
            "listing its files), so it is never replaced."
        )
    listed = set(manifest.files) | {MANIFEST_NAME}
    seen = 0
    for root, folders, files in os.walk(destination, followlinks=False):
        for name in [*files, *(f for f in folders if Path(root, f).is_symlink())]:
            seen += 1
            relative = Path(root, name).relative_to(destination).as_posix()
            if relative not in listed or seen > _MAX_LISTED:
                return (
                    f"{destination} holds {relative}, which the export record does not list; "
                    "a folder with files of yours is never replaced."
                )
    return None
