"""Add or edit a remote server (an OpenAI-compatible API) for the chat's model picker.

The address, an optional API key and the model, chosen from the server's own list (GET
/models, fetched off the GUI thread by "Test connection"). The key goes to the OS keychain
(or is kept for this session only, which the dialog says); it is never shown again, only
replaced or removed. A key for a plain http:// address on another computer gets a warning:
it would cross the network unencrypted.
"""

from __future__ import annotations

from collections.abc import Callable

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.remote.endpoints import (
    EndpointError,
    RemoteEndpoint,
    check_endpoint,
    key_in_clear,
    key_in_clear_warning,
    new_id,
    normalize_base_url,
)
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label
from qwen_mtp_desktop.workers.remote_models import RemoteModels

INTRO = (
    "Chat with a model on another computer or server: another PC running "
    "'qwen-mtp-desktop serve', OpenVINO Model Server (address ending in /v3), vLLM or a "
    "llama.cpp server. Speed and time to first token are measured here; MTP acceptance is "
    "shown when the server reports it (qwen-mtp-desktop serve does)."
)


def ask_to_remove(
    parent: QWidget, endpoint: RemoteEndpoint, remove: Callable[[], None]
) -> QMessageBox:
    """Ask before removing `endpoint` (non-blocking: `remove()` runs on Remove). Returned so
    a caller (and a test) can reach the question."""
    box = QMessageBox(
        QMessageBox.Icon.Question,
        "Remove remote server",
        f"Remove the remote server “{endpoint.name}” ({endpoint.model} at "
        f"{endpoint.base_url})? Its API key is forgotten too. Chats that use it keep their "
        "messages and say the server is gone when opened.",
        QMessageBox.StandardButton.Cancel,
        parent,
    )
    confirm = box.addButton("Remove", QMessageBox.ButtonRole.DestructiveRole)
    box.setDefaultButton(QMessageBox.StandardButton.Cancel)
    box.buttonClicked.connect(lambda button: remove() if button is confirm else None)
    box.finished.connect(box.deleteLater)
    box.open()
    return box


class RemoteServerDialog(QDialog):
    """Modal. After `exec()`: `result_endpoint` (saved) or `removed` (the endpoint was removed).
    Saving and removing go through `RemoteModels` (written off the GUI thread); Remove asks
    first (`confirm`: the question while it is open)."""

    def __init__(
        self,
        remote: RemoteModels,
        endpoint: RemoteEndpoint | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._remote = remote
        self._endpoint = endpoint
        self._probe = 0
        self.result_endpoint: RemoteEndpoint | None = None
        self.removed = False
        self.confirm: QMessageBox | None = None
        self.setWindowTitle("Edit remote server" if endpoint else "Add remote server")
        self.setMinimumWidth(520)

        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        intro.setObjectName("muted")
        self.url_edit = QLineEdit(endpoint.base_url if endpoint else "")
        self.url_edit.setPlaceholderText("http://192.168.1.20:8000/v1")
        self.url_edit.setToolTip("The API's base URL; /v1 is added when no path is given")
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText(
            "stored; type to replace it" if endpoint and endpoint.has_key else "optional"
        )
        self.clear_key_button = QPushButton("Forget key")
        self.clear_key_button.setVisible(bool(endpoint and endpoint.has_key))
        self.clear_key_button.clicked.connect(self._forget_key)
        self._forget = False
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_edit, 1)
        key_row.addWidget(self.clear_key_button)
        self.key_note = QLabel(remote.key_note or "Checking for a system keychain…")
        self.key_note.setWordWrap(True)
        self.key_note.setObjectName("muted")
        self.key_warning = QLabel()
        self.key_warning.setWordWrap(True)
        self.key_warning.setObjectName("warningNote")
        self.key_warning.setVisible(False)
        self.model_combo = QComboBox()
        self.model_combo.setEditable(True)
        self.model_combo.setMinimumContentsLength(24)
        if endpoint:
            self.model_combo.addItem(endpoint.model)
        line = self.model_combo.lineEdit()
        if line is not None:
            line.setPlaceholderText("Test connection lists the models")
        self.test_button = QPushButton("Test connection")
        self.test_button.clicked.connect(self.test_connection)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_combo, 1)
        model_row.addWidget(self.test_button)
        self.name_edit = QLineEdit(endpoint.name if endpoint else "")
        self.name_edit.setPlaceholderText("optional: shown in the model picker")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setMinimumHeight(self.fontMetrics().lineSpacing() * 2)

        form = QFormLayout()
        form.addRow("Server address", self.url_edit)
        form.addRow("API key", key_row)
        form.addRow("", self.key_note)
        form.addRow("Model", model_row)
        form.addRow("Name", self.name_edit)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
        )
        self.buttons.accepted.connect(self._save)
        self.buttons.rejected.connect(self.reject)
        self.remove_button: QPushButton | None = None
        if endpoint is not None:
            self.remove_button = self.buttons.addButton(
                "Remove", QDialogButtonBox.ButtonRole.DestructiveRole
            )
            self.remove_button.clicked.connect(self._remove)

        if not remote.key_note:
            remote.probe_keys(self._on_key_note)

        self.url_edit.textChanged.connect(self._update_key_warning)
        self.key_edit.textChanged.connect(self._update_key_warning)
        self._update_key_warning()

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        # Full width below the form: a wrapped label in a form row leaves gaps around it.
        layout.addWidget(self.key_warning)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)

    # ------------------------------------------------------------------ actions

    def _alive(self) -> bool:
        """Whether this dialog still exists: a background result can come after it closed."""
        return shiboken6.isValid(self)

    def _on_key_note(self, note: str) -> None:
        if self._alive():
            self.key_note.setText(note)

    def _forget_key(self) -> None:
        self._forget = True
        self.key_edit.clear()
        self.key_edit.setPlaceholderText("optional")
        self.clear_key_button.setVisible(False)
        self._update_key_warning()

    def _update_key_warning(self) -> None:
        """Warn while a key would go to another computer over plain http://."""
        try:
            url = normalize_base_url(self.url_edit.text())
        except EndpointError:
            url = None
        has_key = bool(self.key_edit.text().strip()) or self._uses_stored_key()
        host = key_in_clear(url) if url is not None and has_key else None
        self.key_warning.setText(f"Warning: {key_in_clear_warning(host)}" if host else "")
        self.key_warning.setVisible(host is not None)
        if host is not None and self.isVisible():  # grow to show it whole, never shrink
            layout = self.layout()
            if layout is not None:
                layout.activate()
            needed = self.heightForWidth(self.width())
            if needed > self.height():
                self.resize(self.width(), needed)

    def _uses_stored_key(self) -> bool:
        return (
            bool(self._endpoint and self._endpoint.has_key and not self._forget)
            and not self.key_edit.text()
        )

    def test_connection(self) -> None:
        """List the server's models off the GUI thread; the result fills the model box."""
        try:
            url = normalize_base_url(self.url_edit.text())
        except EndpointError as exc:
            self._show(str(exc), error=True)
            return
        self._probe += 1
        probe = self._probe
        ident = self._endpoint.id if self._endpoint else "probe"
        has_key = self._endpoint.has_key if self._endpoint else False
        target = RemoteEndpoint(ident, url, url, self.model_combo.currentText(), has_key)
        self.test_button.setEnabled(False)
        self._show(f"Connecting to {url}…")
        self._remote.fetch_models(
            target,
            self.key_edit.text() or None,
            lambda models: self._on_models(probe, url, models),
            lambda exc: self._on_probe_failed(probe, exc),
            stored_key=self._uses_stored_key(),
        )

    def _on_models(self, probe: int, url: str, models: list[str]) -> None:
        if not self._alive() or probe != self._probe:
            return
        self.test_button.setEnabled(True)
        current = self.model_combo.currentText()
        self.model_combo.clear()
        self.model_combo.addItems(models)
        if current in models:
            self.model_combo.setCurrentText(current)
        if not models:
            self._show(f"Connected to {url}, but it lists no models.", error=True)
            return
        count = f"{len(models)} models" if len(models) != 1 else "1 model"
        self._show(f"Connected to {url}: {count} ({', '.join(models[:5])}).")

    def _on_probe_failed(self, probe: int, exc: Exception) -> None:
        if not self._alive() or probe != self._probe:
            return
        self.test_button.setEnabled(True)
        self._show(str(exc) if isinstance(exc, UserFacingError) else f"{exc}", error=True)

    def _show(self, text: str, *, error: bool = False) -> None:
        self.status.setObjectName("errorText" if error else "muted")
        self.status.setStyleSheet("color: #c0392b;" if error else "")
        plain_label(self.status).setText(text)  # a remote server's own words

    def _save(self) -> None:
        try:
            name, url, model = check_endpoint(
                self.name_edit.text(), self.url_edit.text(), self.model_combo.currentText()
            )
        except EndpointError as exc:
            self._show(str(exc), error=True)
            return
        ident = self._endpoint.id if self._endpoint else new_id()
        key = self.key_edit.text().strip() or None
        keep = self._uses_stored_key()
        endpoint = RemoteEndpoint(ident, name, url, model, keep)
        self._remote.save(endpoint, key, keep_key=keep)
        self.result_endpoint = self._remote.find(ident)
        self.accept()

    def _remove(self) -> None:
        if self._endpoint is not None:
            self.confirm = ask_to_remove(self, self._endpoint, self._removed)

    def _removed(self) -> None:
        if self._endpoint is not None:
            self._remote.remove(self._endpoint.id)
            self.removed = True
        self.accept()
