"""Start-up: the main window module loads without the runtime's heavy imports, and the window is
visible quickly after launch (issue 18: under 1 s on the development machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gui

#: Measured here: 0.7-1.5 s with 4 busy processes on the 2 cores (before issue 18: 1.9-3.2 s).
#: The bound leaves room for a loaded machine; the log of each run has the figure.
VISIBLE_BOUND_S = 2.0


def test_main_window_module_imports_neither_openvino_nor_numpy() -> None:
    code = (
        "import sys\n"
        "import qwen_mtp_desktop.app, qwen_mtp_desktop.ui.main_window\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openvino', 'openvino_genai', 'openvino_tokenizers', 'numpy', 'torch', 'PIL'))\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def test_window_is_visible_soon_after_launch(tmp_path: Path) -> None:
    home = tmp_path / "home"
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
    assert found, logs[-2000:]
    visible_s = float(found[-1])
    print(f"window visible {visible_s:.2f} s after launch")
    assert 0 < visible_s < VISIBLE_BOUND_S
