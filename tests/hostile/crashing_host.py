"""The engine host, crashing natively on purpose: `python -m tests.hostile.crashing_host SPEC`.

SPEC is a JSON file {"after_chunks": K, "signal": "SIGSEGV", "times": N}: the host kills
itself with that signal when a turn is about to produce its (K+1)-th step (K = 0: at the
first generate, before any text, the failure openvino-genai #4425 describes), N more times
across restarts (the file counts down, so a restarted host behaves as asked). Everything else
is the app's own engine host.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core import engine as engine_module


def arm(spec_path: Path) -> None:
    original = engine_module.Generation.next_chunk
    produced = {"chunks": 0}

    def crashing(self: Any, timeout: float | None = None) -> Any:
        spec = json.loads(spec_path.read_text())
        if spec["times"] > 0 and produced["chunks"] == spec["after_chunks"]:
            spec["times"] -= 1
            spec_path.write_text(json.dumps(spec))
            os.kill(os.getpid(), getattr(signal, spec["signal"]))
        chunk = original(self, timeout)
        if chunk is not None:
            produced["chunks"] += 1
        return chunk

    engine_module.Generation.next_chunk = crashing  # type: ignore[method-assign]


def command(spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "tests.hostile.crashing_host", str(spec_path)]


if __name__ == "__main__":
    arm(Path(sys.argv[1]))
    from qwen_mtp_desktop.host.engine_host import main

    sys.exit(main())
