"""Guards against Qt binding releases that break the app on this Python."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.subprocess


def test_signal_emission_keeps_reference_counts() -> None:
    # PySide6 6.12.0 dropped a reference to True on every Signal.emit(); Python 3.11 then aborts
    # ("deallocating True or False") after a few hundred emissions. Run it in a child process so
    # such a crash fails this test instead of killing the test run.
    code = textwrap.dedent(
        """
        import sys
        from PySide6.QtCore import QObject, Signal
        from PySide6.QtWidgets import QApplication, QLabel

        class Emitter(QObject):
            fired = Signal(int)

        app = QApplication([])
        emitter = Emitter()
        label = QLabel()
        before = sys.getrefcount(True), sys.getrefcount(None)
        for i in range(5000):
            emitter.fired.emit(i)
            label.setText(str(i))
            label.setVisible(False)
        after = sys.getrefcount(True), sys.getrefcount(None)
        print(after[0] - before[0], after[1] - before[1])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    drift_true, drift_none = (int(v) for v in result.stdout.split())
    assert abs(drift_true) < 50 and abs(drift_none) < 50
