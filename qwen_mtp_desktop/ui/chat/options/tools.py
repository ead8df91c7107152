"""Chat options' "Tools (MCP)" section: which of the app's MCP servers this chat enables (with
what each offers, or why it cannot), and "Use a tool for the next message", which forces one
call of that tool (a grammar; the demo model never decides to call a tool by itself).

Signals:
    enabled_changed(tuple): the server names this chat now enables.
    manage_requested(): the user wants Tools > MCP servers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.tools.mcp.config import McpServer
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip

LET_MODEL_DECIDE = "Let the model decide"


class ToolOptions(QFrame):
    enabled_changed = Signal(tuple)
    manage_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolOptions")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 6, 0, 0)
        layout.setSpacing(4)
        title = QLabel("Tools (MCP)")
        title.setObjectName("sectionTitle")
        layout.addWidget(title)
        self._boxes_host = QWidget()
        self._boxes = QVBoxLayout(self._boxes_host)
        self._boxes.setContentsMargins(0, 0, 0, 0)
        self._boxes.setSpacing(2)
        layout.addWidget(self._boxes_host)
        self.empty_label = QLabel("No MCP servers yet: add them to give the model tools.")
        self.empty_label.setObjectName("muted")
        self.empty_label.setWordWrap(True)
        layout.addWidget(self.empty_label)
        self.force_label = QLabel("Use a tool for the next message")
        self.force_combo = QComboBox()
        self.force_combo.setToolTip(
            "The next answer calls this tool (its arguments are the model's); the chat asks "
            "before it runs. Then the choice goes back to the model."
        )
        layout.addWidget(self.force_label)
        layout.addWidget(self.force_combo)
        self.manage_button = QPushButton("MCP servers…")
        self.manage_button.clicked.connect(self.manage_requested)
        layout.addWidget(self.manage_button)
        self.checks: dict[str, QCheckBox] = {}
        self._enabled: tuple[str, ...] = ()
        self.show_functions([])

    def show_servers(
        self,
        servers: Sequence[McpServer],
        enabled: Sequence[str],
        states: Mapping[str, str],
    ) -> None:
        """One box per server, ticked when this chat enables it; `states` says what each
        offers ("3 tools") or why it cannot."""
        self._enabled = tuple(name for name in enabled if name in {s.name for s in servers})
        for box in self.checks.values():
            box.deleteLater()
        self.checks = {}
        for server in servers:
            box = QCheckBox(server.name)
            box.setChecked(server.name in enabled)
            state = states.get(server.name, "")
            if state:
                box.setText(f"{server.name}  ·  {state}")
            box.setToolTip(plain_tooltip(f"{server.summary}\n{state}".strip()))
            box.toggled.connect(lambda _on=False: self._on_toggled())
            self._boxes.addWidget(box)
            self.checks[server.name] = box
        self.empty_label.setVisible(not servers)

    def show_functions(self, functions: Sequence[str]) -> None:
        """The tools the enabled servers offer, for "Use a tool for the next message"."""
        current = self.forced
        self.force_combo.blockSignals(True)
        self.force_combo.clear()
        self.force_combo.addItem(LET_MODEL_DECIDE, None)
        for name in functions:
            self.force_combo.addItem(name, name)
        at = self.force_combo.findData(current) if current else 0
        self.force_combo.setCurrentIndex(max(at, 0))
        self.force_combo.blockSignals(False)
        shown = bool(functions)
        self.force_label.setVisible(shown)
        self.force_combo.setVisible(shown)

    @property
    def forced(self) -> str | None:
        data = self.force_combo.currentData()
        return data if isinstance(data, str) else None

    def choose_forced(self, function: str | None) -> None:
        at = self.force_combo.findData(function) if function else 0
        self.force_combo.setCurrentIndex(max(at, 0))

    def _on_toggled(self) -> None:
        enabled = tuple(name for name, box in self.checks.items() if box.isChecked())
        if enabled != self._enabled:
            self._enabled = enabled
            self.enabled_changed.emit(enabled)
