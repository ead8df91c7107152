"""Entry point of the frozen app (PyInstaller runs this as __main__)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _main() -> int:
    # A windowed build (Windows, macOS .app) has no console: give print() somewhere to go.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, Path(os.devnull).open("w", encoding="utf-8"))  # noqa: SIM115
    if sys.argv[1:3] == ["-m", "qwen_mtp_desktop.host"]:
        # The window's engine process (workers.engine_process.host_command).
        from qwen_mtp_desktop.host.engine_host import main as engine_host

        return engine_host()
    if sys.argv[1:3] == ["-m", "qwen_mtp_desktop.core.export.child"]:
        # The MTP == plain check after adding a head (needs only the runtime).
        from qwen_mtp_desktop.core.export.child import _main as child

        return child(sys.argv[3:])
    if len(sys.argv) > 1 and sys.argv[1] == "-m":
        # The exporter and the toolkit installer run `python -m ...`; a bundle has no Python.
        print(
            "error: this is a packaged build; it has no Python interpreter to run "
            f"`-m {' '.join(sys.argv[2:3])}`. Exporting models needs a source install "
            "(see README.md).",
            file=sys.stderr,
        )
        return 2
    from qwen_mtp_desktop.cli import main

    return main()


if __name__ == "__main__":
    sys.exit(_main())
