"""The export wizard: source -> preflight checklist -> options -> run (live log, progress, verify).

Threads: preflight (reading headers, maybe asking the hub) runs on the TaskRunner given to the
panel; exports and toolkit installs run on the panel's ExportQueue thread, one at a time, and keep
running when another page of the app is shown. The GUI thread only updates widgets.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.export.checkpoint import CheckpointInfo, inspect_checkpoint_folder
from qwen_mtp_desktop.core.export.estimate import estimate_export
from qwen_mtp_desktop.core.export.job import ExportOutcome, ExportRequest
from qwen_mtp_desktop.core.export.options import (
    ExportOptions,
    ExportSource,
    GroupSizeFallback,
    MtpWeightFormat,
    WeightFormat,
    default_destination,
    parse_source,
)
from qwen_mtp_desktop.core.export.preflight import PreflightReport, run_preflight
from qwen_mtp_desktop.core.export.progress import (
    ProgressEvent,
    pip_stage,
    python_warning_lines,
)
from qwen_mtp_desktop.core.export.staging import cleanup_stale_exports
from qwen_mtp_desktop.core.export.supervisor import ProcessStats
from qwen_mtp_desktop.core.export.toolkit import (
    install_command,
    installed_versions,
    toolkit_missing,
)
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.export.widgets import (
    FALLBACK_LABELS,
    FALLBACK_TEXT,
    MTP_FORMAT_TEXT,
    MTP_TRADE_OFF,
    TRUST_REMOTE_CODE_TEXT,
    WEIGHT_FORMAT_TEXT,
    Checklist,
    ExportDialogs,
    panel_style,
    status_pixmap,
)
from qwen_mtp_desktop.workers.export_job import (
    ExportQueue,
    InstallOutcome,
    InstallRequest,
)
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

STEPS = ("Source", "Check", "Options", "Export")
LOG_LINE_CAP = 2000
GROUP_SIZES = (("128", 128), ("64", 64), ("32", 32), ("16", 16), ("per channel", -1))
MTP_LABELS: tuple[tuple[MtpWeightFormat, str], ...] = (
    ("default", "optimum-intel's choice"),
    ("same", "Same as the main model"),
    ("none", "No compression (FP16)"),
    ("int8", "INT8"),
    ("int4", "INT4"),
)


@dataclass
class PreflightEnvironment:
    """What preflight measures; tests inject these (None = the real machine)."""

    versions: Callable[[], Mapping[str, str | None]] | None = None
    free_bytes: Callable[[Path], int] | None = None
    memory: Callable[[], tuple[int | None, int | None]] | None = None


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}:" if hours else "") + f"{rest // 60:02d}:{rest % 60:02d}"


def _label(text: str = "", name: str | None = None, wrap: bool = True) -> QLabel:
    label = QLabel(text)
    if name:
        label.setObjectName(name)
    label.setWordWrap(wrap)
    return label


def _button_row(*widgets: QWidget, stretch_first: bool = True) -> QHBoxLayout:
    row = QHBoxLayout()
    row.setSpacing(8)
    if stretch_first:
        row.addStretch(1)
    for widget in widgets:
        row.addWidget(widget)
    return row


class ExportPanel(QWidget):
    """The "Export" page of the main window.

    Signals:
        open_in_chat(Path): the user wants to chat with a freshly exported model.
        show_in_models(Path): the user wants to see it in the Models panel.
        model_exported(Path): an export finished and was moved into place (rescan models).
    """

    open_in_chat = Signal(object)
    show_in_models = Signal(object)
    model_exported = Signal(object)

    def __init__(
        self,
        runner: TaskRunner,
        models_dir: Path,
        queue: ExportQueue | None = None,
        parent: QWidget | None = None,
        *,
        dialogs: ExportDialogs | None = None,
        environment: PreflightEnvironment | None = None,
        verify_generation: bool = True,
        cleanup_at_start: bool = True,
    ) -> None:
        super().__init__(parent)
        self.setStyleSheet(panel_style())
        self._runner = runner
        self._models_dir = models_dir
        self._owns_queue = queue is None
        self.jobs = queue or ExportQueue(parent=self)
        self._dialogs = dialogs or ExportDialogs()
        self._env = environment or PreflightEnvironment()
        self._verify_generation = verify_generation
        self._versions: Mapping[str, str | None] | None = None
        self._source: ExportSource | None = None
        self._checkpoint: CheckpointInfo | None = None
        self.report: PreflightReport | None = None
        self._destination_edited = False
        self._preflight_serial = 0
        self._job_id: int | None = None
        self._install_id: int | None = None
        self._job_started = 0.0
        self.last_outcome: ExportOutcome | None = None
        self._result_path: Path | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(32, 24, 32, 20)
        outer.setSpacing(12)
        header = QHBoxLayout()
        title = _label("Export a model", "wizardTitle", wrap=False)
        header.addWidget(title)
        header.addStretch(1)
        self.step_labels: list[QLabel] = []
        for index, name in enumerate(STEPS):
            step = _label(f"{index + 1}  {name}", "stepLabel", wrap=False)
            self.step_labels.append(step)
            header.addWidget(step)
        outer.addLayout(header)
        subtitle = _label(
            "Turn a Qwen3.5 checkpoint into an OpenVINO model with its MTP head, compressed "
            "and verified.",
            "hint",
        )
        outer.addWidget(subtitle)

        self.pages = QStackedWidget()
        self.source_page = self._build_source_page()
        self.check_page = self._build_check_page()
        self.options_page = self._build_options_page()
        self.run_page = self._build_run_page()
        for page in (self.source_page, self.check_page, self.options_page, self.run_page):
            self.pages.addWidget(page)
        outer.addWidget(self.pages, 1)

        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._tick)
        self.jobs.started.connect(self._on_job_started)
        self.jobs.lines.connect(self._on_lines)
        self.jobs.progress.connect(self._on_progress)
        self.jobs.stats.connect(self._on_stats)
        self.jobs.finished.connect(self._on_finished)
        self.jobs.busy_changed.connect(self._update_queue_label)
        self.show_page(0)
        self._refresh_versions()
        if cleanup_at_start:
            self._runner.submit(lambda: cleanup_stale_exports([models_dir]), self._on_cleaned)

    # --- page construction ----------------------------------------------------------------

    def _scroll(self, content: QWidget) -> QScrollArea:
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setWidget(content)
        return area

    def _build_source_page(self) -> QWidget:
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(0, 0, 0, 0)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 4, 8, 4)
        layout.setSpacing(10)
        layout.addWidget(_label("Choose a checkpoint", "pageTitle"))
        layout.addWidget(
            _label(
                "A Qwen3.5 or Qwen3.5-MoE checkpoint that still has its MTP head (mtp.* "
                "weights), from the Hugging Face hub or a folder on this computer.",
                "hint",
            )
        )
        self.source_group = QButtonGroup(self)
        self.hub_radio = QRadioButton("Hugging Face model id")
        self.folder_radio = QRadioButton("Local checkpoint folder")
        self.source_group.addButton(self.hub_radio)
        self.source_group.addButton(self.folder_radio)
        self.hub_radio.setChecked(True)

        layout.addWidget(self.hub_radio)
        hub_row = QHBoxLayout()
        hub_row.setContentsMargins(24, 0, 0, 0)
        self.hub_edit = QLineEdit()
        self.hub_edit.setPlaceholderText("Qwen/Qwen3.5-0.8B")
        self.revision_edit = QLineEdit()
        self.revision_edit.setPlaceholderText("revision (optional)")
        self.revision_edit.setMaximumWidth(180)
        hub_row.addWidget(self.hub_edit, 1)
        hub_row.addWidget(self.revision_edit)
        layout.addLayout(hub_row)
        hub_hint = _label(
            "Downloaded into the standard Hugging Face cache (an interrupted download resumes); "
            "a model already in the cache is used without going online.",
            "hint",
        )
        hub_hint.setContentsMargins(24, 0, 0, 0)
        layout.addWidget(hub_hint)

        layout.addSpacing(4)
        layout.addWidget(self.folder_radio)
        folder_row = QHBoxLayout()
        folder_row.setContentsMargins(24, 0, 0, 0)
        self.folder_edit = QLineEdit()
        self.folder_edit.setPlaceholderText("Folder with config.json and model.safetensors")
        self.browse_source = QPushButton("Browse…")
        self.browse_source.clicked.connect(self._browse_source)
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(self.browse_source)
        layout.addLayout(folder_row)
        self.hub_edit.textEdited.connect(lambda _text: self.hub_radio.setChecked(True))
        self.folder_edit.textEdited.connect(lambda _text: self.folder_radio.setChecked(True))
        self.hub_edit.textChanged.connect(self._source_changed)
        self.folder_edit.textChanged.connect(self._source_changed)
        self.source_group.buttonToggled.connect(lambda *_args: self._source_changed())

        layout.addSpacing(4)
        self.trust_check = QCheckBox("Trust remote code")
        self.trust_check.setChecked(False)
        layout.addWidget(self.trust_check)
        trust_hint = _label(TRUST_REMOTE_CODE_TEXT, "hint")
        trust_hint.setContentsMargins(24, 0, 0, 0)
        layout.addWidget(trust_hint)

        self.toolkit_banner = self._build_toolkit_banner()
        layout.addWidget(self.toolkit_banner)
        self.source_error = _label("", "checkFix")
        self.source_error.setStyleSheet("color: #d93025;")
        self.source_error.hide()
        layout.addWidget(self.source_error)
        layout.addStretch(1)
        outer.addWidget(self._scroll(content), 1)
        self.check_button = QPushButton("Check checkpoint")
        self.check_button.setObjectName("primaryAction")
        self.check_button.clicked.connect(self.run_check)
        outer.addLayout(_button_row(self.check_button))
        self._source_changed()
        return page

    def _build_toolkit_banner(self) -> QFrame:
        banner = QFrame()
        banner.setObjectName("toolkitBanner")
        layout = QVBoxLayout(banner)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(8)
        head = QHBoxLayout()
        icon = QLabel()
        icon.setPixmap(status_pixmap("warn"))
        head.addWidget(icon)
        head.addWidget(_label("Export toolkit not installed", "checkTitle", wrap=False))
        head.addStretch(1)
        layout.addLayout(head)
        self.toolkit_text = _label(
            "Exporting needs optimum-intel, transformers, nncf and torch (several GB). Chat "
            "works without them. The app can install them into its own Python environment "
            "with:",
        )
        layout.addWidget(self.toolkit_text)
        self.command_label = _label("", "commandLine")
        self.command_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.command_label)
        self.install_progress = QProgressBar()
        self.install_progress.setRange(0, 0)
        self.install_progress.setTextVisible(False)
        self.install_progress.setMaximumHeight(6)
        self.install_progress.hide()
        layout.addWidget(self.install_progress)
        self.install_status = _label("", "hint")
        self.install_status.hide()
        layout.addWidget(self.install_status)
        self.install_log = QPlainTextEdit()
        self.install_log.setObjectName("exportLog")
        self.install_log.setReadOnly(True)
        self.install_log.setMaximumBlockCount(500)
        self.install_log.setFixedHeight(110)
        self.install_log.hide()
        layout.addWidget(self.install_log)
        self.install_button = QPushButton("Install export toolkit")
        self.install_button.setObjectName("primaryAction")
        self.install_button.clicked.connect(self.install_toolkit)
        self.install_cancel = QPushButton("Cancel")
        self.install_cancel.clicked.connect(self._cancel_install)
        self.install_cancel.hide()
        layout.addLayout(_button_row(self.install_cancel, self.install_button))
        banner.hide()
        return banner

    def _build_check_page(self) -> QWidget:
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(10)
        outer.addWidget(_label("Preflight checks", "pageTitle"))
        self.check_summary = _label("", None)
        outer.addWidget(self.check_summary)
        self.check_busy = QProgressBar()
        self.check_busy.setRange(0, 0)
        self.check_busy.setTextVisible(False)
        self.check_busy.setMaximumHeight(6)
        outer.addWidget(self.check_busy)
        content = QWidget()
        content_layout = QVBoxLayout(content)
        content_layout.setContentsMargins(0, 0, 8, 0)
        self.checklist = Checklist(compact_passes=True)
        content_layout.addWidget(self.checklist)
        self.estimate_label = _label("", "hint")
        content_layout.addWidget(self.estimate_label)
        content_layout.addStretch(1)
        outer.addWidget(self._scroll(content), 1)
        back = QPushButton("Back")
        back.clicked.connect(lambda: self.show_page(0))
        self.recheck_button = QPushButton("Check again")
        self.recheck_button.clicked.connect(self.run_check)
        self.options_button = QPushButton("Next: options")
        self.options_button.setObjectName("primaryAction")
        self.options_button.clicked.connect(lambda: self.show_page(2))
        row = QHBoxLayout()
        row.addWidget(back)
        row.addStretch(1)
        row.addWidget(self.recheck_button)
        row.addWidget(self.options_button)
        outer.addLayout(row)
        return page

    def _build_options_page(self) -> QWidget:
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(0, 0, 0, 0)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 4, 8, 4)
        layout.setSpacing(8)
        layout.addWidget(_label("Main model weights", "pageTitle"))
        self.format_group = QButtonGroup(self)
        self.format_radios: dict[str, QRadioButton] = {}
        for fmt in ("int4", "int8", "fp16"):
            radio = QRadioButton(fmt.upper())
            self.format_group.addButton(radio)
            self.format_radios[fmt] = radio
            layout.addWidget(radio)
            hint = _label(WEIGHT_FORMAT_TEXT[fmt], "hint")
            hint.setContentsMargins(24, 0, 0, 2)
            layout.addWidget(hint)
        self.format_radios["int4"].setChecked(True)
        self.format_group.buttonToggled.connect(lambda *_args: self._options_changed())

        self.int4_box = QWidget()
        form = QFormLayout(self.int4_box)
        form.setContentsMargins(24, 4, 0, 4)
        form.setHorizontalSpacing(12)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        self.group_combo = QComboBox()
        for text, size in GROUP_SIZES:
            self.group_combo.addItem(text, size)
        self.sym_check = QCheckBox("Symmetric (no zero points; slightly smaller, less exact)")
        self.ratio_spin = QDoubleSpinBox()
        self.ratio_spin.setRange(0.1, 1.0)
        self.ratio_spin.setSingleStep(0.1)
        self.ratio_spin.setDecimals(2)
        self.ratio_spin.setValue(1.0)
        self.ratio_spin.setToolTip("Share of layers in INT4; the rest stay INT8 (more accurate)")
        self.fallback_combo = QComboBox()
        for fallback in ("ignore", "adjust", "error"):
            self.fallback_combo.addItem(FALLBACK_LABELS[fallback], fallback)
        self.fallback_text = _label("", "hint")
        self.fallback_text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        form.addRow("Group size", self.group_combo)
        form.addRow("INT4 share", self.ratio_spin)
        form.addRow("Group fallback", self.fallback_combo)
        form.addRow("", self.fallback_text)
        form.addRow("", self.sym_check)
        layout.addWidget(self.int4_box)
        for widget in (self.group_combo, self.fallback_combo):
            widget.currentIndexChanged.connect(lambda _i: self._options_changed())
        self.ratio_spin.valueChanged.connect(lambda _v: self._options_changed())
        self.sym_check.toggled.connect(lambda _v: self._options_changed())

        layout.addSpacing(6)
        layout.addWidget(_label("MTP head compression", "pageTitle"))
        self.mtp_combo = QComboBox()
        for mtp_value, mtp_text in MTP_LABELS:
            self.mtp_combo.addItem(mtp_text, mtp_value)
        self.mtp_combo.currentIndexChanged.connect(lambda _i: self._options_changed())
        mtp_row = QHBoxLayout()
        mtp_row.addWidget(self.mtp_combo)
        mtp_row.addStretch(1)
        layout.addLayout(mtp_row)
        self.mtp_text = _label("", None)
        layout.addWidget(self.mtp_text)
        layout.addWidget(_label(MTP_TRADE_OFF, "hint"))

        layout.addSpacing(6)
        layout.addWidget(_label("Destination", "pageTitle"))
        dest_row = QHBoxLayout()
        self.dest_edit = QLineEdit()
        self.dest_edit.textEdited.connect(self._destination_typed)
        self.dest_edit.textChanged.connect(lambda _t: self._options_changed())
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_destination)
        dest_row.addWidget(self.dest_edit, 1)
        dest_row.addWidget(browse)
        layout.addLayout(dest_row)
        layout.addWidget(
            _label(
                "A new folder; the default is the app's Models folder, which the Models panel "
                "lists. The export is built beside it and moved in only when it succeeded.",
                "hint",
            )
        )
        self.options_estimate = _label("", None)
        layout.addWidget(self.options_estimate)
        layout.addStretch(1)
        outer.addWidget(self._scroll(content), 1)
        back = QPushButton("Back")
        back.clicked.connect(lambda: self.show_page(1))
        self.export_button = QPushButton("Export")
        self.export_button.setObjectName("primaryAction")
        self.export_button.clicked.connect(self.start_export)
        row = QHBoxLayout()
        row.addWidget(back)
        row.addStretch(1)
        row.addWidget(self.export_button)
        outer.addLayout(row)
        self._options_changed()
        return page

    def _build_run_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.run_title = _label("", "pageTitle")
        layout.addWidget(self.run_title)
        self.run_paths = _label("", "hint")
        self.run_paths.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.run_paths)
        self.queue_label = _label("", "hint")
        self.queue_label.hide()
        layout.addWidget(self.queue_label)
        stage_row = QHBoxLayout()
        self.stage_label = _label("Waiting…", "stageLabel", wrap=False)
        self.stage_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.percent_label = _label("", "stageLabel", wrap=False)
        stage_row.addWidget(self.stage_label, 1)
        stage_row.addWidget(self.percent_label)
        layout.addLayout(stage_row)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        layout.addWidget(self.progress)
        stats_row = QHBoxLayout()
        self.stats_label = _label("", "hint", wrap=False)
        stats_row.addWidget(self.stats_label, 1)
        self.cancel_button = QPushButton("Cancel export")
        self.cancel_button.setObjectName("dangerAction")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        stats_row.addWidget(self.cancel_button)
        layout.addLayout(stats_row)

        self.result_box = QFrame()
        self.result_box.setObjectName("resultBox")
        result_layout = QVBoxLayout(self.result_box)
        result_layout.setContentsMargins(14, 12, 14, 12)
        result_layout.setSpacing(8)
        title_row = QHBoxLayout()
        self.result_icon = QLabel()
        title_row.addWidget(self.result_icon)
        self.result_title = _label("", "resultTitle", wrap=False)
        title_row.addWidget(self.result_title, 1)
        result_layout.addLayout(title_row)
        self.result_text = _label("", None)
        self.result_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        result_layout.addWidget(self.result_text)
        self.verify_list = Checklist(compact=True)
        result_layout.addWidget(self.verify_list)
        self.chat_button = QPushButton("Open in chat")
        self.chat_button.setObjectName("primaryAction")
        self.chat_button.clicked.connect(self._open_in_chat)
        self.models_button = QPushButton("Show in Models")
        self.models_button.clicked.connect(self._show_in_models)
        self.again_button = QPushButton("Export another")
        self.again_button.clicked.connect(lambda: self.show_page(0))
        result_layout.addLayout(
            _button_row(self.again_button, self.models_button, self.chat_button)
        )
        self.result_box.hide()
        layout.addWidget(self.result_box)

        log_row = QHBoxLayout()
        log_row.addWidget(_label("Exporter log", "checkTitle", wrap=False))
        log_row.addStretch(1)
        # The exporter's Python warnings (tracer, deprecation…) mean nothing to most users and
        # bury the stages: hidden unless asked for.
        self.warnings_check = QCheckBox("Show Python warnings")
        self.warnings_check.toggled.connect(self._render_log)
        log_row.addWidget(self.warnings_check)
        layout.addLayout(log_row)
        self._log_lines: list[str] = []
        self._log_warnings = 0
        self._last_was_warning = False
        self.log_view = QPlainTextEdit()
        self.log_view.setObjectName("exportLog")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINE_CAP)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_view.setMinimumHeight(80)
        layout.addWidget(self.log_view, 1)
        return page

    # --- navigation -----------------------------------------------------------------------

    def show_page(self, index: int) -> None:
        if index == 2:
            self._prefill_destination()
            self._options_changed()
        self.pages.setCurrentIndex(index)
        for step, label in enumerate(self.step_labels):
            label.setProperty("current", step == index)
            label.style().unpolish(label)
            label.style().polish(label)
            label.updateGeometry()  # bold text is wider

    def set_source(self, text: str, *, revision: str | None = None) -> None:
        """Prefill the source page (e.g. from the Models panel's re-export action)."""
        source = parse_source(text, revision)
        if source.kind == "hub":
            self.hub_edit.setText(source.value)
            self.revision_edit.setText(source.revision or "")
            self.hub_radio.setChecked(True)
        else:
            self.folder_edit.setText(source.value)
            self.folder_radio.setChecked(True)
        self.show_page(0)

    def prefill_from_model(self, model_dir: Path) -> None:
        """Re-export: start from the checkpoint an exported model was made from, if known."""
        from qwen_mtp_desktop.core.model_folders.manifest import read_manifest

        try:
            manifest = read_manifest(model_dir)
        except ValueError:
            manifest = None
        if manifest is not None and manifest.source:
            self.set_source(manifest.source, revision=None)
            fmt = manifest.options.get("weight_format")
            if isinstance(fmt, str) and fmt in self.format_radios:
                self.format_radios[fmt].setChecked(True)
        else:
            self.show_page(0)

    # --- source page ----------------------------------------------------------------------

    def _source_text(self) -> tuple[str, str | None]:
        if self.hub_radio.isChecked():
            return self.hub_edit.text().strip(), self.revision_edit.text().strip() or None
        return self.folder_edit.text().strip(), None

    def _source_changed(self) -> None:
        text, _revision = self._source_text()
        self.check_button.setEnabled(bool(text))
        self.source_error.hide()
        if not self._destination_edited and hasattr(self, "dest_edit"):
            self.dest_edit.clear()  # refilled from the new source on the options page

    def _browse_source(self) -> None:
        start = Path(self.folder_edit.text() or Path.home())
        chosen = self._dialogs.choose_folder(self, "Choose a checkpoint folder", start)
        if chosen is not None:
            self.folder_edit.setText(str(chosen))
            self.folder_radio.setChecked(True)

    def _refresh_versions(self) -> None:
        fetch = self._env.versions or installed_versions
        self._runner.submit(lambda: dict(fetch()), self._on_versions)

    def _on_versions(self, versions: Mapping[str, str | None]) -> None:
        self._versions = versions
        missing = toolkit_missing(versions, hub=True)
        self.command_label.setText(shlex.join(install_command(versions=versions)))
        installing = self._install_id is not None
        self.toolkit_banner.setVisible(bool(missing) or installing)
        if missing and not installing:
            self.toolkit_text.setText(
                f"Exporting needs {', '.join(missing)} (several GB in all; chat works "
                "without them). The app can install them into its own Python environment with:"
            )

    # --- preflight ------------------------------------------------------------------------

    def current_options(self) -> ExportOptions:
        fmt: WeightFormat = "int4"
        for name, radio in self.format_radios.items():
            if radio.isChecked():
                fmt = name  # type: ignore[assignment]
        int4 = fmt == "int4" or self.mtp_combo.currentData() == "int4"
        group = self.group_combo.currentData()
        fallback: GroupSizeFallback = self.fallback_combo.currentData()
        mtp: MtpWeightFormat = self.mtp_combo.currentData()
        return ExportOptions(
            weight_format=fmt,
            group_size=int(group) if int4 and group != 128 else None,
            sym=self.sym_check.isChecked(),
            ratio=self.ratio_spin.value()
            if fmt == "int4" and self.ratio_spin.value() < 1
            else None,
            group_size_fallback=fallback if int4 else None,
            trust_remote_code=self.trust_check.isChecked(),
            mtp_weight_format=mtp,
        )

    def destination(self) -> Path:
        text = self.dest_edit.text().strip()
        if text:
            return Path(text).expanduser()
        assert self._source is not None
        return default_destination(self._source, self.current_options(), self._models_dir)

    def run_check(self, *, overwrite: bool = False, then: Callable[[], None] | None = None) -> None:
        """Preflight on the worker thread; shows the checklist page."""
        text, revision = self._source_text()
        try:
            source = parse_source(text, revision)
        except UserFacingError as exc:
            self.source_error.setText(str(exc))
            self.source_error.show()
            return
        if source != self._source:
            self._source = source
            self._checkpoint = None
        options = self.current_options()
        destination = self.destination()
        self._preflight_serial += 1
        serial = self._preflight_serial
        self.check_busy.show()
        self.check_summary.setText(f"Checking {source.display}…")
        self.options_button.setEnabled(False)
        self.recheck_button.setEnabled(False)
        self.export_button.setEnabled(False)
        if then is None:
            self.checklist.set_items([])
            self.estimate_label.clear()
            self.show_page(1)
        env = self._env
        # "Check again" re-reads the checkpoint; the check before exporting reuses it.
        known = self._checkpoint if then is not None else None

        def work() -> PreflightReport:
            checkpoint = known or _inspect(source)
            return run_preflight(
                checkpoint,
                options,
                destination,
                overwrite=overwrite,
                versions=env.versions() if env.versions else None,
                free_bytes=env.free_bytes,
                memory=env.memory() if env.memory else None,
                hf_cache=_hub_cache() if source.kind == "hub" else None,
            )

        def done(report: PreflightReport) -> None:
            if serial != self._preflight_serial:
                return  # a newer check superseded this one
            self._show_report(report)
            if then is not None:
                if report.ok:
                    then()
                else:
                    self.show_page(1)

        def failed(exc: Exception) -> None:
            if serial != self._preflight_serial:
                return
            self.check_busy.hide()
            self.recheck_button.setEnabled(True)
            self.export_button.setEnabled(True)
            self.check_summary.setText(f"The check itself failed: {exc}")
            self.show_page(1)

        self._runner.submit(work, done, failed)

    def _show_report(self, report: PreflightReport) -> None:
        self.report = report
        self._checkpoint = report.checkpoint if report.checkpoint.config is not None else None
        self.check_busy.hide()
        self.recheck_button.setEnabled(True)
        self.export_button.setEnabled(True)
        self.checklist.set_items([(i.status, i.title, i.message, i.fix) for i in report.items])
        failures, warnings = len(report.failures), len(report.warnings)
        if failures:
            self.check_summary.setText(
                f"{failures} problem{'s' if failures > 1 else ''} must be fixed before exporting."
            )
        elif warnings:
            self.check_summary.setText(
                f"Ready to export, with {warnings} warning{'s' if warnings > 1 else ''}."
            )
        else:
            self.check_summary.setText("Ready to export.")
        self.options_button.setEnabled(report.ok or self._only_option_failures(report))
        estimate = report.estimate
        if estimate is not None:
            self.estimate_label.setText(
                f"{estimate.parameters:,} parameters ({estimate.mtp_parameters:,} in the MTP "
                f"head). With the current options the export needs about "
                f"{format_bytes(estimate.output_bytes)} for the model plus "
                f"{format_bytes(estimate.scratch_bytes)} while it works, and about "
                f"{format_bytes(estimate.peak_ram_bytes)} of RAM at its peak."
            )
        self._options_changed()

    @staticmethod
    def _only_option_failures(report: PreflightReport) -> bool:
        """Failures the options page can fix (destination, INT4 group size)."""
        return all(item.key in ("destination", "group_size", "disk") for item in report.failures)

    # --- options page ---------------------------------------------------------------------

    def _prefill_destination(self) -> None:
        if not self._destination_edited and self._source is not None:
            self.dest_edit.setText(
                str(default_destination(self._source, self.current_options(), self._models_dir))
            )

    def _destination_typed(self, _text: str) -> None:
        self._destination_edited = True

    def _browse_destination(self) -> None:
        start = self._models_dir if self._models_dir.exists() else Path.home()
        chosen = self._dialogs.choose_folder(self, "Choose the parent folder", start)
        if chosen is not None and self._source is not None:
            name = default_destination(self._source, self.current_options(), chosen).name
            self.dest_edit.setText(str(chosen / name))
            self._destination_edited = True

    def _options_changed(self) -> None:
        if not hasattr(self, "mtp_text"):
            return
        options = self.current_options()
        self.int4_box.setEnabled(
            options.weight_format == "int4" or options.mtp_weight_format == "int4"
        )
        self.ratio_spin.setEnabled(options.weight_format == "int4")
        self.mtp_text.setText(MTP_FORMAT_TEXT[options.mtp_weight_format])
        self.fallback_text.setText(FALLBACK_TEXT[self.fallback_combo.currentData()])
        if not self._destination_edited and self._source is not None:
            self.dest_edit.blockSignals(True)
            self.dest_edit.setText(
                str(default_destination(self._source, options, self._models_dir))
            )
            self.dest_edit.blockSignals(False)
        checkpoint = self._checkpoint
        estimate = estimate_export(checkpoint, options) if checkpoint is not None else None
        if estimate is not None:
            self.options_estimate.setText(
                f"Estimated model size {format_bytes(estimate.output_bytes)}; free space needed "
                f"while exporting {format_bytes(estimate.output_bytes + estimate.scratch_bytes)}; "
                f"RAM peak about {format_bytes(estimate.peak_ram_bytes)}."
            )
        else:
            self.options_estimate.clear()

    def start_export(self) -> None:
        """Ask before replacing, re-check with the final options, then queue the export."""
        if self._source is None:
            self.show_page(0)
            return
        destination = self.destination()
        overwrite = False
        if destination.exists() and destination.is_dir() and any(destination.iterdir()):
            if not self._dialogs.confirm(
                self,
                "Replace the existing folder?",
                f"{destination} already exists and is not empty. Replace it with the new "
                "export? The old folder is removed only after the new export succeeded.",
                "Replace",
            ):
                return
            overwrite = True
        self.run_check(overwrite=overwrite, then=lambda: self._queue(destination, overwrite))

    def _queue(self, destination: Path, overwrite: bool) -> None:
        assert self._source is not None
        request = ExportRequest(
            self._source,
            destination,
            self.current_options(),
            overwrite=overwrite,
            verify_generation=self._verify_generation,
        )
        self._clear_log()
        self.result_box.hide()
        self.progress.setValue(0)
        self.percent_label.clear()
        self.stage_label.setText("Waiting for the previous export…")
        self.stats_label.clear()
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        self.run_title.setText(f"Exporting {self._source.short_name} → {destination.name}")
        self.run_paths.setText(f"{self._source.display} → {destination}")
        self._job_id = self.jobs.submit(request)
        self._update_queue_label()
        self.show_page(3)

    # --- run page -------------------------------------------------------------------------

    def _on_cancel_clicked(self) -> None:
        if self._dialogs.confirm(
            self,
            "Cancel the export?",
            "The export stops and its partial output is removed; the source is untouched.",
            "Cancel export",
        ):
            self.cancel_export()

    def _clear_log(self) -> None:
        self._log_lines = []
        self._log_warnings = 0
        self._last_was_warning = False
        self.log_view.clear()
        self._update_warnings_check()

    def _add_log_lines(self, lines: list[str]) -> None:
        flags = python_warning_lines(lines, after_warning=self._last_was_warning)
        self._last_was_warning = bool(flags) and flags[-1]
        self._log_lines.extend(lines)
        self._log_warnings += sum(flags)
        del self._log_lines[:-LOG_LINE_CAP]
        shown = [
            line
            for line, warning in zip(lines, flags, strict=True)
            if self.warnings_check.isChecked() or not warning
        ]
        if shown:
            self.log_view.appendPlainText("\n".join(shown))
        self._update_warnings_check()

    def _render_log(self) -> None:
        lines = self._log_lines
        if not self.warnings_check.isChecked():
            lines = [
                line
                for line, warning in zip(lines, python_warning_lines(lines), strict=True)
                if not warning
            ]
        self.log_view.setPlainText("\n".join(lines))

    def _update_warnings_check(self) -> None:
        count = self._log_warnings
        self.warnings_check.setText(
            f"Show Python warnings ({count})" if count else "Show Python warnings"
        )

    def cancel_export(self) -> None:
        if self._job_id is not None:
            self.cancel_button.setEnabled(False)
            self.stage_label.setText("Cancelling…")
            self.jobs.cancel(self._job_id)

    def _update_queue_label(self, *_args: Any) -> None:
        waiting = [
            job for job in self.jobs.jobs() if job != self.jobs.running_job and job != self._job_id
        ]
        self.queue_label.setVisible(bool(waiting))
        self.queue_label.setText(
            f"{len(waiting)} more export{'s' if len(waiting) > 1 else ''} queued after this one."
        )

    def _on_job_started(self, job_id: int) -> None:
        if job_id == self._install_id:
            self.install_status.setText("Installing…")
            return
        if job_id != self._job_id:
            return
        self._job_started = time.monotonic()
        self.stage_label.setText("Starting…")
        self._clock.start()
        self._update_queue_label()

    def _on_lines(self, job_id: int, lines: list[str]) -> None:
        if job_id == self._install_id:
            self.install_log.appendPlainText("\n".join(lines))
            for line in lines:
                stage = pip_stage(line)
                if stage:
                    self.install_status.setText(stage)
            return
        if job_id == self._job_id:
            self._add_log_lines(lines)

    def _on_progress(self, job_id: int, event: ProgressEvent) -> None:
        if job_id != self._job_id:
            return
        self.stage_label.setText(event.label)
        self.progress.setValue(round(event.overall * 1000))
        percent = f"{event.overall:.0%}"
        if event.fraction is not None and event.stage in ("compressing", "downloading"):
            percent = f"{event.fraction:.0%} of this step · {percent}"
        self.percent_label.setText(percent)

    def _on_stats(self, job_id: int, stats: ProcessStats) -> None:
        if job_id != self._job_id:
            return
        elapsed = time.monotonic() - self._job_started if self._job_started else 0.0
        memory = (
            f"memory {format_bytes(stats.rss_bytes)} (peak {format_bytes(stats.peak_rss_bytes)})"
            if stats.peak_rss_bytes
            else ""
        )
        self.stats_label.setText(" · ".join(p for p in (f"Elapsed {_clock(elapsed)}", memory) if p))
        self._last_memory = memory

    def _tick(self) -> None:
        if self._job_started:
            elapsed = time.monotonic() - self._job_started
            memory = getattr(self, "_last_memory", "")
            self.stats_label.setText(
                " · ".join(p for p in (f"Elapsed {_clock(elapsed)}", memory) if p)
            )

    def _on_finished(self, job_id: int, outcome: object) -> None:
        if job_id == self._install_id and isinstance(outcome, InstallOutcome):
            self._install_finished(outcome)
            return
        if job_id != self._job_id or not isinstance(outcome, ExportOutcome):
            return
        self._clock.stop()
        self._job_started = 0.0
        self.last_outcome = outcome
        self.stats_label.setText(
            f"Took {_clock(outcome.seconds)} · peak memory {format_bytes(outcome.peak_rss_bytes)}"
        )
        self.cancel_button.hide()
        self.result_box.show()
        self.result_box.setProperty("status", outcome.status)
        self.result_box.style().unpolish(self.result_box)
        self.result_box.style().polish(self.result_box)
        verification = outcome.verification
        verified = verification is None or verification.ok
        self._result_path = outcome.output_dir if outcome.succeeded else None
        if outcome.status == "succeeded":
            self.result_icon.setPixmap(status_pixmap("pass" if verified else "warn"))
            self.result_title.setText("Exported and verified" if verified else "Exported")
            self.result_text.setText(
                f"{outcome.output_dir}"
                + ("" if verified else "\nVerification found a problem (see below).")
            )
            self.stage_label.setText("Done")
            self.progress.setValue(1000)
            self.percent_label.setText("100%")
        elif outcome.status == "cancelled":
            self.result_icon.setPixmap(status_pixmap("pending"))
            self.result_title.setText("Cancelled")
            self.result_text.setText("The export was stopped; nothing was kept.")
            self.stage_label.setText("Cancelled")
        else:
            self.result_icon.setPixmap(status_pixmap("fail"))
            self.result_title.setText("Export failed")
            error = outcome.error
            self.result_text.setText(
                f"{error.message}\n{error.fix}".strip() if error else outcome.reason()
            )
            self.stage_label.setText("Failed")
            if outcome.log_tail and not self._log_lines:
                self._add_log_lines(outcome.log_tail.splitlines())
        items = verification.items if verification is not None else []
        self.verify_list.set_items(
            [(i.status, _verify_title(i.key), i.message, i.fix) for i in items]
        )
        self.verify_list.setVisible(bool(items))
        self.chat_button.setVisible(self._result_path is not None)
        self.models_button.setVisible(self._result_path is not None)
        if self._result_path is not None:
            self.model_exported.emit(self._result_path)

    def _open_in_chat(self) -> None:
        if self._result_path is not None:
            self.open_in_chat.emit(self._result_path)

    def _show_in_models(self) -> None:
        if self._result_path is not None:
            self.show_in_models.emit(self._result_path)

    # --- toolkit install ------------------------------------------------------------------

    def install_toolkit(self) -> None:
        command = tuple(install_command(versions=self._versions))
        self.command_label.setText(shlex.join(command))
        self.install_button.setEnabled(False)
        self.install_cancel.show()
        self.install_progress.show()
        self.install_status.setText(
            "Waiting for the running export…" if self.jobs.busy else "Starting pip…"
        )
        self.install_status.show()
        self.install_log.clear()
        self.install_log.show()
        self._install_id = self.jobs.submit_install(InstallRequest(command))

    def _cancel_install(self) -> None:
        if self._install_id is not None:
            self.jobs.cancel(self._install_id)

    def _install_finished(self, outcome: InstallOutcome) -> None:
        self._install_id = None
        self.install_button.setEnabled(True)
        self.install_cancel.hide()
        self.install_progress.hide()
        if outcome.succeeded:
            self.install_status.setText("Installed. Checking the versions…")
        elif outcome.cancelled or outcome.process is None:
            self.install_status.setText("Installation cancelled.")
        else:
            self.install_status.setText(str(outcome.error) if outcome.error else "pip failed.")
        self._refresh_versions()

    # --- app lifecycle --------------------------------------------------------------------

    def _on_cleaned(self, removed: list[Path]) -> None:
        if removed:
            log.info("removed %d stale export folder(s): %s", len(removed), removed)

    def confirm_quit(self) -> bool:
        """True if the app may quit now (asks first while an export runs, then cancels it)."""
        if not self.jobs.busy:
            return True
        if not self._dialogs.confirm(
            self,
            "An export is running",
            "Quitting stops the export; nothing of it is kept. Quit anyway?",
            "Stop export and quit",
        ):
            return False
        self.jobs.cancel(None)
        return True

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel jobs and stop the export thread (its subprocesses are gone after this)."""
        self._clock.stop()
        return self.jobs.shutdown(timeout_ms)


def _verify_title(key: str) -> str:
    return {
        "files": "Files",
        "ir": "IR",
        "precision:language_model": "Language model",
        "precision:mtp": "MTP head",
        "mtp_rope": "MTP RoPE",
        "generation": "MTP vs plain decoding",
    }.get(key, key)


def _hub_cache() -> Path:
    from qwen_mtp_desktop.core.export.hub import hub_cache_dir

    return hub_cache_dir()


def _inspect(source: ExportSource) -> CheckpointInfo:
    if source.kind == "hub":
        from qwen_mtp_desktop.core.export.hub import inspect_hub_checkpoint

        return inspect_hub_checkpoint(source.value, source.revision)
    return inspect_checkpoint_folder(Path(source.value))
