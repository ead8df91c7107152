"""Tools > MCP servers…: add, edit, remove and import the MCP servers whose tools a chat may
enable (each chat enables its own in Chat options), test one (list its tools, off the GUI
thread), and set the tool-call time limit. Saved in the app's settings at once.

The dialog is made once and shown again, and the chat saves "Always allow" while it may be
open: so it keeps no copy of the servers (issue 44). It reads the settings' list whenever it
shows one, and each save changes only the entry it edits, on the latest list (for an edit,
with the permissions stored now, not those it was shown).

What a server says (its tool names, its errors and stderr) and what was pasted is shown as
plain text (ui.widgets.plain_text): a tool named `<img src=...>` must not render as an image."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.settings.store import Settings, SettingsStore
from qwen_mtp_desktop.core.tools.mcp.client import McpError, ToolInfo
from qwen_mtp_desktop.core.tools.mcp.config import (
    MAX_TIMEOUT_S,
    MIN_TIMEOUT_S,
    McpConfigError,
    McpServer,
    import_servers,
    merge,
    putting,
    servers_from_settings,
)
from qwen_mtp_desktop.ui.widgets.asking import confirm
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from qwen_mtp_desktop.ui.window_fit import fit_dialog
from qwen_mtp_desktop.workers.mcp_tools import McpTools

INTRO = (
    "MCP servers give the model tools: a program this computer runs (stdio) or a server's "
    "streamable HTTP URL. Enable them per chat in Chat options; the chat asks before a tool "
    "runs unless you allowed it."
)
IMPORT_HINT = (
    'Paste the "mcpServers" JSON as Claude Desktop, LM Studio or Cursor write it:\n'
    '{"mcpServers": {"name": {"command": "npx", "args": ["-y", "package"], "env": {}}}}'
)


def _pairs_text(pairs: tuple[tuple[str, str], ...], separator: str) -> str:
    return "\n".join(f"{key}{separator}{value}" for key, value in pairs)


def _read_pairs(text: str, separator: str, what: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, found, value = line.partition(separator)
        if not found:
            raise McpConfigError(
                f"{what}, line {number}: expected NAME{separator.strip() or separator}VALUE."
            )
        pairs.append((key.strip(), value.strip() if separator == ":" else value))
    return tuple(pairs)


class ImportDialog(QDialog):
    """Paste a JSON block; `servers` holds what it described once accepted."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import MCP servers")
        self.servers: list[McpServer] = []
        hint = QLabel(IMPORT_HINT)
        hint.setWordWrap(True)
        hint.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText('{"mcpServers": {...}}')
        self.error = plain_label(QLabel())  # quotes the pasted JSON
        self.error.setObjectName("errorLabel")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        buttons.accepted.connect(self._import)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(hint)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.error)
        layout.addWidget(buttons)
        fit_dialog(self, QSize(620, 420))

    def _import(self) -> None:
        try:
            self.servers = import_servers(self.text.toPlainText())
        except McpConfigError as exc:
            self.error.setText(str(exc))
            self.error.setVisible(True)
            return
        self.accept()


class McpServersDialog(QDialog):
    """Signals: servers_changed(): the saved list changed (chats refresh their options)."""

    servers_changed = Signal()

    def __init__(
        self, store: SettingsStore, tools: McpTools, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self._store = store
        self._tools = tools
        self._testing: int | None = None
        self.import_dialog: ImportDialog | None = None
        tools.listed.connect(self._on_listed)

        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        self.server_list = QListWidget()
        self.server_list.setMinimumWidth(180)
        self.server_list.currentRowChanged.connect(self._show_server)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self._add)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._remove)
        self.import_button = QPushButton("Import JSON…")
        self.import_button.clicked.connect(self._open_import)
        list_buttons = QHBoxLayout()
        for button in (self.add_button, self.remove_button, self.import_button):
            list_buttons.addWidget(button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.server_list, 1)
        left_layout.addLayout(list_buttons)

        self.name_edit = QLineEdit()
        self.kind_combo = QComboBox()
        self.kind_combo.addItem("Program (stdio)", "stdio")
        self.kind_combo.addItem("Streamable HTTP URL", "http")
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText("npx, uvx, python, or a full path")
        self.args_edit = QLineEdit()
        self.args_edit.setPlaceholderText("-y @modelcontextprotocol/server-filesystem ~/notes")
        self.args_edit.setToolTip("Arguments as a shell would split them (quote spaces).")
        self.env_edit = QPlainTextEdit()
        self.env_edit.setPlaceholderText("NAME=value, one per line")
        self.env_edit.setMaximumHeight(70)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://127.0.0.1:8000/mcp")
        self.headers_edit = QPlainTextEdit()
        self.headers_edit.setPlaceholderText("Authorization: Bearer …, one per line")
        self.headers_edit.setMaximumHeight(70)
        self.allowed_label = plain_label(QLabel())  # tool names, as the server gave them
        self.allowed_label.setWordWrap(True)
        self.forget_allowed = QPushButton("Ask again for every tool")
        self.forget_allowed.clicked.connect(self._forget_allowed)
        self.kind_combo.currentIndexChanged.connect(self._show_kind)
        self.save_button = QPushButton("Save server")
        self.save_button.clicked.connect(self.save_current)
        self.test_button = QPushButton("Test: list tools")
        self.test_button.clicked.connect(self._test)
        self.status = plain_label(QLabel())  # tool names, server errors and their stderr
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # What Test found: each tool with its description (list items are plain text), cut to
        # one line with the whole description in its tooltip.
        self.tools_list = QListWidget()
        self.tools_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.tools_list.setWordWrap(False)
        self.tools_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.tools_list.setSelectionMode(QListWidget.SelectionMode.NoSelection)
        self.tools_list.setVisible(False)
        #: (parent, title, text, action) -> True to go ahead; tests replace it.
        self.confirm: Callable[[QWidget, str, str, str], bool] = confirm
        form_buttons = QHBoxLayout()
        form_buttons.addWidget(self.save_button)
        form_buttons.addWidget(self.test_button)
        form_buttons.addStretch(1)
        forget_row = QHBoxLayout()
        forget_row.addWidget(self.forget_allowed)
        forget_row.addStretch(1)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        form.addRow("Kind", self.kind_combo)
        form.addRow("Command", self.command_edit)
        form.addRow("Arguments", self.args_edit)
        form.addRow("Environment", self.env_edit)
        form.addRow("URL", self.url_edit)
        form.addRow("Headers", self.headers_edit)
        form.addRow("Always allowed", self.allowed_label)
        form.addRow("", forget_row)
        self.form = form
        right_layout.addLayout(form)
        right_layout.addLayout(form_buttons)
        right_layout.addWidget(self.status)
        right_layout.addWidget(self.tools_list, 1)
        right_layout.addStretch(0)
        self.form_host = right

        splitter = QSplitter()
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)

        self.timeout_spin = QDoubleSpinBox()
        self.timeout_spin.setRange(MIN_TIMEOUT_S, MAX_TIMEOUT_S)
        self.timeout_spin.setDecimals(0)
        self.timeout_spin.setSuffix(" s")
        self.timeout_spin.setValue(store.settings.tool_timeout_s)
        self.timeout_spin.setToolTip("A tool that takes longer is stopped and the chat says so.")
        self.timeout_spin.valueChanged.connect(self._on_timeout)
        timeout_row = QHBoxLayout()
        timeout_row.addWidget(QLabel("Time limit per tool call"))
        timeout_row.addWidget(self.timeout_spin)
        timeout_row.addStretch(1)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(splitter, 1)
        layout.addLayout(timeout_row)
        layout.addWidget(buttons)
        self._fill_list()
        fit_dialog(self, QSize(820, 560))

    # --- the list ----------------------------------------------------------------------------

    @property
    def servers(self) -> list[McpServer]:
        return list(self._servers)

    @property
    def _servers(self) -> list[McpServer]:
        """The saved list as it is now (another part of the app may have saved since)."""
        return servers_from_settings(self._store.settings.mcp_servers)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if not event.spontaneous():  # shown again by the app, not just un-minimized
            self._fill_list(select=self._current_name())
            self.timeout_spin.blockSignals(True)
            self.timeout_spin.setValue(self._store.settings.tool_timeout_s)
            self.timeout_spin.blockSignals(False)

    def show_permissions(self) -> None:
        """Show the selected server's saved "Always allowed" tools (the chat saved some)."""
        server = self._current()
        allowed = ", ".join(server.always_allowed) if server is not None else ""
        self.allowed_label.setText(allowed or "none: the chat asks before each tool runs")
        self.forget_allowed.setEnabled(bool(allowed))

    def _fill_list(self, select: str | None = None) -> None:
        self.server_list.blockSignals(True)
        self.server_list.clear()
        for server in self._servers:
            self.server_list.addItem(server.name)
            self.server_list.item(self.server_list.count() - 1).setToolTip(
                plain_tooltip(server.summary)
            )
        self.server_list.blockSignals(False)
        names = [s.name for s in self._servers]
        row = names.index(select) if select in names else (0 if names else -1)
        self.server_list.setCurrentRow(row)
        self._show_server(row)
        if not names:
            self._say("No servers yet: fill in the form and Save server, or Import JSON.")

    def _current_name(self) -> str | None:
        item = self.server_list.currentItem()
        return item.text() if item is not None and self.server_list.currentRow() >= 0 else None

    def _current(self) -> McpServer | None:
        """The selected server as it is saved now."""
        name = self._current_name()
        return next((s for s in self._servers if s.name == name), None)

    def _show_server(self, row: int) -> None:
        servers = self._servers
        server = servers[row] if 0 <= row < len(servers) else None
        self.remove_button.setEnabled(server is not None)
        self.test_button.setEnabled(server is not None)
        self._say("")
        server = server or McpServer("new-server", command="python")
        self.name_edit.setText(server.name if row >= 0 else "")
        self.kind_combo.setCurrentIndex(0 if server.transport == "stdio" else 1)
        self._show_kind(self.kind_combo.currentIndex())
        self.command_edit.setText(server.command if row >= 0 else "")
        self.args_edit.setText(shlex.join(server.args))
        self.env_edit.setPlainText(_pairs_text(server.env, "="))
        self.url_edit.setText(server.url)
        self.headers_edit.setPlainText(_pairs_text(server.headers, ": "))
        self.show_permissions()

    def _show_kind(self, index: int) -> None:
        """The program's fields or the URL's, by the chosen kind."""
        for field_widget in (self.command_edit, self.args_edit, self.env_edit):
            self.form.setRowVisible(field_widget, index == 0)
        for field_widget in (self.url_edit, self.headers_edit):
            self.form.setRowVisible(field_widget, index == 1)

    def _add(self) -> None:
        self.server_list.setCurrentRow(-1)
        self._show_server(-1)
        self.name_edit.setFocus()

    def _remove(self) -> None:
        server = self._current()
        if server is None:
            return
        question = (
            f"Remove the MCP server {server.name!r}? Chats that use its tools lose them, and "
            "its settings here (command, environment, allowed tools) are deleted."
        )
        if not self.confirm(self, "Remove MCP server", question, "Remove"):
            return
        self._tools.forget(server.name)
        if self._save([s for s in self._servers if s.name != server.name]):
            self._fill_list()

    def _forget_allowed(self) -> None:
        server = self._current()
        if server is not None:
            # Permissions are not the server's configuration: it keeps running (a restart raced
            # with the chat listing its tools again, leaving "Connection closed" standing).
            self._replace(server, replace(server, always_allowed=()), restart=False)

    def _replace(self, old: McpServer | None, new: McpServer, restart: bool = True) -> bool:
        """Put `new` in `old`'s place (or add it) in the latest list; McpConfigError when the
        list is full, False when it could not be saved (the dialog says why)."""
        servers = putting(self._servers, old.name if old is not None else None, new)
        if restart and old is not None:
            self._tools.forget(old.name)
        if restart:
            self._tools.forget(new.name)
        if not self._save(servers):
            return False
        self._fill_list(select=new.name)
        return True

    # --- the form ----------------------------------------------------------------------------

    def form_server(self) -> McpServer:
        """The server the form describes, with the selected server's permissions as saved now;
        McpConfigError says what is wrong with it."""
        current = self._current()
        allowed = current.always_allowed if current is not None else ()
        name = self.name_edit.text().strip()
        if self.kind_combo.currentData() == "http":
            return McpServer(
                name,
                "http",
                url=self.url_edit.text().strip(),
                headers=_read_pairs(self.headers_edit.toPlainText(), ":", "Headers"),
                always_allowed=allowed,
            )
        try:
            args = tuple(shlex.split(self.args_edit.text()))
        except ValueError as exc:
            raise McpConfigError(f"Arguments: {exc} (close the quote).") from None
        return McpServer(
            name,
            "stdio",
            command=self.command_edit.text().strip(),
            args=args,
            env=_read_pairs(self.env_edit.toPlainText(), "=", "Environment"),
            always_allowed=allowed,
        )

    def save_current(self) -> bool:
        try:
            server = self.form_server()
        except McpConfigError as exc:
            self._say(str(exc), error=True)
            return False
        current = self._current()
        clash = any(s.name == server.name for s in self._servers)
        if clash and (current is None or current.name != server.name):
            self._say(f"A server named {server.name!r} exists already; choose another name.", True)
            return False
        try:
            if not self._replace(current, server):
                return False
        except McpConfigError as exc:
            self._say(str(exc), error=True)
            return False
        self._say(f"Saved {server.name!r}.")
        return True

    def _say(self, text: str, error: bool = False) -> None:
        self.tools_list.clear()  # a new message replaces what Test found
        self.tools_list.setVisible(False)
        self.status.setObjectName("errorLabel" if error else "")
        self.status.setStyleSheet("color: #c0392b;" if error else "")
        self.status.setText(text)

    def _open_import(self) -> None:
        if self.import_dialog is None:  # one, kept: it remembers what was pasted
            self.import_dialog = ImportDialog(self)
            self.import_dialog.accepted.connect(self._on_imported)
        self.import_dialog.open()

    def _on_imported(self) -> None:
        if self.import_dialog is not None:
            self.add_imported(self.import_dialog.servers)

    def add_imported(self, servers: list[McpServer]) -> None:
        try:
            merged = merge(self._servers, servers)
        except McpConfigError as exc:
            self._say(str(exc), error=True)
            return
        for server in servers:
            self._tools.forget(server.name)
        if not self._save(merged):
            return
        self._fill_list(select=servers[0].name if servers else None)
        self._say(f"Imported {len(servers)} server{'s' if len(servers) != 1 else ''}.")

    def _test(self) -> None:
        server = self._current()
        if server is None:
            return
        self._say(f"Starting {server.name!r} and asking for its tools…")
        self._testing = self._tools.list_tools(server)

    def _on_listed(self, request_id: int, result: object) -> None:
        if request_id != self._testing:
            return
        self._testing = None
        self._tools.settle(request_id)
        if isinstance(result, McpError):
            # Its fix names this dialog's place: here, it says "here".
            fix = result.fix_here()
            self._say(f"{result.message} {fix}" if fix else result.message, error=True)
            return
        tools = [t for t in result if isinstance(t, ToolInfo)] if isinstance(result, list) else []
        self._say(f"{len(tools)} tool{'s' if len(tools) != 1 else ''}" + (":" if tools else "."))
        for tool in tools:
            described = " ".join(tool.description.split())
            item = QListWidgetItem(f"{tool.name} — {described}" if described else tool.name)
            about = tool.description or "No description."
            item.setToolTip(plain_tooltip(f"{tool.name}\n\n{about}"))
            self.tools_list.addItem(item)
        self.tools_list.setVisible(bool(tools))

    def _on_timeout(self, value: float) -> None:
        self._store_save(lambda settings: setattr(settings, "tool_timeout_s", float(value)))

    def _save(self, servers: list[McpServer]) -> bool:
        """Save `servers` (made from the latest list); False when it could not be (the list
        then shows what is saved)."""
        stored = [s.to_dict() for s in servers]
        if not self._store_save(lambda settings: setattr(settings, "mcp_servers", stored)):
            # The store undid a change it could not read back: show what is saved.
            problem = self.status.text()
            self._fill_list()
            self._say(problem, error=True)
            return False
        self.servers_changed.emit()
        return True

    def _store_save(self, change: Callable[[Settings], None]) -> bool:
        """Save `change` on the latest settings; a failure (a full disk, settings too large to
        read back) is said in the status line instead of escaping a Qt slot."""
        try:
            self._store.update(change)
        except OSError as exc:
            self._say(f"The settings could not be saved: {exc}", error=True)
            return False
        return True
