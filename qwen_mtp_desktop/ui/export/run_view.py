"""The export wizard's last page: what the running export is doing, its log, and its result.

Until the exporter reports real progress the bar is indeterminate and says what is happening
(starting Python, importing PyTorch), with the elapsed time: that start takes 10-20 s and a bar
standing at 0 % looked frozen (issue 18).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.export.exporter_log import continues_warning, hidden_lines
from qwen_mtp_desktop.core.models.export.job import ExportOutcome
from qwen_mtp_desktop.core.models.export.process_group import ProcessStats
from qwen_mtp_desktop.core.models.export.progress import ProgressEvent
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.export.widgets import Checklist, check_pixmap
from qwen_mtp_desktop.ui.widgets.labels import text_label

LOG_LINE_CAP = 2000
HIDDEN_TEXT = "Show hidden messages"
BAR_STEPS = 1000

#: What the exporter does before its first measurable step, by stage (no fraction yet).
STARTING_TEXT = "Starting the exporter (importing PyTorch and optimum-intel)…"
WAITING_TEXT = "Waiting for the previous export…"
LAUNCHING_TEXT = "Starting the exporter…"


def clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (f"{hours}:" if hours else "") + f"{rest // 60:02d}:{rest % 60:02d}"


def stage_text(event: ProgressEvent) -> tuple[str, bool]:
    """(what to show, whether the bar is indeterminate) for a progress event.

    The exporter says "loading" the moment its process starts; the first measurable step is
    reading the checkpoint's weights ("Loading weights: 5%"). Between the two it imports
    PyTorch, transformers and optimum-intel, which is most of the silent start.
    """
    if event.stage == "loading" and not event.fraction:
        return STARTING_TEXT, True
    if event.stage == "loading":
        return "Loading the checkpoint's weights", False
    if event.stage == "downloading" and event.fraction is None:
        return event.label, True
    return event.label, False


def verify_title(key: str) -> str:
    return {
        "files": "Files",
        "ir": "IR",
        "precision:language_model": "Language model",
        "precision:mtp": "MTP head",
        "mtp_rope": "MTP RoPE",
        "generation": "MTP vs plain decoding",
    }.get(key, key)


class ExportRunView(QWidget):
    """Stage, progress bar, elapsed time and memory, the result box and the exporter's log.

    The wizard owns the job; this view only shows it. Its buttons (cancel, open in chat, show in
    Models, export another) are connected by the wizard.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._started = 0.0
        self._memory = ""
        self._log_lines: list[str] = []
        self._log_file: Path | None = None
        #: Opens the full log file (tests record the URL instead).
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl
        self.log_warnings = 0
        self._last_was_warning = False
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._tick)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        self.title = text_label("", "pageTitle")
        layout.addWidget(self.title)
        self.paths = text_label("", "hint")
        self.paths.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.paths)
        self.queue_label = text_label("", "hint")
        self.queue_label.hide()
        layout.addWidget(self.queue_label)
        stage_row = QHBoxLayout()
        self.stage_label = text_label(WAITING_TEXT, "stageLabel", wrap=False)
        self.stage_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.percent_label = text_label("", "stageLabel", wrap=False)
        stage_row.addWidget(self.stage_label, 1)
        stage_row.addWidget(self.percent_label)
        layout.addLayout(stage_row)
        self.progress = QProgressBar()
        self.progress.setRange(0, BAR_STEPS)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        layout.addWidget(self.progress)
        stats_row = QHBoxLayout()
        self.stats_label = text_label("", "hint", wrap=False)
        stats_row.addWidget(self.stats_label, 1)
        self.cancel_button = QPushButton("Stop export…")
        self.cancel_button.setObjectName("dangerAction")
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
        self.result_title = text_label("", "resultTitle", wrap=False)
        title_row.addWidget(self.result_title, 1)
        result_layout.addLayout(title_row)
        self.result_text = text_label("", None)
        self.result_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        result_layout.addWidget(self.result_text)
        self.verify_list = Checklist(compact=True)
        result_layout.addWidget(self.verify_list)
        self.chat_button = QPushButton("Open in chat")
        self.chat_button.setObjectName("primaryAction")
        self.models_button = QPushButton("Show in Models")
        self.again_button = QPushButton("Export another")
        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addStretch(1)
        for button in (self.again_button, self.models_button, self.chat_button):
            buttons.addWidget(button)
        result_layout.addLayout(buttons)
        self.result_box.hide()
        layout.addWidget(self.result_box)

        log_row = QHBoxLayout()
        log_row.addWidget(text_label("Exporter log", "checkTitle", wrap=False))
        log_row.addStretch(1)
        # The exporter's Python warnings (tracer, deprecation…) and the libraries' noise (torch
        # probing for CUDA…) mean nothing to most users and bury the stages: hidden unless
        # asked for; the log file keeps every line (core.models.export.exporter_log).
        self.warnings_check = QCheckBox(HIDDEN_TEXT)
        self.warnings_check.setToolTip(
            "Python warnings and library messages that do not affect the export"
        )
        self.warnings_check.toggled.connect(self._render_log)
        log_row.addWidget(self.warnings_check)
        self.log_file_button = QPushButton("Open the full log")
        self.log_file_button.setToolTip("Every line of the exporter's output, for a bug report")
        self.log_file_button.clicked.connect(self._open_log_file)
        self.log_file_button.hide()
        log_row.addWidget(self.log_file_button)
        layout.addLayout(log_row)
        self.log_view = QPlainTextEdit()
        self.log_view.setObjectName("exportLog")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINE_CAP)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_view.setMinimumHeight(80)
        layout.addWidget(self.log_view, 1)

    # --- a job's life ---------------------------------------------------------------------

    @property
    def has_log(self) -> bool:
        return bool(self._log_lines)

    @property
    def indeterminate(self) -> bool:
        return self.progress.maximum() == 0

    def begin(self, title: str, paths: str) -> None:
        """A job was queued: a clean page that waits for it."""
        self._clear_log()
        self.result_box.hide()
        self._set_busy(True)
        self.percent_label.clear()
        self.stage_label.setText(WAITING_TEXT)
        self.stats_label.clear()
        self._memory = ""
        self.cancel_button.setEnabled(True)
        self.cancel_button.show()
        self.title.setText(title)
        self.paths.setText(paths)

    def started(self) -> None:
        """The job left the queue: its process is starting."""
        self._started = time.monotonic()
        self.stage_label.setText(LAUNCHING_TEXT)
        self._set_busy(True)
        self._clock.start()
        self._tick()

    def show_progress(self, event: ProgressEvent) -> None:
        text, busy = stage_text(event)
        self.stage_label.setText(text)
        self._set_busy(busy and event.overall == 0)
        if self.indeterminate:
            self.percent_label.clear()
            return
        self.progress.setValue(round(event.overall * BAR_STEPS))
        percent = f"{event.overall:.0%}"
        if event.fraction is not None and event.stage in ("compressing", "downloading"):
            percent = f"{event.fraction:.0%} of this step · {percent}"
        self.percent_label.setText(percent)

    def show_stats(self, stats: ProcessStats) -> None:
        self._memory = (
            f"memory {format_bytes(stats.rss_bytes)} (peak {format_bytes(stats.peak_rss_bytes)})"
            if stats.peak_rss_bytes
            else ""
        )
        self._tick()

    def cancelling(self) -> None:
        self.cancel_button.setEnabled(False)
        self.stage_label.setText("Cancelling…")

    def show_outcome(self, outcome: ExportOutcome) -> None:
        self._clock.stop()
        self._started = 0.0
        self._set_busy(False)
        self.stats_label.setText(
            f"Took {clock(outcome.seconds)} · peak memory {format_bytes(outcome.peak_rss_bytes)}"
        )
        self.cancel_button.hide()
        self.result_box.show()
        self.result_box.setProperty("status", outcome.status)
        self.result_box.style().unpolish(self.result_box)
        self.result_box.style().polish(self.result_box)
        verification = outcome.verification
        verified = verification is None or verification.ok
        if outcome.status == "succeeded":
            self.result_icon.setPixmap(check_pixmap("pass" if verified else "warn"))
            self.result_title.setText("Exported and verified" if verified else "Exported")
            self.result_text.setText(
                f"{outcome.output_dir}"
                + ("" if verified else "\nVerification found a problem (see below).")
            )
            self.stage_label.setText("Done")
            self.progress.setValue(BAR_STEPS)
            self.percent_label.setText("100%")
        elif outcome.status == "cancelled":
            self.result_icon.setPixmap(check_pixmap("pending"))
            self.result_title.setText("Cancelled")
            self.result_text.setText("The export was stopped; nothing was kept.")
            self.stage_label.setText("Cancelled")
        else:
            self.result_icon.setPixmap(check_pixmap("fail"))
            self.result_title.setText("Export failed")
            error = outcome.error
            self.result_text.setText(
                f"{error.message}\n{error.fix}".strip() if error else outcome.reason()
            )
            self.stage_label.setText("Failed")
            if outcome.log_tail and not self._log_lines:
                self.add_log_lines(outcome.log_tail.splitlines())
        self._log_file = outcome.log_file
        self.log_file_button.setVisible(
            outcome.log_file is not None and outcome.status != "cancelled"
        )
        if outcome.log_file is not None:
            self.log_file_button.setToolTip(str(outcome.log_file))
        items = verification.items if verification is not None else []
        self.verify_list.set_items(
            [(i.status, verify_title(i.key), i.message, i.fix) for i in items]
        )
        self.verify_list.setVisible(bool(items))
        shown = outcome.succeeded
        self.chat_button.setVisible(shown)
        self.models_button.setVisible(shown)

    def stop(self) -> None:
        self._clock.stop()

    # --- log ------------------------------------------------------------------------------

    def add_log_lines(self, lines: list[str]) -> None:
        flags = hidden_lines(lines, after_hidden=self._last_was_warning)
        self._last_was_warning = continues_warning(lines, after_hidden=self._last_was_warning)
        self._log_lines.extend(lines)
        self.log_warnings += sum(flags)
        del self._log_lines[:-LOG_LINE_CAP]
        shown = [
            line
            for line, warning in zip(lines, flags, strict=True)
            if self.warnings_check.isChecked() or not warning
        ]
        if shown:
            self.log_view.appendPlainText("\n".join(shown))
        self._update_warnings_check()

    def _clear_log(self) -> None:
        self._log_lines = []
        self.log_warnings = 0
        self._last_was_warning = False
        self.log_view.clear()
        self._update_warnings_check()

    def _render_log(self) -> None:
        lines = self._log_lines
        if not self.warnings_check.isChecked():
            lines = [
                line
                for line, warning in zip(lines, hidden_lines(lines), strict=True)
                if not warning
            ]
        self.log_view.setPlainText("\n".join(lines))

    def _update_warnings_check(self) -> None:
        count = self.log_warnings
        self.warnings_check.setText(f"{HIDDEN_TEXT} ({count})" if count else HIDDEN_TEXT)

    def _open_log_file(self) -> None:
        if self._log_file is not None:
            self.open_url(QUrl.fromLocalFile(str(self._log_file)))

    # --- helpers --------------------------------------------------------------------------

    def _set_busy(self, busy: bool) -> None:
        """Indeterminate (moving) bar while nothing can be measured yet."""
        if busy:
            self.progress.setRange(0, 0)
        elif self.progress.maximum() == 0:
            self.progress.setRange(0, BAR_STEPS)
            self.progress.setValue(0)

    def _tick(self) -> None:
        if not self._started:
            return
        elapsed = f"Elapsed {clock(time.monotonic() - self._started)}"
        self.stats_label.setText(" · ".join(p for p in (elapsed, self._memory) if p))
