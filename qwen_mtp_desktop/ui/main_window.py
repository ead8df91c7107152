"""The main window: a sidebar of panels (Chat, Models, Export, Benchmark) and a status bar."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QRect, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QCloseEvent, QDesktopServices, QKeySequence, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QStackedWidget,
    QWidget,
)

from qwen_mtp_desktop import APP_NAME
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.engine import LoadedModel
from qwen_mtp_desktop.core.files.paths import AppPaths
from qwen_mtp_desktop.core.models.library import (
    LibraryError,
    adopt_model,
    picker_text,
    same_path,
    selected_model,
    set_default_model,
)
from qwen_mtp_desktop.core.settings import model_defaults
from qwen_mtp_desktop.core.settings.presets import ChatPreset
from qwen_mtp_desktop.core.settings.store import UI_WINDOW_GEOMETRY, Settings, SettingsStore
from qwen_mtp_desktop.core.system.state_budget import load_option
from qwen_mtp_desktop.core.tools.mcp.config import McpServer, allowing_tool, servers_from_settings
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.shortcuts import chat_shortcuts
from qwen_mtp_desktop.ui.chat.theme import restyle_chat
from qwen_mtp_desktop.ui.dialogs.api_server import ServerDialog, apply_saved
from qwen_mtp_desktop.ui.dialogs.mcp_servers import McpServersDialog
from qwen_mtp_desktop.ui.model_status import ModelStatus
from qwen_mtp_desktop.ui.widgets.style import (
    app_icon,
    apply_theme,
    is_dark,
    stylesheet,
    use_indicator_style,
)
from qwen_mtp_desktop.ui.window_fit import fit_window, refit_if_outside
from qwen_mtp_desktop.workers.threads import BackgroundThreads

if TYPE_CHECKING:  # built after the first paint, or when opened: imported then
    from qwen_mtp_desktop.core.models.ready.download import PendingDownload
    from qwen_mtp_desktop.ui.bench import BenchPanel
    from qwen_mtp_desktop.ui.dialogs.about import AboutDialog
    from qwen_mtp_desktop.ui.dialogs.settings import SettingsDialog
    from qwen_mtp_desktop.ui.discover.dialog import DiscoverDialog
    from qwen_mtp_desktop.ui.discover.download_dialog import DownloadDialog
    from qwen_mtp_desktop.ui.export.panel import ExportPanel
    from qwen_mtp_desktop.ui.models.add_head_dialog import AddHeadDialog
    from qwen_mtp_desktop.ui.models.panel import ModelsPanel

log = logging.getLogger(__name__)

PANELS = ("Chat", "Models", "Export", "Benchmark")
#: Settings' key on every platform (macOS's standard Preferences key is the same).
SETTINGS_KEY = "Ctrl+,"


def shortcuts() -> list[tuple[str, str]]:
    """What Help > Keyboard shortcuts lists, the keys as Qt names them on this platform (only
    once the application exists: standard keys come from the platform)."""

    def key(standard: QKeySequence.StandardKey, fallback: str) -> str:
        return QKeySequence(standard).toString() or fallback

    return [
        (key(QKeySequence.StandardKey.New, "Ctrl+N"), "New chat"),
        (SETTINGS_KEY, "Settings"),
        ("Enter", "Send the message"),
        ("Shift+Enter", "New line in the message"),
        ("Esc", "Stop the answer being written"),
        *chat_shortcuts(),
        (key(QKeySequence.StandardKey.Quit, "Ctrl+Q"), "Quit"),
    ]


class MainWindow(QMainWindow):
    """Top-level window. Owns the panels; panels talk to workers, never to core directly on
    the GUI thread for anything slow."""

    def __init__(
        self, paths: AppPaths, store: SettingsStore, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self._paths = paths
        self._store = store
        #: Closing because the system asked (SIGTERM, Ctrl+C): no questions, nothing kept open.
        self._closing_unasked = False
        self.model_dir: Path = selected_model(store.settings)
        # Every background thread of the app, made once and handed to the panels below.
        self.threads = BackgroundThreads(self)
        self.engine_process = self.threads.engine_process
        self.store_runner = self.threads.store
        self.io_runner = self.threads.io
        app = QApplication.instance()
        if isinstance(app, QApplication):
            use_indicator_style(app)  # check boxes that show on a dark palette too
            if store.settings.theme != "system":
                apply_theme(app, store.settings.theme)  # before anything reads the palette
        self.dark = isinstance(app, QApplication) and is_dark(app)
        #: The library's usable models (from the Models panel's scans), for Settings.
        self.model_paths: list[Path] = []
        self.setStyleSheet(stylesheet(self.dark))
        self.setWindowTitle(APP_NAME)
        self.setWindowIcon(app_icon())
        self.setMinimumSize(QSize(760, 520))

        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setFixedWidth(150)
        self.sidebar.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.stack = QStackedWidget()
        # Chat first; the app builds the other panels once the window is painted (app.run_gui
        # calls build_panels), so the window shows sooner (issue 18); any use of one builds
        # them at once. Until then, placeholders.
        self._models: ModelsPanel | None = None
        self._export_panel: ExportPanel | None = None
        self._bench: BenchPanel | None = None
        for name in PANELS:
            QListWidgetItem(name, self.sidebar)
        self.stack.addWidget(self._make_chat())
        for _name in PANELS[1:]:
            self.stack.addWidget(QWidget())
        self.sidebar.currentRowChanged.connect(self._on_row_changed)
        self.sidebar.setCurrentRow(0)

        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.sidebar)
        layout.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        #: Opens a folder in the system's file manager (tests record the URLs instead).
        self.open_url: Callable[[QUrl], object] = QDesktopServices.openUrl
        file_menu = self.menuBar().addMenu("&File")
        # The key itself is the chat panel's shortcut; a second one here would be ambiguous.
        new_chat = QAction(f"&New chat\t{shortcuts()[0][0]}", self)
        new_chat.triggered.connect(self._new_chat)
        file_menu.addAction(new_chat)
        self.settings_action = QAction("&Settings…", self)
        self.settings_action.setShortcut(QKeySequence(SETTINGS_KEY))
        self.settings_action.setMenuRole(QAction.MenuRole.PreferencesRole)
        self.settings_action.triggered.connect(self.show_settings)
        file_menu.addAction(self.settings_action)
        file_menu.addSeparator()
        self.quit_action = QAction("&Quit", self)
        self.quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        self.quit_action.setMenuRole(QAction.MenuRole.QuitRole)
        self.quit_action.triggered.connect(self.close)  # asks first while an export runs
        file_menu.addAction(self.quit_action)

        tools_menu = self.menuBar().addMenu("&Tools")
        self.discover_action = QAction("&Discover Qwen3.5 models…", self)
        self.discover_action.setToolTip("Sizes and memory per precision on this computer")
        self.discover_action.triggered.connect(self.show_discover)
        tools_menu.addAction(self.discover_action)
        self.download_action = QAction("Download a &ready model…", self)
        self.download_action.setToolTip(
            "A Qwen3.5 model already converted to OpenVINO, from the hub (no export toolkit)"
        )
        self.download_action.triggered.connect(lambda: self.show_download())
        tools_menu.addAction(self.download_action)
        # Shown when an interrupted download is found at start (_offer_resume).
        self.resume_action = QAction("Resume download…", self)
        self.resume_action.setVisible(False)
        tools_menu.addAction(self.resume_action)
        self.server_action = QAction("Local &API server…", self)
        self.server_action.setToolTip("Let other apps use the loaded model (OpenAI-compatible)")
        self.server_action.triggered.connect(self.show_server_dialog)
        tools_menu.addAction(self.server_action)
        self.mcp_action = QAction("&MCP servers…", self)
        self.mcp_action.setToolTip("Tools the model may use in a chat, from MCP servers")
        self.mcp_action.triggered.connect(self.show_mcp_dialog)
        tools_menu.addAction(self.mcp_action)
        self.remote_action = QAction("&Remote servers…", self)
        self.remote_action.setToolTip("The remote servers the chat can use: add, edit, remove")
        self.remote_action.triggered.connect(lambda: self.chat.show_remote_servers())
        tools_menu.addAction(self.remote_action)
        help_menu = self.menuBar().addMenu("&Help")
        self.shortcuts_action = QAction("&Keyboard shortcuts", self)
        self.shortcuts_action.triggered.connect(self.show_shortcuts)
        help_menu.addAction(self.shortcuts_action)
        self.open_logs_action = QAction("Open the &log folder", self)
        self.open_logs_action.triggered.connect(lambda: self._open_folder(paths.log_dir))
        help_menu.addAction(self.open_logs_action)
        self.open_data_action = QAction("Open the &data folder (chats, models)", self)
        self.open_data_action.triggered.connect(lambda: self._open_folder(paths.data_dir))
        help_menu.addAction(self.open_data_action)
        help_menu.addSeparator()
        self.about_action = QAction(f"&About {APP_NAME}", self)
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)  # macOS: the app menu
        self.about_action.triggered.connect(self.show_about)
        help_menu.addAction(self.about_action)

        # The chat's model through its router (a remote server shows as such), and what
        # decoded its last answer.
        self.model_label = ModelStatus(self.chat.model.router.names)
        self.api_label = QLabel()
        self.api_label.setVisible(False)
        self.api_label.setToolTip("The local API server is running (Tools > Local API server)")
        # Two parts, two labels: a line between them, as the model's own parts have "·".
        self.api_separator = QFrame()
        self.api_separator.setObjectName("statusSeparator")
        self.api_separator.setFrameShape(QFrame.Shape.VLine)
        self.api_separator.setVisible(False)
        self.statusBar().addPermanentWidget(self.api_label)
        self.statusBar().addPermanentWidget(self.api_separator)
        self.statusBar().addPermanentWidget(self.model_label)
        self.engine_process.api_state.connect(self._on_api_state)
        apply_saved(self.engine_process, store)
        self._server_dialog: ServerDialog | None = None
        self._mcp_dialog: McpServersDialog | None = None
        self._settings_dialog: SettingsDialog | None = None
        self._discover_dialog: DiscoverDialog | None = None
        self._download_dialog: DownloadDialog | None = None
        self._show_model()
        # The status bar follows what the engine really has loaded.
        router = self.chat.model.router
        router.loading.connect(self.model_label.loading)
        router.loaded.connect(self.model_label.loaded)
        router.load_failed.connect(lambda _error: self.model_label.failed())
        self.chat.answered.connect(self.model_label.answered)
        self.chat.last_answer.connect(self.model_label.chat_shown)
        self.engine_process.loaded.connect(self._on_engine_loaded)
        self.engine_process.load_failed.connect(self._on_load_failed)
        self.engine_process.unloaded.connect(self._on_engine_unloaded)
        # The engine runs in its own process; when it dies the window stays and says so.
        self.engine_process.engine_stopped.connect(self.statusBar().showMessage)
        self.engine_process.engine_restarted.connect(self.statusBar().showMessage)
        self._shown_once = False
        self._placed = QRect()
        self._restore_geometry()
        #: Notices shown at start-up (e.g. damaged settings kept aside), newest last.
        self.notices: list[str] = []
        if store.notice:
            notice = store.notice
            QTimer.singleShot(0, lambda: self.show_notice("Settings were reset", notice))

    def show_notice(self, title: str, text: str) -> None:
        """Tell the user something they should know without blocking anything (non-modal)."""
        self.notices.append(text)
        box = QMessageBox(
            QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok, self
        )
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()

    def panel(self, name: str) -> QWidget:
        widget = self.stack.widget(PANELS.index(name))
        assert widget is not None
        return widget

    def show_panel(self, name: str) -> None:
        self.sidebar.setCurrentRow(PANELS.index(name))

    @property
    def panels_built(self) -> bool:
        return self._models is not None

    @property
    def models(self) -> ModelsPanel:
        self.build_panels()
        assert self._models is not None
        return self._models

    @property
    def export_panel(self) -> ExportPanel:
        self.build_panels()
        assert self._export_panel is not None
        return self._export_panel

    @property
    def bench(self) -> BenchPanel:
        self.build_panels()
        assert self._bench is not None
        return self._bench

    def _on_row_changed(self, row: int) -> None:
        if row > 0:
            self.build_panels()
        self.stack.setCurrentIndex(row)

    def _make_chat(self) -> ChatPanel:
        self.chat = ChatPanel(
            self.engine_process,
            self.store_runner,
            self._paths.data_dir / "chats.sqlite3",
            self.model_dir,
            self._paths.log_file,
            dark=self.dark,
            ui_state=self._store.settings.ui_state,
            # Checked when the settings were read (core.settings.store: damaged ones named).
            presets=[ChatPreset.from_stored(p) for p in self._store.settings.chat_presets],
            default_preset=self._store.settings.default_chat_preset,
        )
        self.chat.presets_changed.connect(self._save_presets)
        self.chat.model_defaults.set_entries(  # checked when the settings were read
            [
                model_defaults.ModelDefaults.from_stored(e)
                for e in self._store.settings.model_defaults
            ]
        )
        self.chat.model_defaults.changed.connect(self._save_model_defaults)
        self.chat.model.state_cache_bytes = lambda: load_option(
            self._store.settings.conversation_memory_mb
        )
        self.chat.discover_requested.connect(self.show_discover)
        self.chat.tool_turns.attach(
            self.threads.mcp,
            self.mcp_servers,
            self._allow_tool,
            lambda: self._store.settings.tool_timeout_s,
        )
        self.chat.tool_turns.options.manage_requested.connect(self.show_mcp_dialog)
        self.chat.examples.discover_requested.connect(self.show_discover)
        self.chat.validate_requested.connect(self._validate)
        self.chat.validate_lookup_requested.connect(self._validate_lookup)
        # The chat's model folder vanished: Models drops it now, not after its debounce.
        self.chat.missing.vanished.connect(self._on_chat_model_gone)
        self.chat.missing.relocated.connect(self._on_chat_model_located)
        return self.chat

    def build_panels(self) -> None:
        """Build Models, Export and Benchmark (once): after the first paint, or at once when
        one of them is asked for."""
        if self._models is not None:
            return
        from qwen_mtp_desktop.ui.bench import BenchPanel
        from qwen_mtp_desktop.ui.export.panel import ExportPanel
        from qwen_mtp_desktop.ui.models.panel import ModelsPanel

        models = ModelsPanel(
            self._store,
            self._paths,
            runner=self.threads.models,
            verify_runner=self.threads.model_verify,
            deploy_runner=self.threads.model_deploy,
        )
        self._models = models
        models.set_loaded(self._loaded_dir)
        models.open_in_chat.connect(self._open_in_chat)
        models.models_changed.connect(self.chat.set_models)
        models.models_changed.connect(self._describe_models)
        models.models_changed.connect(self._on_models_changed)
        models.discover_requested.connect(self.show_discover)
        models.add_head_requested.connect(self.show_add_head)
        models.details.state_cache_wanted.connect(self.engine_process.query_state_cache)
        self.engine_process.state_cache.connect(models.details.show_state_cache)

        export_panel = ExportPanel(self.io_runner, self._paths.models_dir, self.threads.exports)
        self._export_panel = export_panel
        export_panel.open_in_chat.connect(self._open_in_chat)
        export_panel.show_in_models.connect(self._show_in_models)
        # Every finished export is listed and selected, wherever it was written.
        export_panel.model_exported.connect(lambda path: models.show_model(Path(path)))
        models.reexport_requested.connect(self._reexport)

        bench = BenchPanel(
            self._loaded_dir or self.model_dir,
            device=self._store.settings.device,
            job=self.threads.bench,
            io=self.threads.bench_io,
        )
        self._bench = bench
        # The engine process lists the devices: OpenVINO is never loaded in this process.
        self.engine_process.devices_listed.connect(self._on_devices)
        self.engine_process.list_devices()
        models.validate_requested.connect(self._validate)
        models.models_changed.connect(bench.set_models)
        bench.recommendation_changed.connect(
            lambda path, _device, _recommendation: self.chat.forget_recommendation(Path(path))
        )
        bench.run_finished.connect(
            lambda report: self.chat.reload_acceptance_reference(Path(report["model"]["path"]))
        )
        row = self.sidebar.currentRow()
        for index, panel in enumerate((models, export_panel, bench), start=1):
            placeholder = self.stack.widget(index)
            assert placeholder is not None
            self.stack.insertWidget(index, panel)
            self.stack.removeWidget(placeholder)
            placeholder.deleteLater()
        self.stack.setCurrentIndex(max(row, 0))

    def _on_devices(self, names: list[str]) -> None:
        self.chat.set_devices(names)
        self.bench.set_devices(names)

    def show_shortcuts(self) -> QMessageBox:
        """Help > Keyboard shortcuts (non-modal)."""
        rows = "".join(
            f"<tr><td><b>{keys}</b></td><td>{what}</td></tr>" for keys, what in shortcuts()
        )
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Keyboard shortcuts", "", parent=self)
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setText(f"<table cellspacing='6'>{rows}</table>")
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        return box

    def _describe_models(self, paths: list[Path]) -> None:
        """Tell the chat's model picker what each model is (from the Models panel's reports)."""
        details = {}
        for path in paths:
            report = self.models.report(path)
            if report is not None:
                details[path] = picker_text(report)
        self.chat.set_model_details(details)

    def _new_chat(self) -> None:
        self.show_panel("Chat")
        self.chat.new_chat()

    def _open_folder(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.open_url(QUrl.fromLocalFile(str(folder)))

    def show_about(self) -> AboutDialog:
        """Help > About: version, git revision and runtime versions (modal)."""
        from qwen_mtp_desktop.ui.dialogs.about import AboutDialog

        dialog = AboutDialog(self, paths=self._paths)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def show_mcp_dialog(self) -> McpServersDialog:
        """Tools > MCP servers (non-modal; one at a time)."""
        if self._mcp_dialog is None:
            self._mcp_dialog = McpServersDialog(self._store, self.threads.mcp, self)
            self._mcp_dialog.servers_changed.connect(self.chat.tool_turns.servers_changed)
        self._mcp_dialog.show()
        self._mcp_dialog.raise_()
        return self._mcp_dialog

    def _save_presets(self, presets: list[ChatPreset], default: str | None) -> None:
        """The chat's presets changed: kept in the settings file at once."""
        self._store.settings.chat_presets = [preset.to_stored() for preset in presets]
        self._store.settings.default_chat_preset = default
        try:
            self._store.save()
        except OSError as exc:
            self.chat.show_problem(f"The presets could not be saved: {exc}", "warning")

    def _save_model_defaults(self, key: str, entry: model_defaults.ModelDefaults | None) -> None:
        """A model's defaults saved or cleared: that one entry written on the latest settings
        (merge on write: what another part of the app saved stays)."""

        def change(settings: Settings) -> None:
            settings.model_defaults = model_defaults.replaced(settings.model_defaults, key, entry)

        try:
            self._store.update(change)
        except OSError as exc:
            self.chat.show_problem(f"The model's defaults could not be saved: {exc}", "warning")

    def _allow_tool(self, server_name: str, tool: str) -> None:
        """The chat's "Always allow this tool": added to that server's entry as saved now (merge
        on write: what the MCP dialog saved meanwhile stays), and shown in the dialog."""
        servers = allowing_tool(self.mcp_servers(), server_name, tool)
        stored = [s.to_dict() for s in servers]
        try:
            self._store.update(lambda settings: setattr(settings, "mcp_servers", stored))
        except OSError as exc:
            self.chat.show_problem(f"The permission could not be saved: {exc}", "warning")
        if self._mcp_dialog is not None:
            self._mcp_dialog.show_permissions()

    def mcp_servers(self) -> list[McpServer]:
        return servers_from_settings(self._store.settings.mcp_servers)

    def show_server_dialog(self) -> ServerDialog:
        """Tools > Local API server (non-modal; one at a time)."""
        if self._server_dialog is None:
            self._server_dialog = ServerDialog(self.engine_process, self._store, self)
        self._server_dialog.show()
        self._server_dialog.raise_()
        return self._server_dialog

    def show_settings(self) -> SettingsDialog:
        """File > Settings… (Ctrl+,), non-modal; one at a time."""
        from qwen_mtp_desktop.ui.dialogs.settings import SettingsDialog

        if self._settings_dialog is None:
            dialog = SettingsDialog(
                self._store, self._paths, self.io_runner, self, models=self.model_paths
            )
            dialog.theme_changed.connect(self.apply_theme)
            dialog.server_requested.connect(self.show_server_dialog)
            dialog.open_folder_requested.connect(self._open_folder)
            self._settings_dialog = dialog
        self._settings_dialog.show_server_state()
        if not self._settings_dialog.isVisible():
            self._settings_dialog.fit_to_content()
        self._settings_dialog.show()
        self._settings_dialog.raise_()
        return self._settings_dialog

    def show_discover(self) -> DiscoverDialog:
        """Tools > Discover (also in Models and the empty chat): non-modal; one at a time."""
        from qwen_mtp_desktop.ui.discover.dialog import DiscoverDialog

        if self._discover_dialog is None:
            dialog = DiscoverDialog(self.io_runner, self._store.settings.device, self)
            dialog.export_requested.connect(self._export_from_discover)
            dialog.download_requested.connect(self.show_download)
            self._discover_dialog = dialog
        if not self._discover_dialog.isVisible():
            self._discover_dialog.fit_to_content()
        self._discover_dialog.show()
        self._discover_dialog.raise_()
        return self._discover_dialog

    def show_download(self, repo_id: str = "", mtp_source: str = "") -> DownloadDialog:
        """Download a ready OpenVINO model (from Discover, or any repo id): a new dialog each
        time, non-modal; the download itself lives in the fetch worker."""
        from qwen_mtp_desktop.ui.discover.download_dialog import DownloadDialog

        dialog = DownloadDialog(
            self.threads.fetch,
            self._paths.models_dir,
            self,
            repo_id=repo_id,
            mtp_source=mtp_source,
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.model_ready.connect(lambda _path: self.models.rescan())
        dialog.open_requested.connect(self._open_in_chat)
        dialog.show()
        dialog.raise_()
        self._download_dialog = dialog
        return dialog

    def _look_for_interrupted_downloads(self) -> None:
        from qwen_mtp_desktop.core.models.ready.download import pending_downloads

        models_dir = self._paths.models_dir
        self.io_runner.submit(lambda: pending_downloads(models_dir), self._offer_resume)

    def _offer_resume(self, pending: list[PendingDownload]) -> None:
        """A download the app was closed (or killed) during: offer it in Tools and say so."""
        if not pending:
            return
        first = pending[0]
        share = f"{first.done_bytes / max(first.total_bytes, 1):.0%}"
        self.resume_action.setText(f"Resume download of {first.repo_id} ({share})…")
        self.resume_action.setVisible(True)
        self.resume_action.triggered.connect(lambda: self.show_download(first.repo_id))
        more = f" (and {len(pending) - 1} more)" if len(pending) > 1 else ""
        self.statusBar().showMessage(
            f"The download of {first.repo_id} was interrupted at {share}{more}: Tools > "
            "Resume download continues where it stopped.",
            30_000,
        )

    def show_add_head(self, model_dir: Path) -> AddHeadDialog:
        """Models > Add MTP head…: rebuild a model's missing head from its checkpoint."""
        from qwen_mtp_desktop.ui.models.add_head_dialog import AddHeadDialog

        dialog = AddHeadDialog(self.threads.fetch, self.io_runner, Path(model_dir), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.head_added.connect(lambda _path: self.models.rescan())
        dialog.show()
        return dialog

    def _export_from_discover(self, hub_id: str, weight_format: str) -> None:
        self.export_panel.prefill_from_discover(hub_id, weight_format)
        self.show_panel("Export")

    def apply_theme(self, theme: str) -> None:
        """Switch light/dark/system at once: the palette, then the stylesheets that use it."""
        app = QApplication.instance()
        if not isinstance(app, QApplication):
            return
        self.dark = apply_theme(app, theme)
        self.setStyleSheet(stylesheet(self.dark))
        restyle_chat(self.chat, self.dark)
        if self._models is not None:
            self._models.restyle(self.dark)
        if self._export_panel is not None:
            self._export_panel.restyle()

    def _on_chat_model_gone(self, model_dir: Path) -> None:
        self.model_label.folder_gone(model_dir)
        if self._models is not None:
            self._models.rescan()

    def _on_chat_model_located(self, gone: Path, located: Path) -> None:
        """The chat's vanished model folder was located: the library lists it (added as a
        folder when no library folder reaches it) and, if the gone one opened at start, the
        located one does from now on. Written with the settings store's merge-on-write."""
        was_default = self._store.settings.default_model is not None and same_path(
            Path(self._store.settings.default_model), gone
        )

        def change(settings: Settings) -> None:
            adopt_model(settings, located, self._paths)
            if was_default:
                set_default_model(settings, located)

        try:
            self._store.update(change)
        except (OSError, LibraryError) as exc:
            log.warning("Could not add the located model folder to the library: %s", exc)
            self.statusBar().showMessage(f"The located folder was not added to Models: {exc}")
        if same_path(self.model_dir, gone):
            self.model_dir = located
        if self._models is not None:
            self._models.rescan()

    def _on_models_changed(self, paths: list[Path]) -> None:
        self.model_paths = list(paths)
        if self._settings_dialog is not None:
            self._settings_dialog.set_models(paths)

    def _on_api_state(self, url: str | None, error: object) -> None:
        self.api_label.setVisible(url is not None)
        self.api_separator.setVisible(url is not None)
        if url is not None:
            self.api_label.setText(f"API: {url.replace('://0.0.0.0:', '://all interfaces:')}")
        elif error is not None:
            self.statusBar().showMessage(f"The local API server did not start: {error}")

    @property
    def _loaded_dir(self) -> Path | None:
        """The folder of the model the engine host has loaded (the engine process's supervisor
        keeps that state; the window reads it)."""
        loaded = self.engine_process.loaded_model
        return loaded.model_dir if loaded is not None else None

    def _on_engine_loaded(self, loaded: LoadedModel) -> None:
        if self._models is not None:
            self._models.set_loaded(loaded.model_dir)
        if self._bench is not None:  # measure the chat's model by default
            self._bench.follow_chat_model(loaded.model_dir)

    def _on_load_failed(self, _error: object) -> None:
        if self._models is not None:
            self._models.set_loaded(None)

    def _on_engine_unloaded(self) -> None:
        if self._models is not None:
            self._models.set_loaded(None)
        self.model_label.unloaded()

    def _show_model(self) -> None:
        self.model_label.show_start(self.model_dir, self._store.settings.device)

    def _restore_geometry(self) -> None:
        saved = self._store.settings.ui_state.get(UI_WINDOW_GEOMETRY)  # validated base64 (issue 29)
        wanted = None
        if saved:
            if self.restoreGeometry(QByteArray.fromBase64(saved.encode("ascii"))):
                wanted = self.geometry()
            else:  # Qt refuses one saved on a screen that is gone: open as on a first start
                log.info("the saved window geometry is not usable on these screens")
        # Fresh or restored, the window must fit the screen it opens on (issue 28).
        self._placed = fit_window(self, wanted)

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt override)
        super().showEvent(event)
        if not self._shown_once:  # the real frame is known now: keep it on the screen
            self._shown_once = True
            self._look_for_interrupted_downloads()
            # Typing goes to the message box at start, not to the panel list (issue 44).
            if self.stack.currentWidget() is self.chat:
                QTimer.singleShot(0, self.chat.composer.editor.setFocus)
            if self.geometry() == self._placed:  # not resized by a caller since
                QTimer.singleShot(0, lambda: refit_if_outside(self))

    def _validate(self, model_dir: Path) -> None:
        self.show_panel("Benchmark")
        self.bench.validate_model(model_dir)

    def _validate_lookup(self, model_dir: Path, workload: str, lookup: DecodingMethod) -> None:
        self.show_panel("Benchmark")
        self.bench.validate_model(model_dir, lookup, prompt_set=workload)

    def _reexport(self, model_dir: Path) -> None:
        self.export_panel.prefill_from_model(model_dir)
        self.show_panel("Export")

    def _show_in_models(self, model_dir: Path) -> None:
        self.models.show_model(Path(model_dir))
        self.show_panel("Models")

    def _open_in_chat(self, model_dir: Path) -> None:
        # A new chat with that model: the open chat keeps its own model (issue 28).
        self.show_panel("Chat")
        self.chat.new_chat(model_dir)

    def shutdown(self) -> None:
        """Stop generating, write what is pending, stop every worker thread."""
        if self._models is not None:
            self._models.shutdown()
        self.chat.shutdown()
        if self._export_panel is not None:
            self._export_panel.shutdown()
        if self._bench is not None:
            self._bench.shutdown()
        self.threads.shutdown()

    def close_unasked(self, reason: str) -> None:
        """Close the way the close button does, without questions (a logout's SIGTERM, Ctrl+C
        in a terminal): a running export is stopped, everything pending is written."""
        log.info("closing: %s", reason)
        self._closing_unasked = True
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt override)
        exports = self._export_panel
        asking = not self._closing_unasked
        if asking and exports is not None and not exports.confirm_quit():  # the user decides
            event.ignore()
            return
        self.shutdown()
        geometry = bytes(self.saveGeometry().toBase64().data()).decode("ascii")
        self._store.settings.ui_state[UI_WINDOW_GEOMETRY] = geometry
        with contextlib.suppress(OSError):  # losing window geometry must never block quitting
            self._store.save()
        super().closeEvent(event)
