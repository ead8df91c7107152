"""The app-wide Settings dialog (File > Settings…, Ctrl+,): appearance, the model opened at
start, conversation memory (the budget for kept conversation states), the local API server,
and the data folders.

Each change is saved when it is made (no Apply button to forget). The theme applies at once.
The local API server keeps its own dialog (ui/dialogs/api_server.py); this one links to it. Checking
a new models folder looks at the file system, so it runs on the I/O thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFormLayout,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.files.paths import AppPaths
from qwen_mtp_desktop.core.models.data_folders import (
    FolderChange,
    FolderChoice,
    FolderChoiceError,
    apply_models_folder,
    choose_models_folder,
)
from qwen_mtp_desktop.core.models.library import DEMO_MODEL_NAME, display_name
from qwen_mtp_desktop.core.settings.store import THEMES, SettingsStore
from qwen_mtp_desktop.core.system.state_budget import MAX_SETTING_MB, describe_automatic, setting_mb
from qwen_mtp_desktop.ui.widgets.asking import choose_folder, confirm
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from qwen_mtp_desktop.ui.window_fit import fit_dialog
from qwen_mtp_desktop.workers.tasks import TaskRunner

THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}
#: The conversation-memory choices besides Automatic (None).
KEEP_NOTHING, CUSTOM = "nothing", "custom"
MEMORY_NOTE = (
    "The engine keeps each chat's processed conversation between turns, so a follow-up "
    "question, Regenerate or switching back to a chat reads only its new tokens and starts "
    "at once. Least recently used chats are dropped first. A change applies the next time a "
    "model loads (Eject, or pick another model). The budget is for kept chats only: reading a "
    "long prompt needs working memory of its own, which grows with the prompt and is not "
    "counted here."
)


@dataclass
class SettingsDialogs:
    """What the dialog asks the user; tests replace these."""

    choose_folder: Callable[[QWidget, str, Path], Path | None] = choose_folder
    confirm: Callable[[QWidget, str, str, str], bool] = confirm


class SettingsDialog(QDialog):
    """Signals:
    theme_changed(str): "system", "light" or "dark" (already saved); the window applies it.
    server_requested(): open the local API server's dialog.
    open_folder_requested(Path): show this folder in the file manager.
    """

    theme_changed = Signal(str)
    server_requested = Signal()
    open_folder_requested = Signal(object)

    def __init__(
        self,
        store: SettingsStore,
        paths: AppPaths,
        runner: TaskRunner,
        parent: QWidget | None = None,
        *,
        models: Sequence[Path] = (),
        dialogs: SettingsDialogs | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.setMinimumSize(560, 420)
        self._store = store
        self._paths = paths
        self._runner = runner
        self._dialogs = dialogs or SettingsDialogs()
        self._models: list[Path] = list(models)
        #: The last models-folder change's message (or refusal), for the user and tests.
        self.folder_message = ""
        self.checking_folder = False

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 12)
        area = QScrollArea()
        self._area = area
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        content = QWidget()
        layout = QVBoxLayout(content)
        layout.setContentsMargins(20, 16, 20, 8)
        layout.setSpacing(14)
        area.setWidget(content)
        outer.addWidget(area, 1)

        # Appearance
        appearance = QGroupBox("Appearance")
        form = QFormLayout(appearance)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        self.theme_combo = QComboBox()
        for theme in THEMES:
            self.theme_combo.addItem(THEME_LABELS[theme], theme)
        self.theme_combo.setCurrentIndex(max(self.theme_combo.findData(store.settings.theme), 0))
        self.theme_combo.currentIndexChanged.connect(self._on_theme_chosen)
        form.addRow("Theme", self.theme_combo)
        layout.addWidget(appearance)

        # Startup
        startup = QGroupBox("Startup")
        startup_layout = QVBoxLayout(startup)
        row = QHBoxLayout()
        row.addWidget(QLabel("Open at start"))
        self.default_combo = QComboBox()
        self.default_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.default_combo.setMinimumContentsLength(24)
        self.default_combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        row.addWidget(self.default_combo, 1)
        startup_layout.addLayout(row)
        self.default_note = text_label("", "muted")
        startup_layout.addWidget(self.default_note)
        layout.addWidget(startup)
        self._fill_default_models()
        self.default_combo.currentIndexChanged.connect(self._on_default_chosen)

        layout.addWidget(self._build_memory(store.settings.conversation_memory_mb))

        # Local API server: its own dialog holds the settings; one place to change them.
        server = QGroupBox("Local API server")
        server_layout = QHBoxLayout(server)
        self.server_status = text_label("", "muted")
        server_layout.addWidget(self.server_status, 1)
        self.server_button = QPushButton("Local API server settings…")
        self.server_button.clicked.connect(self.server_requested)
        server_layout.addWidget(self.server_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(server)
        self.show_server_state()

        # Data folders
        folders = QGroupBox("Data folders")
        grid = QGridLayout(folders)
        grid.setColumnStretch(1, 1)
        grid.setHorizontalSpacing(10)
        self.folder_labels: dict[str, QLabel] = {}
        self.open_buttons: dict[str, QPushButton] = {}
        rows = (
            ("models", "Models", paths.models_dir),
            ("chats", "Chats database", paths.chats_db),
            ("logs", "Logs", paths.log_dir),
        )
        for index, (key, title, where) in enumerate(rows):
            grid.addWidget(QLabel(title), index, 0, Qt.AlignmentFlag.AlignTop)
            value = plain_label(text_label(str(where)))  # a path may hold any character
            value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            grid.addWidget(value, index, 1)
            self.folder_labels[key] = value
            button = QPushButton("Open")
            button.setToolTip(
                plain_tooltip(f"Show {'the folder of ' if key == 'chats' else ''}{where}")
            )
            folder = where.parent if key == "chats" else where
            button.clicked.connect(lambda _c=False, f=folder: self.open_folder_requested.emit(f))
            grid.addWidget(button, index, 2, Qt.AlignmentFlag.AlignTop)
            self.open_buttons[key] = button
        self.change_models_button = QPushButton("Change…")
        self.change_models_button.setToolTip("Where new exports go; nothing is moved")
        self.change_models_button.clicked.connect(self._on_change_models_clicked)
        grid.addWidget(self.change_models_button, 0, 3, Qt.AlignmentFlag.AlignTop)
        pending = store.settings.models_dir
        if pending and Path(pending) != paths.models_dir:
            self.folder_labels["models"].setText(
                f"{paths.models_dir}\n(from the next start: {pending})"
            )
        self.folder_status = text_label(  # made plain below: it quotes folders and errors
            "Change… sets where new exports go, from the next start. Models already exported "
            "are never moved: they stay where they are and stay listed.",
            "muted",
        )
        plain_label(self.folder_status)
        grid.addWidget(self.folder_status, len(rows), 0, 1, 4)
        layout.addWidget(folders)
        layout.addStretch(1)

        buttons = QHBoxLayout()
        buttons.setContentsMargins(20, 0, 20, 0)
        self.save_error = plain_label(text_label("", "messageError"))  # quotes OS errors
        buttons.addWidget(self.save_error, 1)
        self.close_button = QPushButton("Close")
        self.close_button.setDefault(True)
        self.close_button.clicked.connect(self.accept)
        buttons.addWidget(self.close_button)
        outer.addLayout(buttons)

    # --- public ---------------------------------------------------------------------------

    def fit_to_content(self) -> None:
        """As large as its content wants (the folder paths on one line where they fit),
        within the window it opens over: no sideways scrolling, no fixed size."""
        content = self._area.widget()
        scroll = self._area.verticalScrollBar().sizeHint().width()
        hint = content.sizeHint() if content is not None else QSize(560, 420)
        outer = self.layout()
        margins = outer.contentsMargins() if outer is not None else None
        extra = (margins.top() + margins.bottom()) if margins is not None else 0
        buttons = self.close_button.sizeHint().height() + extra + 8
        fit_dialog(self, QSize(hint.width() + scroll + 4, hint.height() + buttons))

    def set_models(self, models: Sequence[Path]) -> None:
        """The library's usable models changed (a scan finished)."""
        self._models = list(models)
        self.default_combo.blockSignals(True)
        self._fill_default_models()
        self.default_combo.blockSignals(False)

    def show_server_state(self) -> None:
        settings = self._store.settings
        if settings.api_server:
            where = "every network interface" if settings.api_server_lan else "this computer"
            self.server_status.setText(
                f"On: port {settings.api_server_port}, reachable from {where}."
            )
        else:
            self.server_status.setText("Off. Other apps can use the loaded model when it is on.")

    # --- conversation memory --------------------------------------------------------------

    def _build_memory(self, current: int | None) -> QGroupBox:
        box = QGroupBox("Conversation memory")
        layout = QVBoxLayout(box)
        row = QHBoxLayout()
        self.memory_combo = QComboBox()
        self.memory_combo.addItem(describe_automatic(), None)
        self.memory_combo.addItem("Keep nothing (every turn reads the whole chat)", KEEP_NOTHING)
        self.memory_combo.addItem("Custom budget", CUSTOM)
        self.memory_combo.setAccessibleName("Conversation memory")
        self.memory_spin = QSpinBox()
        self.memory_spin.setRange(1, MAX_SETTING_MB)
        self.memory_spin.setSingleStep(256)
        self.memory_spin.setSuffix(" MB")
        self.memory_spin.setAccessibleName("Conversation memory budget")
        self.memory_spin.setToolTip("1,000 MB = 1 GB")
        row.addWidget(self.memory_combo, 1)
        row.addWidget(self.memory_spin)
        layout.addLayout(row)
        layout.addWidget(text_label(MEMORY_NOTE, "muted"))
        choice = None if current is None else KEEP_NOTHING if current == 0 else CUSTOM
        self.memory_combo.setCurrentIndex(max(self.memory_combo.findData(choice), 0))
        self.memory_spin.setValue(current if current else 2000)
        self.memory_spin.setEnabled(choice == CUSTOM)
        self.memory_combo.currentIndexChanged.connect(self._on_memory_changed)
        self.memory_spin.valueChanged.connect(self._on_memory_changed)
        return box

    def _on_memory_changed(self, *_args: object) -> None:
        choice = self.memory_combo.currentData()
        self.memory_spin.setEnabled(choice == CUSTOM)
        value = (
            None if choice is None else 0 if choice == KEEP_NOTHING else self.memory_spin.value()
        )
        if value is not None and setting_mb(value) is None:
            return  # the spin box's range keeps this from happening; never store it
        self._store.settings.conversation_memory_mb = value
        self._save()

    # --- appearance and startup -------------------------------------------------------------

    def _save(self) -> bool:
        try:
            self._store.save()
        except OSError as exc:
            self.save_error.setText(f"The settings could not be saved: {exc}")
            return False
        self.save_error.clear()
        return True

    def _on_theme_chosen(self, _index: int) -> None:
        theme = self.theme_combo.currentData()
        if theme not in THEMES:
            return
        self._store.settings.theme = theme
        self._save()
        self.theme_changed.emit(theme)

    def _fill_default_models(self) -> None:
        combo = self.default_combo
        combo.clear()
        combo.addItem(f"{DEMO_MODEL_NAME} (bundled; counts and repeats only)", None)
        for path in self._models:
            combo.addItem(display_name(path), str(path))
            combo.setItemData(combo.count() - 1, str(path), Qt.ItemDataRole.ToolTipRole)
        current = self._store.settings.default_model
        index = combo.findData(current) if current else 0
        if current and index < 0:
            combo.addItem(f"{Path(current).name} (not found)", current)
            index = combo.count() - 1
        combo.setCurrentIndex(max(index, 0))
        self._describe_default()

    def _describe_default(self) -> None:
        current = self._store.settings.default_model
        if current and self.default_combo.currentText().endswith("(not found)"):
            self.default_note.setText(
                f"{current} was not found at the last scan: the demo model opens instead until "
                "it is back."
            )
        else:
            self.default_note.setText(
                "Loaded when the app starts. The chat's model picker switches models any time."
            )

    def _on_default_chosen(self, _index: int) -> None:
        value = self.default_combo.currentData()
        self._store.settings.default_model = value if isinstance(value, str) else None
        self._save()
        self._describe_default()

    # --- models folder --------------------------------------------------------------------

    def _on_change_models_clicked(self) -> None:
        start = self._paths.models_dir if self._paths.models_dir.exists() else Path.home()
        chosen = self._dialogs.choose_folder(self, "Choose the models folder", start)
        if chosen is not None:
            self.change_models_folder(str(chosen))

    def change_models_folder(self, text: str) -> None:
        """Check `text` off the GUI thread, then ask, then save (nothing is moved)."""
        self.checking_folder = True
        self.change_models_button.setEnabled(False)
        self.folder_status.setText("Checking the folder…")
        paths = self._paths
        self._runner.submit(
            lambda: choose_models_folder(text, paths), self._on_folder_checked, self._on_refused
        )

    def _on_refused(self, exc: Exception) -> None:
        self.checking_folder = False
        self.change_models_button.setEnabled(True)
        reason = str(exc) if isinstance(exc, FolderChoiceError) else f"{exc}"
        self.folder_message = f"Not changed: {reason}"
        self.folder_status.setText(self.folder_message)

    def _on_folder_checked(self, choice: FolderChoice) -> None:
        self.checking_folder = False
        self.change_models_button.setEnabled(True)
        old, folder = self._paths.models_dir, choice.folder
        warning = f"\n\nWarning: {choice.warning}" if choice.warning else ""
        if not self._dialogs.confirm(
            self,
            "Change the models folder?",
            f"New exports will go to {folder} from the next start of the app.\n\n"
            f"Models already in {old} are not moved, copied or deleted: they stay there and "
            f"stay listed in Models (the old folder is kept as a library folder).{warning}",
            "Change",
        ):
            self.folder_message = "Not changed."
            self.folder_status.setText(self.folder_message)
            return
        settings = self._store.settings
        before = (settings.models_dir, list(settings.model_folders))
        change: FolderChange = apply_models_folder(
            settings, folder, self._paths, warning=choice.warning
        )
        if self._save():
            self.folder_message = change.message
            self.folder_labels["models"].setText(f"{old}\n(from the next start: {folder})")
        else:
            settings.models_dir, settings.model_folders = before
            self.folder_message = "Not changed: the settings could not be saved."
        self.folder_status.setText(self.folder_message)
