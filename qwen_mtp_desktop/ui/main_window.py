"""The main window: a sidebar of panels (Chat, Models, Export, Benchmark) and a status bar."""

from __future__ import annotations

import contextlib
from pathlib import Path

from PySide6.QtCore import QByteArray, QSize, Qt
from PySide6.QtGui import QCloseEvent, QIcon
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QWidget,
)

from qwen_mtp_desktop import APP_NAME
from qwen_mtp_desktop.core.models import display_name, is_demo_model, selected_model
from qwen_mtp_desktop.core.paths import AppPaths, resources_dir
from qwen_mtp_desktop.core.settings import SettingsStore
from qwen_mtp_desktop.ui.placeholder import PlaceholderPanel

PANELS = ("Chat", "Models", "Export", "Benchmark")


def app_icon() -> QIcon:
    return QIcon(str(resources_dir() / "icons" / "app.svg"))


class MainWindow(QMainWindow):
    """Top-level window. Owns the panels; panels talk to workers, never to core directly on
    the GUI thread for anything slow."""

    def __init__(
        self, paths: AppPaths, store: SettingsStore, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._paths = paths
        self._store = store
        self.model_dir: Path = selected_model(store.settings)
        self.setWindowTitle(APP_NAME)
        self.setWindowIcon(app_icon())
        self.setMinimumSize(QSize(760, 520))

        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setFixedWidth(180)
        self.sidebar.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.stack = QStackedWidget()
        for name in PANELS:
            QListWidgetItem(name, self.sidebar)
            self.stack.addWidget(self._make_panel(name))
        self.sidebar.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.sidebar.setCurrentRow(0)

        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        self.model_label = QLabel()
        self.statusBar().addPermanentWidget(self.model_label)
        self._show_model()
        self._restore_geometry()

    def panel(self, name: str) -> QWidget:
        widget = self.stack.widget(PANELS.index(name))
        assert widget is not None
        return widget

    def show_panel(self, name: str) -> None:
        self.sidebar.setCurrentRow(PANELS.index(name))

    def _make_panel(self, name: str) -> QWidget:
        texts = {
            "Chat": (
                "Chat",
                "The chat window arrives here: streaming answers with live tokens per second, "
                "time to first token and MTP draft acceptance.",
            ),
            "Models": (
                "Models",
                "The model manager arrives here: your local OpenVINO model folders, what each "
                "holds, precision, size, memory fit and plain-language diagnostics.",
            ),
            "Export": (
                "Export",
                "The export wizard arrives here: turn a Hugging Face Qwen3.5 checkpoint into an "
                "OpenVINO model with its MTP head, compressed and verified.",
            ),
            "Benchmark": (
                "Benchmark",
                "Validation and benchmarking arrive here: MTP output checked against normal "
                "decoding first, then measured speed-ups per draft depth.",
            ),
        }
        title, text = texts[name]
        return PlaceholderPanel(title, text)

    def _show_model(self) -> None:
        device = self._store.settings.device
        name = display_name(self.model_dir)
        suffix = " (counts and repeats phrases only)" if is_demo_model(self.model_dir) else ""
        self.model_label.setText(f"Model: {name}{suffix}  ·  Device: {device}")

    def _restore_geometry(self) -> None:
        saved = self._store.settings.ui_state.get("main_window_geometry")
        if saved:
            self.restoreGeometry(QByteArray.fromBase64(saved.encode("ascii")))
        else:
            self.resize(1100, 720)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        geometry = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        self._store.settings.ui_state["main_window_geometry"] = geometry
        with contextlib.suppress(OSError):  # losing window geometry must never block quitting
            self._store.save()
        super().closeEvent(event)
