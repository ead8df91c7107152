"""The selected model's details: overview, components, MTP head, memory fit, integrity and
diagnostics, with the actions on top. Only renders a `ModelReport`; the panel does the work."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.decoding.state_cache import CacheReport
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME
from qwen_mtp_desktop.core.models.folders.report import Diagnostic, ModelReport
from qwen_mtp_desktop.core.models.ir import format_shares
from qwen_mtp_desktop.core.models.library import (
    CONTEXT_CHOICES,
    VERDICT_LABELS,
    LibraryEntry,
    kind_text,
    parts_text,
)
from qwen_mtp_desktop.core.units import format_bytes, keep_units
from qwen_mtp_desktop.ui.models.common import VERDICT_STATUS
from qwen_mtp_desktop.ui.models.detail_parts import (
    SELECTABLE,
    DiagnosticRow,
    Form,
    clear_layout,
    component_status,
    integrity_summary,
    muted_color,
    repolish,
    version_order,
)
from qwen_mtp_desktop.ui.widgets.flow_layout import FlowLayout
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.widgets.status_icons import status_pixmap


#: What the "Use" column's words mean.
def kept_text(report: CacheReport | None) -> str:
    """What the engine keeps of conversations between turns, in words (Models › Memory)."""
    if report is None:
        return (
            "Conversation memory: nothing is kept. No model is loaded, or this one decodes "
            "with openvino-genai, which reads the whole conversation every turn."
        )
    budget = format_bytes(report.budget_bytes)
    if report.budget_bytes == 0:
        return (
            "Conversation memory: off (Settings › Conversation memory is Keep nothing), so "
            "every turn reads the whole conversation."
        )
    chats = f"{report.sequences} chat{'' if report.sequences == 1 else 's'}"
    text = (
        f"Conversation memory: {chats} kept, {report.tokens:,} tokens, "
        f"{format_bytes(report.bytes)} of the {budget} budget."
    )
    if report.turns:
        text += f" {report.reused_turns} of {report.turns} turns since loading reused a kept state."
    return text


USE_TIPS = {
    "chat": "Loaded for every chat",
    "image": "Loaded for messages with an image",
    "other": "Not loaded by the app",
}


class ModelDetails(QStackedWidget):
    """The selected model in a scrolling page, or a hint when nothing is selected.

    Signals:
    context_length_changed(int): the user chose another context length for the estimate.
    verify_cancel_requested(): the user cancelled the running checksum check.
    state_cache_wanted(): the chat's loaded model is shown: ask the engine what it keeps of
        conversations (`show_state_cache` shows the answer).
    """

    context_length_changed = Signal(int)
    verify_cancel_requested = Signal()
    state_cache_wanted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.empty_label = QLabel("Select a model to see what it holds.")
        self.empty_label.setObjectName("panelBody")
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setContentsMargins(48, 0, 48, 0)
        self.addWidget(self.empty_label)
        # The content is the scroll area's own widget: a stack in between would lose the
        # height-for-width of the wrapped labels, and sections would overlap after a switch.
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.content = QWidget()
        self.scroll_area.setWidget(self.content)
        self.addWidget(self.scroll_area)
        self._entry: LibraryEntry | None = None
        self._build()

    # --- layout ----------------------------------------------------------------------------

    def _build(self) -> None:
        outer = QVBoxLayout(self.content)
        outer.setContentsMargins(28, 22, 28, 28)
        outer.setSpacing(10)

        header = QHBoxLayout()
        header.setSpacing(10)
        # Wraps (at the hyphens of an export's name) rather than being cut on a narrow window.
        self.title_label = text_label("", "modelTitle", selectable=True)
        self.default_badge = QLabel("Default")
        self.default_badge.setObjectName("defaultBadge")
        self.default_badge.setMinimumHeight(22)
        self.default_badge.setToolTip("The app opens this model at start")
        self.loaded_badge = QLabel("In the chat")
        self.loaded_badge.setObjectName("loadedBadge")
        self.loaded_badge.setMinimumHeight(22)
        self.loaded_badge.setToolTip("The chat has this model loaded")
        header.addWidget(self.title_label, 1)
        header.addWidget(self.default_badge, 0, Qt.AlignmentFlag.AlignTop)
        header.addWidget(self.loaded_badge, 0, Qt.AlignmentFlag.AlignTop)
        outer.addLayout(header)
        self.path_label = text_label("", "muted", selectable=True)
        outer.addWidget(self.path_label)
        # The worst finding, up top: the full list is at the bottom of a long page.
        self.summary = QWidget()
        summary = QHBoxLayout(self.summary)
        summary.setContentsMargins(0, 2, 0, 2)
        summary.setSpacing(8)
        self.summary_icon = QLabel()
        self.summary_icon.setFixedSize(18, 18)
        self.summary_label = text_label(selectable=True)
        summary.addWidget(self.summary_icon, 0, Qt.AlignmentFlag.AlignTop)
        summary.addWidget(self.summary_label, 1)
        outer.addWidget(self.summary)
        outer.addSpacing(4)

        self.open_button = QPushButton("Open in chat")
        self.open_button.setObjectName("primaryAction")
        self.default_button = QPushButton("Set as default")
        self.validate_button = QPushButton("Validate MTP")
        self.validate_button.setToolTip(
            "Check that MTP decoding gives the same answers as plain decoding, and measure it"
        )
        self.add_head_button = QPushButton("Add MTP head…")
        self.add_head_button.setToolTip(
            "Rebuild the missing MTP head from the source checkpoint (reads only its mtp.* "
            "tensors; no export toolkit)"
        )
        self.verify_button = QPushButton("Verify integrity")
        self.verify_button.setToolTip("Check every file against the SHA-256 sums of the export")
        self.reveal_button = QPushButton("Show in file manager")
        self.reexport_button = QPushButton("Re-export / compress…")
        self.reexport_button.setToolTip(
            "Export the source checkpoint again, e.g. with another weight format"
        )
        self.deploy_button = QPushButton("Deploy to OVMS…")
        self.deploy_button.setToolTip(
            "Write an OpenVINO Model Server repository for this model (files and commands; "
            "the server is not run here)"
        )
        self.remove_button = QPushButton("Remove from library")
        self.remove_button.setToolTip("Take it off this list; the files stay where they are")
        self.delete_button = QPushButton("Delete from disk…")
        self.delete_button.setObjectName("dangerAction")
        # One flowing row: on a narrow window the buttons wrap instead of running off screen.
        actions = QWidget()
        line = FlowLayout(actions)
        for button in (
            self.open_button,
            self.default_button,
            self.validate_button,
            self.add_head_button,
            self.verify_button,
            self.reveal_button,
            self.reexport_button,
            self.deploy_button,
            self.remove_button,
            self.delete_button,
        ):
            line.addWidget(button)
        outer.addWidget(actions)
        # The check's progress and outcome sit under the button that started it, where the
        # user looks (issue 44): the Integrity section below keeps each finding.
        progress_row = QHBoxLayout()
        progress_row.setContentsMargins(0, 0, 0, 0)
        self.verify_progress = QProgressBar()
        self.verify_progress.setRange(0, 1000)
        self.verify_progress.setTextVisible(True)
        self.verify_cancel_button = QPushButton("Cancel")
        self.verify_cancel_button.clicked.connect(self.verify_cancel_requested)
        progress_row.addWidget(self.verify_progress, 1)
        progress_row.addWidget(self.verify_cancel_button)
        self.verify_row = QWidget()
        self.verify_row.setLayout(progress_row)
        outer.addWidget(self.verify_row)
        self.verify_result = QWidget()
        result = QHBoxLayout(self.verify_result)
        result.setContentsMargins(0, 0, 0, 0)
        result.setSpacing(8)
        self.verify_result_icon = QLabel()
        self.verify_result_icon.setFixedSize(18, 18)
        self.verify_result_label = text_label(selectable=True)
        result.addWidget(self.verify_result_icon, 0, Qt.AlignmentFlag.AlignTop)
        result.addWidget(self.verify_result_label, 1)
        outer.addWidget(self.verify_result)

        self.overview = Form(
            [
                "Kind",
                "Parts",
                "Source",
                "Revision",
                "Exported with",
                "Size on disk",
                "Chat template",
            ]
        )
        outer.addLayout(self._section("Overview", self.overview))

        # Four columns that fit a 1024 px window: the .xml and .bin sizes are one "Size" (each
        # in its tooltip), and each precision share has a line of its own, never wrapped.
        self.component_table = QTableWidget(0, 4)
        self.component_table.setObjectName("componentTable")
        self.component_table.setHorizontalHeaderLabels(["Component", "Use", "Size", "Weights"])
        self.component_table.setWordWrap(False)
        self._setup_table(self.component_table, stretch=3, right=(2,))
        outer.addLayout(self._section("Components", self.component_table))

        self.mtp_form = Form(["Present", "Size", "Precision", "Compressed like the model"])
        outer.addLayout(self._section("MTP head", self.mtp_form))

        outer.addLayout(self._section("Memory", self._build_memory()))

        integrity = QWidget()
        box = QVBoxLayout(integrity)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(6)
        self.integrity_label = text_label(selectable=True)
        box.addWidget(self.integrity_label)
        self.integrity_box = QVBoxLayout()
        self.integrity_box.setSpacing(2)
        box.addLayout(self.integrity_box)
        outer.addLayout(self._section("Integrity", integrity))

        diagnostics = QWidget()
        self.diagnostics_box = QVBoxLayout(diagnostics)
        self.diagnostics_box.setContentsMargins(0, 0, 0, 0)
        self.diagnostics_box.setSpacing(6)
        outer.addLayout(self._section("Diagnostics", diagnostics))
        outer.addStretch(1)
        self.diagnostic_rows: list[DiagnosticRow] = []
        self.integrity_rows: list[DiagnosticRow] = []

    def _build_memory(self) -> QWidget:
        memory = QWidget()
        box = QVBoxLayout(memory)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(8)
        controls = QHBoxLayout()
        controls.setSpacing(8)
        controls.addWidget(text_label("Context length", "formLabel", wrap=False, selectable=True))
        self.context_combo = QComboBox()
        for tokens in CONTEXT_CHOICES:
            self.context_combo.addItem(f"{tokens:,} tokens", tokens)
        self.context_combo.currentIndexChanged.connect(self._on_context_changed)
        controls.addWidget(self.context_combo)
        controls.addSpacing(12)
        self.kv_label = text_label("", "formLabel", wrap=False, selectable=True)
        controls.addWidget(self.kv_label)
        controls.addStretch(1)
        box.addLayout(controls)

        need = QHBoxLayout()
        need.setSpacing(10)
        self.memory_need_label = text_label("", "memoryNeed", wrap=False, selectable=True)
        self.verdict_label = QLabel()
        self.verdict_label.setObjectName("verdictBadge")
        self.verdict_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.verdict_label.setMinimumHeight(22)
        need.addWidget(self.memory_need_label)
        need.addWidget(self.verdict_label, 0, Qt.AlignmentFlag.AlignVCenter)
        need.addStretch(1)
        box.addLayout(need)
        self.memory_available_label = text_label("", "muted", selectable=True)
        box.addWidget(self.memory_available_label)

        self.arithmetic_button = QToolButton()
        self.arithmetic_button.setObjectName("arithmeticToggle")
        self.arithmetic_button.setCheckable(True)
        self.arithmetic_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.arithmetic_button.setArrowType(Qt.ArrowType.RightArrow)
        self.arithmetic_button.setText("Show the arithmetic")
        self.arithmetic_button.setAutoRaise(True)
        self.arithmetic_button.toggled.connect(self._on_arithmetic_toggled)
        box.addWidget(self.arithmetic_button, 0, Qt.AlignmentFlag.AlignLeft)
        # One rich-text label, not a grid of widgets: it re-flows reliably when replaced.
        self.arithmetic = QLabel()
        self.arithmetic.setObjectName("memoryArithmetic")
        self.arithmetic.setTextFormat(Qt.TextFormat.RichText)
        self.arithmetic.setWordWrap(True)
        self.arithmetic.setTextInteractionFlags(SELECTABLE)
        self.arithmetic.setContentsMargins(20, 0, 0, 0)
        self.arithmetic.setVisible(False)
        box.addWidget(self.arithmetic)
        self.memory_notes = text_label("", "muted", selectable=True)
        box.addWidget(self.memory_notes)
        # The loaded model only: what the engine keeps of conversations (issue 24).
        self.kept_label = text_label("", "muted", selectable=True)
        self.kept_label.setTextInteractionFlags(SELECTABLE)
        self.kept_label.setVisible(False)
        box.addWidget(self.kept_label)
        return memory

    def _section(self, title: str, body: QWidget) -> QVBoxLayout:
        box = QVBoxLayout()
        box.setSpacing(8)
        box.setContentsMargins(0, 14, 0, 0)
        rule = QFrame()
        rule.setObjectName("sectionRule")
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setFrameShadow(QFrame.Shadow.Plain)
        heading = QLabel(title)
        heading.setObjectName("sectionTitle")
        box.addWidget(rule)
        box.addWidget(heading)
        box.addWidget(body)
        return box

    @staticmethod
    def _setup_table(table: QTableWidget, *, stretch: int, right: Sequence[int] = ()) -> None:
        table.verticalHeader().setVisible(False)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        table.setShowGrid(False)
        table.setAlternatingRowColors(True)
        table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        header = table.horizontalHeader()
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        for column in range(table.columnCount()):
            mode = (
                QHeaderView.ResizeMode.Stretch
                if column == stretch
                else QHeaderView.ResizeMode.ResizeToContents
            )
            header.setSectionResizeMode(column, mode)
        for column in right:
            item = table.horizontalHeaderItem(column)
            if item is not None:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    @staticmethod
    def _fit_height(table: QTableWidget) -> None:
        """Show every row: the table never scrolls inside the scrolling page."""
        table.resizeRowsToContents()
        height = table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth()
        height += sum(table.rowHeight(row) for row in range(table.rowCount()))
        table.setFixedHeight(height + 2)

    # --- content ---------------------------------------------------------------------------

    @property
    def entry(self) -> LibraryEntry | None:
        return self._entry

    @property
    def context_length(self) -> int:
        return int(self.context_combo.currentData())

    def set_context_length(self, tokens: int) -> None:
        index = self.context_combo.findData(tokens)
        if index < 0:
            self.context_combo.addItem(f"{tokens:,} tokens", tokens)
            index = self.context_combo.count() - 1
        self.context_combo.blockSignals(True)
        self.context_combo.setCurrentIndex(index)
        self.context_combo.blockSignals(False)

    def show_state_cache(self, report: CacheReport | None) -> None:
        """The engine's answer to `state_cache_wanted`."""
        self.kept_label.setText(keep_units(kept_text(report)))

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if self.kept_label.isVisibleTo(self):  # back on the page: the figures moved on
            self.state_cache_wanted.emit()

    def show_empty(self, text: str) -> None:
        self._entry = None
        self.empty_label.setText(text)
        self.setCurrentWidget(self.empty_label)

    def show_model(
        self,
        entry: LibraryEntry,
        report: ModelReport | None,
        *,
        is_default: bool,
        is_loaded: bool = False,
        verify_findings: Sequence[Diagnostic] | None = None,
        verifying: bool = False,
    ) -> None:
        """Render `entry`; `report` None means it is still being inspected."""
        if self._entry is None or self._entry.path != entry.path:
            self.scroll_area.verticalScrollBar().setValue(0)  # another model starts at the top
        self._entry = entry
        self.setCurrentWidget(self.scroll_area)
        self.title_label.setText(entry.name)
        self.default_badge.setVisible(is_default)
        self.loaded_badge.setVisible(is_loaded)
        self.kept_label.setVisible(is_loaded)
        if is_loaded:
            self.kept_label.setText(self.kept_label.text() or "Conversation memory: asking…")
            self.state_cache_wanted.emit()
        where = {"demo": "bundled with the app", "managed": "in the app's model folder"}.get(
            entry.origin, f"in {entry.root}" if entry.root is not None else ""
        )
        self.path_label.setText(str(entry.path))
        self.path_label.setToolTip(f"Found {where}" if where else "")
        self._set_actions(entry, report, is_default=is_default, verifying=verifying)
        if report is None:
            self.overview.set("Kind", "inspecting…")
            for name in ("Parts", "Source", "Revision", "Exported with", "Size on disk"):
                self.overview.set(name, "")
            self.overview.set("Chat template", "")
            self.component_table.setRowCount(0)
            self._fit_height(self.component_table)
            self._show_diagnostics([])
            self.summary.setVisible(False)
            self.verify_row.setVisible(False)
            self.verify_result.setVisible(False)
            return
        self._show_overview(report)
        self._show_components(report)
        self._show_mtp(report)
        self._show_memory(report)
        self._show_integrity(report, verify_findings, verifying)
        self._show_diagnostics(report.diagnostics)
        self._show_summary(report, verify_findings or [])

    def _set_actions(
        self,
        entry: LibraryEntry,
        report: ModelReport | None,
        *,
        is_default: bool,
        verifying: bool,
    ) -> None:
        usable = report is not None and report.usable_for_chat
        reason = "" if usable else "This model has errors (see Diagnostics) and cannot be opened."
        if report is None:
            reason = "The model is still being inspected."
        self.open_button.setEnabled(usable)
        self.open_button.setToolTip(reason or "Start chatting with this model")
        self.default_button.setEnabled(usable and not is_default)
        self.default_button.setToolTip(
            "Already the default model"
            if is_default
            else reason or "Open this model when the app starts"
        )
        mtp_usable = report is not None and report.mtp_usable
        self.validate_button.setEnabled(mtp_usable)
        # Offered where the head is missing or damaged and the model itself works.
        self.add_head_button.setVisible(usable and not mtp_usable)
        self.verify_button.setEnabled(report is not None and not verifying)
        self.reexport_button.setEnabled(report is not None)
        self.deploy_button.setEnabled(usable)
        self.deploy_button.setToolTip(
            reason
            or "Write an OpenVINO Model Server repository for this model (files and commands; "
            "the server is not run here)"
        )
        self.remove_button.setEnabled(not entry.is_demo)
        self.delete_button.setEnabled(not entry.is_demo and report is not None)
        demo = "The demo model is part of the app."
        self.remove_button.setToolTip(
            demo if entry.is_demo else "Take it off this list; the files stay where they are"
        )
        self.delete_button.setToolTip(
            demo if entry.is_demo else "Delete this model folder and every file in it"
        )

    def _show_overview(self, report: ModelReport) -> None:
        model_type = f" · model_type {report.model_type}" if report.model_type else ""
        self.overview.set("Kind", kind_text(report) + model_type, ", ".join(report.architectures))
        self.overview.set("Parts", parts_text(report))
        source = report.source
        origin = {
            "manifest": "from the export record",
            "config": "from config.json",
            "openvino_config": "from openvino_config.json",
        }.get(source.origin or "", "")
        self.overview.set("Source", source.model_id or "unknown", origin)
        revision = source.revision or "not recorded"
        # A commit is 40 unbreakable characters: show the usual short form, the rest on hover.
        short = revision[:12] if len(revision) == 40 and revision.isalnum() else revision
        self.overview.set("Revision", short, revision if short != revision else "")
        # Short versions ("2026.4.1", not the build string); the full ones in the tooltip.
        short = " · ".join(
            f"{name} {re.split(r'[-+ ]', version, maxsplit=1)[0]}"
            for name, version in sorted(report.versions.items(), key=version_order)
        )
        full = "\n".join(f"{name} {version}" for name, version in report.versions.items())
        self.overview.set("Exported with", short or "unknown", full)
        self.overview.set(
            "Size on disk", format_bytes(report.total_bytes), f"{report.total_bytes:,} bytes"
        )
        self.overview.set("Chat template", "yes" if report.chat_template else "no")

    def _show_components(self, report: ModelReport) -> None:
        table = self.component_table
        rows = [c for c in report.components if c.use != "other" or c.xml_present]
        table.setRowCount(len(rows))
        uses = {"chat": "chat", "image": "images", "other": "—"}
        for row, component in enumerate(rows):
            status = component_status(component)
            name = QTableWidgetItem(component.label)
            name.setIcon(status_pixmap(status, 14))
            problems = [component.error] if component.error else []
            problems += [issue.message for issue in component.issues]
            tip = f"{component.stem}.xml / .bin"
            if problems:
                tip += "\n" + "\n".join(p for p in problems if p)
            name.setToolTip(tip)
            use = QTableWidgetItem(uses[component.use])
            use.setToolTip(USE_TIPS[component.use])
            absent = not component.xml_present and not component.bin_present
            size = QTableWidgetItem(
                "—" if absent else format_bytes(component.xml_bytes + component.bin_bytes)
            )
            size.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            parts = (
                (".xml", component.xml_present, component.xml_bytes),
                (".bin", component.bin_present, component.bin_bytes),
            )
            size.setToolTip(
                "\n".join(
                    f"{component.stem}{suffix}: "
                    + (f"{format_bytes(count)} ({count:,} bytes)" if present else "missing")
                    for suffix, present, count in parts
                )
            )
            cells = [name, use, size]
            if absent:
                precision = "not in this export"
            elif not component.xml_present:
                precision = "unknown (.xml missing)"
            elif component.error:
                precision = "unreadable"
            elif component.precision_shares:
                # One share per line: "INT4 asym g16 (78 %)" over "INT8 asym (22 %)".
                precision = "\n".join(format_shares([s]) for s in component.precision_shares)
            else:
                precision = "tables only"  # a tokenizer: no weights
            detail = QTableWidgetItem(precision)
            detail.setToolTip(component.precision or precision)
            cells.append(detail)
            for column, item in enumerate(cells):
                table.setItem(row, column, item)
        self._fit_height(table)

    def _show_mtp(self, report: ModelReport) -> None:
        mtp = report.mtp
        component = report.component("mtp")
        if mtp.present:
            self.mtp_form.set("Present", "yes: MTP speculative decoding is available")
        elif component is not None and (component.xml_present or component.bin_present):
            self.mtp_form.set("Present", "damaged: chat works without the speed-up")
        else:
            self.mtp_form.set("Present", "no: chat works without the speed-up")
        self.mtp_form.set("Size", format_bytes(mtp.bytes) if mtp.bytes else "—")
        self.mtp_form.set("Precision", mtp.precision or "—")
        like = {
            True: f"yes (both {mtp.main_precision})",
            False: f"no: MTP head {mtp.dominant_precision}, language model {mtp.main_precision}",
            None: "unknown",
        }[mtp.compressed_like_main]
        self.mtp_form.set("Compressed like the model", like if mtp.present else "—")

    def _show_memory(self, report: ModelReport) -> None:
        memory = report.memory
        if memory is None:
            self.memory_need_label.setText("No estimate: this folder holds no usable model.")
            self.verdict_label.setVisible(False)
            self.memory_available_label.setText("")
            self.memory_notes.setText("")
            self.kv_label.setText("")
            return
        self.set_context_length(memory.context_length)
        self.kv_label.setText(f"KV cache precision: {memory.kv_precision}")
        self.memory_need_label.setText(
            keep_units(f"Needs about {format_bytes(memory.total_bytes)}")
        )
        verdict = VERDICT_LABELS[memory.verdict]
        self.verdict_label.setText(verdict)
        self.verdict_label.setProperty("status", VERDICT_STATUS[memory.verdict])
        self.verdict_label.setVisible(True)
        repolish(self.verdict_label)
        if memory.available_bytes is not None and memory.fraction is not None:
            share = "<1 %" if memory.fraction < 0.005 else f"{memory.fraction:.0%}"
            available = (
                f"{format_bytes(memory.available_bytes)} of RAM is free now; the model would "
                f"use {share} of it (tight above 70 %)."
            )
        else:
            available = "Free RAM is unknown on this system."
        self.memory_available_label.setText(keep_units(available))
        muted = muted_color(self.palette())
        rows = []
        tip_lines = []
        for term in memory.terms:
            rows.append(
                f"<tr><td>{escape(term.label)}<br>"
                f'<font color="{muted}">{escape(term.formula)}</font></td>'
                f'<td width="80" align="right" valign="top">{format_bytes(term.bytes)}</td></tr>'
            )
            tip_lines.append(f"{term.label}: {format_bytes(term.bytes)}\n    {term.formula}")
        rows.append(
            f'<tr><td><b>Total</b></td><td align="right"><b>'
            f"{format_bytes(memory.total_bytes)}</b></td></tr>"
        )
        self.arithmetic.setText(
            f'<table width="100%" cellspacing="0" cellpadding="3">{"".join(rows)}</table>'
        )
        tip_lines.append(f"Total: {format_bytes(memory.total_bytes)}")
        tooltip = "\n".join(tip_lines)
        self.memory_need_label.setToolTip(tooltip)
        self.verdict_label.setToolTip(tooltip)
        self.memory_notes.setText(keep_units("\n".join(f"• {note}" for note in memory.notes)))

    def _show_integrity(
        self,
        report: ModelReport,
        findings: Sequence[Diagnostic] | None,
        verifying: bool,
    ) -> None:
        manifest = report.manifest
        if manifest is not None and manifest.files:
            count = len(manifest.files)
            text = (
                f"The export record ({MANIFEST_NAME}) holds SHA-256 sums for {count} "
                f"file{'s' if count != 1 else ''}."
            )
        elif "MANIFEST_INVALID" in report.codes():
            text = "The export record is damaged, so the files cannot be verified."
        else:
            text = (
                "No export record with checksums: exports made outside the app have none, so "
                "only the structure checks below apply."
            )
        if findings is None and not verifying:
            text += " Not verified in this session."
        self.integrity_label.setText(text)
        self.verify_row.setVisible(verifying)
        if verifying:
            self.verify_progress.setValue(0)
            self.verify_progress.setFormat("Verifying… %p %")
        self.verify_result.setVisible(findings is not None and not verifying)
        if findings is not None:
            status, summary = integrity_summary(findings)
            self.verify_result_icon.setPixmap(status_pixmap(status, 18))
            self.verify_result_label.setText(f"Integrity check: {summary}")
        for row in self.integrity_rows:
            row.hide()
            row.deleteLater()
        self.integrity_rows = []
        for diagnostic in findings or []:
            row = DiagnosticRow(diagnostic)
            self.integrity_box.addWidget(row)
            self.integrity_rows.append(row)

    def set_verify_progress(self, done: int, total: int) -> None:
        self.verify_row.setVisible(True)
        self.verify_progress.setValue(1000 * done // total if total else 0)
        self.verify_progress.setFormat(
            f"Verifying… %p %  ({format_bytes(done)} of {format_bytes(total)})"
        )

    def _show_summary(self, report: ModelReport, findings: Sequence[Diagnostic]) -> None:
        problems = [d for d in [*report.diagnostics, *findings] if d.severity != "info"]
        errors = [d for d in problems if d.severity == "error"]
        self.summary.setVisible(bool(problems))
        if not problems:
            return
        self.summary_icon.setPixmap(status_pixmap("error" if errors else "warning", 18))
        if errors:
            more = f" (and {len(problems) - 1} more, see Diagnostics)" if len(problems) > 1 else ""
            first = errors[0].message.rstrip(".") if more else errors[0].message
            text = f"Cannot be used for chat: {first}{more}"
            fix = errors[0].fix
        else:
            count = len(problems)
            text = f"{count} warning{'s' if count > 1 else ''}: {problems[0].message}" + (
                " (see Diagnostics)" if count > 1 else ""
            )
            fix = problems[0].fix
        if fix:  # the next step, where the problem is first read
            text += f"\nFix: {fix}"
        self.summary_label.setText(keep_units(text))

    def _show_diagnostics(self, diagnostics: Sequence[Diagnostic]) -> None:
        clear_layout(self.diagnostics_box)
        self.diagnostic_rows = []
        if not diagnostics:
            ok = QWidget()
            line = QHBoxLayout(ok)
            line.setContentsMargins(0, 0, 0, 0)
            line.setSpacing(10)
            icon = QLabel()
            icon.setPixmap(status_pixmap("ok", 18))
            line.addWidget(icon)
            line.addWidget(text_label("No problems found.", wrap=False, selectable=True))
            line.addStretch(1)
            self.diagnostics_box.addWidget(ok)
            return
        order = {"error": 0, "warning": 1, "info": 2}
        for diagnostic in sorted(diagnostics, key=lambda d: order[d.severity]):
            row = DiagnosticRow(diagnostic)
            self.diagnostics_box.addWidget(row)
            self.diagnostic_rows.append(row)

    # --- slots -----------------------------------------------------------------------------

    def _on_context_changed(self, _index: int) -> None:
        self.context_length_changed.emit(self.context_length)

    def _on_arithmetic_toggled(self, shown: bool) -> None:
        self.arithmetic.setVisible(shown)
        self.arithmetic_button.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )
        self.arithmetic_button.setText("Hide the arithmetic" if shown else "Show the arithmetic")
