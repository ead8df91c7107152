"""Where the user writes: Enter sends, Shift+Enter adds a line, Esc stops, images can be
attached (button or drag and drop) when the model can see."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QImageReader, QKeyEvent, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.chat.composer.context_meter import ContextMeter
from qwen_mtp_desktop.ui.chat.composer.message_editor import MessageEditor

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


class _Editor(MessageEditor):
    """The composer's box: Esc (`escape`) stops the answer being written; images drop in."""

    image_dropped = Signal(object)  # Path
    edit_last = Signal()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt override)
        if event.key() == Qt.Key.Key_Up and not self.toPlainText():
            # As in ChatGPT and Slack: Up in an empty box edits the last message sent.
            self.edit_last.emit()
            return
        super().keyPressEvent(event)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt override)
        return bool(_image_urls(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt override)
        images = _image_urls(source)
        if images:
            self.image_dropped.emit(images[0])
            return
        super().insertFromMimeData(source)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802 (Qt override)
        if _image_urls(event.mimeData()):
            event.acceptProposedAction()
            return
        super().dragEnterEvent(event)

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802 (Qt override)
        images = _image_urls(event.mimeData())
        if images:
            self.image_dropped.emit(images[0])
            event.acceptProposedAction()
            return
        super().dropEvent(event)


#: The attached image's thumbnail fits this square (pixels).
THUMB_SIZE = 64


def thumbnail(path: Path, size: int) -> QPixmap | None:
    """`path` decoded at thumbnail size (the reader scales while decoding, so a large photo
    costs little); None for what is not a readable image. Only a regular file is opened: a
    dropped FIFO or device would block the window."""
    try:
        if not path.is_file():
            return None
    except OSError:
        return None
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    full = reader.size()
    if full.isValid() and (full.width() > size or full.height() > size):
        reader.setScaledSize(full.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    return None if image.isNull() else QPixmap.fromImage(image)


def _image_urls(data: QMimeData) -> list[Path]:
    if not data.hasUrls():
        return []
    return [
        Path(url.toLocalFile())
        for url in data.urls()
        if url.isLocalFile() and url.toLocalFile().lower().endswith(IMAGE_SUFFIXES)
    ]


class Composer(QFrame):
    """Signals:
    send_requested(str, object): text and an attached image Path (or None).
    stop_requested(): the user pressed Stop or Esc.
    edit_last_requested(): Up in the empty box: edit the last message sent.
    """

    send_requested = Signal(str, object)
    stop_requested = Signal()
    edit_last_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("composer")
        self.image: Path | None = None
        self._generating = False
        self._vision = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 8, 16, 12)
        layout.setSpacing(6)
        self.attachment_row = QWidget()
        attachment_layout = QHBoxLayout(self.attachment_row)
        attachment_layout.setContentsMargins(0, 0, 0, 0)
        # A thumbnail of the image before it is sent (what the model will see).
        self.attachment_thumb = QLabel()
        self.attachment_thumb.setObjectName("imageThumb")
        self.attachment_label = QLabel()
        self.attachment_label.setObjectName("muted")
        remove = QToolButton()
        remove.setText("Remove")
        remove.setAutoRaise(True)
        remove.clicked.connect(lambda: self.set_image(None))
        attachment_layout.addWidget(self.attachment_thumb)
        attachment_layout.addWidget(self.attachment_label)
        attachment_layout.addWidget(remove)
        attachment_layout.addStretch(1)
        self.attachment_row.setVisible(False)
        layout.addWidget(self.attachment_row)

        row = QHBoxLayout()
        row.setSpacing(8)
        self.attach_button = QToolButton()
        self.attach_button.setText("Image…")
        self.attach_button.setToolTip("Attach an image (for vision-capable models)")
        self.attach_button.clicked.connect(self._choose_image)
        self.editor = _Editor()
        self.editor.setObjectName("composerEditor")
        self.editor.setPlaceholderText("Message the model…  (Enter sends, Shift+Enter new line)")
        self.editor.setTabChangesFocus(True)
        self.editor.setFixedHeight(72)
        self.editor.submit.connect(self._on_submit)
        self.editor.escape.connect(self.stop_requested)
        self.editor.edit_last.connect(self.edit_last_requested)
        self.editor.setAccessibleName("Message")
        self.editor.image_dropped.connect(self.set_image)
        self.send_button = QPushButton("Send")
        self.send_button.setObjectName("sendButton")
        self.send_button.setDefault(True)
        self.send_button.setMinimumWidth(84)
        self.send_button.clicked.connect(self._on_button)
        row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignBottom)
        row.addWidget(self.editor, 1)
        row.addWidget(self.send_button, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addLayout(row)
        # How full the model's context is (the chat panel feeds it the engine's numbers).
        self.meter = ContextMeter()
        # The message being typed counts too (its length only: nothing is tokenized here).
        document = self.editor.document()
        document.contentsChanged.connect(
            lambda: self.meter.set_typed(document.characterCount() - 1)
        )
        meter_row = QHBoxLayout()
        meter_row.setContentsMargins(0, 0, 0, 0)
        meter_row.addStretch(1)
        meter_row.addWidget(self.meter)
        layout.addLayout(meter_row)
        self.set_vision(False)

    def set_generating(self, generating: bool) -> None:
        self._generating = generating
        self.send_button.setText("Stop" if generating else "Send")
        self.send_button.setProperty("stop", generating)
        self.send_button.style().unpolish(self.send_button)
        self.send_button.style().polish(self.send_button)

    def set_vision(self, vision: bool) -> None:
        self._vision = vision
        self.attach_button.setEnabled(vision)
        self.attach_button.setToolTip(
            "Attach an image" if vision else "This model cannot see images"
        )
        if not vision:
            self.set_image(None)

    def set_image(self, path: Path | None) -> None:
        if path is not None and not self._vision:
            return
        self.image = path
        self.attachment_row.setVisible(path is not None)
        if path is not None:
            self.attachment_label.setText(f"Attached: {path.name}")
            thumb = thumbnail(path, THUMB_SIZE)
            self.attachment_thumb.setPixmap(thumb if thumb is not None else QPixmap())
            self.attachment_thumb.setVisible(thumb is not None)

    def set_text(self, text: str) -> None:
        self.editor.setPlainText(text)
        self.editor.setFocus()

    def _choose_image(self) -> None:
        filename, _ = QFileDialog.getOpenFileName(
            self, "Attach an image", "", "Images (*.png *.jpg *.jpeg *.bmp *.gif *.webp)"
        )
        if filename:
            self.set_image(Path(filename))

    def _on_button(self) -> None:
        if self._generating:
            self.stop_requested.emit()
        else:
            self._on_submit()

    def _on_submit(self) -> None:
        if self._generating:
            return
        text = self.editor.toPlainText().strip()
        if not text:
            return
        image = self.image
        self.editor.clear()
        self.set_image(None)
        self.send_requested.emit(text, image)
