"""Start-up: the main window module loads without the runtime's heavy imports, and the window is
visible quickly after launch (issue 18: under 1 s on the development machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

#: Measured here: 0.7-1.0 s (up to 1.5 s with 4 busy processes on the 2 cores); before issue 18,
#: 1.9-3.2 s. The best of RUNS launches must beat the bound: one slow launch on a loaded
#: machine is noise, three are a regression.
VISIBLE_BOUND_S = 1.8
RUNS = 3


def test_main_window_module_imports_neither_openvino_nor_numpy() -> None:
    code = (
        "import sys\n"
        "import qwen_mtp_desktop.app, qwen_mtp_desktop.ui.main_window\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openvino', 'openvino_genai', 'openvino_tokenizers', 'numpy', 'torch', 'PIL',"
        " 'httpx', 'keyring'))\n"  # remote models import these on first use
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def _launch_visible_s(tmp_path: Path, run: int) -> float:
    home = tmp_path / f"home-{run}"
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "--screenshot", str(tmp_path / "shot.png")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    logs = "".join(p.read_text("utf-8") for p in home.rglob("*.log"))
    found = re.findall(r"window visible (\d+\.\d+) s after launch", logs)
    assert len(found) == 1, logs[-2000:]
    return float(found[0])


def test_window_is_visible_soon_after_launch(tmp_path: Path) -> None:
    times = [_launch_visible_s(tmp_path, run) for run in range(RUNS)]
    print("window visible after launch (s):", times)
    assert all(t > 0 for t in times)
    assert min(times) < VISIBLE_BOUND_S, times
