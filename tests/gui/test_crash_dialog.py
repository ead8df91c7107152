from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.system.crash import CrashReport
from qwen_mtp_desktop.ui.dialogs.crash import CrashNotifier

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


@pytest.mark.subprocess
def test_native_crash_of_the_previous_run_is_announced_in_the_window(qtbot: QtBot) -> None:
    """A real segfault in one run; the next start says so in the window, not only the log."""
    import subprocess
    import sys
    import textwrap

    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore
    from qwen_mtp_desktop.core.system.crash import CrashHandler
    from qwen_mtp_desktop.ui.dialogs.crash import announce_previous_crash
    from qwen_mtp_desktop.ui.main_window import MainWindow

    paths = app_paths().ensure()
    code = f"""
        import faulthandler
        from pathlib import Path
        from qwen_mtp_desktop.core.system.crash import CrashHandler
        CrashHandler(Path({str(paths.log_dir)!r}), Path({str(paths.log_file)!r})).install()
        faulthandler._sigsegv()
    """
    crashed = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True)
    assert crashed.returncode != 0
    handler = CrashHandler(paths.log_dir, paths.log_file)
    handler.install()
    try:
        window = MainWindow(paths, SettingsStore(paths.settings_file))
        qtbot.addWidget(window)
        window.show()
        assert announce_previous_crash(window, handler)
        (notice,) = window.notices
        assert "Segmentation fault" in notice
        assert str(paths.log_dir / "native-crash.previous.log") in notice
        assert "Your conversations are kept" in notice
    finally:
        handler.uninstall()
    # A clean start announces nothing.
    again = CrashHandler(paths.log_dir, paths.log_file)
    again.install()
    try:
        assert again.previous_native_crash is None
        assert not announce_previous_crash(window, again)
    finally:
        again.uninstall()
