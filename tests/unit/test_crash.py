from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from qwen_mtp_desktop.core.crash import CrashHandler, CrashReport


def test_thread_exception_is_reported_and_logged(tmp_path: Path) -> None:
    reports: list[CrashReport] = []
    handler = CrashHandler(tmp_path, tmp_path / "app.log", reports.append)
    handler.install()
    try:

        def boom() -> None:
            raise ValueError("worker exploded")

        worker = threading.Thread(target=boom, name="worker-1")
        worker.start()
        worker.join()
    finally:
        handler.uninstall()
    assert len(reports) == 1
    assert reports[0].summary == "ValueError: worker exploded"
    assert reports[0].thread_name == "worker-1"
    assert "Traceback" in reports[0].details and "boom" in reports[0].details
    # A clean exit leaves no native crash file behind.
    assert not (tmp_path / "native-crash.log").exists()


def test_main_thread_excepthook(tmp_path: Path) -> None:
    reports: list[CrashReport] = []
    handler = CrashHandler(tmp_path, tmp_path / "app.log", reports.append)
    handler.install()
    try:
        try:
            raise RuntimeError("main broke")
        except RuntimeError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    finally:
        handler.uninstall()
    assert [r.summary for r in reports] == ["RuntimeError: main broke"]


def test_native_crash_is_reported_at_next_start(tmp_path: Path) -> None:
    code = f"""
        import faulthandler
        from pathlib import Path
        from qwen_mtp_desktop.core.crash import CrashHandler
        CrashHandler(Path({str(tmp_path)!r}), Path({str(tmp_path)!r}) / "app.log").install()
        faulthandler._sigsegv()
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True)
    assert result.returncode != 0
    handler = CrashHandler(tmp_path, tmp_path / "app.log")
    dump = handler.take_previous_native_crash()
    assert dump is not None and "Segmentation fault" in dump
    assert handler.take_previous_native_crash() is None  # reported once
