"""`--version` and Help > About show the app version, git revision and runtime versions."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.cli import main
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.system.buildinfo import build_info
from qwen_mtp_desktop.core.system.environment import package_version
from qwen_mtp_desktop.ui.dialogs.about import AboutDialog
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui


def test_version_option_prints_version_revision_and_runtime(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    info = build_info()
    first = out.splitlines()[0]
    assert __version__ in first and f"git {info.revision}" in first
    for name in ("openvino", "openvino-genai", "openvino-tokenizers"):
        assert f"{name} {package_version(name)}" in out


@pytest.mark.subprocess
def test_about_dialog_from_the_main_window(qtbot: QtBot, screenshot_dir: Path) -> None:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    menus = [action.text() for action in window.menuBar().actions()]
    assert "&Help" in menus
    window.about_action.trigger()
    dialogs = [w for w in QApplication.topLevelWidgets() if isinstance(w, AboutDialog)]
    assert len(dialogs) == 1
    dialog = dialogs[0]
    qtbot.waitExposed(dialog)
    rows = dict(dialog.rows)
    info = build_info()
    assert rows["Version"] == __version__
    assert rows["Git revision"] == info.revision
    assert rows["openvino"] == package_version("openvino")
    assert rows["openvino-genai"] == package_version("openvino-genai")
    assert "Qt" in rows and str(paths.data_dir) == rows["Data folder"]
    assert __version__ in dialog.details.text() and info.revision in dialog.details.text()
    assert dialog.grab().save(str(screenshot_dir / "about_dialog.png"))
    dialog.copy_button.click()
    clipboard = QApplication.clipboard()
    assert info.revision in clipboard.text()
    assert f"openvino: {package_version('openvino')}" in clipboard.text()
    dialog.close()


def test_about_dialog_shows_a_bundle_build(qtbot: QtBot) -> None:
    info = build_info()
    bundle = replace(info, kind="bundle", revision="0123456789ab", built_at="2026-11-30T12:00:00Z")
    dialog = AboutDialog(info=bundle)
    qtbot.addWidget(dialog)
    rows = dict(dialog.rows)
    assert rows["Build"] == "bundle, built 2026-11-30T12:00:00Z"
    assert rows["Git revision"] == "0123456789ab"
    assert "0123456789ab" in dialog.text()
