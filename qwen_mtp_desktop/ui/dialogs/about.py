"""Help > About: app version, git revision, how this copy was built, runtime versions, folders.

The same facts as `qwen-mtp-desktop --version` (both come from `core.system.buildinfo`), plus the Qt
version and the app's folders; "Copy" puts them on the clipboard for a bug report.
"""

from __future__ import annotations

import html

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import Qt, qVersion
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop import APP_NAME
from qwen_mtp_desktop.core.files.paths import AppPaths, app_paths
from qwen_mtp_desktop.core.system.buildinfo import BuildInfo, build_info

ABOUT_TEXT = (
    "A private, local chat for Qwen3.5 models on OpenVINO, sped up by the checkpoint's own "
    "multi-token-prediction head."
)


def about_rows(info: BuildInfo, paths: AppPaths | None = None) -> list[tuple[str, str]]:
    """(label, value) pairs the dialog shows, in order."""
    rows = [
        ("Version", info.app_version),
        ("Git revision", info.revision),
        ("Build", info.kind if info.built_at is None else f"{info.kind}, built {info.built_at}"),
        ("Python", f"{info.python} on {info.platform}"),
    ]
    rows += [(name, version or "not installed") for name, version in info.versions.items()]
    rows.append(("Qt", f"{qVersion()} (PySide6 {pyside_version})"))
    if paths is not None:
        rows += [("Data folder", str(paths.data_dir)), ("Log file", str(paths.log_file))]
    return rows


class AboutDialog(QDialog):
    """Modal About box. `info` defaults to this process's `build_info()`."""

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        info: BuildInfo | None = None,
        paths: AppPaths | None = None,
    ) -> None:
        super().__init__(parent)
        self.info = info or build_info()
        self.rows = about_rows(self.info, paths or app_paths())
        self.setWindowTitle(f"About {APP_NAME}")
        self.setObjectName("aboutDialog")

        from qwen_mtp_desktop.ui.widgets.style import app_icon

        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(64, 64))
        icon.setAlignment(Qt.AlignmentFlag.AlignTop)
        head.addWidget(icon)
        title = QLabel(
            f"<h2>{html.escape(APP_NAME)} {html.escape(self.info.app_version)}</h2>"
            f"<p>{html.escape(ABOUT_TEXT)}</p>"
        )
        title.setWordWrap(True)
        head.addWidget(title, 1)

        table = "".join(
            f"<tr><td style='padding-right:12px'><b>{html.escape(label)}</b></td>"
            f"<td>{html.escape(value)}</td></tr>"
            for label, value in self.rows
        )
        self.details = QLabel(f"<table>{table}</table>")
        self.details.setObjectName("aboutDetails")
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setWordWrap(True)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy these details for a bug report")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self._on_copy)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(head)
        layout.addWidget(self.details)
        layout.addWidget(buttons)
        self.setMinimumWidth(520)

    def text(self) -> str:
        """The details as plain text (what Copy puts on the clipboard)."""
        return "\n".join([self.info.headline, *(f"{label}: {value}" for label, value in self.rows)])

    def _on_copy(self) -> None:
        clipboard = QGuiApplication.clipboard()
        if clipboard is not None:
            clipboard.setText(self.text())
