"""Shared bits of the Models panel: severity icons, the injectable dialogs, the local style."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRectF, Qt, QUrl
from PySide6.QtGui import QColor, QDesktopServices, QFont, QIcon, QPainter, QPixmap
from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget

from qwen_mtp_desktop.ui.models.ovms_dialog import choose_parent as _choose_ovms_parent
from qwen_mtp_desktop.ui.style import ACCENT

#: Status colours, readable on light and dark backgrounds.
SEVERITY_COLORS = {
    "error": "#d93025",
    "warning": "#d08400",
    "info": "#3c78d8",
    "ok": "#2e9d57",
    "pending": "#9aa0ad",
}
SEVERITY_GLYPHS = {"error": "!", "warning": "!", "info": "i", "ok": "✓", "pending": "…"}
SEVERITY_WORDS = {"error": "Error", "warning": "Warning", "info": "Note"}
VERDICT_STATUS = {"fits": "ok", "tight": "warning", "does_not_fit": "error", "unknown": "pending"}

_icons: dict[tuple[str, int], QIcon] = {}


def status_pixmap(status: str, size: int = 16, ratio: float = 2.0) -> QPixmap:
    """A filled circle with a glyph; drawn, so it looks the same on every platform and theme."""
    pixmap = QPixmap(round(size * ratio), round(size * ratio))
    pixmap.setDevicePixelRatio(ratio)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(SEVERITY_COLORS[status]))
    rect = QRectF(1, 1, size - 2, size - 2)
    painter.drawEllipse(rect)
    font = QFont()
    font.setBold(True)
    font.setPixelSize(round(size * 0.7))
    painter.setFont(font)
    painter.setPen(QColor("white"))
    painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, SEVERITY_GLYPHS[status])
    painter.end()
    return pixmap


def status_icon(status: str, size: int = 16) -> QIcon:
    key = (status, size)
    if key not in _icons:
        _icons[key] = QIcon(status_pixmap(status, size))
    return _icons[key]


def _choose_folder(parent: QWidget) -> Path | None:
    chosen = QFileDialog.getExistingDirectory(parent, "Add a folder of models", str(Path.home()))
    return Path(chosen) if chosen else None


def _confirm(parent: QWidget, title: str, text: str) -> bool:
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=parent)
    delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.exec()
    return box.clickedButton() is delete


def _inform(parent: QWidget, title: str, text: str) -> None:
    QMessageBox.warning(parent, title, text)


def _open_url(url: QUrl) -> bool:
    return QDesktopServices.openUrl(url)


@dataclass
class ModelDialogs:
    """Everything the panel asks the user or the desktop; tests replace these."""

    choose_folder: Callable[[QWidget], Path | None] = _choose_folder
    #: (parent, title, text) -> True to go ahead with a destructive action.
    confirm: Callable[[QWidget, str, str], bool] = _confirm
    #: (parent, title, text): an action was refused or failed.
    inform: Callable[[QWidget, str, str], None] = _inform
    #: Opens a folder in the file manager.
    open_url: Callable[[QUrl], bool] = _open_url
    #: (parent, start folder) -> the folder to write an OVMS repository in, or None.
    choose_ovms_parent: Callable[[QWidget, Path], Path | None] = _choose_ovms_parent


def panel_style(dark: bool) -> str:
    """Rules for the panel's own object names (the app stylesheet covers the rest)."""
    muted = "#9aa0ad" if dark else "#6b7080"  # the app stylesheet's muted text
    badge = "border-radius: 10px; padding: 2px 10px; font-weight: 600; color: white;"
    verdicts = "\n".join(
        f'QLabel#verdictBadge[status="{status}"] {{ background: {color}; {badge} }}'
        for status, color in SEVERITY_COLORS.items()
    )
    return f"""
    QLabel#modelTitle {{ font-size: 20px; font-weight: 600; }}
    QLabel#defaultBadge {{ background: {ACCENT}; {badge} }}
    QLabel#loadedBadge {{ background: {SEVERITY_COLORS["ok"]}; {badge} }}
    {verdicts}
    QLabel#memoryNeed {{ font-size: 15px; font-weight: 600; }}
    QLabel#sectionTitle {{ font-size: 15px; font-weight: 600; }}
    QFrame#sectionRule {{ color: palette(mid); }}
    QLabel#formLabel {{ color: {muted}; }}
    QLabel#diagnosticCode {{ font-weight: 600; }}
    QLabel#diagnosticFix {{ color: {muted}; }}
    QPushButton#primaryAction {{
        background: {ACCENT}; color: white; border: none; border-radius: 6px;
        padding: 6px 14px; font-weight: 600;
    }}
    QPushButton#primaryAction:disabled {{ background: palette(mid); }}
    QPushButton#dangerAction {{ color: {SEVERITY_COLORS["error"]}; }}
    QPushButton#dangerAction:disabled {{ color: {muted}; }}
    QTableWidget#componentTable, QTableWidget#memoryTerms {{ border: none; }}
    QTableWidget#componentTable::item {{ padding: 3px 6px; }}
    QToolButton#arithmeticToggle {{ border: none; padding: 2px 0; }}
    QFrame#modelLibrary {{ border-right: 1px solid palette(mid); }}
    """
