"""The engine host with every decoding step delayed: `python -m tests.reliability.paced_host S`.

The tiny demo model answers in a blink; delaying each step as the host takes it (the decoding
loop itself runs as usual) makes an answer stream at a real model's pace, so a kill lands
mid-answer. Everything else is the app's own engine host.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from qwen_mtp_desktop.core import engine as engine_module


def pace(delay_s: float) -> None:
    original = engine_module.Generation.next_chunk

    def paced(self: Any, timeout: float | None = None) -> Any:
        chunk = original(self, timeout)
        if chunk is not None:
            time.sleep(delay_s)
        return chunk

    engine_module.Generation.next_chunk = paced  # type: ignore[method-assign]


def command(delay_s: float) -> list[str]:
    """The command line that starts this host (for `EngineProcess(command=...)`)."""
    return [sys.executable, "-m", "tests.reliability.paced_host", str(delay_s)]


if __name__ == "__main__":
    pace(float(sys.argv[1]))
    from qwen_mtp_desktop.host.engine_host import main

    sys.exit(main())
