"""Typed, versioned user settings stored as JSON under the config dir.

Writes are atomic. A file that cannot be read is moved aside (never deleted) and the app starts
with defaults, saying so through `LoadedSettings.notice`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.fileio import atomic_write_text

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1


@dataclass
class Settings:
    schema_version: int = SCHEMA_VERSION
    #: Model directory opened at start; None means the bundled demo model.
    default_model: str | None = None
    #: OpenVINO device for inference ("CPU", "GPU", "NPU", "AUTO").
    device: str = "CPU"
    #: Extra folders the model library scans, besides its managed folder.
    model_folders: list[str] = field(default_factory=list)
    #: Write prompts and answers to the log (off by default: conversations are private).
    debug_logging: bool = False
    #: Opaque UI state (window geometry etc.), owned by the UI layer.
    ui_state: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    #: A plain-language message when the file was damaged and defaults were used, else None.
    notice: str | None = None


def _from_dict(raw: dict[str, Any]) -> Settings:
    defaults = Settings()
    known = {f.name for f in fields(Settings)}
    values: dict[str, Any] = {}
    for name in known:
        if name not in raw:
            continue
        value = raw[name]
        expected = getattr(defaults, name)
        # Accept None for optional fields; otherwise the type must match the default's.
        if value is None and name == "default_model":
            values[name] = None
        elif isinstance(expected, bool) != isinstance(value, bool) or not isinstance(
            value, type(expected) if expected is not None else str
        ):
            raise ValueError(f"setting {name!r} has the wrong type ({type(value).__name__})")
        else:
            values[name] = value
    values["schema_version"] = SCHEMA_VERSION
    return Settings(**values)


def _migrate(raw: dict[str, Any]) -> dict[str, Any]:
    version = raw.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"unknown settings schema_version {version!r}")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"settings were written by a newer version of the app (schema {version}, "
            f"this app knows {SCHEMA_VERSION})"
        )
    # Future migrations go here, one `if version == N:` step at a time.
    return raw


def load_settings(path: Path) -> LoadedSettings:
    if not path.exists():
        return LoadedSettings(Settings())
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError("the file does not hold a JSON object")
        return LoadedSettings(_from_dict(_migrate(raw)))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.damaged-{stamp}")
        counter = 1
        while backup.exists():  # never overwrite an earlier backup (two in one second)
            counter += 1
            backup = path.with_name(f"{path.name}.damaged-{stamp}-{counter}")
        try:
            path.replace(backup)
            where = f"It was kept as {backup}."
        except OSError:
            where = "It could not be moved aside."
        log.warning("settings file %s unreadable (%s); using defaults", path, exc)
        return LoadedSettings(
            Settings(),
            notice=f"Your settings file could not be read ({exc}). {where} "
            "The app started with default settings.",
        )


def save_settings(path: Path, settings: Settings) -> None:
    atomic_write_text(path, json.dumps(asdict(settings), indent=2, sort_keys=True) + "\n")


class SettingsStore:
    """The loaded settings plus where they live; `save()` writes them atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        loaded = load_settings(path)
        self.settings = loaded.settings
        self.notice = loaded.notice

    def save(self) -> None:
        save_settings(self.path, self.settings)
