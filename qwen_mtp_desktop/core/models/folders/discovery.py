"""Finding model folders under some roots (by their file names; nothing is read)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

CHECKPOINT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def _looks_like_model(names: set[str]) -> bool:
    if "openvino_language_model.xml" in names or "openvino_model.xml" in names:
        return True
    if "config.json" not in names:
        return False
    return any(n.endswith(".xml") and n[:-4] + ".bin" in names for n in names)


def discover_models(roots: Iterable[Path], max_depth: int = 3) -> list[Path]:
    """Model folders under `roots` (each root may itself be one), at most `max_depth` levels down.

    A folder holding openvino_language_model.xml or openvino_model.xml, or config.json with an
    IR pair, is a model; its subfolders are not searched. Hidden folders (".name", which is also
    where exports stage their output) are skipped; unreadable folders and symlink loops are
    passed over silently. Order: roots in the order given, then depth-first by name.
    """
    found: list[Path] = []
    visited: set[tuple[int, int]] = set()

    def visit(folder: Path, depth: int) -> None:
        try:
            info = folder.stat()
        except OSError:
            return
        if not stat.S_ISDIR(info.st_mode):
            return
        key = (info.st_dev, info.st_ino)
        if key in visited:
            return  # a symlink loop, or a folder reached twice
        visited.add(key)
        try:
            with os.scandir(folder) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError:
            return
        names = {entry.name for entry in listing}
        if _looks_like_model(names):
            found.append(folder)
            return
        if depth >= max_depth:
            return
        for entry in listing:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                visit(Path(entry.path), depth + 1)

    for root in roots:
        visit(Path(root), 0)
    return found
