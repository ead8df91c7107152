"""The export wizard: source -> preflight checklist -> options -> run (live log, progress, verify).

Threads: preflight (reading headers, maybe asking the hub) runs on the TaskRunner given to the
panel; exports and toolkit installs run on the panel's ExportQueue thread, one at a time, and keep
running when another page of the app is shown. The GUI thread only updates widgets.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal  # noqa: F401 (Qt: tests click through this module)
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.export.job import ExportOutcome, ExportRequest
from qwen_mtp_desktop.core.models.export.options import (
    ExportOptions,
    ExportSource,
    default_destination,
    parse_source,
)
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import (
    CheckpointInfo,
    inspect_checkpoint_folder,
)
from qwen_mtp_desktop.core.models.export.preflight.checks import (
    PreflightReport,
    check_options,
    fitting_group_size,
    run_preflight,
)
from qwen_mtp_desktop.core.models.export.preflight.estimate import estimate_export
from qwen_mtp_desktop.core.models.export.preflight.toolkit import (
    install_command,
    installed_versions,
    toolkit_missing,
)
from qwen_mtp_desktop.core.models.export.process_group import ProcessStats
from qwen_mtp_desktop.core.models.export.progress import (
    ProgressEvent,
    pip_stage,
)
from qwen_mtp_desktop.core.models.export.staging import cleanup_stale_exports
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.export.check_page import (
    CheckPage,
    only_option_failures,
    option_warnings,
)
from qwen_mtp_desktop.ui.export.options_form import ExportOptionsForm
from qwen_mtp_desktop.ui.export.run_view import LOG_LINE_CAP, ExportRunView  # noqa: F401 (the cap, as before)
from qwen_mtp_desktop.ui.export.toolkit_banner import ToolkitBanner
from qwen_mtp_desktop.ui.export.widgets import (
    TRUST_REMOTE_CODE_TEXT,
    ExportDialogs,
    panel_style,
)
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.workers.export_job import (
    ExportQueue,
    InstallOutcome,
    InstallRequest,
)
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

STEPS = ("Source", "Check", "Options", "Export")


@dataclass
class PreflightEnvironment:
    """What preflight measures; tests inject these (None = the real machine)."""

    versions: Callable[[], Mapping[str, str | None]] | None = None
    free_bytes: Callable[[Path], int] | None = None
    memory: Callable[[], tuple[int | None, int | None]] | None = None


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
        self.last_outcome: ExportOutcome | None = None
        self._result_path: Path | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(32, 24, 32, 20)
        outer.setSpacing(12)
        header = QHBoxLayout()
        title = text_label("Export a model", "wizardTitle", wrap=False)
        header.addWidget(title)
        header.addStretch(1)
        self.step_labels: list[QLabel] = []
        for index, name in enumerate(STEPS):
            step = text_label(f"{index + 1}  {name}", "stepLabel", wrap=False)
            self.step_labels.append(step)
            header.addWidget(step)
        outer.addLayout(header)
        subtitle = text_label(
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

    def _scrolling_page(self, spacing: int) -> tuple[QWidget, QVBoxLayout, QVBoxLayout]:
        """A wizard page whose content scrolls above a fixed button row: the page, its outer
        layout (the scroll area is in it; the buttons go below) and the content's layout."""
        page = QWidget()
        outer = QVBoxLayout(page)
        outer.setContentsMargins(0, 0, 0, 0)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(0, 4, 8, 4)
        layout.setSpacing(spacing)
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setWidget(content)
        outer.addWidget(area, 1)
        return page, outer, layout

    def _build_source_page(self) -> QWidget:
        page, outer, layout = self._scrolling_page(10)
        layout.addWidget(text_label("Choose a checkpoint", "pageTitle"))
        self.prefill_note = text_label("", "hint")
        self.prefill_note.hide()
        layout.addWidget(self.prefill_note)
        layout.addWidget(
            text_label(
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
        hub_hint = text_label(
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
        trust_hint = text_label(TRUST_REMOTE_CODE_TEXT, "hint")
        trust_hint.setContentsMargins(24, 0, 0, 0)
        layout.addWidget(trust_hint)

        self.toolkit_banner = ToolkitBanner()
        banner = self.toolkit_banner
        self.toolkit_text, self.command_label = banner.text, banner.command_label
        self.install_progress, self.install_status = banner.progress, banner.status
        self.install_log, self.install_button = banner.log, banner.install_button
        self.install_cancel = banner.install_cancel
        self.install_button.clicked.connect(self.install_toolkit)
        self.install_cancel.clicked.connect(self._cancel_install)
        layout.addWidget(self.toolkit_banner)
        self.source_error = text_label("", "checkFix")
        self.source_error.setStyleSheet("color: #d93025;")
        self.source_error.hide()
        layout.addWidget(self.source_error)
        layout.addStretch(1)
        self.check_button = QPushButton("Check checkpoint")
        self.check_button.setObjectName("primaryAction")
        self.check_button.clicked.connect(self.run_check)
        outer.addLayout(_button_row(self.check_button))
        self._source_changed()
        return page

    def _build_check_page(self) -> CheckPage:
        page = CheckPage()
        # The names the wizard (and its tests) have always used for these widgets.
        self.check_summary, self.check_busy = page.check_summary, page.check_busy
        self.checklist, self.estimate_label = page.checklist, page.estimate_label
        self.recheck_button, self.options_button = page.recheck_button, page.options_button
        page.back_button.clicked.connect(lambda: self.show_page(0))
        self.recheck_button.clicked.connect(self.run_check)
        self.options_button.clicked.connect(lambda: self.show_page(2))
        return page

    def _build_options_page(self) -> QWidget:
        page, outer, layout = self._scrolling_page(8)
        self.options_form = ExportOptionsForm()
        form = self.options_form
        # The names the wizard (and its tests) have always used for these widgets.
        self.format_radios, self.format_group = form.format_radios, form.format_group
        self.int4_box, self.group_combo = form.int4_box, form.group_combo
        self.sym_check, self.ratio_spin = form.sym_check, form.ratio_spin
        self.fallback_combo, self.fallback_text = form.fallback_combo, form.fallback_text
        self.mtp_combo, self.mtp_text = form.mtp_combo, form.mtp_text
        form.changed.connect(self._options_changed)
        layout.addWidget(form)
        # What the chosen format means for this checkpoint (INT4 group size...), checked as the
        # options change, under the settings: the Check page, before any format is chosen,
        # does not judge them.
        self.options_problems = form.problems_label

        layout.addSpacing(6)
        layout.addWidget(text_label("Destination", "pageTitle"))
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
            text_label(
                "A new folder; the default is the app's Models folder, which the Models panel "
                "lists. The export is built beside it and moved in only when it succeeded.",
                "hint",
            )
        )
        self.options_estimate = text_label("", None)
        layout.addWidget(self.options_estimate)
        layout.addStretch(1)
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
        view = ExportRunView()
        self.run_view = view
        # The names the wizard (and its tests) have always used for these widgets.
        self.run_title, self.run_paths, self.queue_label = view.title, view.paths, view.queue_label
        self.stage_label, self.percent_label = view.stage_label, view.percent_label
        self.progress, self.stats_label = view.progress, view.stats_label
        self.cancel_button, self.result_box = view.cancel_button, view.result_box
        self.result_icon, self.result_title = view.result_icon, view.result_title
        self.result_text, self.verify_list = view.result_text, view.verify_list
        self.chat_button, self.models_button = view.chat_button, view.models_button
        self.again_button, self.warnings_check = view.again_button, view.warnings_check
        self.log_view = view.log_view
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.chat_button.clicked.connect(self._open_in_chat)
        self.models_button.clicked.connect(self._show_in_models)
        self.again_button.clicked.connect(lambda: self.show_page(0))
        return view

    @property
    def _log_warnings(self) -> int:
        return self.run_view.log_warnings

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

    def restyle(self) -> None:
        """The theme changed: resolve the stylesheet's palette() colours again."""
        self.setStyleSheet(panel_style())

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

    def prefill_from_discover(self, hub_id: str, weight_format: str) -> None:
        """From Discover: the hub id and the precision recommended for this computer."""
        self.set_source(hub_id)
        self.options_form.set_weight_format(weight_format)
        self.prefill_note.setText(
            f"From Discover: {hub_id}, {weight_format.upper()} (recommended for this computer; "
            "you can change it under Options). Check checkpoint reads its details from the "
            "Hugging Face hub, so it needs an internet connection unless the model is already "
            "in the local cache."
        )
        self.prefill_note.show()

    def prefill_from_model(self, model_dir: Path) -> None:
        """Re-export: start from the checkpoint an exported model was made from, if known."""
        from qwen_mtp_desktop.core.models.folders.manifest import read_manifest

        try:
            manifest = read_manifest(model_dir)
        except ValueError:
            manifest = None
        if manifest is not None and manifest.source:
            self.set_source(manifest.source, revision=None)
            fmt = manifest.options.get("weight_format")
            if isinstance(fmt, str):
                self.options_form.set_weight_format(fmt)
        else:
            self.show_page(0)

    # --- source page ----------------------------------------------------------------------

    def _source_text(self) -> tuple[str, str | None]:
        if self.hub_radio.isChecked():
            return self.hub_edit.text().strip(), self.revision_edit.text().strip() or None
        return self.folder_edit.text().strip(), None

    def _source_changed(self) -> None:
        text, _revision = self._source_text()
        if hasattr(self, "prefill_note") and text not in self.prefill_note.text():
            self.prefill_note.hide()
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
            self.toolkit_banner.set_missing(list(missing))

    # --- preflight ------------------------------------------------------------------------

    def current_options(self) -> ExportOptions:
        return self.options_form.options(trust_remote_code=self.trust_check.isChecked())

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
            self._show_report(report, with_options=then is not None)
            if then is not None:
                if report.ok:
                    then()
                else:  # the options page shows what its settings must change
                    self.show_page(2 if only_option_failures(report) else 1)

        def failed(exc: Exception) -> None:
            if serial != self._preflight_serial:
                return
            self.check_busy.hide()
            self.recheck_button.setEnabled(True)
            self.export_button.setEnabled(True)
            self.check_summary.setText(f"The check itself failed: {exc}")
            self.show_page(1)

        self._runner.submit(work, done, failed)

    def _show_report(self, report: PreflightReport, *, with_options: bool = False) -> None:
        self.report = report
        self._checkpoint = report.checkpoint if report.checkpoint.config is not None else None
        if not with_options:  # the check before exporting judges the options as they are
            self.options_form.fit_group_size(fitting_group_size(report.checkpoint.config))
        self.export_button.setEnabled(True)
        self.check_page.show_report(
            report,
            with_options=with_options,
            weight_format=self.current_options().weight_format or "fp32",
        )
        self._options_changed()

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
        if not hasattr(self, "options_estimate"):
            return
        options = self.current_options()
        if not self._destination_edited and self._source is not None:
            self.dest_edit.blockSignals(True)
            self.dest_edit.setText(
                str(default_destination(self._source, options, self._models_dir))
            )
            self.dest_edit.blockSignals(False)
        checkpoint = self._checkpoint
        problems = check_options(checkpoint.config, options) if checkpoint is not None else []
        self.options_problems.setText(
            "\n".join(f"{item.title}: {item.message} {item.fix}".strip() for item in problems)
        )
        self.options_problems.setProperty(
            "status", "fail" if any(i.status == "fail" for i in problems) else "warn"
        )
        self.options_problems.style().unpolish(self.options_problems)
        self.options_problems.style().polish(self.options_problems)
        self.options_problems.setVisible(bool(problems))
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
                "Keep the folder",
            ):
                return
            overwrite = True
        self.run_check(overwrite=overwrite, then=lambda: self._confirmed(destination, overwrite))

    def _confirmed(self, destination: Path, overwrite: bool) -> None:
        """Queue the export once the user accepted what the Options page warns of."""
        warnings = option_warnings(self.report) if self.report is not None else ""
        if warnings and not self._dialogs.confirm(
            self, "Export with this warning?", warnings, "Export anyway", "Change the options"
        ):
            self.show_page(2)
            return
        self._queue(destination, overwrite)

    def _queue(self, destination: Path, overwrite: bool) -> None:
        assert self._source is not None
        request = ExportRequest(
            self._source,
            destination,
            self.current_options(),
            overwrite=overwrite,
            verify_generation=self._verify_generation,
        )
        self.run_view.begin(
            f"Exporting {self._source.short_name} → {destination.name}",
            f"{self._source.display} → {destination}",
        )
        self._job_id = self.jobs.submit(request)
        self._update_queue_label()
        self.show_page(3)

    # --- run page -------------------------------------------------------------------------

    def _on_cancel_clicked(self) -> None:
        if self._dialogs.confirm(
            self,
            "Stop the export?",
            "The export stops and its partial output is removed; the source is untouched.",
            "Stop export",
            "Keep exporting",
        ):
            self.cancel_export()

    def cancel_export(self) -> None:
        if self._job_id is not None:
            self.run_view.cancelling()
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
        self.run_view.started()
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
            self.run_view.add_log_lines(lines)

    def _on_progress(self, job_id: int, event: ProgressEvent) -> None:
        if job_id == self._job_id:
            self.run_view.show_progress(event)

    def _on_stats(self, job_id: int, stats: ProcessStats) -> None:
        if job_id == self._job_id:
            self.run_view.show_stats(stats)

    def _on_finished(self, job_id: int, outcome: object) -> None:
        if job_id == self._install_id and isinstance(outcome, InstallOutcome):
            self._install_finished(outcome)
            return
        if job_id != self._job_id or not isinstance(outcome, ExportOutcome):
            return
        self.last_outcome = outcome
        self.run_view.show_outcome(outcome)
        self._result_path = outcome.output_dir if outcome.succeeded else None
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
        self.toolkit_banner.installing(waiting=self.jobs.busy)
        self._install_id = self.jobs.submit_install(InstallRequest(command))

    def _cancel_install(self) -> None:
        if self._install_id is not None:
            self.jobs.cancel(self._install_id)

    def _install_finished(self, outcome: InstallOutcome) -> None:
        self._install_id = None
        if outcome.succeeded:
            status = "Installed. Checking the versions…"
        elif outcome.cancelled or outcome.process is None:
            status = "Installation cancelled."
        else:
            status = str(outcome.error) if outcome.error else "pip failed."
        self.toolkit_banner.installed(status)
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
            "Keep exporting",
        ):
            return False
        self.jobs.cancel(None)
        return True

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Cancel jobs and stop the export thread (its subprocesses are gone after this)."""
        self.run_view.stop()
        return self.jobs.shutdown(timeout_ms)


def _hub_cache() -> Path:
    from qwen_mtp_desktop.core.models.export.hub import hub_cache_dir

    return hub_cache_dir()


def _inspect(source: ExportSource) -> CheckpointInfo:
    if source.kind == "hub":
        from qwen_mtp_desktop.core.models.export.hub import inspect_hub_checkpoint

        return inspect_hub_checkpoint(source.value, source.revision)
    return inspect_checkpoint_folder(Path(source.value))
