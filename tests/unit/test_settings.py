from __future__ import annotations

import json
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.settings import (
    SCHEMA_VERSION,
    Settings,
    SettingsStore,
    load_settings,
    save_settings,
)


def test_home_override_moves_every_folder(app_home: Path) -> None:
    paths = app_paths().ensure()
    for folder in (paths.data_dir, paths.config_dir, paths.cache_dir, paths.log_dir):
        assert folder.is_dir()
        assert folder.is_relative_to(app_home)
    assert paths.settings_file.parent == paths.config_dir


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path / "settings.json")
    assert loaded.settings == Settings()
    assert loaded.notice is None


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.json"
    settings = Settings(default_model="/models/q", device="GPU", model_folders=["/a", "/b"])
    settings.ui_state["geometry"] = "abc"
    save_settings(path, settings)
    assert load_settings(path).settings == settings
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    # The write is atomic: no temp files are left next to it.
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        '{"device": 3}',
        '{"schema_version": 999}',
        '{"debug_logging": "yes"}',
        b"\xff\xfe garbage",
    ],
)
def test_damaged_file_is_kept_aside_and_defaults_used(tmp_path: Path, content: str | bytes) -> None:
    path = tmp_path / "settings.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    original = path.read_bytes()
    loaded = load_settings(path)
    assert loaded.settings == Settings()
    assert loaded.notice is not None and "default settings" in loaded.notice
    backups = list(tmp_path.glob("settings.json.damaged-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert not path.exists()


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schema_version": 1, "device": "NPU", "future_key": 1}))
    loaded = load_settings(path)
    assert loaded.notice is None
    assert loaded.settings.device == "NPU"


def test_store_saves(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    store.settings.device = "GPU"
    store.save()
    assert SettingsStore(tmp_path / "settings.json").settings.device == "GPU"
