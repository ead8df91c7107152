"""A finished export appears in the Models library and is selected, wherever it was written
(issue 18: an export outside the managed models folder used to be missing from the library)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.models.library import adopt_model, in_library, remove_from_library
from qwen_mtp_desktop.core.settings.store import Settings, SettingsStore
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui

WAIT = 30_000


def _window(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.models.scans_done >= 1 and not window.models.busy, timeout=WAIT)
    return window


def _export_copy(target: Path) -> Path:
    """A real, complete export (the demo model's files) at `target`."""
    shutil.copytree(demo_model_dir(), target)
    return target


@pytest.mark.subprocess
@pytest.mark.parametrize("where", ["outside", "managed"])
def test_finished_export_is_listed_and_selected(qtbot: QtBot, tmp_path: Path, where: str) -> None:
    window = _window(qtbot)
    models = window.models
    before = models.scans_done
    paths = app_paths()
    if where == "outside":
        exported = _export_copy(tmp_path / "elsewhere" / "deep" / "my-export")
    else:
        exported = _export_copy(paths.models_dir / "my-export")
    window.export_panel.model_exported.emit(exported)
    qtbot.waitUntil(lambda: models.scans_done > before and not models.busy, timeout=WAIT)
    assert exported in [entry.path for entry in models.entries]
    assert models.selected_path == exported
    assert models.details.title_label.text() == "my-export"
    folders = SettingsStore(paths.settings_file).settings.model_folders
    # An outside export becomes a library folder of its own (saved); a managed one needs none.
    assert folders == ([str(exported)] if where == "outside" else [])

    # "Show in Models" brings the panel up with the model selected.
    models.select(demo_model_dir())
    window.export_panel.show_in_models.emit(exported)
    assert window.stack.currentWidget() is models
    qtbot.waitUntil(lambda: models.selected_path == exported and not models.busy, timeout=WAIT)


def test_adopt_model_adds_only_what_a_scan_would_miss(tmp_path: Path) -> None:
    paths = app_paths().ensure()
    settings = Settings()
    inside = paths.models_dir / "a" / "b" / "model"
    too_deep = paths.models_dir / "a" / "b" / "c" / "model"
    outside = tmp_path / "out" / "model"
    for folder in (inside, too_deep, outside):
        folder.mkdir(parents=True)
    assert in_library(settings, inside, paths)
    assert not in_library(settings, too_deep, paths)
    assert not adopt_model(settings, inside, paths) and settings.model_folders == []
    assert adopt_model(settings, too_deep, paths)
    assert adopt_model(settings, outside, paths)
    assert settings.model_folders == [str(too_deep), str(outside)]
    assert not adopt_model(settings, outside, paths)  # once is enough
    # A model the user hid and then exported again is shown again.
    assert remove_from_library(settings, inside) == "hidden"
    assert adopt_model(settings, inside, paths)
    assert str(inside) not in settings.ui_state.get("model_library.hidden", "")
