"""SIGTERM (a logout) and SIGINT (Ctrl+C in a terminal) close the real window the normal way:
what is pending is written (the window geometry stands for it: only a normal close writes it),
the engine process goes with it, and the app exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [
    pytest.mark.gui,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.subprocess,
]


def _wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _logs(home: Path) -> str:
    return "".join(p.read_text("utf-8", errors="replace") for p in home.rglob("*.log"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_quit_signal_closes_the_window_normally(tmp_path: Path, signum: int) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    process = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: "window visible" in _logs(home), 120, "the window")
        time.sleep(2)  # the panels and the engine process start after the first paint
        children = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signum)
        _out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    name = signal.Signals(signum).name
    logs = _logs(home)
    assert process.returncode == 0, (process.returncode, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert f"{name} received: closing the window" in logs, logs[-3000:]
    settings = next(home.rglob("settings.json"))
    state = json.loads(settings.read_text("utf-8"))
    assert "window_geometry" in json.dumps(state), state  # written by the normal close only
    _gone, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [p.pid for p in alive]
