"""OpenVINO never loads in the window's process (issue 25 item 2): the real window, in a
process of its own, chats, validates, benchmarks, survives a run's process being killed, and
exports (tests/gui/window_actions.py); then its sys.modules holds neither OpenVINO nor the
export toolkit. The chat's engine, each run and the exporter each ran in another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models import cached_checkpoint

pytestmark = [pytest.mark.gui, pytest.mark.export]


def test_openvino_is_never_imported_in_the_windows_process(app_home: Path) -> None:
    checkpoint = cached_checkpoint(moe=False)
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(app_home), "QT_QPA_PLATFORM": "offscreen"}
    run = subprocess.run(
        [sys.executable, "-m", "tests.gui.window_actions", str(checkpoint)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    # Every action did what it should...
    assert result["chat"] in ("eos", "length", "stop"), result
    assert result["validate"] == ["finished", True], result
    assert result["bench"] == ["finished", 3], result  # plain, MTP n=1, MTP n=2
    what, code, status, killed = result["killed"]
    assert (what, code) == ("failed", "MEASURE_STOPPED") and len(killed) == 1, result
    assert status.startswith("The validation stopped: the process running it ended (")
    assert sys.platform == "win32" or "(SIGKILL)" in status
    assert killed[0] not in (result["window_pid"], result["chat_engine_pid"])
    assert result["chat_after_kill"] in ("eos", "length", "stop"), result
    assert result["export"] == ["succeeded", ""], result
    # ...and none of it loaded OpenVINO (or the export toolkit) in the window's process.
    assert result["heavy"] == [], result
