"""The Models panel: the model library on the left (the app's model folder, the folders you
added, the bundled demo model), the selected model's report and actions on the right.

Threads: discovery, inspection and deletion run on the panel's "model-library" TaskRunner;
checksum verification runs on its own "model-verify" runner, so a long check never holds up a
rescan; "Deploy to OVMS…" writes on a "model-deploy" runner. Library folders (and their
subfolders, and every model folder) are watched with a QFileSystemWatcher; a burst of changes
is debounced into one rescan. A rescan re-inspects only the folders whose listing changed
(name, size, mtime of each entry)."""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, Qt, QTimer, QUrl, Signal
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.files.fileio import folder_bytes
from qwen_mtp_desktop.core.files.paths import AppPaths, app_paths
from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.folders.memory import (
    DEFAULT_CONTEXT_LENGTH,
    available_memory,
    default_kv_precision,
)
from qwen_mtp_desktop.core.models.folders.report import Diagnostic, KvPrecision, ModelReport
from qwen_mtp_desktop.core.models.library import (
    LibraryEntry,
    LibraryError,
    LibraryFolder,
    adopt_model,
    delete_model_dir,
    deletion_problem,
    folder_signature,
    forget_model,
    is_default,
    library_folders,
    reestimate,
    remove_folder,
    remove_from_library,
    scan_library,
    set_default_model,
    watch_targets,
    worst_severity,
)
from qwen_mtp_desktop.core.models.library import add_folder as add_library_folder
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.models.common import ModelDialogs, panel_style
from qwen_mtp_desktop.ui.models.detail_parts import integrity_summary
from qwen_mtp_desktop.ui.models.details import ModelDetails
from qwen_mtp_desktop.ui.models.finding_words import PASSED_CODES
from qwen_mtp_desktop.ui.models.library_view import PATH_ROLE, LibraryView
from qwen_mtp_desktop.ui.models.ovms_dialog import OvmsDeployDialog
from qwen_mtp_desktop.ui.widgets.style import is_dark
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

#: Quiet time after the last file-system event before rescanning (a copy fires many events).
WATCH_DEBOUNCE_MS = 800
_PATH_ROLE = PATH_ROLE
MemoryProbe = Callable[[], tuple[int | None, int | None]]
Signature = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class _ScanResult:
    folders: list[LibraryFolder]
    entries: list[LibraryEntry]
    signatures: dict[Path, Signature]
    watch: list[Path]
    memory: tuple[int | None, int | None]


class ModelsPanel(QWidget):
    """Signals:
    open_in_chat(Path): the user wants to chat with this model.
    reexport_requested(Path): the user wants to re-export / compress this model.
    validate_requested(Path): the user wants MTP validated on this model.
    default_model_changed(Path): the default model changed (saved to the settings already).
    model_deleted(Path): a model folder was deleted from disk.
    models_changed(list): the usable model folders (list[Path]) after each scan.
    scan_finished(): a scan and every inspection it started have reported back.
    verify_finished(Path): a checksum check ended (done, cancelled or failed).
    discover_requested(): the user wants the Discover list (Qwen3.5 checkpoints to export).
    add_head_requested(Path): the user wants the MTP head added to this model.
    """

    open_in_chat = Signal(object)
    reexport_requested = Signal(object)
    validate_requested = Signal(object)
    default_model_changed = Signal(object)
    model_deleted = Signal(object)
    models_changed = Signal(list)
    scan_finished = Signal()
    verify_finished = Signal(object)
    discover_requested = Signal()
    add_head_requested = Signal(object)
    # From the verify thread to the GUI thread (queued): path, done bytes, total bytes.
    _verify_progress = Signal(object, object, object)

    def __init__(
        self,
        store: SettingsStore,
        paths: AppPaths | None = None,
        parent: QWidget | None = None,
        *,
        dialogs: ModelDialogs | None = None,
        memory_probe: MemoryProbe = available_memory,
        debounce_ms: int = WATCH_DEBOUNCE_MS,
        autostart: bool = True,
        runner: TaskRunner | None = None,
        verify_runner: TaskRunner | None = None,
        deploy_runner: TaskRunner | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("modelsPanel")
        self._store = store
        self._paths = paths or app_paths()
        self.dialogs = dialogs or ModelDialogs()
        self._memory_probe = memory_probe
        # The app hands its threads in (workers.threads); a panel on its own makes its own.
        self._runner = runner or TaskRunner("model-library", self)
        self._verify_runner = verify_runner or TaskRunner("model-verify", self)
        # Writing an OVMS repository (copies can take minutes) holds up neither scans nor checks.
        self._deploy_runner: TaskRunner | None = deploy_runner  # made on first use if None
        self.ovms_dialog: OvmsDeployDialog | None = None
        self._generation = 0
        self._scanning = False
        self._scans_done = 0
        self._pending: set[Path] = set()
        self._folders: list[LibraryFolder] = []
        self._entries: list[LibraryEntry] = []
        self._reports: dict[Path, tuple[Signature, ModelReport]] = {}
        self._views: dict[Path, ModelReport] = {}
        # Checksum findings with the folder listing they were made for.
        self._verified: dict[Path, tuple[Signature, list[Diagnostic]]] = {}
        self._verifying: Path | None = None
        self._verify_cancel = threading.Event()
        self._memory: tuple[int | None, int | None] = (None, None)
        self._context_length = DEFAULT_CONTEXT_LENGTH
        self._selected: Path | None = None
        #: The model the chat has loaded (marked in the list and the details), if any.
        self._loaded: Path | None = None
        #: A model to select when the next scan has listed it (a finished export).
        self._select_after_scan: Path | None = None
        self._closed = False
        self._message = ""  # the last action's outcome, kept above the scan summary
        self._build()
        app = QApplication.instance()
        self.setStyleSheet(panel_style(isinstance(app, QApplication) and is_dark(app)))
        self._watcher = QFileSystemWatcher(self)
        self._watcher.directoryChanged.connect(self._on_fs_changed)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(debounce_ms)
        self._debounce.timeout.connect(self.rescan)
        self._verify_progress.connect(self._on_verify_progress)
        if autostart:
            QTimer.singleShot(0, self.rescan)

    # --- layout ----------------------------------------------------------------------------

    def _build(self) -> None:
        root = QHBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        root.setSpacing(0)

        library = LibraryView()
        self.library_view = library
        # The names the panel (and its tests) have always used for these widgets.
        self.add_folder_button, self.rescan_button = (
            library.add_folder_button,
            library.rescan_button,
        )
        self.discover_button = library.discover_button
        self.model_list, self.folder_list = library.model_list, library.folder_list
        self.remove_folder_button, self.status_label = (
            library.remove_folder_button,
            library.status_label,
        )
        self.add_folder_button.clicked.connect(self._on_add_folder_clicked)
        self.rescan_button.clicked.connect(self.rescan)
        self.discover_button.clicked.connect(self.discover_requested)
        self.model_list.itemSelectionChanged.connect(self._on_selection_changed)
        self.folder_list.itemSelectionChanged.connect(self._on_folder_selection_changed)
        self.remove_folder_button.clicked.connect(self._on_remove_folder_clicked)
        root.addWidget(library, 2)

        self.details = ModelDetails()
        self.details.show_empty("Looking for models…")
        self.details.context_length_changed.connect(self._on_context_changed)
        self.details.verify_cancel_requested.connect(self.cancel_verify)
        d = self.details
        d.open_button.clicked.connect(self._on_open_clicked)
        d.default_button.clicked.connect(self.set_default_selected)
        d.validate_button.clicked.connect(self._on_validate_clicked)
        d.add_head_button.clicked.connect(self._on_add_head_clicked)
        d.verify_button.clicked.connect(self.verify_selected)
        d.reveal_button.clicked.connect(self._on_reveal_clicked)
        d.reexport_button.clicked.connect(self._on_reexport_clicked)
        d.deploy_button.clicked.connect(self.deploy_selected)
        d.remove_button.clicked.connect(self.remove_selected)
        d.delete_button.clicked.connect(self.delete_selected)
        root.addWidget(self.details, 5)

    # --- public API ------------------------------------------------------------------------

    def restyle(self, dark: bool) -> None:
        """The theme changed (Settings > Appearance)."""
        self.setStyleSheet(panel_style(dark))

    @property
    def entries(self) -> list[LibraryEntry]:
        return list(self._entries)

    @property
    def folders(self) -> list[LibraryFolder]:
        return list(self._folders)

    @property
    def busy(self) -> bool:
        """A scan, an inspection, a deletion or a verification is still running."""
        return (
            self._scanning
            or self._runner.pending > 0
            or self._verify_runner.pending > 0
            or (self._deploy_runner is not None and self._deploy_runner.pending > 0)
            or self._debounce.isActive()
        )

    @property
    def scans_done(self) -> int:
        return self._scans_done

    @property
    def selected_path(self) -> Path | None:
        return self._selected

    @property
    def watched_folders(self) -> list[str]:
        return list(self._watcher.directories())

    @property
    def loaded_path(self) -> Path | None:
        return self._loaded

    def set_loaded(self, model_dir: Path | None) -> None:
        """The chat loaded this model (None: ejected, or a remote model)."""
        self._loaded = Path(model_dir).resolve() if model_dir is not None else None
        self._fill_list()
        self._show_selected()

    def report(self, model_dir: Path) -> ModelReport | None:
        """The report as shown: inspection + memory at the chosen context length."""
        if model_dir not in self._views:
            base = self._reports.get(model_dir)
            if base is None:
                return None
            available, total = self._memory
            self._views[model_dir] = reestimate(
                base[1],
                self._context_length,
                self._kv_precision(),
                available_bytes=available,
                total_ram_bytes=total,
            )
        return self._views[model_dir]

    def verify_findings(self, model_dir: Path) -> list[Diagnostic] | None:
        verified = self._verified.get(model_dir)
        return verified[1] if verified is not None else None

    def select(self, model_dir: Path) -> bool:
        for row in range(self.model_list.topLevelItemCount()):
            item = self.model_list.topLevelItem(row)
            if item is not None and Path(item.data(0, _PATH_ROLE)) == model_dir:
                self.model_list.setCurrentItem(item)
                return True
        return False

    def rescan(self) -> None:
        """Discover the library again (off the GUI thread); re-inspect changed folders."""
        if self._closed:
            return
        self._debounce.stop()
        self._generation += 1
        generation = self._generation
        settings = copy.deepcopy(self._store.settings)  # the worker must not share the lists
        paths, probe = self._paths, self._memory_probe
        self._scanning = True
        self._set_status("Looking for models…", transient=True)

        def scan() -> _ScanResult:
            with contextlib.suppress(OSError):  # so it can be watched before the first export
                paths.models_dir.mkdir(parents=True, exist_ok=True)
            folders = library_folders(settings, paths)
            entries = scan_library(settings, paths)
            signatures = {entry.path: folder_signature(entry.path) for entry in entries}
            return _ScanResult(
                folders, entries, signatures, watch_targets(folders, entries), probe()
            )

        self._runner.submit(
            scan,
            lambda result: self._on_scanned(generation, result),
            lambda exc: self._on_scan_failed(generation, exc),
        )

    def show_model(self, model_dir: Path) -> None:
        """List `model_dir` (a finished export, wherever it was written) and select it once the
        scan that follows has found it."""
        try:
            changed = adopt_model(self._store.settings, model_dir, self._paths)
        except LibraryError as exc:
            self.dialogs.inform(self, "Cannot add this model", str(exc))
            return
        if changed and not self._save_settings():
            return
        self._select_after_scan = model_dir
        self.rescan()

    def add_folder(self, folder: Path) -> bool:
        """Add a folder to the library (what "Add folder…" does with the chosen folder)."""
        try:
            added = add_library_folder(self._store.settings, folder)
        except LibraryError as exc:
            self.dialogs.inform(self, "Cannot add this folder", str(exc))
            return False
        if added and not self._save_settings():
            return False
        self._set_status(f"Added {folder}." if added else f"{folder} is already in the library.")
        self.rescan()
        return added

    def remove_selected(self) -> None:
        entry = self._selected_entry()
        if entry is None:
            return
        try:
            how = remove_from_library(self._store.settings, entry.path)
        except LibraryError as exc:
            self.dialogs.inform(self, "Cannot remove this model", str(exc))
            return
        if not self._save_settings():
            return
        note = "" if how == "hidden" else " (and its folder from the library folders)"
        self._set_status(f"Removed {entry.name}{note}; its files are still in {entry.path}.")
        self._selected = None
        self.rescan()

    def delete_selected(self) -> None:
        """Check off-thread, ask with the folder's name and size, then delete off-thread."""
        entry = self._selected_entry()
        if entry is None:
            return
        if entry.is_demo:
            self.dialogs.inform(
                self, "Cannot delete", "The demo model is part of the app and cannot be deleted."
            )
            return
        paths = self._paths

        def check() -> tuple[str | None, int]:
            problem = deletion_problem(entry.path, paths)
            return problem, 0 if problem else folder_bytes(entry.path)

        self._runner.submit(
            check,
            lambda result: self._on_delete_checked(entry, *result),
            lambda exc: self._on_action_failed("Cannot delete", exc),
        )

    def verify_selected(self) -> None:
        """Check the selected model's files against its manifest, off-thread, cancellable."""
        entry = self._selected_entry()
        if entry is None or self._verifying is not None:
            return
        path = entry.path
        cancel = threading.Event()
        self._verify_cancel = cancel
        self._verifying = path
        emit = self._verify_progress.emit
        last = [-1]

        def progress(done: int, total: int) -> None:
            step = 1000 * done // total if total else 1000
            if step != last[0]:  # at most 1000 updates, however big the model
                last[0] = step
                emit(path, done, total)

        def verify() -> tuple[Signature, list[Diagnostic]]:
            signature = folder_signature(path)
            return signature, verify_checksums(path, progress, cancel.is_set)

        self._verify_runner.submit(
            verify,
            lambda result: self._on_verified(path, *result),
            lambda exc: self._on_verify_failed(path, exc),
        )
        self._set_status(f"Verifying {entry.name}…")
        self._show_selected()

    def deploy_selected(self) -> OvmsDeployDialog | None:
        """Open the "Deploy to OVMS…" dialog for the selected model (the writing runs on the
        panel's "model-deploy" thread, so a long copy never holds up scans or checks)."""
        entry = self._selected_entry()
        if entry is None:
            return None
        if self._deploy_runner is None:
            self._deploy_runner = TaskRunner("model-deploy", self)
        dialog = OvmsDeployDialog(
            entry.path,
            self.report(entry.path),
            self._deploy_runner,
            self,
            device=self._store.settings.device,
            choose_parent=self.dialogs.choose_ovms_parent,
            open_url=self.dialogs.open_url,
        )
        dialog.deployed.connect(
            lambda result: self._set_status(f"OVMS repository written to {result.out}.")
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.ovms_dialog = dialog
        dialog.open()
        return dialog

    def cancel_verify(self) -> None:
        self._verify_cancel.set()

    def set_default_selected(self) -> None:
        entry = self._selected_entry()
        if entry is None:
            return
        previous = self._store.settings.default_model
        set_default_model(self._store.settings, entry.path)
        if not self._save_settings():
            self._store.settings.default_model = previous
            return
        self._set_status(f"{entry.name} opens at start from now on.")
        self._fill_list()
        self._show_selected()
        self.default_model_changed.emit(entry.path)

    def shutdown(self) -> None:
        """Cancel a running check and stop both worker threads."""
        self._closed = True
        self._generation += 1  # queued inspections see they are stale and return at once
        self._debounce.stop()
        self._verify_cancel.set()
        self._verify_runner.shutdown()
        self._runner.shutdown()
        if self._deploy_runner is not None:
            self._deploy_runner.shutdown()

    # --- scanning --------------------------------------------------------------------------

    def _kv_precision(self) -> KvPrecision:
        return default_kv_precision(self._store.settings.device)

    def _on_scanned(self, generation: int, result: _ScanResult) -> None:
        if generation != self._generation or self._closed:
            return  # a newer scan is on its way
        before = {entry.path for entry in self._entries}
        self._folders, self._entries, self._memory = result.folders, result.entries, result.memory
        self._views.clear()
        current = {entry.path for entry in result.entries}
        for gone in sorted(before - current):
            log.info("A listed model folder is gone (moved, renamed or deleted): %s", gone)
        for path in list(self._reports):
            if path not in current:
                del self._reports[path]
                self._verified.pop(path, None)
        stale = [
            entry.path
            for entry in result.entries
            if entry.path not in self._reports
            or self._reports[entry.path][0] != result.signatures[entry.path]
        ]
        for path in stale:
            self._reports.pop(path, None)
            verified = self._verified.get(path)
            if verified is not None and verified[0] != result.signatures[path]:
                self._verified.pop(path)  # the files changed since they were checked
        self._pending = set(stale)
        self._watch(result.watch)
        self._fill_folders()
        self._fill_list()
        wanted, self._select_after_scan = self._select_after_scan, None
        if wanted is not None and self.select(wanted):
            pass  # a model the user just exported
        elif self._selected is None or self._selected not in current:
            self._select_initial()
        else:
            self._show_selected()
        for path in stale:
            self._submit_inspection(generation, path, result.signatures[path])
        if not self._pending:
            self._finish_scan()

    def _submit_inspection(self, generation: int, path: Path, signature: Signature) -> None:
        available, total = self._memory
        kv, context = self._kv_precision(), self._context_length

        def inspect() -> ModelReport | None:
            if generation != self._generation:
                return None  # superseded by a newer scan: do not spend time on it
            return inspect_model(
                path,
                context_length=context,
                kv_precision=kv,
                available_bytes=available,
                total_ram_bytes=total,
                measure_memory=False,
            )

        self._runner.submit(
            inspect,
            partial(self._on_inspected, generation, path, signature),
            partial(self._on_inspect_failed, generation, path, signature),
        )

    def _on_scan_failed(self, generation: int, exc: Exception) -> None:
        log.warning("model library scan failed: %s", exc, exc_info=exc)
        if generation != self._generation:
            return
        self._scanning = False
        self._set_status(f"Could not look for models: {exc}")
        self.scan_finished.emit()

    def _on_inspected(
        self, generation: int, path: Path, signature: Signature, report: ModelReport | None
    ) -> None:
        if generation != self._generation or report is None or self._closed:
            return
        self._reports[path] = (signature, report)
        self._views.pop(path, None)
        self._pending.discard(path)
        self._fill_list()
        if path == self._selected:
            self._show_selected()
        if not self._pending:
            self._finish_scan()

    def _on_inspect_failed(
        self, generation: int, path: Path, signature: Signature, exc: Exception
    ) -> None:
        log.warning("inspecting %s failed: %s", path, exc, exc_info=exc)
        report = ModelReport(path=path, name=path.name)
        report.diagnostics.append(
            Diagnostic(
                "INSPECTION_FAILED",
                "error",
                f"The folder could not be inspected ({type(exc).__name__}: {exc}).",
                "Check the folder's files and permissions, then Rescan.",
            )
        )
        self._on_inspected(generation, path, signature, report)

    def _finish_scan(self) -> None:
        self._scanning = False
        self._scans_done += 1
        count = len(self._entries)
        # The folders listed below, not every folder the watcher holds (it also watches each
        # model's own folder and the subfolders in between).
        folders = len(self._folders)
        self._set_status(
            f"{count} model{'s' if count != 1 else ''} in {folders} library folder"
            f"{'s' if folders != 1 else ''} · changes show up by themselves",
            transient=True,
        )
        usable = [
            entry.path
            for entry in self._entries
            if (report := self.report(entry.path)) is not None and report.usable_for_chat
        ]
        self.models_changed.emit(usable)
        self.scan_finished.emit()

    def _watch(self, targets: list[Path]) -> None:
        wanted = {str(path) for path in targets}
        current = set(self._watcher.directories())
        if current - wanted:
            self._watcher.removePaths(sorted(current - wanted))
        if wanted - current:
            self._watcher.addPaths(sorted(wanted - current))

    # --- list ------------------------------------------------------------------------------

    def _status_of(self, path: Path) -> str:
        report = self.report(path)
        if report is None:
            return "pending"
        findings = [*report.diagnostics, *(self.verify_findings(path) or [])]
        # A passed check (the checksums match) keeps the tick; it is not a note.
        worst = worst_severity([d for d in findings if d.code not in PASSED_CODES])
        return "ok" if worst is None else worst

    def _fill_list(self) -> None:
        self.library_view.fill_models(
            self._entries,
            self.report,
            self._status_of,
            lambda path: is_default(self._store.settings, path),
            self._selected,
            self._loaded,
        )

    def _fill_folders(self) -> None:
        self.library_view.fill_folders(self._folders)

    def _select_initial(self) -> None:
        if not self._entries:
            self._selected = None
            self.details.show_empty(
                "No models yet. Export a Qwen3.5 checkpoint in the Export panel, or add a folder "
                "that holds OpenVINO models."
            )
            return
        settings = self._store.settings
        chosen = next((e for e in self._entries if is_default(settings, e.path)), self._entries[0])
        self.select(chosen.path)

    def _selected_entry(self) -> LibraryEntry | None:
        return next((e for e in self._entries if e.path == self._selected), None)

    def _show_selected(self) -> None:
        entry = self._selected_entry()
        if entry is None:
            if self._entries:
                self.details.show_empty("Select a model to see what it holds.")
            return
        self.details.show_model(
            entry,
            self.report(entry.path),
            is_default=is_default(self._store.settings, entry.path),
            is_loaded=self._loaded is not None and entry.path.resolve() == self._loaded,
            verify_findings=self.verify_findings(entry.path),
            verifying=self._verifying == entry.path,
        )

    # --- helpers ---------------------------------------------------------------------------

    def _set_status(self, text: str, *, transient: bool = False) -> None:
        """Show `text` under the last action's outcome (transient: scan progress and summary,
        which replace each other but never the outcome)."""
        if not transient:
            self._message = text
        self.status_label.setText(
            f"{self._message}\n{text}" if transient and self._message else text
        )

    def _save_settings(self) -> bool:
        try:
            self._store.save()
        except OSError as exc:
            self.dialogs.inform(
                self, "Settings not saved", f"The settings could not be saved: {exc}"
            )
            return False
        return True

    def _on_action_failed(self, title: str, exc: Exception) -> None:
        log.warning("%s: %s", title, exc, exc_info=exc)
        self.dialogs.inform(self, title, str(exc))
        self.rescan()

    # --- slots -----------------------------------------------------------------------------

    def _on_selection_changed(self) -> None:
        items = self.model_list.selectedItems()
        self._selected = Path(items[0].data(0, _PATH_ROLE)) if items else None
        self._show_selected()

    def _on_folder_selection_changed(self) -> None:
        items = self.folder_list.selectedItems()
        removable = bool(items) and items[0].data(Qt.ItemDataRole.UserRole + 1) == "folder"
        self.remove_folder_button.setEnabled(removable)

    def _on_fs_changed(self, _path: str) -> None:
        if not self._closed:
            self._debounce.start()

    def _on_context_changed(self, tokens: int) -> None:
        self._context_length = tokens
        self._views.clear()
        self._fill_list()
        self._show_selected()

    def _on_add_folder_clicked(self) -> None:
        chosen = self.dialogs.choose_folder(self, "Add a folder of models", Path.home())
        if chosen is not None:
            self.add_folder(chosen)

    def _on_remove_folder_clicked(self) -> None:
        items = self.folder_list.selectedItems()
        if not items:
            return
        folder = Path(items[0].data(_PATH_ROLE))
        if remove_folder(self._store.settings, folder) and self._save_settings():
            self._set_status(f"Stopped looking in {folder}; its files stay.")
            self.rescan()

    def _on_open_clicked(self) -> None:
        if self._selected is not None:
            self.open_in_chat.emit(self._selected)

    def _on_add_head_clicked(self) -> None:
        if self.selected_path is not None:
            self.add_head_requested.emit(self.selected_path)

    def _on_validate_clicked(self) -> None:
        if self._selected is not None:
            self.validate_requested.emit(self._selected)

    def _on_reexport_clicked(self) -> None:
        if self._selected is not None:
            self.reexport_requested.emit(self._selected)

    def _on_reveal_clicked(self) -> None:
        if self._selected is not None:
            self.dialogs.open_url(QUrl.fromLocalFile(str(self._selected)))

    def _on_delete_checked(self, entry: LibraryEntry, problem: str | None, size: int) -> None:
        if self._closed:
            return
        if problem is not None:
            self.dialogs.inform(self, "Cannot delete", problem)
            return
        text = (
            f"Delete the folder “{entry.path.name}” and everything in it "
            f"({format_bytes(size)})?\n\n{entry.path}\n\nThis cannot be undone."
        )
        if not self.dialogs.confirm(self, "Delete model from disk", text, "Delete"):
            return
        paths = self._paths
        self._set_status(f"Deleting {entry.name}…")
        self._runner.submit(
            lambda: delete_model_dir(entry.path, paths),
            lambda freed: self._on_deleted(entry, freed),
            lambda exc: self._on_action_failed("Delete failed", exc),
        )

    def _on_deleted(self, entry: LibraryEntry, freed: int) -> None:
        forget_model(self._store.settings, entry.path)
        self._save_settings()
        self._set_status(f"Deleted {entry.path} ({format_bytes(freed)} freed).")
        if self._selected == entry.path:
            self._selected = None
        self.model_deleted.emit(entry.path)
        self.rescan()

    def _on_verify_progress(self, path: Path, done: int, total: int) -> None:
        if path == self._selected and self._verifying == path:
            self.details.set_verify_progress(done, total)

    def _on_verified(self, path: Path, signature: Signature, findings: list[Diagnostic]) -> None:
        self._verifying = None
        self._verify_cancel = threading.Event()
        self._verified[path] = (signature, list(findings))
        _status, summary = integrity_summary(findings)
        self._set_status(f"Integrity check of {path.name}: {summary}")
        self._fill_list()
        self._show_selected()
        self.verify_finished.emit(path)

    def _on_verify_failed(self, path: Path, exc: Exception) -> None:
        log.warning("verifying %s failed: %s", path, exc, exc_info=exc)
        failure = Diagnostic(
            "VERIFY_FAILED", "error", f"The check could not run ({exc}).", "Try again."
        )
        self._on_verified(path, (), [failure])
