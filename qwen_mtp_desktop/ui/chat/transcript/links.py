"""Opening a link from a model's answer: web links only, after showing the real target."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox, QWidget


def open_answer_link(parent: QWidget, url: QUrl) -> None:
    from qwen_mtp_desktop.core.chat.link_display import link_target

    # The real target: punycode host, control and bidi characters shown as escapes.
    target = link_target(url.toString())
    if url.scheme() not in ("http", "https"):
        QMessageBox.information(
            parent,
            "Link not opened",
            f"Only web links can be opened from a chat:\n{target.address}",
        )
        return
    answer = QMessageBox.question(
        parent,
        "Open link?",
        f"The model's answer links to:\n\n{target.describe()}\n\nOpen it in your browser?",
    )
    if answer == QMessageBox.StandardButton.Yes:
        QDesktopServices.openUrl(url)
