"""Tools > Local API server: let other apps use the loaded model through an OpenAI-compatible API.

The server runs inside the engine process, on the model the chat has loaded, so it needs no
second copy of the model in memory; API requests and the chat take turns. Off by default; the
choice is remembered and the server comes back with the app (and with the engine after a
crash). Listening beyond this computer needs an API key.
"""

from __future__ import annotations

import contextlib
import secrets
import time

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.core.hosting.protocol import ApiRequest
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.server.examples import curl_example, model_id_for
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label
from qwen_mtp_desktop.workers.engine_process import API_REQUESTS_KEPT, EngineProcess

LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"
INTRO = (
    "Other apps (editors, Open WebUI, scripts) can use the model loaded in the chat through an "
    "OpenAI-compatible API. Requests are answered one at a time and take turns with the chat; "
    "each answer reports its MTP statistics."
)


REQUEST_COLUMNS = ("Time", "Endpoint", "Status", "Tokens", "Duration")


def request_row(record: ApiRequest) -> tuple[str, str, str, str, str]:
    """One request as the dialog's list shows it."""
    when = time.strftime("%H:%M:%S", time.localtime(record.at))
    tokens = "–" if record.tokens is None else f"{record.tokens:,}"
    status = "left" if record.status == 499 else str(record.status)  # the client went away
    return when, f"{record.method} {record.path}", status, tokens, f"{record.duration_s:.2f} s"


def apply_saved(engine: EngineProcess, store: SettingsStore) -> None:
    """Start the server at app start when the user left it on."""
    settings = store.settings
    if settings.api_server:
        host = ALL_INTERFACES if settings.api_server_lan else LOOPBACK
        engine.serve_api(host, settings.api_server_port, settings.api_server_key)


class ServerDialog(QDialog):
    """Non-modal: start and stop the server, see its address and an example request."""

    def __init__(
        self, engine_process: EngineProcess, store: SettingsStore, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Local API server")
        self._engine_process = engine_process
        self._store = store
        settings = store.settings

        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1024, 65535)
        self.port_spin.setValue(max(settings.api_server_port, 1024))
        self.port_spin.setToolTip("The TCP port the server listens on (1024-65535).")
        self.port_spin.setMaximumWidth(110)
        self.lan_check = QCheckBox("Allow other computers on the network (needs an API key)")
        self.lan_check.setChecked(settings.api_server_lan)
        self.key_edit = QLineEdit(settings.api_server_key or "")
        self.key_edit.setPlaceholderText("none: any app on this computer may connect")
        self.key_edit.setToolTip("Clients send it as 'Authorization: Bearer KEY'.")
        self.generate_button = QPushButton("New key")
        self.generate_button.setToolTip("Make a random key")
        self.generate_button.clicked.connect(
            lambda: self.key_edit.setText(secrets.token_urlsafe(24))
        )
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_edit, 1)
        key_row.addWidget(self.generate_button)
        form = QFormLayout()
        form.addRow("Port", self.port_spin)
        form.addRow("", self.lan_check)
        form.addRow("API key", key_row)

        self.example = QPlainTextEdit()
        self.example.setReadOnly(True)
        self.example.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.example.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.example.setMinimumHeight(90)
        self.example.setMaximumHeight(140)
        self.example.setToolTip("An example request with curl (the key is included if set).")

        self.status_label = QLabel()
        self.status_label.setWordWrap(True)
        self.status_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.start_button = QPushButton()
        self.start_button.clicked.connect(self._toggle)
        self.copy_url_button = QPushButton("Copy URL")
        self.copy_url_button.clicked.connect(lambda: self._copy(self._base_url() + "/v1"))
        self.copy_example_button = QPushButton("Copy example")
        self.copy_example_button.clicked.connect(lambda: self._copy(self.example.toPlainText()))
        actions = QHBoxLayout()
        actions.addWidget(self.start_button)
        actions.addStretch(1)
        actions.addWidget(self.copy_url_button)
        actions.addWidget(self.copy_example_button)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self.status_label)
        layout.addLayout(actions)
        layout.addWidget(QLabel("Example request"))
        layout.addWidget(self.example)
        layout.addWidget(QLabel("Recent requests"))
        layout.addWidget(self._build_request_log())
        layout.addWidget(buttons)
        self.resize(680, 560)

        self._error: EngineError | None = None
        self._starting = False
        for signal in (self.port_spin.valueChanged, self.lan_check.toggled):
            signal.connect(self._refresh)
        self.key_edit.textChanged.connect(self._refresh)
        engine_process.api_state.connect(self._on_state)
        engine_process.loaded.connect(lambda _model: self._refresh())
        engine_process.api_request.connect(self._add_request)
        for record in engine_process.api_requests:  # the ones answered before the dialog opened
            self._add_request(record)
        self._refresh()

    def _build_request_log(self) -> QTableWidget:
        """The latest answered requests, newest on top: time, endpoint, status, tokens,
        duration. No prompt or answer text (server.http.request_log says why)."""
        table = QTableWidget(0, len(REQUEST_COLUMNS))
        table.setObjectName("requestLog")
        table.setHorizontalHeaderLabels(list(REQUEST_COLUMNS))
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        table.setWordWrap(False)
        table.setMinimumHeight(110)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        table.setToolTip("The server's latest requests; what they asked is never shown or kept")
        self.request_log = table
        return table

    def _add_request(self, record: ApiRequest) -> None:
        table = self.request_log
        table.insertRow(0)
        for column, text in enumerate(request_row(record)):
            item = QTableWidgetItem(text)
            if column >= 2:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            table.setItem(0, column, item)
        while table.rowCount() > API_REQUESTS_KEPT:
            table.removeRow(table.rowCount() - 1)

    # ------------------------------------------------------------------ actions

    def _toggle(self) -> None:
        settings = self._store.settings
        if self._engine_process.api_url is not None or self._starting:
            self._engine_process.stop_api()
            settings.api_server = False
            self._starting = False
        else:
            key = self.key_edit.text().strip() or None
            if self.lan_check.isChecked() and key is None:
                self._error = EngineError(
                    "Other computers may only connect with an API key.",
                    "Press New key (or type one), or untick the network option.",
                    code="NEEDS_API_KEY",
                )
                self._refresh()
                return
            settings.api_server = True
            settings.api_server_port = self.port_spin.value()
            settings.api_server_lan = self.lan_check.isChecked()
            settings.api_server_key = key
            host = ALL_INTERFACES if settings.api_server_lan else LOOPBACK
            self._starting = True
            self._error = None
            self._engine_process.serve_api(host, settings.api_server_port, key)
        try:
            self._store.save()
        except OSError as exc:
            self._error = EngineError(
                f"The setting could not be saved ({exc.strerror or exc}).",
                "The server runs now but will not start with the app next time.",
                code="SETTINGS_NOT_SAVED",
            )
        self._refresh()

    def _on_state(self, url: str | None, error: EngineError | None) -> None:
        self._starting = False
        self._error = error
        if error is not None and self._store.settings.api_server:
            # It did not start: do not try again at the next start.
            self._store.settings.api_server = False
            with contextlib.suppress(OSError):
                self._store.save()
        self._refresh()

    def _copy(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)

    # ------------------------------------------------------------------ display

    def _base_url(self) -> str:
        """The server's address on this computer (without /v1)."""
        return self._engine_process.api_url or f"http://{LOOPBACK}:{self.port_spin.value()}"

    def _refresh(self) -> None:
        running = self._engine_process.api_url is not None
        for widget in (self.port_spin, self.lan_check, self.key_edit, self.generate_button):
            widget.setEnabled(not running and not self._starting)
        self.start_button.setText("Stop the server" if running or self._starting else "Start")
        if self._starting:
            status = "Starting…"
        elif running:
            status = f"Running at {self._base_url()}/v1"
            others = self._engine_process.api_network_urls
            if others:
                status += "; other computers use " + ", ".join(f"{u}/v1" for u in others)
            elif self._store.settings.api_server_lan:
                status += "; this computer has no network address other computers could use"
            else:
                status += " (this computer only)"
            status += "."
        else:
            status = "Off."
        if self._error is not None:
            status = f"Not running: {self._error.message} {self._error.fix}".strip()
        loaded = self._engine_process.loaded_model
        if loaded is None:
            status += " No model is loaded yet: the server answers once the chat loads one."
        plain_label(self.status_label).setText(status)
        self.copy_url_button.setEnabled(running)
        model = model_id_for(loaded.model_dir) if loaded is not None else "MODEL"
        key = self.key_edit.text().strip() or None
        self.example.setPlainText(curl_example(self._base_url(), model, key))
