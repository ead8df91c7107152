"""The window fits the screen it opens on, on every start (issue 28): the real app launched on
Qt's offscreen platform configured with screens of given sizes, a fresh profile, a profile saved
on a larger screen, and one saved on a screen that is gone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QByteArray, QRect
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SMALL = {"name": "small", "x": 0, "y": 0, "width": 1024, "height": 700}
LARGE = {"name": "large", "x": 0, "y": 0, "width": 2560, "height": 1440}
SECOND = {"name": "second", "x": 1024, "y": 0, "width": 2560, "height": 1440}


def _platform(tmp_path: Path, *screens: dict[str, object]) -> str:
    config = tmp_path / f"screens-{len(list(tmp_path.glob('screens-*')))}.json"
    config.write_text(json.dumps({"screens": [s | {"logicalDpi": 96, "dpr": 1} for s in screens]}))
    return f"offscreen:configfile={config}"


def _env(home: Path, platform: str) -> dict[str, str]:
    return {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home), "QT_QPA_PLATFORM": platform}


def _launch(home: Path, platform: str, shot: Path) -> QRect:
    """Start the app, let it save its window as `shot` and close (which saves its geometry);
    the geometry it logged."""
    log = home / "logs" / "app.log"
    before = log.read_text("utf-8") if log.exists() else ""
    command = [sys.executable, "-m", "qwen_mtp_desktop", "--screenshot", str(shot)]
    result = subprocess.run(
        [*command, "--quit-after-ms", "200"],
        env=_env(home, platform),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    placed = re.findall(
        r"window placed (\d+)x(\d+)\+(-?\d+)\+(-?\d+)", log.read_text()[len(before) :]
    )
    assert len(placed) == 1, log.read_text()[-2000:]
    width, height, left, top = (int(v) for v in placed[0])
    image = QImage(str(shot))
    assert (image.width(), image.height()) == (width, height)  # what was painted
    return QRect(left, top, width, height)


def _on(screen: dict[str, object]) -> QRect:
    return QRect(int(screen["x"]), int(screen["y"]), int(screen["width"]), int(screen["height"]))  # type: ignore[call-overload]


def test_a_first_start_fits_a_small_screen_and_uses_a_large_one(tmp_path: Path) -> None:
    small = _launch(tmp_path / "a", _platform(tmp_path, SMALL), tmp_path / "small.png")
    assert _on(SMALL).contains(small)
    assert small.width() >= 1000 and small.height() >= 640  # the screen, less a frame
    large = _launch(tmp_path / "b", _platform(tmp_path, LARGE), tmp_path / "large.png")
    assert (large.width(), large.height()) == (1280, 800)
    assert large.center().x() in range(1270, 1290)  # centred


def test_a_geometry_saved_on_a_larger_screen_is_fitted(tmp_path: Path) -> None:
    home = tmp_path / "home"
    saved = _launch(home, _platform(tmp_path, LARGE), tmp_path / "large.png")
    assert saved.width() == 1280
    fitted = _launch(home, _platform(tmp_path, SMALL), tmp_path / "small.png")
    assert _on(SMALL).contains(fitted)
    # ... and a window the user made smaller keeps its size, on the small screen too.
    again = _launch(home, _platform(tmp_path, SMALL), tmp_path / "again.png")
    assert again == fitted


def test_a_geometry_saved_on_a_screen_that_is_gone_opens_on_the_one_there(
    tmp_path: Path,
) -> None:
    """Qt's own saved format, from a window on the second of two screens."""
    code = (
        "import sys\n"
        "from PySide6.QtWidgets import QApplication, QMainWindow\n"
        "app = QApplication([])\n"
        "w = QMainWindow(); w.setGeometry(1500, 300, 1400, 900); w.show(); app.processEvents()\n"
        "assert w.screen().name() == 'second', w.screen().name()\n"
        "print(bytes(w.saveGeometry().toBase64().data()).decode())\n"
    )
    two = _platform(tmp_path, SMALL, SECOND)
    result = subprocess.run(
        [sys.executable, "-c", code], env=_env(tmp_path, two), capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    home = tmp_path / "home"
    os.environ["QWEN_MTP_DESKTOP_HOME"] = str(home)  # the test's own home (autouse fixture)
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.ui_state["main_window_geometry"] = result.stdout.strip()
    store.save()
    fitted = _launch(home, _platform(tmp_path, SMALL), tmp_path / "gone.png")
    assert _on(SMALL).contains(fitted)


def test_in_process_a_restored_geometry_larger_than_the_screen_is_fitted(
    qtbot: QtBot,
) -> None:
    """The same within the test process (Qt's offscreen screen here is 800x800)."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    screen = app.primaryScreen().availableGeometry()
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    first = MainWindow(paths, store)
    qtbot.addWidget(first)
    first.setGeometry(QRect(-300, -200, screen.width() + 900, screen.height() + 700))
    saved = bytes(first.saveGeometry().toBase64().data()).decode()
    store.settings.ui_state["main_window_geometry"] = saved
    window = MainWindow(paths, store)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    QApplication.processEvents()
    assert screen.contains(window.frameGeometry()), (window.frameGeometry(), screen)
    assert window.minimumWidth() <= screen.width()
    first.shutdown()
    window.shutdown()
    assert QByteArray.fromBase64(saved.encode())  # a real saved geometry was used
