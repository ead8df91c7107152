"""Staging folders beside the destination: ownership, stale clean-up, moving into place."""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file
from qwen_mtp_desktop.core.models.export.options import ExportError

STAGING_INFIX = ".exporting-"


REPLACED_INFIX = ".replaced-"


OWNER_FILE = "owner.json"


_STAGING_RE = re.compile(r"^\.(?P<name>.+)\.exporting-(?P<token>[A-Za-z0-9_-]+)$")


_REPLACED_RE = re.compile(r"^\.(?P<name>.+)\.replaced-(?P<token>[A-Za-z0-9_-]+)$")


def staging_registry_dir() -> Path:
    return app_paths().cache_dir / "export-staging"


def _process_identity() -> dict[str, Any]:
    me = psutil.Process()
    return {"pid": me.pid, "create_time": me.create_time()}


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        process = psutil.Process(pid)
        created = owner.get("create_time")
        return not isinstance(created, int | float) or abs(process.create_time() - created) < 1
    except psutil.Error:
        return False


def _read_owner(folder: Path) -> dict[str, Any]:
    try:
        raw = read_json_file(folder / OWNER_FILE, kind=FileKind(OWNER_FILE, ""))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


@dataclass
class Staging:
    """`.NAME.exporting-TOKEN/` beside the destination: `model/` = the export, `tmp/` = TMPDIR."""

    root: Path
    destination: Path
    registry_entry: Path | None = None

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    @classmethod
    def create(cls, destination: Path) -> Staging:
        token = secrets.token_hex(4)
        root = destination.parent / f".{destination.name}{STAGING_INFIX}{token}"
        root.mkdir(parents=True)
        (root / "tmp").mkdir()
        owner = {**_process_identity(), "destination": str(destination)}
        (root / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
        entry = staging_registry_dir() / f"{token}.json"
        try:
            atomic_write_text(entry, json.dumps({**owner, "staging": str(root)}))
        except OSError:  # the registry only helps cleanup of custom destinations
            return cls(root, destination, None)
        return cls(root, destination, entry)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.registry_entry is not None:
            with contextlib.suppress(OSError):
                self.registry_entry.unlink()


def cleanup_stale_exports(roots: Iterable[Path] = ()) -> list[Path]:
    """Remove staging folders left by exports whose process is gone; call at app start.

    Looks in `roots` (default: the models folder) and in the registry of staging folders made
    for custom destinations. A folder renamed aside to be replaced is renamed back if its new
    version never arrived. Returns what was removed or restored.
    """
    handled: list[Path] = []
    parents = {Path(r) for r in roots} or {app_paths().models_dir}
    registry = staging_registry_dir()
    if registry.is_dir():
        for entry in sorted(registry.glob("*.json")):
            try:
                raw = read_json_file(entry, kind=FileKind(entry.name, ""))
            except (OSError, ValueError):
                raw = {}
            if isinstance(raw, dict) and _owner_alive(raw):
                continue
            staging = Path(str(raw.get("staging", ""))) if isinstance(raw, dict) else None
            if staging is not None and _STAGING_RE.match(staging.name):
                parents.add(staging.parent)
            with contextlib.suppress(OSError):
                entry.unlink()
    for parent in sorted(parents):
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        for child in children:
            if not child.is_dir():
                continue
            if _STAGING_RE.match(child.name):
                if _owner_alive(_read_owner(child)):
                    continue
                shutil.rmtree(child, ignore_errors=True)
                handled.append(child)
            elif match := _REPLACED_RE.match(child.name):
                original = parent / match.group("name")
                if original.exists():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        child.rename(original)
                handled.append(child)
    return handled


def move_into_place(source: Path, destination: Path, *, overwrite: bool) -> None:
    """Rename the finished export to `destination`; an old folder goes only after that."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    aside: Path | None = None
    if destination.exists():
        if destination.is_dir() and not any(destination.iterdir()):
            destination.rmdir()
        elif overwrite:
            from qwen_mtp_desktop.core.models.export.guard import replace_problem

            problem = replace_problem(destination)  # checked again: only an export goes
            if problem is not None:
                raise ExportError(problem, "Choose a new folder name.", code="DESTINATION_EXISTS")
            aside = destination.parent / (
                f".{destination.name}{REPLACED_INFIX}{secrets.token_hex(4)}"
            )
            destination.rename(aside)
        else:
            raise ExportError(
                f"{destination} already exists and is not empty.",
                "Choose another destination or allow replacing it.",
                code="DESTINATION_EXISTS",
            )
    try:
        source.rename(destination)
    except OSError:
        if aside is not None:  # put the old model back
            aside.rename(destination)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
