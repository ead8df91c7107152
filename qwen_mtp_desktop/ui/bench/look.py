"""How the Benchmark page looks: status colours, its style sheet, the history's status dots."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPixmap

from qwen_mtp_desktop.ui.widgets.style import ACCENT

STATUS_COLORS = {"ok": "#2e9d57", "warning": "#d08400", "error": "#d93025", "info": "#3c78d8"}


def status_dot(color: str, size: int = 12) -> QIcon:
    """A filled status dot (drawn, so it looks the same on every platform)."""
    pixmap = QPixmap(size * 2, size * 2)
    pixmap.setDevicePixelRatio(2.0)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    painter.drawEllipse(2, 2, size - 4, size - 4)
    painter.end()
    return QIcon(pixmap)


def bench_style() -> str:
    banner = "border-radius: 8px; padding: 2px;"
    banners = "\n".join(
        f'QFrame#benchBanner[status="{status}"] {{ border: 1px solid {color}; {banner}'
        f" border-left: 5px solid {color}; }}"
        for status, color in STATUS_COLORS.items()
    )
    return f"""
    QLabel#benchTitle {{ font-size: 22px; font-weight: 600; }}
    QLabel#sectionTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#bannerTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#formLabel, QLabel#muted {{ color: palette(placeholder-text); }}
    QFrame#benchSetup {{ border: 1px solid palette(mid); border-radius: 8px; }}
    QFrame#benchHistory {{ border-right: 1px solid palette(mid); }}
    QPushButton#primaryAction {{
        background: {ACCENT}; color: white; border: none; border-radius: 6px;
        padding: 6px 16px; font-weight: 600;
    }}
    QPushButton#primaryAction:disabled {{
        background: transparent; color: palette(mid); border: 1px solid palette(mid);
        font-weight: normal;
    }}
    QListWidget#benchHistoryList::item {{ padding: 6px 4px; }}
    QTableWidget#benchTable {{ border: none; }}
    {banners}
    """
