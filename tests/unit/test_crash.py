"""The crash handler. It sets process-wide hooks (sys.excepthook, threading.excepthook,
faulthandler), so each case runs in a process of its own, as in the app: uninstalling it
disables faulthandler, and in the test process that left every later test without pytest's
own native-crash dump."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.system.crash import CrashHandler, CrashReport
from tests.hostile.isolation import run_isolated

pytestmark = pytest.mark.subprocess


def thread_exception_case(folder: str) -> dict[str, Any]:
    reports: list[CrashReport] = []
    handler = CrashHandler(Path(folder), Path(folder) / "app.log", reports.append)
    handler.install()
    try:

        def boom() -> None:
            raise ValueError("worker exploded")

        worker = threading.Thread(target=boom, name="worker-1")
        worker.start()
        worker.join()
    finally:
        handler.uninstall()
    return {"reports": [[r.summary, r.thread_name, r.details] for r in reports]}


def main_thread_case(folder: str) -> dict[str, Any]:
    reports: list[CrashReport] = []
    handler = CrashHandler(Path(folder), Path(folder) / "app.log", reports.append)
    handler.install()
    try:
        try:
            raise RuntimeError("main broke")
        except RuntimeError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
    finally:
        handler.uninstall()
    return {"summaries": [r.summary for r in reports]}


def _isolated(case: str, folder: Path) -> dict[str, Any]:
    """`case` (a function of this module) run in a fresh interpreter on `folder`."""
    return run_isolated(
        f"tests.unit.test_crash:{case}", timeout_s=60, memory_mb=1024, folder=str(folder)
    )


def test_thread_exception_is_reported_and_logged(tmp_path: Path) -> None:
    outcome = _isolated("thread_exception_case", tmp_path)
    [[summary, thread_name, details]] = outcome["reports"]
    assert summary == "ValueError: worker exploded"
    assert thread_name == "worker-1"
    assert "Traceback" in details and "boom" in details
    # A clean exit leaves no native crash file behind.
    assert not (tmp_path / "native-crash.log").exists()


def test_main_thread_excepthook(tmp_path: Path) -> None:
    outcome = _isolated("main_thread_case", tmp_path)
    assert outcome["summaries"] == ["RuntimeError: main broke"]


def test_native_crash_is_reported_at_next_start(tmp_path: Path) -> None:
    code = f"""
        import faulthandler
        from pathlib import Path
        from qwen_mtp_desktop.core.system.crash import CrashHandler
        CrashHandler(Path({str(tmp_path)!r}), Path({str(tmp_path)!r}) / "app.log").install()
        faulthandler._sigsegv()
    """
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True)
    assert result.returncode != 0
    handler = CrashHandler(tmp_path, tmp_path / "app.log")
    dump = handler.take_previous_native_crash()
    assert dump is not None and "Segmentation fault" in dump
    assert handler.take_previous_native_crash() is None  # reported once
