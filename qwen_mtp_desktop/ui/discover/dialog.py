"""Discover: the Qwen3.5 family sized for this computer; choosing one downloads a ready
OpenVINO export of it (where the list names one) or opens the export wizard.

The list and the estimates are computed on a worker thread (reading the list is file I/O, and
the free memory is asked of the system); the dialog only renders them. Nothing here goes online:
the wizard's check asks the hub, and says clearly when it cannot be reached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.catalog import (
    FORMATS,
    Catalog,
    DeviceFit,
    ReadyExport,
    fit_on_device,
    load_catalog,
)
from qwen_mtp_desktop.core.models.folders.memory import DEFAULT_CONTEXT_LENGTH, available_memory
from qwen_mtp_desktop.core.models.library import VERDICT_LABELS
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.models.common import SEVERITY_COLORS, VERDICT_STATUS
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.window_fit import fit_dialog
from qwen_mtp_desktop.workers.tasks import TaskRunner

MemoryProbe = Callable[[], tuple[int | None, int | None]]
COLUMNS = (
    "Model",
    "Parameters",
    "Download",
    "Ready",
    "INT4 memory",
    "INT8 memory",
    "FP16 memory",
    "MTP",
    "For this computer",
)
#: The column that takes a wider dialog's spare room.
NAME_COLUMN = 0
_FORMAT_COLUMN = {fmt: 4 + index for index, fmt in enumerate(FORMATS)}


@dataclass(frozen=True)
class DiscoverResult:
    catalog: Catalog
    fits: list[DeviceFit]
    available: int | None
    total: int | None
    #: Why this app cannot export here (no export toolkit; an installed bundle), or None.
    export_blocked: str | None = None


def export_blocked() -> str | None:
    """Why exporting cannot run in this app, or None when the toolkit is installed."""
    import importlib.util
    import sys

    if getattr(sys, "frozen", False):
        return (
            "Exporting needs a source install with the export toolkit; this installed app "
            "downloads ready models instead."
        )
    if any(importlib.util.find_spec(name) is None for name in ("optimum", "torch")):
        return "Exporting needs the export toolkit (several GB): the Export panel installs it."
    return None


def compute(
    device: str,
    memory_probe: MemoryProbe = available_memory,
    blocked: Callable[[], str | None] = export_blocked,
) -> DiscoverResult:
    """The list and its fit on this device (worker thread)."""
    catalog = load_catalog()
    available, total = memory_probe()
    fits = [fit_on_device(model, device, available, total) for model in catalog.models]
    return DiscoverResult(catalog, fits, available, total, blocked())


def _parameters(fit: DeviceFit) -> str:
    model = fit.model

    def billions(count: int) -> str:
        value = count / 1e9
        return f"{value:.1f}B" if value < 1 else f"{value:.0f}B"

    if model.active_parameters is not None:
        return f"{billions(model.parameters)} (MoE, {billions(model.active_parameters)} active)"
    return billions(model.parameters)


class DiscoverDialog(QDialog):
    """Signals:
    export_requested(str, str): hub id and weight format; the window opens the wizard with them.
    download_requested(str, str): a ready export's repo id ("" to type one) and the source
        checkpoint's hub id (for its MTP head); the window opens the download dialog.
    """

    export_requested = Signal(str, str)
    download_requested = Signal(str, str)

    def __init__(
        self,
        runner: TaskRunner,
        device: str,
        parent: QWidget | None = None,
        *,
        memory_probe: MemoryProbe = available_memory,
        export_probe: Callable[[], str | None] = export_blocked,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Discover Qwen3.5 models")
        self._export_blocked = export_probe
        self.setObjectName("discoverDialog")
        self.setMinimumSize(640, 420)
        self.setSizeGripEnabled(True)  # sized to its content on opening, resizable after
        self._runner = runner
        self._device = device
        self._memory_probe = memory_probe
        self.found: DiscoverResult | None = None
        self.error: str | None = None

        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 18, 20, 16)
        layout.setSpacing(10)
        layout.addWidget(text_label("Qwen3.5 models for this computer", "panelHeading"))
        self.summary = text_label("Reading the list…", "panelBody")
        layout.addWidget(self.summary)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("discoverTable")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        header = self.table.horizontalHeader()
        # Every column as wide as its contents (a name cut to "Qwen3.5-…" says nothing); the
        # dialog takes the width they need, within the window (fit_to_content). The name column
        # takes the room a larger dialog has to spare, never less than its names
        # (_stretch_name_column: Qt's Stretch mode would cut them on a narrow dialog).
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(NAME_COLUMN, QHeaderView.ResizeMode.Fixed)
        header.setStretchLastSection(False)
        self.table.viewport().installEventFilter(self)
        self.table.itemSelectionChanged.connect(self._show_selected)
        self.table.itemDoubleClicked.connect(lambda _item: self._export())
        layout.addWidget(self.table, 1)

        self.detail_title = text_label("", "sectionTitle")
        layout.addWidget(self.detail_title)
        self.detail_text = text_label("")
        self.detail_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.detail_text)
        self.note = text_label(
            "Memory: one chat at "
            f"{DEFAULT_CONTEXT_LENGTH:,} tokens (weights, KV cache and linear-attention state; "
            "the app's own estimate): green fits in the free memory, orange only just (close "
            "other apps), red does not fit. Download: the checkpoint in bf16. Ready: OpenVINO "
            "exports others published, downloaded without the export toolkit (their MTP head is "
            "added from the checkpoint when they dropped it). The export wizard checks the real "
            "checkpoint (MTP head, files, disk, memory) before anything is written.",
            "muted",
        )
        layout.addWidget(self.note)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        self.other_button = QPushButton("Download by repository id…")
        self.other_button.setToolTip("Any ready OpenVINO export of a Qwen3.5 model on the hub")
        self.other_button.clicked.connect(lambda: self.download_requested.emit("", ""))
        buttons.insertWidget(0, self.other_button)
        self.export_button = QPushButton("Export…")
        self.export_button.setEnabled(False)
        self.export_button.clicked.connect(self._export)
        self.download_button = QPushButton("Download ready…")
        self.download_button.setObjectName("primaryAction")
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self._download)
        buttons.addWidget(self.close_button)
        buttons.addWidget(self.export_button)
        buttons.addWidget(self.download_button)
        layout.addLayout(buttons)
        self.reload()

    @property
    def loaded(self) -> bool:
        return self.found is not None or self.error is not None

    def reload(self) -> None:
        device, probe, blocked = self._device, self._memory_probe, self._export_blocked
        self._runner.submit(
            lambda: compute(device, probe, blocked), self._on_computed, self._on_failed
        )

    def selected_fit(self) -> DeviceFit | None:
        rows = self.table.selectionModel().selectedRows()
        if self.found is None or not rows:
            return None
        return self.found.fits[rows[0].row()]

    def select(self, hub_id: str) -> bool:
        if self.found is None:
            return False
        for row, fit in enumerate(self.found.fits):
            if fit.model.hub_id == hub_id:
                self.table.selectRow(row)
                return True
        return False

    # --- rendering ------------------------------------------------------------------------

    def _on_failed(self, exc: Exception) -> None:
        self.error = str(exc) if isinstance(exc, UserFacingError) else f"{exc}"
        self.summary.setText(f"The model list could not be read: {self.error}")
        self.table.hide()

    def _on_computed(self, result: DiscoverResult) -> None:
        self.found = result
        self.error = None
        free = format_bytes(result.available) if result.available is not None else "unknown"
        total = format_bytes(result.total) if result.total is not None else "unknown"
        summary = (
            f"{len(result.fits)} {result.catalog.family} checkpoints with their MTP head, sized "
            f"for {self._device}: {free} of memory free of {total}. Pick one to download a "
            "ready OpenVINO export of it (where one is listed) or to open the export wizard "
            "with the precision recommended here."
        )
        if result.catalog.problems:
            summary += f" Left out of the list: {'; '.join(result.catalog.problems[:3])}."
        self.summary.setText(summary)
        self.table.setRowCount(len(result.fits))
        for row, fit in enumerate(result.fits):
            self._fill_row(row, fit)
        first = next((i for i, fit in enumerate(result.fits) if fit.recommended), 0)
        if result.fits:
            self.table.selectRow(first)
        self.fit_to_content()

    def content_size(self) -> QSize:
        """The dialog's size with every column and row of the table shown."""
        table = self.table
        table.resizeColumnsToContents()
        header = table.horizontalHeader()
        columns = sum(
            max(table.sizeHintForColumn(c), header.sectionSizeHint(c))
            for c in range(table.columnCount())
        )
        rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
        frame = 2 * table.frameWidth()
        scroll = table.verticalScrollBar().sizeHint().width()
        wanted = QSize(columns + frame + scroll, header.sizeHint().height() + rows + frame + 2)
        hint = self.sizeHint()
        extra_w = max(wanted.width() - table.sizeHint().width(), 0)
        extra_h = max(wanted.height() - table.sizeHint().height(), 0)
        return QSize(hint.width() + extra_w, hint.height() + extra_h)

    def fit_to_content(self) -> None:
        """As large as the table wants, within the window it opens over."""
        fit_dialog(self, self.content_size())
        self._stretch_name_column()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt override)
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self._stretch_name_column()
        return super().eventFilter(watched, event)

    def _stretch_name_column(self) -> None:
        """The name column: its names' width, plus whatever the other columns leave over."""
        table = self.table
        header = table.horizontalHeader()
        names = max(table.sizeHintForColumn(NAME_COLUMN), header.sectionSizeHint(NAME_COLUMN))
        others = sum(table.columnWidth(c) for c in range(table.columnCount()) if c != NAME_COLUMN)
        table.setColumnWidth(NAME_COLUMN, max(names, table.viewport().width() - others))

    def _fill_row(self, row: int, fit: DeviceFit) -> None:
        model = fit.model

        def cell(column: int, text: str, tip: str = "", right: bool = False) -> QTableWidgetItem:
            item = QTableWidgetItem(text)
            item.setToolTip(tip)
            if right:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            self.table.setItem(row, column, item)
            return item

        cell(0, model.name, model.hub_id)
        cell(1, _parameters(fit), f"{model.parameters:,} parameters", right=True)
        cell(2, format_bytes(model.download_bytes), "The checkpoint as published (bf16)", True)
        ready = ", ".join(r.weight_format.upper() for r in model.ready) or "none listed"
        cell(3, ready, "\n".join(f"{r.repo_id} ({r.publisher})" for r in model.ready))
        for fmt, column in _FORMAT_COLUMN.items():
            fitted = fit.fits[fmt]
            verdict = fitted.verdict
            memory = fitted.memory
            tip = (
                f"{fmt.upper()}: model folder about {format_bytes(fitted.model_bytes)}; one chat "
                f"needs about {format_bytes(memory.total_bytes)} ({VERDICT_LABELS[verdict]})."
            )
            if model.geometry is None:
                tip += " Weights only: this model's shape (for the KV cache) is not in the list."
            item = cell(column, format_bytes(memory.total_bytes), tip, right=True)
            item.setForeground(QColor(SEVERITY_COLORS[VERDICT_STATUS[verdict]]))
            if fmt == fit.recommended:
                font = QFont(item.font())
                font.setBold(True)
                item.setFont(font)
        cell(7, "yes" if model.mtp else "no", "The checkpoint ships its MTP head (mtp.* weights)")
        verdict_text = fit.recommended.upper() if fit.recommended else "too large"
        if fit.recommended and fit.export_problem:
            # Exporting needs more RAM than this computer has; a ready export needs none.
            formats = sorted({r.weight_format.upper() for r in model.ready})
            if fit.recommended.upper() in formats:
                verdict_text += ", download ready"
            elif formats:
                verdict_text += f", or {'/'.join(formats)} ready"
            else:
                verdict_text += ", export elsewhere"
        cell(8, verdict_text, f"{fit.reason} {fit.export_problem or ''}".strip())

    def _show_selected(self) -> None:
        fit = self.selected_fit()
        if fit is None:
            self.detail_title.clear()
            self.detail_text.clear()
            self.export_button.setEnabled(False)
            return
        model = fit.model
        self.detail_title.setText(f"{model.hub_id} · {_parameters(fit)}")
        lines = [model.blurb] if model.blurb else []
        lines.append(fit.reason)
        if fit.export_problem:
            lines.append(fit.export_problem)
        if model.geometry is None:
            lines.append(
                "Memory figures cover the weights only: this model's shape is not in the list, "
                "so the KV cache is not included (the Models panel shows the full figure after "
                "the export)."
            )
        fmt = fit.recommended
        self.export_button.setEnabled(fmt is not None)
        self.export_button.setText(
            f"Export as {fmt.upper()}…" if fmt is not None else "Too large for this computer"
        )
        blocked = self.found.export_blocked if self.found is not None else None
        if blocked and fmt is not None:
            # Said before the wizard opens: it would only say the same after a click.
            self.export_button.setText(f"Export as {fmt.upper()} (needs the toolkit)…")
            lines.append(blocked)
        self.export_button.setToolTip(blocked or "")
        ready = self._ready_export(fit)
        self.download_button.setEnabled(ready is not None)
        self.download_button.setText(
            f"Download {ready.weight_format.upper()} ready…" if ready else "No ready export listed"
        )
        if ready is not None:
            lines.append(f"Ready export: {ready.repo_id} ({ready.publisher}).")
        self.detail_text.setText("\n".join(lines))

    @staticmethod
    def _ready_export(fit: DeviceFit) -> ReadyExport | None:
        """The ready export in the recommended format, else the first one listed."""
        ready = fit.model.ready
        matching = [r for r in ready if r.weight_format == fit.recommended]
        choices = matching or list(ready)
        return choices[0] if choices else None

    def _download(self) -> None:
        fit = self.selected_fit()
        ready = self._ready_export(fit) if fit is not None else None
        if fit is None or ready is None:
            return
        self.download_requested.emit(ready.repo_id, fit.model.hub_id)

    def _export(self) -> None:
        fit = self.selected_fit()
        if fit is None or fit.recommended is None:
            return
        self.export_requested.emit(fit.model.hub_id, fit.recommended)
        self.accept()
