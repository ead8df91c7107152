"""The chat's model folder, watched while the app runs: when it is moved, renamed or deleted,
a banner above the transcript says which folder is gone and offers to locate it or to choose
another model, a warning goes to the log, and a turn that fails for want of the model says
the same instead of "No model is loaded" (issue 28).

The folder and its parent are watched with a QFileSystemWatcher: Qt's inotify watch on a folder
reports its deletion but not its renaming, which shows as a change of the parent. On a change
one stat (is the folder still there?) decides; no scan runs on the GUI thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.ui.widgets.asking import choose_folder
from qwen_mtp_desktop.workers.remote_models import is_remote

log = logging.getLogger(__name__)

#: The error codes a turn fails with when its model folder could not be loaded.
_NO_MODEL_CODES = ("NOT_LOADED", "MODEL_NOT_FOUND")

#: Asks the user for a folder (replaced in tests): (parent, title, start folder) -> folder.
ChooseFolder = Callable[[QWidget, str, Path], Path | None]


def gone_message(model_dir: Path) -> tuple[str, str]:
    """(message, fix) for a chat whose model folder vanished."""
    return (
        f"The model folder “{model_dir.name}” is gone: {model_dir} was moved, renamed or deleted.",
        "Click “Locate folder…” above the chat to point to where it is now, or choose "
        "another model in the header.",
    )


class MissingModelBanner(QWidget):
    """Says which model folder is gone, with Locate and Choose-another buttons.

    Signals: locate_requested(), choose_requested().
    """

    locate_requested = Signal()
    choose_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 0)
        self.frame = QFrame()
        self.frame.setObjectName("healthBanner")  # the warning banner's look
        layout.addWidget(self.frame)
        row = QHBoxLayout(self.frame)
        row.setContentsMargins(14, 8, 10, 8)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.PlainText)  # a path is not markup
        self.locate_button = QPushButton("Locate folder…")
        self.locate_button.clicked.connect(self.locate_requested)
        self.choose_button = QPushButton("Choose another model")
        self.choose_button.clicked.connect(self.choose_requested)
        row.addWidget(self.text, 1)
        row.addWidget(self.locate_button)
        row.addWidget(self.choose_button)
        self.setVisible(False)

    def show_gone(self, model_dir: Path) -> None:
        self.text.setText(gone_message(model_dir)[0])
        self.setVisible(True)


class MissingModel(QObject):
    """Watches the chat's model folder; see the module docstring.

    Signals:
        vanished(Path): the followed model folder is gone.
        located(Path): the user chose a folder to use instead (the chat switches to it).
        relocated(Path, Path): the same, with the gone folder first (the library and the
            settings follow the model to its new place).
        choose_requested(): the user wants to pick another model.
    """

    vanished = Signal(object)
    located = Signal(object)
    relocated = Signal(object, object)
    choose_requested = Signal()

    def __init__(
        self,
        parent: QWidget,
        refresh: Callable[[], None] | None = None,
        choose_folder: ChooseFolder = choose_folder,
    ) -> None:
        """`refresh` is called when the folder is found gone (the chat's header says so)."""
        super().__init__(parent)
        self._parent = parent
        self._refresh = refresh
        self.choose_folder = choose_folder
        self.banner = MissingModelBanner()
        self.banner.locate_requested.connect(self.locate)
        self.banner.choose_requested.connect(self.choose_requested)
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(self._on_changed)
        self.followed: Path | None = None
        #: The followed folder, while it is gone.
        self.gone: Path | None = None

    def attach(
        self, above: QWidget, use_model: Callable[[Path], None], choose: Callable[[], None]
    ) -> None:
        """Show the banner below `above` (the chat's other banners); a located folder goes to
        `use_model`, "Choose another model" calls `choose`."""
        parent = above.parentWidget()
        layout = parent.layout() if parent is not None else None
        if isinstance(layout, QVBoxLayout):
            layout.insertWidget(layout.indexOf(above) + 1, self.banner)
        self.located.connect(use_model)
        self.choose_requested.connect(choose)

    def follow(self, model_dir: Path) -> None:
        """Watch `model_dir` (the chat's model now); a remote model has no folder."""
        if is_remote(model_dir):
            self._stop()
            return
        if model_dir == self.followed and self.gone is None:
            return
        if model_dir != self.followed:
            self._stop()
            self.followed = model_dir
        if model_dir.is_dir():  # one stat, as the header's vision check does
            watched = self._watcher.directories()
            wanted = [str(p) for p in (model_dir, model_dir.parent) if str(p) not in watched]
            if wanted:
                self._watcher.addPaths(wanted)
            self.gone = None
            self.banner.setVisible(False)
        elif self.gone != model_dir:
            self._mark_gone(model_dir)

    def header_status(self, model_dir: Path, ejected: bool) -> str:
        """The chat header's word for `model_dir` when it is not loaded."""
        if self.gone is not None and self.gone == model_dir:
            return "folder missing"  # the banner says which and what to do
        return "ejected" if ejected else "not loaded"  # Eject's tooltip: the next turn reloads

    def explain(self, error: EngineError) -> EngineError:
        """A failed turn's error, naming the folder when the model's folder is gone."""
        if self.gone is None or error.code not in _NO_MODEL_CODES:
            return error
        message, fix = gone_message(self.gone)
        return EngineError(message, fix, code="MODEL_NOT_FOUND")

    def locate(self) -> None:
        start = self.gone or self.followed or Path.home()
        gone = self.gone or self.followed
        chosen = self.choose_folder(self._parent, "Locate the model folder", start.parent)
        if chosen is not None:
            if gone is not None:
                self.relocated.emit(gone, chosen)
            self.located.emit(chosen)

    def _stop(self) -> None:
        if self._watcher.directories():
            self._watcher.removePaths(self._watcher.directories())
        self.followed = self.gone = None
        self.banner.setVisible(False)

    def _on_changed(self, _path: str) -> None:
        followed = self.followed
        if followed is not None and self.gone is None and not followed.is_dir():
            self._mark_gone(followed)

    def _mark_gone(self, model_dir: Path) -> None:
        self.gone = model_dir
        log.warning("The chat's model folder is gone (moved, renamed or deleted): %s", model_dir)
        self.banner.show_gone(model_dir)
        self.vanished.emit(model_dir)
        if self._refresh is not None:
            self._refresh()
