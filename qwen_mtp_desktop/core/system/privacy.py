"""Keep the app private: no network traffic the user did not start.

OpenVINO's converter (imported by `import openvino`) and nncf send usage telemetry unless a
consent file in the user's home says no. Both fall back to a built-in no-op stub when the
`openvino_telemetry` package cannot be imported, so the app makes it unimportable before
anything imports openvino. The user's global consent file is left untouched.
"""

from __future__ import annotations

import sys


def block_telemetry() -> None:
    """Call before the first `import openvino` in a process (entry points do)."""
    if "openvino_telemetry" not in sys.modules:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]


def telemetry_blocked() -> bool:
    return "openvino_telemetry" in sys.modules and sys.modules["openvino_telemetry"] is None
