"""Render resources/icons/app.svg to PNG files (for .desktop, .ico and .icns icons).

Usage: python packaging/render_icon.py OUT_DIR [SIZE ...]   (default sizes 16 ... 512)
Runs Qt offscreen; PyInstaller turns the 256 px PNG into .ico / .icns with Pillow.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SVG = Path(__file__).resolve().parents[1] / "resources" / "icons" / "app.svg"
SIZES = (16, 32, 48, 64, 128, 256, 512)


def main(argv: list[str]) -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication, QIcon

    out = Path(argv[0])
    sizes = [int(s) for s in argv[1:]] or list(SIZES)
    out.mkdir(parents=True, exist_ok=True)
    app = QGuiApplication.instance() or QGuiApplication([])
    icon = QIcon(str(SVG))
    if icon.isNull():
        print(f"cannot read {SVG} (is Qt's SVG icon engine installed?)", file=sys.stderr)
        return 1
    for size in sizes:
        path = out / f"app-{size}.png"
        if not icon.pixmap(size, size).save(str(path)):
            print(f"cannot write {path}", file=sys.stderr)
            return 1
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
