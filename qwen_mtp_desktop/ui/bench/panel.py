"""The Benchmark page: validate MTP (or prompt lookup) against plain decoding, benchmark draft
depths, compare runs. This module holds the run setup, the history and the runs; the results
(banner, charts, table) are ui.bench.results, its look ui.bench.look, its dialogs
ui.bench.dialogs.

Threads: runs go to a `BenchJob` (each in an engine host process of its own); listing, loading
and exporting reports go to the panel's "bench-io" TaskRunner. The GUI thread only draws.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QResizeEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.decoding.method import DEFAULT_LOOKUP_DRAFTS, DecodingMethod
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.hosting.protocol import MeasureProgress
from qwen_mtp_desktop.core.measure.records import Report
from qwen_mtp_desktop.core.measure.reports import ReportEntry
from qwen_mtp_desktop.core.measure.validate import method_label
from qwen_mtp_desktop.core.measure.verdicts import row_method
from qwen_mtp_desktop.core.models.library import display_name, is_demo_model
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.bench.charts import AcceptanceChart, ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.bench.dialogs import BenchDialogs
from qwen_mtp_desktop.ui.bench.history import BenchHistory
from qwen_mtp_desktop.ui.bench.look import STATUS_COLORS, bench_style
from qwen_mtp_desktop.ui.bench.report_view import local_time
from qwen_mtp_desktop.ui.bench.results import BenchResults
from qwen_mtp_desktop.workers.bench_job import BenchJob, JobResult
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

ALL_SETS = "*"
OTHER_FILE = "file"
#: Narrower than this, the History is a picker above the results (a 1024 px window's panel is
#: 874 px wide, a 1280 px one's 1130: beside a 270 px list the results keep their two charts).
STACK_HISTORY_BELOW = 1100
_PATH_ROLE = Qt.ItemDataRole.UserRole
RUN_PROCESS_NOTE = (
    "Each run loads the model twice more (plain and MTP) in a process of its own, beside the "
    "chat's engine, and gives the memory back when it ends. A crash there stops the run only."
)

__all__ = ["ALL_SETS", "OTHER_FILE", "STATUS_COLORS", "BenchDialogs", "BenchPanel"]


def _list_prompt_sets() -> list[tuple[str, str]]:
    from qwen_mtp_desktop.core.measure.prompt_sets import builtin_prompt_sets

    return [(s.name, s.title) for s in builtin_prompt_sets()]


# --- the panel -----------------------------------------------------------------------------


class BenchPanel(QWidget):
    """Signals:
    run_finished(dict): a validation or benchmark report (already saved to the history).
    recommendation_changed(Path, str, DecodingMethod): a benchmark stored a new recommendation
        for (model folder, device): where Auto starts, an MTP depth or plain decoding.
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
        self.setStyleSheet(bench_style())
        self.dialogs = dialogs or BenchDialogs()
        # The app hands its threads in (workers.threads); a panel on its own makes its own.
        self.io = io or TaskRunner("bench-io", self)
        self.job = job or BenchJob(self, io=self.io)
        self.report: Report | None = None
        self.history: list[ReportEntry] = []
        self._set_touched = False
        self._model_touched = False
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

        self.history_view = BenchHistory()
        self.history_view.list.currentItemChanged.connect(self._on_history_selected)
        outer.addWidget(self.history_view.bar)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        self._splitter = splitter
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.history_view.frame)
        self.results = BenchResults()
        self.results.export_requested.connect(self._on_export)
        splitter.addWidget(self.results)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([270, 880])
        outer.addWidget(splitter, 1)

        self.job.progress.connect(self._on_progress)
        self.job.finished.connect(self._on_finished)
        self.job.failed.connect(self._on_failed)
        self.job.cancelled.connect(self._on_cancelled)
        self.job.busy_changed.connect(self._on_busy)
        self.job.memory.connect(self._on_memory)

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

    # The results' widgets, under the names the panel has always had (tests and the window
    # read them here).
    @property
    def history_list(self) -> QListWidget:
        return self.history_view.list

    @property
    def history_hint(self) -> QLabel:
        return self.history_view.hint

    @property
    def banner(self) -> QFrame:
        return self.results.banner

    @property
    def banner_title(self) -> QLabel:
        return self.results.banner_title

    @property
    def banner_detail(self) -> QLabel:
        return self.results.banner_detail

    @property
    def view_set_combo(self) -> QComboBox:
        return self.results.view_set_combo

    @property
    def throughput_chart(self) -> ThroughputChart:
        return self.results.throughput_chart

    @property
    def acceptance_chart(self) -> AcceptanceChart:
        return self.results.acceptance_chart

    @property
    def workload_chart(self) -> WorkloadChart:
        return self.results.workload_chart

    @property
    def table(self) -> QTableWidget:
        return self.results.table

    @property
    def meta_label(self) -> QLabel:
        return self.results.meta_label

    @property
    def export_md_button(self) -> QPushButton:
        return self.results.export_md_button

    @property
    def export_json_button(self) -> QPushButton:
        return self.results.export_json_button

    @property
    def export_png_button(self) -> QPushButton:
        return self.results.export_png_button

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
        # A model the user picks here stays picked; until then the panel follows the chat's.
        self.model_combo.activated.connect(lambda _index: setattr(self, "_model_touched", True))
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
            f"Also benchmark prompt lookup ({DEFAULT_LOOKUP_DRAFTS} drafts per step from "
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
        # 0 is "as many as each prompt set asks for" (each set names its own).
        self.tokens_spin.setSpecialValueText("per prompt set")
        self.tokens_spin.setToolTip(
            "New tokens per prompt; 'per prompt set': as many as each prompt set asks for"
        )

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
        self.validate_lookup_button = QPushButton("Validate lookup")
        self.validate_lookup_button.setToolTip(
            f"Compare prompt lookup ({DEFAULT_LOOKUP_DRAFTS} drafts per step) with plain greedy "
            "decoding token for token on the selected prompt set, and measure its acceptance "
            "there (the chat compares its lookup answers with it, per workload)"
        )
        self.validate_lookup_button.clicked.connect(self._on_validate_lookup)
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
        self.status_label.setWordWrap(True)  # an error and its fix are read whole, not cut
        actions = QHBoxLayout()
        actions.setSpacing(8)
        actions.addWidget(self.validate_button)
        actions.addWidget(self.validate_lookup_button)
        actions.addWidget(self.bench_button)
        actions.addWidget(self.cancel_button)
        # What the run's own process holds: the model twice more, apart from the chat's.
        self.memory_label = QLabel("")
        self.memory_label.setObjectName("muted")
        self.memory_label.setToolTip(RUN_PROCESS_NOTE)
        self.memory_label.setVisible(False)
        status_line = QHBoxLayout()
        status_line.setSpacing(8)
        status_line.addWidget(self.status_label, 1)
        status_line.addWidget(self.memory_label)
        status = QVBoxLayout()
        status.setSpacing(2)
        status.addLayout(status_line)
        status.addWidget(self.progress_bar)
        actions.addSpacing(8)
        actions.addLayout(status, 1)
        grid.addLayout(actions, 3, 0, 1, 6)  # its own row: the status text needs the width
        return frame

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

    def follow_chat_model(self, model_dir: Path) -> None:
        """The chat loaded `model_dir`: measure that one by default, unless the user chose a
        model here or a run is going."""
        if not self._model_touched and not self.job.running:
            self.set_model(model_dir)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        # On a small window the History is a one-line picker above the results, which keep
        # the whole width and height for their table and charts.
        self.history_view.set_compact(self.width() < STACK_HISTORY_BELOW)

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

    def validate_model(
        self,
        path: Path,
        method: DecodingMethod | None = None,
        *,
        prompt_set: str | None = None,
    ) -> bool:
        """Select `path` and start validating `method` on it (one click from the models or chat
        panels; default: MTP at the deepest depth selected here), on the built-in `prompt_set`
        when given (the chat's health check re-validates lookup on the workload it compared).
        False if another run is still going."""
        if self.job.running:
            self._set_status("A run is already going; cancel it first.", "warning")
            return False
        self.set_model(path)
        if prompt_set is not None:
            index = self.set_combo.findData(prompt_set, _PATH_ROLE)
            if index < 0:
                self._set_status(f"There is no built-in prompt set called {prompt_set!r}.")
                return False
            self._set_touched = True
            self.set_combo.setCurrentIndex(index)
        return self._start_validation(method)

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
        return self.results.chart_image(self._caption())

    def _caption(self) -> str:
        report = self.report
        if report is None:
            return ""
        kind = "MTP benchmark"
        if report["kind"] == "validate":
            kind = f"{method_label(report['settings'])} validation"
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

    def _start_validation(self, method: DecodingMethod | None = None) -> bool:
        settings = self._run_settings()
        depths = self.selected_depths()
        if settings is None:
            return False
        model, specs, tokens = settings
        return self.job.start_validation(
            model,
            specs[0],
            method=method or DecodingMethod.mtp(max(depths, default=1)),
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
            lookup=DecodingMethod.lookup() if self.lookup_check.isChecked() else None,
            cache_dir=app_paths().compile_cache_dir,
        )

    def _on_validate(self) -> None:
        self._start_validation()

    def _on_validate_lookup(self) -> None:
        self._start_validation(DecodingMethod.lookup())

    def _on_benchmark(self) -> None:
        self._start_benchmark()

    def _on_progress(self, progress: MeasureProgress) -> None:
        self.progress_bar.setRange(0, max(progress.total, 1))
        self.progress_bar.setValue(progress.done)
        self._set_status(progress.message)

    def _on_memory(self, rss: int, peak: int) -> None:
        self.memory_label.setText(f"Run's process: {format_bytes(rss)}")
        self.memory_label.setToolTip(
            f"{format_bytes(rss)} now, {format_bytes(peak)} at most. {RUN_PROCESS_NOTE}"
        )
        self.memory_label.setVisible(True)

    def _on_busy(self, busy: bool) -> None:
        self.progress_bar.setVisible(busy)
        if not busy:
            self.memory_label.setVisible(False)
        if busy:
            self.progress_bar.setRange(0, 0)
        self.cancel_button.setEnabled(busy)
        for widget in (self.model_combo, self.browse_button, self.device_combo, self.set_combo):
            widget.setEnabled(not busy)
        self._update_buttons()
        self.busy_changed.emit(busy)

    def _on_finished(self, result: JobResult) -> None:
        report = result.report
        if report["kind"] == "bench":
            rec = report["recommendation"]
            self.recommendation_changed.emit(
                Path(report["model"]["path"]), report["device"], row_method(rec)
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
        self.validate_lookup_button.setEnabled(not busy and has_model)
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
            self._model_touched = True
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
        from qwen_mtp_desktop.core.measure.reports import list_reports

        self.io.submit(lambda: (model, list_reports(model)), self._on_history, self._on_io_error)

    def _on_history(self, result: tuple[Path, list[ReportEntry]]) -> None:
        model, entries = result
        if model != self.model_dir:
            return  # the user moved on to another model meanwhile
        self.history = entries
        if self.history_view.fill(entries, display_name(model), self._pending_select):
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
        from qwen_mtp_desktop.core.measure.reports import load_report

        path = Path(item.data(_PATH_ROLE))
        self.io.submit(lambda: load_report(path), self._show_report, self._on_io_error)

    # --- showing a report ---

    def _show_report(self, report: Report | None) -> None:
        self.report = report
        self.results.show_report(report)
        if report is not None:
            self.report_shown.emit(report)

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
            from qwen_mtp_desktop.core.files.safe_files import UnsafeFileError, check_output_target

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
        from qwen_mtp_desktop.core.measure.report_markdown import export_report

        self.io.submit(
            lambda: export_report(report, chosen),
            lambda path: self._set_status(f"Report saved to {path}", "ok"),
            lambda exc: self._set_status(f"Could not write {chosen}: {exc}", "error"),
        )
