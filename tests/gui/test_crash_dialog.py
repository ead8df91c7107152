from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.crash import CrashReport
from qwen_mtp_desktop.ui.crash_dialog import CrashNotifier

pytestmark = pytest.mark.gui


def _boxes() -> list[QMessageBox]:
    return [
        w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()
    ]


def test_first_crash_is_shown_once_with_log_path(qtbot: QtBot, tmp_path: Path) -> None:
    notifier = CrashNotifier()
    report = CrashReport("ValueError: bad", "Traceback ...", "worker", tmp_path / "app.log")
    notifier.notify(report)
    notifier.notify(CrashReport("KeyError: x", "Traceback ...", "worker", tmp_path / "app.log"))
    qtbot.waitUntil(lambda: len(_boxes()) == 1)
    box = _boxes()[0]
    assert "ValueError: bad" in box.text()
    assert str(tmp_path / "app.log") in box.informativeText()
    assert "Traceback" not in box.text()
    qtbot.wait(50)
    assert len(_boxes()) == 1
    box.close()
