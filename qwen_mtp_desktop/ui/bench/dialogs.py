"""What the Benchmark page asks the desktop (file dialogs), replaceable in tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget


def _choose_model_dir(parent: QWidget) -> Path | None:
    chosen = QFileDialog.getExistingDirectory(parent, "Choose a model folder", str(Path.home()))
    return Path(chosen) if chosen else None


def _choose_prompt_file(parent: QWidget) -> Path | None:
    chosen, _filter = QFileDialog.getOpenFileName(
        parent, "Choose a prompt set", str(Path.home()), "Prompt sets (*.json)"
    )
    return Path(chosen) if chosen else None


def _choose_save_path(parent: QWidget, title: str, suggested: Path, filters: str) -> Path | None:
    chosen, _filter = QFileDialog.getSaveFileName(parent, title, str(suggested), filters)
    return Path(chosen) if chosen else None


@dataclass
class BenchDialogs:
    """Everything the panel asks the desktop; tests replace these."""

    choose_model_dir: Callable[[QWidget], Path | None] = _choose_model_dir
    choose_prompt_file: Callable[[QWidget], Path | None] = _choose_prompt_file
    #: (parent, title, suggested path, file filters) -> chosen path or None.
    choose_save_path: Callable[[QWidget, str, Path, str], Path | None] = _choose_save_path
