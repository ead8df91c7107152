"""The app's look: one stylesheet that follows the palette (light or dark)."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

ACCENT = "#5b6cff"


def is_dark(app: QApplication) -> bool:
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def stylesheet(dark: bool) -> str:
    sidebar = "#1e1f24" if dark else "#f1f2f6"
    sidebar_text = "#c9ccd6" if dark else "#3b3f4a"
    selected = "#2d3140" if dark else "#e1e4ff"
    muted = "#9aa0ad" if dark else "#6b7080"
    banner_bg = "#2a2a1c" if dark else "#fff7dd"
    banner_border = "#6b5d1f" if dark else "#f0d98a"
    return f"""
    QListWidget#sidebar {{
        background: {sidebar};
        border: none;
        padding: 12px 8px;
        font-size: 14px;
        color: {sidebar_text};
        outline: 0;
    }}
    QListWidget#sidebar::item {{
        padding: 10px 12px;
        border-radius: 8px;
        margin: 2px 0;
    }}
    QListWidget#sidebar::item:selected {{
        background: {selected};
        color: {ACCENT if not dark else "#ffffff"};
        font-weight: 600;
    }}
    QLabel#panelHeading {{ font-size: 22px; font-weight: 600; }}
    QLabel#panelBody {{ font-size: 14px; color: {muted}; }}
    QLabel#muted {{ color: {muted}; }}
    QFrame#demoBanner {{
        background: {banner_bg};
        border: 1px solid {banner_border};
        border-radius: 8px;
    }}
    """
