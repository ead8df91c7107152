"""Typed, versioned user settings stored as JSON under the config dir.

Writes are atomic. A file that cannot be read is moved aside (never deleted) and the app starts
with defaults, saying so through `LoadedSettings.notice`.

Whatever is written must load back whole (issue 45): the file is UTF-8 (an escaped CJK prompt
took 6 bytes a character and pushed six presets past the reader's limit), one size limit
serves the writer and the reader, and a save that would pass it, or write a value the loader
would reject, is refused with a message instead of a file the next start would move aside.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    UnsafeFileError,
    checked_fields,
    int_in_range,
    parse_json_text,
    read_json_object,
)
from qwen_mtp_desktop.core.settings.model_defaults import MAX_MODEL_DEFAULTS, clean_model_defaults
from qwen_mtp_desktop.core.settings.presets import (
    MAX_PRESETS,
    PresetError,
    check_preset_name,
    clean_presets,
)
from qwen_mtp_desktop.core.system.state_budget import setting_mb
from qwen_mtp_desktop.core.tools.mcp.config import DEFAULT_TIMEOUT_S, stored_servers, stored_timeout

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
    #: The local OpenAI-compatible API server (off by default), run by the engine process.
    api_server: bool = False
    api_server_port: int = 8000
    #: Listen on every network interface instead of this computer only (needs a key).
    api_server_lan: bool = False
    api_server_key: str | None = None
    #: "system" follows the desktop; "light" or "dark" forces one (Settings > Appearance).
    theme: str = "system"
    #: The managed models folder (exports land here); None means the one under the data folder.
    #: A change takes effect at the next start; models already exported stay where they are.
    models_dir: str | None = None
    #: Megabytes of conversation states the engine keeps between turns (core.system.state_budget);
    #: None: automatic (an eighth of this computer's memory); 0 keeps nothing. Applied at the
    #: next model load.
    conversation_memory_mb: int | None = None
    #: The MCP servers whose tools a chat may enable, in their stored form
    #: (core.tools.mcp.config.McpServer.to_dict; checked by `servers_from_settings` on load).
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds a tool call may take before the chat gives up on it.
    tool_timeout_s: float = DEFAULT_TIMEOUT_S
    #: Chat presets (core.settings.presets.ChatPreset.to_stored), each checked on load.
    chat_presets: list[dict[str, Any]] = field(default_factory=list)
    #: The preset a new chat starts from (a name in chat_presets); None: the last settings.
    default_chat_preset: str | None = None
    #: Each model's default chat settings (core.settings.model_defaults.ModelDefaults.to_stored):
    #: what new chats of that model start with, before the default preset.
    model_defaults: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    #: A plain-language message when the file was damaged and defaults were used, else None.
    notice: str | None = None


#: What each setting may hold; a value outside it falls back to the default (with a notice).
_MAX_TEXT = 4096
_MAX_ITEMS = 256


def _text(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= _MAX_TEXT and "\x00" not in value:
        return value
    return None


def _device(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= 64 and value.isprintable():
        return value
    return None


def _folders(value: object) -> list[str] | None:
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        return None
    items = [_text(item) for item in value]
    return [item for item in items if item is not None] if None not in items else None


def _ui_state(value: object) -> dict[str, Any] | None:
    """The shape only; each value is checked by `_clean_ui_state`, so a damaged one falls
    back alone."""
    if not isinstance(value, dict) or len(value) > _MAX_ITEMS:
        return None
    return dict(value)


# --- ui_state: the UI's own values, each validated like the settings above (issue 29) -------

#: ui_state keys the app reads (the UI and the model library import them from here).
UI_WINDOW_GEOMETRY = "main_window_geometry"
UI_SHOW_DRAFTS = "chat_show_drafts"
UI_NEW_CHAT_SETTINGS = "chat_new_settings"
UI_HIDDEN_MODELS = "model_library.hidden"
UI_DEMO_BANNER_HIDDEN = "chat_demo_banner_hidden"
#: Qt's saveGeometry() is about 66 bytes; base64 of a few KB is far beyond any real one.
_MAX_GEOMETRY_BYTES = 4096
_MAX_UI_VALUE = 65536


def _geometry(value: object) -> str | None:
    """Base64 of Qt's window geometry, ASCII only (a non-ASCII string aborted the window)."""
    if not isinstance(value, str) or not value.isascii() or len(value) > 2 * _MAX_GEOMETRY_BYTES:
        return None
    try:
        decoded = base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        return None
    return value if 0 < len(decoded) <= _MAX_GEOMETRY_BYTES else None


def _zero_one(value: object) -> str | None:
    return value if value in ("0", "1") else None


def _bounded_json(value: object) -> object:
    """`value` parsed when it is JSON text within the size, depth and number bounds
    (parse_json_text); None (read as absent) otherwise."""
    if not isinstance(value, str) or len(value) > _MAX_UI_VALUE:
        return None
    try:
        return parse_json_text(value)
    except (ValueError, RecursionError):
        return None


def _json_object_text(value: object) -> str | None:
    """JSON text of an object, bounded."""
    return value if isinstance(value, str) and isinstance(_bounded_json(value), dict) else None


def _json_text_list(value: object) -> str | None:
    """JSON text of a list of strings (paths), bounded."""
    parsed = _bounded_json(value)
    if not isinstance(value, str) or not isinstance(parsed, list) or len(parsed) > _MAX_ITEMS:
        return None
    return value if all(_text(item) is not None for item in parsed) else None


def _unknown_ui_value(value: object) -> str | None:
    """A key this version does not read (a newer version's): kept as text, bounded."""
    return value if isinstance(value, str) and len(value) <= _MAX_UI_VALUE else None


_UI_VALIDATORS: dict[str, Callable[[object], str | None]] = {
    UI_WINDOW_GEOMETRY: _geometry,
    UI_SHOW_DRAFTS: _zero_one,
    UI_NEW_CHAT_SETTINGS: _json_object_text,
    UI_HIDDEN_MODELS: _json_text_list,
    UI_DEMO_BANNER_HIDDEN: _zero_one,
}
#: What a damaged ui_state value is called in the notice.
_UI_NAMES = {
    UI_WINDOW_GEOMETRY: "window size and position",
    UI_SHOW_DRAFTS: "the chat's Drafts toggle",
    UI_NEW_CHAT_SETTINGS: "a new chat's settings",
    UI_HIDDEN_MODELS: "models removed from the library",
    UI_DEMO_BANNER_HIDDEN: "the demo model's banner, dismissed",
}


def _clean_ui_state(raw: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The ui_state values that pass their check, and the names of those that do not."""
    good: dict[str, str] = {}
    bad: list[str] = []
    for key, value in raw.items():
        check = _UI_VALIDATORS.get(key, _unknown_ui_value)
        cleaned = check(value) if _text(key) is not None else None
        if cleaned is None:
            shown = key if _text(key) is not None and key.isprintable() else repr(key)[:40]
            bad.append(_UI_NAMES.get(key, f"ui_state {shown[:60]}"))
        else:
            good[key] = cleaned
    return good, bad


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _port(value: object) -> int | None:
    return int_in_range(value, 1, 65535)


def _api_key(value: object) -> str | None:
    if (
        isinstance(value, str)
        and 0 < len(value) <= 256
        and value.isprintable()
        and value.strip() == value
    ):
        return value
    return None


THEMES = ("system", "light", "dark")


def _theme(value: object) -> str | None:
    return value if isinstance(value, str) and value in THEMES else None


def _absolute_folder(value: object) -> str | None:
    """An absolute path written as text (whether it exists is checked where it is used)."""
    text = _text(value)
    if text is None or not text.isprintable() or not Path(text).is_absolute():
        return None
    return text


def _preset_list(value: object) -> list[Any] | None:
    """The shape only; each preset is checked by `clean_presets`, so a damaged one is dropped
    alone."""
    return list(value) if isinstance(value, list) and len(value) <= MAX_PRESETS else None


def _model_defaults_list(value: object) -> list[Any] | None:
    """The shape only; each entry is checked by `clean_model_defaults`."""
    return list(value) if isinstance(value, list) and len(value) <= MAX_MODEL_DEFAULTS else None


def _preset_name(value: object) -> str | None:
    try:
        return check_preset_name(value) if value is not None else None
    except PresetError:
        return None


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "default_model": _text,
    "device": _device,
    "model_folders": _folders,
    "debug_logging": _flag,
    "ui_state": _ui_state,
    "api_server": _flag,
    "api_server_port": _port,
    "api_server_lan": _flag,
    "api_server_key": _api_key,
    "theme": _theme,
    "models_dir": _absolute_folder,
    "conversation_memory_mb": setting_mb,
    "mcp_servers": stored_servers,
    "tool_timeout_s": stored_timeout,
    "chat_presets": _preset_list,
    "default_chat_preset": _preset_name,
    "model_defaults": _model_defaults_list,
}


def _from_dict(raw: dict[str, Any]) -> tuple[Settings, list[str]]:
    """The settings, and the names of values that were damaged (their defaults are used)."""
    values, bad = checked_fields(raw, _VALIDATORS)  # null default_model: the demo, as default
    if "ui_state" in values:
        values["ui_state"], bad_ui = _clean_ui_state(values["ui_state"])
        bad.extend(bad_ui)
    if "chat_presets" in values:
        presets, bad_presets = clean_presets(values["chat_presets"])
        values["chat_presets"] = [preset.to_stored() for preset in presets]
        bad.extend(bad_presets)
    if "model_defaults" in values:
        entries, bad_entries = clean_model_defaults(values["model_defaults"])
        values["model_defaults"] = [entry.to_stored() for entry in entries]
        bad.extend(bad_entries)
    default = values.get("default_chat_preset")
    names = {str(p["name"]).casefold() for p in values.get("chat_presets", [])}
    if default is not None and default.casefold() not in names:
        # It named a preset that is gone (damaged above, or the file edited by hand).
        del values["default_chat_preset"]
        bad.append("the preset new chats start from")
    return Settings(**values), bad


def _migrate(raw: dict[str, Any]) -> dict[str, Any]:
    version = raw.get("schema_version", 1)
    if int_in_range(version, 1, 1_000_000) is None:
        raise ValueError(f"unknown settings schema_version {str(version)[:40]!r}")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"settings were written by a newer version of the app (schema {version}, "
            f"this app knows {SCHEMA_VERSION})"
        )
    # Future migrations go here, one `if version == N:` step at a time.
    return raw


_KIND = FileKind("The settings file", "Delete it to start with default settings, or fix its JSON.")


def _move_aside(path: Path) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.damaged-{stamp}")
    counter = 1
    while backup.exists():  # never overwrite an earlier backup (two in one second)
        counter += 1
        backup = path.with_name(f"{path.name}.damaged-{stamp}-{counter}")
    try:
        path.replace(backup)
        return f"It was kept as {backup}."
    except OSError:
        return "It could not be moved aside."


def load_settings(path: Path) -> LoadedSettings:
    """The settings; a damaged file is kept aside, and each damaged value falls back to its
    default (the others are kept), saying so in `notice`."""
    try:
        raw = read_json_object(path, kind=_KIND, max_bytes=MAX_SETTINGS_BYTES)
        settings, bad = _from_dict(_migrate(raw))
    except FileNotFoundError:
        return LoadedSettings(Settings())
    except (UnsafeFileError, ValueError) as exc:
        reason = exc.message if isinstance(exc, UnsafeFileError) else str(exc)
        where = _move_aside(path)
        log.warning("settings file %s unreadable (%s); using defaults", path, reason)
        return LoadedSettings(
            Settings(),
            notice=f"Your settings file could not be read ({reason}). {where} "
            "The app started with default settings.",
        )
    if not bad:
        return LoadedSettings(settings)
    where = _move_aside(path)
    names = ", ".join(bad)
    log.warning("settings file %s: damaged values %s; using their defaults", path, names)
    return LoadedSettings(
        settings,
        notice=f"Some settings were damaged ({names}) and were reset to their default "
        f"settings; the others were kept. {where}",
    )


#: The most the settings file may hold, written or read (one number, so the reader takes
#: whatever the writer wrote). Presets are the only large part: 100 presets of 32,000
#: characters can need 12.8 MB, so the writer refuses past this with a message naming them.
MAX_SETTINGS_BYTES = 4_000_000


class SettingsNotSavedError(UserFacingError, OSError):
    """Settings the app would not be able to read back; nothing was written. An OSError
    too: every place that saves settings already shows a failed write to the user."""

    code = "SETTINGS_NOT_SAVED"


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


def settings_text(settings: Settings) -> str:
    """The settings file's text; SettingsNotSavedError when it would be too large or would not
    load back as it is (a value the loader rejects)."""
    stored = asdict(settings)
    # UTF-8 as it is (3 bytes a CJK character, not the 6 of a \uXXXX escape). A lone
    # surrogate cannot be UTF-8: then the whole file is escaped, which json reads back alike.
    text = json.dumps(stored, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        text = json.dumps(stored, indent=2, sort_keys=True) + "\n"
        size = len(text)
    if size > MAX_SETTINGS_BYTES:
        presets = len(
            json.dumps(stored["chat_presets"], ensure_ascii=False).encode("utf-8", "replace")
        )
        raise SettingsNotSavedError(
            f"The settings would take {_megabytes(size)}, more than the "
            f"{_megabytes(MAX_SETTINGS_BYTES)} the settings file may hold (chat presets take "
            f"{_megabytes(presets)} of it).",
            "Shorten or delete some chat presets' system prompts, then save again.",
        )
    _, bad = _from_dict(_migrate(parse_json_text(text)))
    if bad:
        raise SettingsNotSavedError(
            f"The settings were not saved: the app could not have read back {', '.join(bad)}.",
            "Change that value, then save again.",
        )
    return text


def save_settings(path: Path, settings: Settings) -> None:
    """Write the settings atomically; SettingsNotSavedError (nothing written) when they would
    not load back whole."""
    atomic_write_text(path, settings_text(settings))


class SettingsStore:
    """The one owner of the loaded settings and of where they live; `save()` writes them
    atomically.

    Merge on write (issue 44): the window, the chat and each dialog share this one
    `settings` object, so a writer changes only the keys (or list entries) it changed, on the
    latest state, through `update()`; none keeps a copy of a value to write back later (the MCP
    dialog's old server list once wrote over an "Always allow" the chat had just saved)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        loaded = load_settings(path)
        self.settings = loaded.settings
        self.notice = loaded.notice
        self._saved = copy.deepcopy(self.settings)

    def update(self, change: Callable[[Settings], None]) -> None:
        """Apply `change` to the latest settings (it edits only what its caller changes) and
        save. Settings that could not be read back (SettingsNotSavedError) undo only what
        `change` changed, so what other parts of the app hold in memory stays; other OSErrors
        leave it to retry."""
        before = copy.deepcopy(self.settings)
        change(self.settings)
        try:
            save_settings(self.path, self.settings)
        except SettingsNotSavedError:
            for item in fields(Settings):
                if getattr(self.settings, item.name) != getattr(before, item.name):
                    setattr(self.settings, item.name, getattr(before, item.name))
            raise
        self._saved = copy.deepcopy(self.settings)

    def save(self) -> None:
        """Write the settings. When they could not be read back (SettingsNotSavedError), the
        change is undone in place (callers hold `settings`), so memory matches the file and
        the next unrelated save does not fail for it too; other OSErrors leave it to retry."""
        try:
            save_settings(self.path, self.settings)
        except SettingsNotSavedError:
            for item in fields(Settings):
                setattr(self.settings, item.name, copy.deepcopy(getattr(self._saved, item.name)))
            raise
        self._saved = copy.deepcopy(self.settings)
