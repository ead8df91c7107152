"""`python -m qwen_mtp_desktop.core.optimum_cli ARGS` runs optimum-cli with telemetry blocked.

The export subprocess runs through this entry point, so exports stay as private as chat.
"""

from __future__ import annotations

import sys

from qwen_mtp_desktop.core.privacy import block_telemetry


def main() -> int:
    block_telemetry()
    from optimum.commands.optimum_cli import main as optimum_main

    sys.argv[0] = "optimum-cli"
    optimum_main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
