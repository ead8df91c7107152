"""The Benchmark page's History: the chosen model's saved runs, as a list beside the results on
a wide window, or as a one-line picker above them on a narrow one, so the results keep the
height (issue 44: a list stacked above them showed 1.5 rows and left the results ~230 px).
Both show the same rows; the list is the one the panel reads and selects."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.measure.reports import ReportEntry
from qwen_mtp_desktop.ui.bench.look import STATUS_COLORS, status_dot
from qwen_mtp_desktop.ui.bench.report_view import local_time

PATH_ROLE = Qt.ItemDataRole.UserRole


def _label(text: str, name: str) -> QLabel:
    label = QLabel(text)
    label.setObjectName(name)
    return label


class BenchHistory:
    """The History's two views and the rows in them; the panel places `frame` and `bar`."""

    def __init__(self) -> None:
        self.frame = QFrame()
        self.frame.setObjectName("benchHistory")
        self.frame.setMinimumWidth(240)
        layout = QVBoxLayout(self.frame)
        layout.setContentsMargins(0, 6, 10, 0)
        self.hint = _label("", "muted")
        self.hint.setWordWrap(True)
        self.list = QListWidget()
        self.list.setObjectName("benchHistoryList")
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.list.setWordWrap(True)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setIconSize(QSize(12, 12))
        layout.addWidget(_label("History", "sectionTitle"))
        layout.addWidget(self.hint)
        layout.addWidget(self.list, 1)

        self.bar = QWidget()
        row = QHBoxLayout(self.bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.combo = QComboBox()
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(30)
        self.combo.setIconSize(QSize(12, 12))
        self.bar_hint = _label("", "muted")
        row.addWidget(_label("History", "sectionTitle"))
        row.addWidget(self.combo, 1)
        row.addWidget(self.bar_hint)
        row.addStretch(0)  # takes the room only while the picker is hidden (no runs)
        self.bar.setVisible(False)
        # A run picked in either view is the list's current row: the panel listens there.
        self.combo.activated.connect(self.list.setCurrentRow)
        self.list.currentRowChanged.connect(self._on_list_row)

    def set_compact(self, compact: bool) -> None:
        """The one-line picker above the results (narrow window) or the list beside them."""
        self.bar.setVisible(compact)
        self.frame.setVisible(not compact)

    def fill(self, entries: list[ReportEntry], model_name: str, select: Path | None) -> bool:
        """Show `entries` (newest first) without announcing a selection; True if `select`
        is among them and is now the current row."""
        self.list.blockSignals(True)
        self.list.clear()
        self.combo.clear()
        found: QListWidgetItem | None = None
        for entry in entries:
            kind = "Validation" if entry.kind == "validate" else "Benchmark"
            when = f"{kind} · {local_time(entry.created)} · {entry.device}"
            icon = status_dot(STATUS_COLORS["ok" if entry.ok else "warning"])
            item = QListWidgetItem(f"{when}\n{entry.headline}")
            item.setData(PATH_ROLE, str(entry.path))
            item.setIcon(icon)
            item.setToolTip(str(entry.path))
            self.list.addItem(item)
            line = f"{when} · {entry.headline}"
            self.combo.addItem(icon, line)
            self.combo.setItemData(self.combo.count() - 1, line, Qt.ItemDataRole.ToolTipRole)
            if select is not None and entry.path == select:
                found = item
        if found is not None:
            self.list.setCurrentItem(found)
        self.list.blockSignals(False)
        self._on_list_row(self.list.currentRow())
        count = len(entries)
        hint = (
            f"{count} saved run{'s' if count != 1 else ''} for {model_name}"
            if count
            else f"No runs yet for {model_name}."
        )
        self.hint.setText(hint)
        self.bar_hint.setText(hint)
        self.combo.setVisible(bool(count))
        return found is not None

    def _on_list_row(self, row: int) -> None:
        self.combo.blockSignals(True)
        self.combo.setCurrentIndex(row)
        self.combo.blockSignals(False)
