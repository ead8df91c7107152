"""The banner that offers to install the export toolkit (optimum-intel, torch, ...) with pip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.export.widgets import check_pixmap
from qwen_mtp_desktop.ui.widgets.labels import text_label


class ToolkitBanner(QFrame):
    """What is missing, the pip command, and the install's progress and log. The wizard runs
    the install (on its export queue) and connects `install_button` and `install_cancel`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolkitBanner")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(8)
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(check_pixmap("warn"))
        head.addWidget(icon)
        head.addWidget(text_label("Export toolkit not installed", "checkTitle", wrap=False))
        head.addStretch(1)
        layout.addLayout(head)
        self.text = text_label(
            "Exporting needs optimum-intel, transformers, nncf and torch (several GB). Chat "
            "works without them. The app can install them into its own Python environment "
            "with:",
        )
        layout.addWidget(self.text)
        self.command_label = text_label("", "commandLine")
        self.command_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.command_label)
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(6)
        self.progress.hide()
        layout.addWidget(self.progress)
        self.status = text_label("", "hint")
        self.status.hide()
        layout.addWidget(self.status)
        self.log = QPlainTextEdit()
        self.log.setObjectName("exportLog")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(500)
        self.log.setFixedHeight(110)
        self.log.hide()
        layout.addWidget(self.log)
        self.install_button = QPushButton("Install export toolkit")
        self.install_button.setObjectName("primaryAction")
        self.install_cancel = QPushButton("Cancel")
        self.install_cancel.hide()
        row = QHBoxLayout()
        row.setSpacing(8)
        row.addStretch(1)
        row.addWidget(self.install_cancel)
        row.addWidget(self.install_button)
        layout.addLayout(row)
        self.hide()

    def set_missing(self, missing: list[str]) -> None:
        self.text.setText(
            f"Exporting needs {', '.join(missing)} (several GB in all; chat works "
            "without them). The app can install them into its own Python environment with:"
        )

    def installing(self, waiting: bool) -> None:
        self.install_button.setEnabled(False)
        self.install_cancel.show()
        self.progress.show()
        self.status.setText("Waiting for the running export…" if waiting else "Starting pip…")
        self.status.show()
        self.log.clear()
        self.log.show()

    def installed(self, status: str) -> None:
        self.install_button.setEnabled(True)
        self.install_cancel.hide()
        self.progress.hide()
        self.status.setText(status)
