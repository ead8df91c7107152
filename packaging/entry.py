"""Entry point of the frozen app (PyInstaller runs this as __main__)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

#: `qwen-mtp-desktop --probe-imports NAME...`: prints {"NAME": true|false} (importable in this
#: bundle or not) and exits 0. Only the frozen app has it: packaging/build.py and the bundle test
#: use it to show the export toolkit (torch, transformers, optimum) is not in the bundle, which a
#: look at the bundle folder cannot show (pure-Python modules live inside its archive).
PROBE_IMPORTS = "--probe-imports"


def _probe_imports(names: list[str]) -> int:
    import importlib

    found: dict[str, bool] = {}
    for name in names:
        # Any other error (a package that is there but fails to load) escapes: the probe then
        # exits non-zero, which is what a bundle holding part of the toolkit deserves.
        try:
            importlib.import_module(name)
        except ImportError:
            found[name] = False
        else:
            found[name] = True
    print(json.dumps(found))
    return 0


def _main() -> int:
    # A windowed build (Windows, macOS .app) has no console: give print() somewhere to go.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, Path(os.devnull).open("w", encoding="utf-8"))  # noqa: SIM115
    if sys.argv[1:2] == [PROBE_IMPORTS]:
        return _probe_imports(sys.argv[2:])
    if sys.argv[1:3] == ["-m", "qwen_mtp_desktop.host"]:
        # The window's engine process (workers.engine_process.host_command).
        from qwen_mtp_desktop.host.engine_host import main as engine_host

        return engine_host()
    if sys.argv[1:3] == ["-m", "qwen_mtp_desktop.core.models.export.child"]:
        # The MTP == plain check after adding a head (needs only the runtime).
        from qwen_mtp_desktop.core.models.export.child import _main as child

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
