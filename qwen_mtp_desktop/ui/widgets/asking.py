"""The app's two questions to the user: which folder, and whether to go ahead.

A confirmation has a button that names the action ("Delete", "Stop export") and a safe button
("Cancel", "Keep exporting") that is the default and answers Esc, so Enter never does the
harmful thing. Panels keep these behind a dataclass of dialogs, so tests answer them.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QMessageBox, QWidget


def choose_folder(parent: QWidget, title: str, start: Path) -> Path | None:
    """A folder the user picked, starting at `start`; None when they cancelled."""
    chosen = QFileDialog.getExistingDirectory(parent, title, str(start))
    return Path(chosen) if chosen else None


def confirm(parent: QWidget, title: str, text: str, action: str, keep: str = "Cancel") -> bool:
    """True when the user chose `action`; `keep` is the safe answer (the default, and Esc)."""
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, parent=parent)
    go = box.addButton(action, QMessageBox.ButtonRole.DestructiveRole)
    safe = box.addButton(keep, QMessageBox.ButtonRole.RejectRole)
    box.setDefaultButton(safe)
    box.setEscapeButton(safe)
    box.exec()
    return box.clickedButton() is go
