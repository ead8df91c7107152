"""The Benchmark page: validate MTP against plain decoding, benchmark draft depths, compare runs.

Threads: runs go to a `BenchJob` (its own thread, two pipelines of its own); listing, loading
and exporting reports go to the panel's "bench-io" TaskRunner. The GUI thread only draws.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.model_library import display_name, is_demo_model
from qwen_mtp_desktop.core.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.prompt_lookup import DEFAULT_LOOKUP_TOKENS
from qwen_mtp_desktop.core.reports import ReportEntry, fmt, fmt_spread
from qwen_mtp_desktop.core.units import format_bytes, keep_units
from qwen_mtp_desktop.core.validate import Progress
from qwen_mtp_desktop.ui.bench.charts import AcceptanceChart, ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.bench.report_view import chart_data, local_time, verdict, workload_data
from qwen_mtp_desktop.ui.figures import COLUMN_HELP
from qwen_mtp_desktop.ui.flow_layout import FlowLayout, ResponsiveRow
from qwen_mtp_desktop.ui.style import ACCENT
from qwen_mtp_desktop.workers.bench_job import BenchJob, JobResult
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

ALL_SETS = "*"
OTHER_FILE = "file"
STATUS_COLORS = {"ok": "#2e9d57", "warning": "#d08400", "error": "#d93025", "info": "#3c78d8"}
_PATH_ROLE = Qt.ItemDataRole.UserRole
#: Below this width the two charts go one above the other, so their titles stay whole.
CHARTS_SIDE_BY_SIDE_MIN = 760


def _choose_model_dir(parent: QWidget) -> Path | None:
    chosen = QFileDialog.getExistingDirectory(parent, "Choose a model folder", str(Path.home()))
    return Path(chosen) if chosen else None


def _choose_prompt_file(parent: QWidget) -> Path | None:
    chosen, _filter = QFileDialog.getOpenFileName(
        parent, "Choose a prompt set", str(Path.home()), "Prompt sets (*.json)"
    )
    return Path(chosen) if chosen else None


def _choose_save_path(parent: QWidget, title: str, suggested: Path, filters: str) -> Path | None:
    chosen, _filter = QFileDialog.getSaveFileName(parent, title, str(suggested), filters)
    return Path(chosen) if chosen else None


@dataclass
class BenchDialogs:
    """Everything the panel asks the desktop; tests replace these."""

    choose_model_dir: Callable[[QWidget], Path | None] = _choose_model_dir
    choose_prompt_file: Callable[[QWidget], Path | None] = _choose_prompt_file
    #: (parent, title, suggested path, file filters) -> chosen path or None.
    choose_save_path: Callable[[QWidget, str, Path, str], Path | None] = _choose_save_path


def _list_prompt_sets() -> list[tuple[str, str]]:
    from qwen_mtp_desktop.core.validate import builtin_prompt_sets

    return [(s.name, s.title) for s in builtin_prompt_sets()]


def _dot(color: str, size: int = 12) -> QIcon:
    """A filled status dot (drawn, so it looks the same on every platform)."""
    pixmap = QPixmap(size * 2, size * 2)
    pixmap.setDevicePixelRatio(2.0)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setPen(Qt.PenStyle.NoPen)
    painter.setBrush(QColor(color))
    painter.drawEllipse(2, 2, size - 4, size - 4)
    painter.end()
    return QIcon(pixmap)


# --- the panel -----------------------------------------------------------------------------


def _style() -> str:
    banner = "border-radius: 8px; padding: 2px;"
    banners = "\n".join(
        f'QFrame#benchBanner[status="{status}"] {{ border: 1px solid {color}; {banner}'
        f" border-left: 5px solid {color}; }}"
        for status, color in STATUS_COLORS.items()
    )
    return f"""
    QLabel#benchTitle {{ font-size: 22px; font-weight: 600; }}
    QLabel#sectionTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#bannerTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#formLabel, QLabel#muted {{ color: palette(placeholder-text); }}
    QFrame#benchSetup {{ border: 1px solid palette(mid); border-radius: 8px; }}
    QFrame#benchHistory {{ border-right: 1px solid palette(mid); }}
    QPushButton#primaryAction {{
        background: {ACCENT}; color: white; border: none; border-radius: 6px;
        padding: 6px 16px; font-weight: 600;
    }}
    QPushButton#primaryAction:disabled {{ background: palette(mid); }}
    QListWidget#benchHistoryList::item {{ padding: 6px 4px; }}
    QTableWidget#benchTable {{ border: none; }}
    {banners}
    """


class BenchPanel(QWidget):
    """Signals:
    run_finished(dict): a validation or benchmark report (already saved to the history).
    recommendation_changed(Path, str, object): a benchmark stored a new depth recommendation
        for (model folder, device); the depth is an int, or None for plain decoding.
    busy_changed(bool): a run started or ended.
    history_loaded(list): the selected model's report history (list[ReportEntry]) was listed.
    report_shown(dict): a report is on screen (a new run or one picked from the history).
    """

    run_finished = Signal(object)
    recommendation_changed = Signal(object, str, object)
    busy_changed = Signal(bool)
    history_loaded = Signal(list)
    report_shown = Signal(object)

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        device: str = "CPU",
        models: Sequence[Path] = (),
        dialogs: BenchDialogs | None = None,
        parent: QWidget | None = None,
        job: BenchJob | None = None,
        io: TaskRunner | None = None,
    ) -> None:
        super().__init__(parent)
        self.setStyleSheet(_style())
        self.dialogs = dialogs or BenchDialogs()
        # The app hands its threads in (workers.threads); a panel on its own makes its own.
        self.job = job or BenchJob(self)
        self.io = io or TaskRunner("bench-io", self)
        self.report: dict[str, Any] | None = None
        self.history: list[ReportEntry] = []
        self._set_touched = False
        self._pending_select: Path | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(24, 18, 24, 12)
        outer.setSpacing(10)
        title = QLabel("Benchmark")
        title.setObjectName("benchTitle")
        subtitle = QLabel(
            "First check that MTP output equals plain decoding, then measure the speed-up per "
            "draft depth. The best depth is remembered for the chat's “auto” setting."
        )
        subtitle.setObjectName("muted")
        subtitle.setWordWrap(True)
        outer.addWidget(title)
        outer.addWidget(subtitle)
        outer.addWidget(self._build_setup())

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self._build_history())
        splitter.addWidget(self._build_results())
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([270, 880])
        outer.addWidget(splitter, 1)

        self.job.progress.connect(self._on_progress)
        self.job.finished.connect(self._on_finished)
        self.job.failed.connect(self._on_failed)
        self.job.cancelled.connect(self._on_cancelled)
        self.job.busy_changed.connect(self._on_busy)

        demo = demo_model_dir()
        bundled = [demo] if (demo / "openvino_language_model.xml").is_file() else []
        for path in [*(models or []), *([model_dir] if model_dir else []), *bundled]:
            self._add_model(path)
        self.set_devices([device])
        if model_dir is not None:
            self.set_model(model_dir)
        else:
            self._on_model_changed()
        self.io.submit(_list_prompt_sets, self._on_prompt_sets, self._on_io_error)
        self._show_report(None)

    # --- building ---

    def _build_setup(self) -> QFrame:
        frame = QFrame()
        frame.setObjectName("benchSetup")
        grid = QGridLayout(frame)
        grid.setContentsMargins(14, 12, 14, 12)
        grid.setHorizontalSpacing(10)
        grid.setVerticalSpacing(8)

        def label(text: str) -> QLabel:
            widget = QLabel(text)
            widget.setObjectName("formLabel")
            return widget

        self.model_combo = QComboBox()
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_combo.setMinimumContentsLength(24)
        self.model_combo.currentIndexChanged.connect(self._on_model_changed)
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._on_browse)
        self.device_combo = QComboBox()
        self.device_combo.setMinimumContentsLength(6)
        self.set_combo = QComboBox()
        self.set_combo.setMinimumContentsLength(18)
        self.set_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.set_combo.activated.connect(self._on_set_activated)
        self.depth_checks: list[QCheckBox] = []
        depths = QHBoxLayout()
        depths.setSpacing(8)
        for depth in (1, 2, 3, 4):
            check = QCheckBox(str(depth))
            check.setChecked(True)
            check.setToolTip(f"Benchmark MTP with {depth} draft token{'s' if depth > 1 else ''}")
            check.toggled.connect(self._update_buttons)
            self.depth_checks.append(check)
            depths.addWidget(check)
        self.lookup_check = QCheckBox("prompt lookup")
        self.lookup_check.setChecked(True)
        self.lookup_check.setToolTip(
            f"Also benchmark prompt lookup ({DEFAULT_LOOKUP_TOKENS} drafts per step from "
            "n-grams of the prompt), and compare the methods per workload"
        )
        depths.addStretch(1)
        self.runs_spin = QSpinBox()
        self.runs_spin.setRange(1, 20)
        self.runs_spin.setValue(3)
        self.runs_spin.setToolTip("Measured rounds after one warm-up round")
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setRange(0, 4096)
        self.tokens_spin.setSingleStep(16)
        self.tokens_spin.setSpecialValueText("set default")
        self.tokens_spin.setToolTip("New tokens per prompt (each prompt set has its own default)")

        grid.addWidget(label("Model"), 0, 0)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model_combo, 1)
        model_row.addWidget(self.browse_button)
        grid.addLayout(model_row, 0, 1, 1, 3)
        grid.addWidget(label("Device"), 0, 4)
        grid.addWidget(self.device_combo, 0, 5)
        grid.addWidget(label("Prompt set"), 1, 0)
        grid.addWidget(self.set_combo, 1, 1)
        grid.addWidget(label("Draft depths"), 1, 2)
        grid.addLayout(depths, 1, 3)
        grid.addWidget(label("Runs"), 1, 4)
        grid.addWidget(self.runs_spin, 1, 5)
        # Its own row: beside the depths it is squeezed below its text at 1024 px.
        grid.addWidget(label("Also"), 2, 2)
        grid.addWidget(self.lookup_check, 2, 3)
        grid.addWidget(label("New tokens"), 2, 4)
        grid.addWidget(self.tokens_spin, 2, 5)
        grid.setColumnStretch(1, 2)
        grid.setColumnStretch(3, 1)

        self.validate_button = QPushButton("Validate")
        self.validate_button.setObjectName("primaryAction")
        self.validate_button.setToolTip(
            "Compare MTP with plain greedy decoding token for token (exact f32 numerics), at "
            "the deepest selected draft depth, then time both"
        )
        self.validate_button.clicked.connect(self._on_validate)
        self.bench_button = QPushButton("Benchmark")
        self.bench_button.setToolTip(
            "Plain decoding vs MTP at each selected depth (and prompt lookup), modes "
            "interleaved per round; the winner per prompt set is stored"
        )
        self.bench_button.clicked.connect(self._on_benchmark)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setFixedHeight(8)
        self.progress_bar.setVisible(False)
        self.status_label = QLabel("")
        self.status_label.setObjectName("muted")
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        actions = QHBoxLayout()
        actions.setSpacing(8)
        actions.addWidget(self.validate_button)
        actions.addWidget(self.bench_button)
        actions.addWidget(self.cancel_button)
        status = QVBoxLayout()
        status.setSpacing(2)
        status.addWidget(self.status_label)
        status.addWidget(self.progress_bar)
        actions.addSpacing(8)
        actions.addLayout(status, 1)
        grid.addLayout(actions, 2, 0, 1, 4)
        return frame

    def _build_history(self) -> QFrame:
        frame = QFrame()
        frame.setObjectName("benchHistory")
        frame.setMinimumWidth(240)
        layout = QVBoxLayout(frame)
        layout.setContentsMargins(0, 6, 10, 0)
        heading = QLabel("History")
        heading.setObjectName("sectionTitle")
        self.history_hint = QLabel("")
        self.history_hint.setObjectName("muted")
        self.history_hint.setWordWrap(True)
        self.history_list = QListWidget()
        self.history_list.setObjectName("benchHistoryList")
        self.history_list.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.history_list.setWordWrap(True)
        self.history_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.history_list.setIconSize(QSize(12, 12))
        self.history_list.currentItemChanged.connect(self._on_history_selected)
        layout.addWidget(heading)
        layout.addWidget(self.history_hint)
        layout.addWidget(self.history_list, 1)
        return frame

    def _build_results(self) -> QScrollArea:
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(12, 6, 4, 4)
        layout.setSpacing(10)

        self.banner = QFrame()
        self.banner.setObjectName("benchBanner")
        banner_layout = QVBoxLayout(self.banner)
        banner_layout.setContentsMargins(14, 10, 14, 10)
        banner_layout.setSpacing(4)
        self.banner_title = QLabel()
        self.banner_title.setObjectName("bannerTitle")
        self.banner_detail = QLabel()
        self.banner_detail.setWordWrap(True)
        self.banner_detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        banner_layout.addWidget(self.banner_title)
        banner_layout.addWidget(self.banner_detail)
        layout.addWidget(self.banner)

        view_widget = QWidget()
        view_row = FlowLayout(view_widget)  # wraps on a narrow window instead of clipping
        self.view_set_label = QLabel("Show prompt set")
        self.view_set_label.setObjectName("formLabel")
        self.view_set_combo = QComboBox()
        self.view_set_combo.currentIndexChanged.connect(self._on_view_set_changed)
        view_row.addWidget(self.view_set_label)
        view_row.addWidget(self.view_set_combo)
        export_label = QLabel("Export")
        export_label.setObjectName("formLabel")
        view_row.addWidget(export_label)
        self.export_md_button = QPushButton("Markdown…")
        self.export_md_button.clicked.connect(lambda: self._on_export("md"))
        self.export_json_button = QPushButton("JSON…")
        self.export_json_button.clicked.connect(lambda: self._on_export("json"))
        self.export_png_button = QPushButton("Charts (PNG)…")
        self.export_png_button.clicked.connect(lambda: self._on_export("png"))
        for button in (self.export_md_button, self.export_json_button, self.export_png_button):
            view_row.addWidget(button)
        layout.addWidget(view_widget)

        self.charts = QWidget()
        # Side by side when there is room, one above the other when not (titles stay whole).
        charts_layout = ResponsiveRow(self.charts, min_width=CHARTS_SIDE_BY_SIDE_MIN)
        charts_layout.setContentsMargins(0, 0, 0, 0)
        charts_layout.setSpacing(12)
        self.throughput_chart = ThroughputChart()
        self.acceptance_chart = AcceptanceChart()
        charts_layout.addWidget(self.throughput_chart, 3)
        charts_layout.addWidget(self.acceptance_chart, 2)
        layout.addWidget(self.charts)
        self.workload_chart = WorkloadChart()
        self.workload_chart.setVisible(False)
        layout.addWidget(self.workload_chart)

        self.table = QTableWidget()
        self.table.setObjectName("benchTable")
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setSizeAdjustPolicy(QAbstractItemView.SizeAdjustPolicy.AdjustToContents)
        self.table.setWordWrap(False)
        layout.addWidget(self.table)

        self.meta_label = QLabel()
        self.meta_label.setObjectName("muted")
        self.meta_label.setWordWrap(True)
        self.meta_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.meta_label)

        layout.addStretch(1)

        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(content)
        return scroll

    # --- public API ---

    @property
    def model_dir(self) -> Path | None:
        data = self.model_combo.currentData(_PATH_ROLE)
        return Path(data) if data else None

    @property
    def device(self) -> str:
        return self.device_combo.currentText() or "CPU"

    def set_models(self, models: Sequence[Path]) -> None:
        """The model folders to offer (e.g. the Models panel's usable models)."""
        current = self.model_dir
        for path in models:
            self._add_model(Path(path))
        if current is not None:
            self.set_model(current)

    def set_model(self, model_dir: Path) -> None:
        index = self._add_model(Path(model_dir))
        if index != self.model_combo.currentIndex():
            self.model_combo.setCurrentIndex(index)

    def set_devices(self, devices: Sequence[str]) -> None:
        current = self.device_combo.currentText()
        self.device_combo.clear()
        self.device_combo.addItems(list(devices) or ["CPU"])
        index = self.device_combo.findText(current)
        if index >= 0:
            self.device_combo.setCurrentIndex(index)

    def validate_model(self, path: Path, num_assistant_tokens: int | None = None) -> bool:
        """Select `path` and start validating it (one click from the models or chat panels),
        at `num_assistant_tokens` draft tokens (default: the deepest depth selected here).
        False if another run is still going."""
        if self.job.running:
            self._set_status("A run is already going; cancel it first.", "warning")
            return False
        self.set_model(path)
        return self._start_validation(num_assistant_tokens)

    def benchmark_model(self, path: Path) -> bool:
        if self.job.running:
            self._set_status("A run is already going; cancel it first.", "warning")
            return False
        self.set_model(path)
        return self._start_benchmark()

    def cancel(self) -> None:
        if self.job.running:
            self.job.cancel()
            self.cancel_button.setEnabled(False)
            self._set_status("Cancelling at the next decoding step…")

    def selected_depths(self) -> list[int]:
        return [i + 1 for i, check in enumerate(self.depth_checks) if check.isChecked()]

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        stopped = self.job.shutdown(timeout_ms)
        return self.io.shutdown(timeout_ms) and stopped

    def chart_image(self) -> QImage:
        """Both charts side by side, as saved by "Save charts as PNG"."""
        width, height, gap, caption_h = 560, 300, 16, 28
        left = self.throughput_chart.render_image(QSize(width, height))
        right = self.acceptance_chart.render_image(QSize(int(width * 0.75), height))
        ratio = left.devicePixelRatio()
        image = QImage(
            left.width() + right.width() + round(gap * ratio),
            max(left.height(), right.height()) + round(caption_h * ratio),
            QImage.Format.Format_ARGB32,
        )
        image.setDevicePixelRatio(ratio)
        image.fill(self.palette().base().color())
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(self.palette().text().color())
        painter.drawText(
            QRectF(8, 4, image.width() / ratio - 16, caption_h - 4),
            Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
            self._caption(),
        )
        painter.drawImage(0, caption_h, left)
        painter.drawImage(round(left.width() / ratio) + gap, caption_h, right)
        painter.end()
        if not self.workload_chart.has_data():
            return image
        # The methods-per-workload comparison goes underneath, full width.
        below = self.workload_chart.render_image(QSize(round(image.width() / ratio), height), ratio)
        combined = QImage(image.width(), image.height() + below.height(), image.format())
        combined.setDevicePixelRatio(ratio)
        combined.fill(self.palette().base().color())
        painter = QPainter(combined)
        painter.drawImage(0, 0, image)
        painter.drawImage(0, round(image.height() / ratio), below)
        painter.end()
        return combined

    def _caption(self) -> str:
        report = self.report
        if report is None:
            return ""
        kind = "MTP validation" if report["kind"] == "validate" else "MTP benchmark"
        when = local_time(report["created"], "%Y-%m-%d %H:%M")
        return f"{kind} · {report['model']['name']} · {report['device']} · {when}"

    # --- runs ---

    def _run_settings(self) -> tuple[Path, list[str | Path], int | None] | None:
        model = self.model_dir
        if model is None:
            self._set_status("Choose a model folder first.", "warning")
            return None
        spec = self.set_combo.currentData(_PATH_ROLE)
        if spec is None:
            self._set_status("The prompt sets are still loading…", "warning")
            return None
        if spec == ALL_SETS:
            specs: list[str | Path] = [
                self.set_combo.itemData(i, _PATH_ROLE)
                for i in range(self.set_combo.count())
                if self.set_combo.itemData(i, _PATH_ROLE) not in (ALL_SETS, OTHER_FILE)
            ]
        else:
            specs = [spec]
        tokens = self.tokens_spin.value() or None
        return model, specs, tokens

    def _start_validation(self, num_assistant_tokens: int | None = None) -> bool:
        settings = self._run_settings()
        depths = self.selected_depths()
        if settings is None:
            return False
        model, specs, tokens = settings
        return self.job.start_validation(
            model,
            specs[0],
            num_assistant_tokens=num_assistant_tokens or (max(depths) if depths else 1),
            max_new_tokens=tokens,
            device=self.device,
        )

    def _start_benchmark(self) -> bool:
        settings = self._run_settings()
        depths = self.selected_depths()
        if settings is None:
            return False
        if not depths:
            self._set_status("Select at least one draft depth.", "warning")
            return False
        model, specs, tokens = settings
        return self.job.start_benchmark(
            model,
            specs,
            depths=depths,
            runs=self.runs_spin.value(),
            max_new_tokens=tokens,
            device=self.device,
            lookup_tokens=DEFAULT_LOOKUP_TOKENS if self.lookup_check.isChecked() else None,
            cache_dir=app_paths().compile_cache_dir,
        )

    def _on_validate(self) -> None:
        self._start_validation()

    def _on_benchmark(self) -> None:
        self._start_benchmark()

    def _on_progress(self, progress: Progress) -> None:
        self.progress_bar.setRange(0, max(progress.total, 1))
        self.progress_bar.setValue(progress.done)
        self._set_status(progress.message)

    def _on_busy(self, busy: bool) -> None:
        self.progress_bar.setVisible(busy)
        if busy:
            self.progress_bar.setRange(0, 0)
        self.cancel_button.setEnabled(busy)
        for widget in (self.model_combo, self.browse_button, self.device_combo, self.set_combo):
            widget.setEnabled(not busy)
        self._update_buttons()
        self.busy_changed.emit(busy)

    def _on_finished(self, result: JobResult) -> None:
        report = result.report
        if result.kind == "bench":
            rec = report["recommendation"]
            self.recommendation_changed.emit(
                Path(report["model"]["path"]), report["device"], rec["depth"]
            )
            self._set_status(f"Benchmark finished in {report['duration_s']:.0f} s.", "ok")
        else:
            ok = report["summary"]["all_identical"]
            self._set_status(
                f"Validation finished in {report['duration_s']:.0f} s.", "ok" if ok else "error"
            )
        self._show_report(report)
        self._pending_select = result.path
        self._refresh_history()
        self.run_finished.emit(report)

    def _on_failed(self, error: UserFacingError) -> None:
        self._set_status(str(error), "error")

    def _on_cancelled(self) -> None:
        self._set_status("Cancelled. Nothing was saved.", "warning")

    def _update_buttons(self) -> None:
        busy = self.job.running
        has_model = self.model_dir is not None
        self.validate_button.setEnabled(not busy and has_model)
        self.bench_button.setEnabled(not busy and has_model and bool(self.selected_depths()))

    def _set_status(self, text: str, status: str | None = None) -> None:
        color = STATUS_COLORS.get(status or "", "")
        self.status_label.setStyleSheet(f"color: {color};" if color else "")
        self.status_label.setText(text)
        self.status_label.setToolTip(text)

    # --- models and prompt sets ---

    def _add_model(self, path: Path) -> int:
        for index in range(self.model_combo.count()):
            if Path(self.model_combo.itemData(index, _PATH_ROLE)) == path:
                return index
        label = display_name(path)
        if is_demo_model(path):
            label += " (counts and repeats)"
        self.model_combo.addItem(label, str(path))
        index = self.model_combo.count() - 1
        self.model_combo.setItemData(index, str(path), Qt.ItemDataRole.ToolTipRole)
        return index

    def _on_browse(self) -> None:
        chosen = self.dialogs.choose_model_dir(self)
        if chosen is not None:
            self.set_model(chosen)

    def _on_model_changed(self) -> None:
        self._update_buttons()
        self._select_default_set()
        self._refresh_history()

    def _on_prompt_sets(self, sets: list[tuple[str, str]]) -> None:
        self.set_combo.clear()
        for name, title in sets:
            self.set_combo.addItem(title, name)
        if len(sets) > 1:
            self.set_combo.addItem("All built-in sets (benchmark)", ALL_SETS)
        self.set_combo.addItem("Prompt file…", OTHER_FILE)
        self._select_default_set()

    def _select_default_set(self) -> None:
        if self._set_touched or self.model_dir is None:
            return
        wanted = "demo" if is_demo_model(self.model_dir) else "chat"
        index = self.set_combo.findData(wanted, _PATH_ROLE)
        if index >= 0:
            self.set_combo.setCurrentIndex(index)

    def _on_set_activated(self, index: int) -> None:
        self._set_touched = True
        if self.set_combo.itemData(index, _PATH_ROLE) != OTHER_FILE:
            return
        chosen = self.dialogs.choose_prompt_file(self)
        if chosen is None:
            self.set_combo.setCurrentIndex(0)
            return
        existing = self.set_combo.findData(str(chosen), _PATH_ROLE)
        if existing < 0:
            self.set_combo.insertItem(index, chosen.name, str(chosen))
            existing = index
        self.set_combo.setCurrentIndex(existing)

    def _on_io_error(self, exc: Exception) -> None:
        self._set_status(str(exc), "error")

    # --- history ---

    def _refresh_history(self) -> None:
        model = self.model_dir
        if model is None:
            return
        from qwen_mtp_desktop.core.reports import list_reports

        self.io.submit(lambda: (model, list_reports(model)), self._on_history, self._on_io_error)

    def _on_history(self, result: tuple[Path, list[ReportEntry]]) -> None:
        model, entries = result
        if model != self.model_dir:
            return  # the user moved on to another model meanwhile
        self.history = entries
        self.history_list.blockSignals(True)
        self.history_list.clear()
        select: QListWidgetItem | None = None
        for entry in entries:
            kind = "Validation" if entry.kind == "validate" else "Benchmark"
            item = QListWidgetItem(
                f"{kind} · {local_time(entry.created)} · {entry.device}\n{entry.headline}"
            )
            item.setData(_PATH_ROLE, str(entry.path))
            item.setIcon(_dot(STATUS_COLORS["ok" if entry.ok else "warning"]))
            item.setToolTip(str(entry.path))
            self.history_list.addItem(item)
            if self._pending_select is not None and entry.path == self._pending_select:
                select = item
        self.history_list.blockSignals(False)
        count = len(entries)
        self.history_hint.setText(
            f"{count} saved run{'s' if count != 1 else ''} for {display_name(model)}"
            if count
            else f"No runs yet for {display_name(model)}."
        )
        if select is not None:
            self.history_list.blockSignals(True)
            self.history_list.setCurrentItem(select)
            self.history_list.blockSignals(False)
            self._pending_select = None
        elif self.report is None or Path(self.report["model"]["path"]) != model.resolve():
            if entries:
                self.history_list.setCurrentRow(0)
            else:
                self._show_report(None)
        self.history_loaded.emit(entries)

    def _on_history_selected(self, item: QListWidgetItem | None) -> None:
        if item is None:
            return
        from qwen_mtp_desktop.core.reports import load_report

        path = Path(item.data(_PATH_ROLE))
        self.io.submit(lambda: load_report(path), self._show_report, self._on_io_error)

    # --- showing a report ---

    def _show_report(self, report: dict[str, Any] | None) -> None:
        self.report = report
        has = report is not None
        for widget in (
            self.export_md_button,
            self.export_json_button,
            self.export_png_button,
        ):
            widget.setEnabled(has)
        if report is None:
            self.banner.setProperty("status", "info")
            self.banner_title.setText("No results yet")
            self.banner_detail.setText(
                "Validate first: it proves MTP changes nothing in the output. Then Benchmark "
                "finds the fastest draft depth on this computer."
            )
            self.view_set_label.setVisible(False)
            self.view_set_combo.setVisible(False)
            self.throughput_chart.set_bars([])
            self.acceptance_chart.set_series([])
            self.workload_chart.set_workloads([])
            self.workload_chart.setVisible(False)
            self.table.clear()
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            self.table.setVisible(False)
            self.meta_label.setText("")
            self._repolish(self.banner)
            return
        status, title, detail = verdict(report)
        self.banner.setProperty("status", status)
        self.banner_title.setText(title)
        self.banner_detail.setText(keep_units(detail))
        self._repolish(self.banner)
        sets = [e["prompt_set"] for e in report.get("per_set", [])]
        self.view_set_combo.blockSignals(True)
        self.view_set_combo.clear()
        if len(sets) > 1:
            self.view_set_combo.addItem("All sets", None)
            for name in sets:
                self.view_set_combo.addItem(name, name)
        self.view_set_combo.blockSignals(False)
        self.view_set_label.setVisible(len(sets) > 1)
        self.view_set_combo.setVisible(len(sets) > 1)
        workloads = workload_data(report)
        self.workload_chart.set_workloads(workloads)
        self.workload_chart.setVisible(bool(workloads))
        self._show_set(None)
        self.meta_label.setText(keep_units(self._meta_text(report)))
        self.report_shown.emit(report)

    def _on_view_set_changed(self) -> None:
        self._show_set(self.view_set_combo.currentData())

    def _show_set(self, prompt_set: str | None) -> None:
        report = self.report
        if report is None:
            return
        bars, series = chart_data(report, prompt_set)
        if report["kind"] != "validate":
            self.throughput_chart.empty_text = "No results"
        elif report["summary"]["all_identical"]:
            self.throughput_chart.empty_text = "Not timed (validation ran without timing)"
        else:
            self.throughput_chart.empty_text = "Not timed: the outputs differ"
        self.throughput_chart.set_bars(bars)
        self.acceptance_chart.set_series(series)
        if report["kind"] == "validate":
            self._fill_validation_table(report)
        else:
            modes = report["modes"]
            if prompt_set is not None:
                modes = next(e["modes"] for e in report["per_set"] if e["prompt_set"] == prompt_set)
            self._fill_bench_table(modes, report["recommendation"]["depth"])

    def _fill_table(self, headers: list[str], rows: list[list[str]], bold_row: int = -1) -> None:
        self.table.clear()
        self.table.setVisible(True)
        self.table.setColumnCount(len(headers))
        self.table.setRowCount(len(rows))
        self.table.setHorizontalHeaderLabels(headers)
        for column, name in enumerate(headers):
            header_item = self.table.horizontalHeaderItem(column)
            if header_item is not None:
                header_item.setToolTip(COLUMN_HELP.get(name, ""))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                if c == 0:
                    item.setToolTip(text)  # the full mode name where the column is narrow
                if c > 0:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if r == bold_row:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                if text in ("no", "differs"):
                    item.setForeground(QColor(STATUS_COLORS["error"]))
                self.table.setItem(r, c, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        first = self.table.horizontalHeaderItem(0)
        if first is not None:
            first.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        self.table.setWordWrap(True)
        self.table.resizeColumnsToContents()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.resizeRowsToContents()
        height = self.table.horizontalHeader().height() + 4
        height += sum(self.table.rowHeight(r) for r in range(len(rows)))
        self.table.setFixedHeight(height)

    def _fill_bench_table(self, modes: list[dict[str, Any]], best: int | None) -> None:
        rows = []
        bold = -1
        for index, mode in enumerate(modes):
            if mode["depth"] is not None and mode["depth"] == best:
                bold = index
            speedup = fmt_spread(mode["speedup"], "{:.2f}x") if mode["depth"] else "1.00x"
            rows.append(
                [
                    mode["label"],
                    fmt_spread(mode["decode_tokens_per_s"]),
                    speedup,
                    fmt_spread(mode["ttft_s"], "{:.0f}", 1000),
                    fmt(mode["acceptance_rate"], "{:.0%}"),
                    fmt(mode["mean_accepted_per_step"], "{:.2f}"),
                    ", ".join(f"{p:.0%}" for p in mode["acceptance_by_position"]) or "–",
                    "yes" if mode["identical"] else "no",
                ]
            )
        self._fill_table(
            [
                "Mode",
                "Decode tok/s (min–max)",
                "Speed-up (min–max)",
                "TTFT ms",
                "Accepted",
                "Per step",
                "By position",
                "Identical",
            ],
            rows,
            bold,
        )

    def _fill_validation_table(self, report: dict[str, Any]) -> None:
        rows = []
        for result in report["results"]:
            timing = result["timing"]
            div = result["divergence"]
            rows.append(
                [
                    result["prompt"].replace("\n", " ")[:70],
                    "yes" if result["identical"] else "no",
                    "–" if div is None else f"token {div['position']}",
                    fmt(result["mtp"]["acceptance_rate"], "{:.0%}"),
                    fmt(timing and timing["baseline"]["decode_tokens_per_s"]),
                    fmt(timing and timing["mtp"]["decode_tokens_per_s"]),
                    fmt(timing and timing["speedup"], "{:.2f}x"),
                ]
            )
        self._fill_table(
            [
                "Prompt",
                "Identical",
                "First difference",
                "Accepted",
                "Plain tok/s",
                "MTP tok/s",
                "Speed-up",
            ],
            rows,
        )

    def _meta_text(self, report: dict[str, Any]) -> str:
        model = report["model"]
        versions = report["versions"]
        runtime = ", ".join(
            f"{name} {versions.get(name) or '–'}"
            for name in ("openvino", "openvino-genai", "optimum-intel", "transformers", "nncf")
        )
        mtp = model.get("mtp_precision") or "–"
        lm = model["precisions"].get("language_model") or "–"
        when = local_time(report["created"], "%Y-%m-%d %H:%M")
        if report["kind"] == "bench":
            settings = report["settings"]
            what = (
                f"{settings['runs']} run{'s' if settings['runs'] != 1 else ''} after "
                f"{settings['warmup']} warm-up, depths "
                f"{', '.join(map(str, settings['depths']))}, "
                f"{'exact f32' if report['numerics'] == 'exact' else 'default'} numerics"
            )
            what += f", peak memory {format_bytes(report['memory']['peak_rss_bytes'])}"
        else:
            what = f"{report['settings']['max_new_tokens']} new tokens, exact f32 numerics"
        return (
            f"{model['name']} on {report['device']} · {when} · {what}\n"
            f"Language model {lm} · MTP head {mtp} · source "
            f"{model['source_model_id'] or 'unknown'}\n{runtime}"
        )

    @staticmethod
    def _repolish(widget: QWidget) -> None:
        style = widget.style()
        style.unpolish(widget)
        style.polish(widget)

    # --- export ---

    def _on_export(self, fmt_name: str) -> None:
        report = self.report
        if report is None:
            return
        stem = f"{report['model']['key']}-{report['id']}"
        filters = {
            "md": "Markdown (*.md)",
            "json": "JSON (*.json)",
            "png": "PNG image (*.png)",
        }[fmt_name]
        suggested = Path.home() / f"{stem}.{fmt_name}"
        chosen = self.dialogs.choose_save_path(self, "Export the report", suggested, filters)
        if chosen is None:
            return
        if chosen.suffix.lower() != f".{fmt_name}":
            chosen = chosen.with_name(chosen.name + f".{fmt_name}")
        if fmt_name == "png":
            from qwen_mtp_desktop.core.safe_files import UnsafeFileError, check_output_target

            try:
                check_output_target(chosen)
            except UnsafeFileError as exc:
                self._set_status(str(exc), "error")
                return
            if self.chart_image().save(str(chosen)):
                self._set_status(f"Charts saved to {chosen}", "ok")
            else:
                self._set_status(f"Could not write {chosen}", "error")
            return
        from qwen_mtp_desktop.core.report_markdown import export_report

        self.io.submit(
            lambda: export_report(report, chosen),
            lambda path: self._set_status(f"Report saved to {path}", "ok"),
            lambda exc: self._set_status(f"Could not write {chosen}: {exc}", "error"),
        )
