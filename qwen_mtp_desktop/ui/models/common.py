"""Shared bits of the Models panel: severity colours, the injectable dialogs, the local style."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox, QWidget

from qwen_mtp_desktop.ui.models.ovms_dialog import choose_parent as _choose_ovms_parent
from qwen_mtp_desktop.ui.widgets.asking import choose_folder, confirm
from qwen_mtp_desktop.ui.widgets.status_icons import status_color
from qwen_mtp_desktop.ui.widgets.style import ACCENT

#: The Models panel's status words and their colours (ui.widgets.status_icons draws their icons).
SEVERITY_COLORS = {
    status: status_color(status) for status in ("error", "warning", "info", "ok", "pending")
}
SEVERITY_WORDS = {"error": "Error", "warning": "Warning", "info": "Note"}
VERDICT_STATUS = {"fits": "ok", "tight": "warning", "does_not_fit": "error", "unknown": "pending"}


def _inform(parent: QWidget, title: str, text: str) -> None:
    QMessageBox.warning(parent, title, text)


def _open_url(url: QUrl) -> bool:
    return QDesktopServices.openUrl(url)


@dataclass
class ModelDialogs:
    """Everything the panel asks the user or the desktop; tests replace these."""

    #: (parent, title, start folder) -> chosen folder or None.
    choose_folder: Callable[[QWidget, str, Path], Path | None] = choose_folder
    #: (parent, title, text, action button) -> True to go ahead with a destructive action.
    confirm: Callable[[QWidget, str, str, str], bool] = confirm
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
