"""Status colours and the drawn status icons every panel shows (a filled circle with a glyph).

One palette, readable on light and dark backgrounds. The Models panel speaks of error /
warning / info / ok / pending, the export wizard's checklist of pass / warn / fail / pending:
both vocabularies map onto the same colours here.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPixmap

GREEN, AMBER, RED, BLUE, GREY = "#2e9d57", "#d08400", "#d93025", "#3c78d8", "#9aa0ad"

#: status -> (colour, glyph)
STATUS_LOOKS: dict[str, tuple[str, str]] = {
    "error": (RED, "!"),
    "warning": (AMBER, "!"),
    "info": (BLUE, "i"),
    "ok": (GREEN, "✓"),
    "pending": (GREY, "…"),
    "pass": (GREEN, "✓"),
    "warn": (AMBER, "!"),
    "fail": (RED, "✕"),
}
_UNKNOWN = (GREY, "?")

_icons: dict[tuple[str, int], QIcon] = {}


def status_color(status: str) -> str:
    return STATUS_LOOKS.get(status, _UNKNOWN)[0]


def status_pixmap(
    status: str, size: int = 16, ratio: float = 2.0, *, glyph_scale: float = 0.7
) -> QPixmap:
    """A filled circle with a glyph; drawn, so it looks the same on every platform and theme.
    An unknown status is a grey "?"."""
    color, glyph = STATUS_LOOKS.get(status, _UNKNOWN)
    pixmap = QPixmap(round(size * ratio), round(size * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    rect = QRectF(1, 1, size - 2, size - 2)
    painter.drawEllipse(rect)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(round(size * glyph_scale))
    painter.setFont(font)
    painter.setPen(QColor("white"))
    painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, glyph)
    painter.end()
    return pixmap


def status_icon(status: str, size: int = 16) -> QIcon:
    """`status_pixmap` as an icon, made once per status and size."""
    key = (status, size)
    if key not in _icons:
        _icons[key] = QIcon(status_pixmap(status, size))
    return _icons[key]


__all__ = ["STATUS_LOOKS", "status_color", "status_icon", "status_pixmap"]
