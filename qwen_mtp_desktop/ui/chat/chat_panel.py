"""The chat panel: conversations, the streaming transcript, live MTP readouts and settings.

Threads: the model runs in the engine process (EngineProcess); every database call runs on the
store's TaskRunner thread. The GUI thread only updates widgets, so it never waits for either.
Streamed text reaches the database at most every STORE_FLUSH_MS, so a crash loses at most that
much of an answer, and the store marks the answer incomplete on the next start.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QKeySequence,
    QResizeEvent,
    QShortcut,
    QStandardItem,
    QStandardItemModel,
)
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.acceptance_health import (
    AcceptanceReference,
    HealthMonitor,
    HealthWarning,
    ModelState,
    current_state,
    load_reference,
)
from qwen_mtp_desktop.core.bench import DepthRecommendation
from qwen_mtp_desktop.core.chat_session import (
    DEMO_SINGLE_TURN_NOTE,
    AutoDecoding,
    PolicyKey,
    Turn,
    auto_applies,
    chat_history,
    example_prompts,
    generation_settings,
    restart_after,
    single_turn,
    start_conversation,
    start_turn,
)
from qwen_mtp_desktop.core.chats.records import (
    ChatSettings,
    Conversation,
    ConversationSummary,
    DeletedConversation,
    StoredMessage,
)
from qwen_mtp_desktop.core.chats.store import ChatStore
from qwen_mtp_desktop.core.decoding import GenerationStats, speculative_stats
from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.model_library import DEMO_MODEL_NOTE, display_name, is_demo_model
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.core.units import keep_units
from qwen_mtp_desktop.ui.chat.compare import CompareDialog
from qwen_mtp_desktop.ui.chat.composer import Composer
from qwen_mtp_desktop.ui.chat.conversation_list import ConversationList
from qwen_mtp_desktop.ui.chat.examples import ExamplePrompts
from qwen_mtp_desktop.ui.chat.message_widget import MessageWidget, format_stats
from qwen_mtp_desktop.ui.chat.remote_picker import (
    append_remote_rows,
    open_remote_dialog,
    picker_action,
)
from qwen_mtp_desktop.ui.chat.settings_panel import ChatSettingsPanel
from qwen_mtp_desktop.ui.chat.transcript import Transcript
from qwen_mtp_desktop.ui.elided_label import ElidedLabel
from qwen_mtp_desktop.ui.figures import LEGEND, stats_tooltip
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.remote_chat import ModelRouter, RemoteModels, is_remote
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

STORE_FLUSH_MS = 500
MESSAGES_PER_PAGE = 12
VISION_ENCODER = "openvino_vision_embeddings_model.xml"
#: The conversation keeps at least this width; below it a side column closes.
MIN_CONVERSATION_WIDTH = 560
#: ui_state keys: the Drafts toggle, and the settings a new chat starts with (the last chosen).
DRAFTS_KEY = "chat_show_drafts"
NEW_CHAT_SETTINGS_KEY = "chat_new_settings"


class _Stream:
    """The answer being generated: its widget, store id and text not yet written."""

    def __init__(
        self,
        request_id: int,
        widget: MessageWidget,
        turn: Turn,
    ) -> None:
        self.request_id = request_id
        self.widget = widget
        #: This answer's settings and, under Auto, its policy and decision.
        self.turn = turn
        self.settings = turn.settings
        self.message_id: int | None = None
        self.pending_answer: list[str] = []
        self.pending_reasoning: list[str] = []
        self.sizes: list[int] = []
        self.first_t: float | None = None
        self.last_t = 0.0
        self.started = time.monotonic()


class ChatPanel(QWidget):
    """Signals:
    export_requested(): the user wants the export wizard (from the demo banner).
    validate_requested(Path): the user wants to validate MTP on a model.
    busy_changed(bool): a generation started or ended.
    """

    export_requested = Signal()
    validate_requested = Signal(object)
    busy_changed = Signal(bool)

    def __init__(
        self,
        engine: EngineProcess,
        store_runner: TaskRunner,
        database: Path,
        default_model: Path,
        log_file: Path,
        parent: QWidget | None = None,
        *,
        dark: bool = False,
        ui_state: dict[str, str] | None = None,
    ) -> None:
        super().__init__(parent)
        #: The app settings' UI state (saved with them): what this panel remembers between runs.
        self._ui_state = ui_state if ui_state is not None else {}
        self._runner = store_runner
        # Local models run in the engine process, remote ones on their server: one handle.
        self.remote_models = RemoteModels(store_runner, self)
        self._engine = ModelRouter(engine, self.remote_models, self)
        self._store: ChatStore | None = None
        self._default_model = default_model
        self._log_file = log_file
        self._dark = dark
        self._conversation: Conversation | None = None
        self._messages: list[StoredMessage] = []
        self._stream: _Stream | None = None
        self._want_model: tuple[Path, LoadOptions] | None = None
        self._loaded: LoadedModel | None = None
        self._loading = False
        self._show_drafts = False
        self._search = ""
        self._models: list[Path] = []
        #: Why a model cannot use MTP (missing or damaged head), learnt from its loads.
        self._mtp_problems: dict[Path, str] = {}
        #: The benchmark's verdicts and Auto's policies (core.chat_session).
        self._auto = AutoDecoding()
        #: Live MTP acceptance against validate's / bench's (core.acceptance_health).
        self._health: HealthMonitor | None = None
        self.health_warning: HealthWarning | None = None
        self._last_deleted: DeletedConversation | None = None
        self._build()
        self.drafts_toggle.setChecked(self._ui_state.get(DRAFTS_KEY) == "1")
        self._wire_engine()
        self.remote_models.changed.connect(self._update_header)
        self.remote_models.problem.connect(lambda text: self._show_problem(text, "warning"))
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(STORE_FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush_to_store)
        self._runner.submit(
            lambda: ChatStore(database), self._on_store_opened, self._on_store_failed
        )

    # ------------------------------------------------------------------------ layout

    def _build(self) -> None:
        self.conversations = ConversationList()
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.search_changed.connect(self._on_search)
        self.conversations.action.connect(self._on_conversation_action)

        center = QWidget()
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(0, 0, 0, 0)
        center_layout.setSpacing(0)

        header = QFrame()
        header.setObjectName("chatHeader")
        header_layout = QHBoxLayout(header)
        header_layout.setContentsMargins(20, 10, 12, 10)
        self.title_label = ElidedLabel("New chat")  # a long title yields to the buttons
        self.title_label.setMinimumWidth(120)  # ...but keeps a few words
        self.title_label.setObjectName("chatTitle")
        self.model_status = ElidedLabel()  # Auto's reason can be long; the tooltip has it all
        self.model_status.setObjectName("muted")
        self.busy_bar = QProgressBar()
        self.busy_bar.setRange(0, 0)
        self.busy_bar.setFixedSize(90, 6)
        self.busy_bar.setTextVisible(False)
        self.busy_bar.setVisible(False)
        self.drafts_toggle = QToolButton()
        self.drafts_toggle.setText("Drafts")
        self.drafts_toggle.setCheckable(True)
        self.drafts_toggle.setToolTip(
            "Show drafted tokens: tint the text that came from accepted MTP drafts"
        )
        self.drafts_toggle.toggled.connect(self._on_show_drafts)
        self.compare_button = QToolButton()
        self.compare_button.setText("Compare with plain")
        self.compare_button.clicked.connect(self.compare)
        self.compare_dialog: CompareDialog | None = None
        self.settings_toggle = QToolButton()
        self.settings_toggle.setText("Settings")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setChecked(False)
        self.settings_toggle.setToolTip("Show or hide this chat's settings")
        self.chats_toggle = QToolButton()
        self.chats_toggle.setText("Chats")
        self.chats_toggle.setCheckable(True)
        self.chats_toggle.setChecked(True)
        self.chats_toggle.setToolTip("Show or hide the list of chats")
        # The model picker, as users know it from LM Studio and Jan: name, size, precision,
        # MTP; the same choice as Settings > Model.
        self.model_picker = QComboBox()
        self.model_picker.setObjectName("modelPicker")
        self.model_picker.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_picker.setMinimumContentsLength(10)
        self.model_picker.setToolTip("The model this chat uses")
        # Closed: the name. Open: name and what it is, in two columns.
        picker_view = QTreeView()
        picker_view.setHeaderHidden(True)
        picker_view.setRootIsDecorated(False)
        picker_view.setItemsExpandable(False)
        picker_view.setAllColumnsShowFocus(True)
        self.model_picker.setView(picker_view)
        self.model_picker.activated.connect(self._on_picker)
        self._picker_key: tuple[object, ...] = ()
        self._model_details: dict[Path, str] = {}
        self.remote_dialog: QWidget | None = None
        self._local_model = self._default_model
        header_layout.addWidget(self.chats_toggle)
        header_layout.addWidget(self.title_label)
        header_layout.addSpacing(12)
        header_layout.addWidget(self.model_picker)
        header_layout.addWidget(self.model_status)
        header_layout.addWidget(self.busy_bar)
        header_layout.addStretch(1)
        header_layout.addWidget(self.drafts_toggle)
        header_layout.addWidget(self.settings_toggle)

        self.demo_banner = QFrame()
        self.demo_banner.setObjectName("demoBanner")
        banner_layout = QHBoxLayout(self.demo_banner)
        banner_layout.setContentsMargins(14, 8, 10, 8)
        banner_text = QLabel(DEMO_MODEL_NOTE)
        banner_text.setWordWrap(True)
        # Shown once a demo chat has earlier turns: why the model does not see them.
        self.demo_turn_note = QLabel(DEMO_SINGLE_TURN_NOTE)
        self.demo_turn_note.setWordWrap(True)
        self.demo_turn_note.setObjectName("muted")
        self.demo_turn_note.setVisible(False)
        banner_texts = QVBoxLayout()
        banner_texts.setSpacing(4)
        banner_texts.addWidget(banner_text)
        banner_texts.addWidget(self.demo_turn_note)
        banner_button = QPushButton("Open Export")
        banner_button.clicked.connect(self.export_requested)
        banner_layout.addLayout(banner_texts, 1)
        banner_layout.addWidget(banner_button)
        banner_wrap = QWidget()
        banner_wrap_layout = QVBoxLayout(banner_wrap)
        banner_wrap_layout.setContentsMargins(20, 8, 20, 0)
        banner_wrap_layout.addWidget(self.demo_banner)
        self.banner_wrap = banner_wrap

        # Acceptance health: shown when live MTP acceptance fell far below the measured one.
        self.health_banner = QFrame()
        self.health_banner.setObjectName("healthBanner")
        health_layout = QHBoxLayout(self.health_banner)
        health_layout.setContentsMargins(14, 8, 10, 8)
        self.health_text = QLabel()
        self.health_text.setWordWrap(True)
        self.health_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.revalidate_button = QPushButton("Re-validate")
        self.revalidate_button.setToolTip(
            "Check MTP against plain decoding on this model again and measure its acceptance"
        )
        self.revalidate_button.clicked.connect(self._on_revalidate)
        health_layout.addWidget(self.health_text, 1)
        health_layout.addWidget(self.revalidate_button)
        self.health_wrap = QWidget()
        health_wrap_layout = QVBoxLayout(self.health_wrap)
        health_wrap_layout.setContentsMargins(20, 8, 20, 0)
        health_wrap_layout.addWidget(self.health_banner)
        self.health_wrap.setVisible(False)

        self.transcript = Transcript()
        self.transcript.earlier_requested.connect(self._show_earlier)
        self.live_stats = QLabel()
        self.live_stats.setObjectName("liveStats")
        self.live_stats.setWordWrap(True)
        self.live_stats.setContentsMargins(20, 4, 20, 0)
        self.live_stats.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # What the figures mean, one line, shown while figures are (tooltips say more).
        self.legend = QLabel(LEGEND)
        self.legend.setObjectName("legend")
        self.legend.setWordWrap(True)
        self.legend.setContentsMargins(20, 0, 20, 0)
        self.legend.setVisible(False)
        self.composer = Composer()
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(self.stop)

        center_layout.addWidget(header)
        center_layout.addWidget(banner_wrap)
        center_layout.addWidget(self.health_wrap)
        center_layout.addWidget(self.transcript, 1)
        self.examples = ExamplePrompts()
        self.examples.chosen.connect(self.send)
        center_layout.addWidget(self.examples)
        # The figures, and beside them Compare: the same message plain and with MTP.
        figures_row = QHBoxLayout()
        figures_row.setContentsMargins(0, 0, 20, 0)
        figures_row.addWidget(self.live_stats, 1)
        figures_row.addWidget(self.compare_button, 0, Qt.AlignmentFlag.AlignBottom)
        center_layout.addLayout(figures_row)
        center_layout.addWidget(self.legend)
        center_layout.addWidget(self.composer)

        self.settings_panel = ChatSettingsPanel()
        self.settings_panel.settings_changed.connect(self._on_settings_changed)
        self.settings_panel.system_prompt_changed.connect(self._on_system_prompt_changed)
        self.settings_panel.model_changed.connect(self._on_model_changed)
        self.settings_panel.validate_requested.connect(
            lambda: self.validate_requested.emit(self._model_dir())
        )
        self.settings_toggle.toggled.connect(self._on_settings_toggled)
        self.chats_toggle.toggled.connect(self._on_chats_toggled)
        self.settings_panel.setVisible(False)

        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.conversations)
        layout.addWidget(center, 1)
        layout.addWidget(self.settings_panel)

        QShortcut(QKeySequence.StandardKey.New, self, self.new_chat)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.stop)
        self._update_header()

    # The two side columns share the width with the conversation: when both do not fit next
    # to a readable conversation, opening one closes the other.

    def _narrow(self) -> bool:
        sides = self.conversations.width() + self.settings_panel.width()
        return self.width() - sides < MIN_CONVERSATION_WIDTH

    def _on_settings_toggled(self, show: bool) -> None:
        if show and self.conversations.isVisibleTo(self) and self._narrow():
            self.chats_toggle.setChecked(False)
        self.settings_panel.setVisible(show)

    def _on_chats_toggled(self, show: bool) -> None:
        if show and self.settings_panel.isVisibleTo(self) and self._narrow():
            self.settings_toggle.setChecked(False)
        self.conversations.setVisible(show)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt override)
        super().resizeEvent(event)
        both = self.conversations.isVisibleTo(self) and self.settings_panel.isVisibleTo(self)
        if both and self._narrow():
            self.chats_toggle.setChecked(False)

    def _wire_engine(self) -> None:
        self._engine.loading.connect(self._on_loading)
        self._engine.loaded.connect(self._on_loaded)
        self._engine.load_failed.connect(self._on_load_failed)
        self._engine.chunks.connect(self._on_chunks)
        self._engine.finished.connect(self._on_finished)
        self._engine.failed.connect(self._on_failed)

    # ------------------------------------------------------------------------ public API

    @property
    def generating(self) -> bool:
        return self._stream is not None

    @property
    def store_ready(self) -> bool:
        return self._store is not None

    @property
    def conversation(self) -> Conversation | None:
        return self._conversation

    def set_models(self, models: list[Path]) -> None:
        self._models = models
        self.settings_panel.set_models(models, self._model_dir(), self._engine.names())
        self._fill_picker()

    def set_model_details(self, details: dict[Path, str]) -> None:
        """What the picker says about each model ("Qwen3.5 dense · 1.8 MB · FP16 · MTP")."""
        self._model_details = dict(details)
        self._fill_picker()

    def _fill_picker(self) -> None:
        current = self._model_dir()
        if not is_remote(current):
            self._local_model = current
        # With a remote model chosen, the last local one stays listed to switch back to.
        local = self._local_model
        models = self._models if local in self._models else [local, *self._models]
        endpoints = self.remote_models.endpoints
        details = tuple(sorted(self._model_details.items()))
        key = (current, tuple(models), details, tuple(endpoints))
        if key == self._picker_key:
            return
        self._picker_key = key
        picker = self.model_picker
        picker.blockSignals(True)
        model = QStandardItemModel(0, 2, picker)
        for path in models:
            detail = self._model_details.get(path, "")
            name = QStandardItem(display_name(path))
            name.setData(str(path), Qt.ItemDataRole.UserRole)
            name.setToolTip(str(path))
            about = QStandardItem(detail)
            about.setToolTip(str(path))
            about.setForeground(self.palette().placeholderText())
            model.appendRow([name, about])
        append_remote_rows(model, endpoints, current, self.palette())
        picker.setModel(model)
        picker.setCurrentIndex(max(picker.findData(str(current), Qt.ItemDataRole.UserRole), 0))
        view = picker.view()
        assert isinstance(view, QTreeView)
        view.resizeColumnToContents(0)
        view.resizeColumnToContents(1)
        view.setMinimumWidth(view.columnWidth(0) + view.columnWidth(1) + 24)
        picker.blockSignals(False)

    def _on_picker(self, index: int) -> None:
        action = picker_action(self.model_picker, index)
        if action is not None:
            self._picker_key = ()  # show the chosen model again, not the action row
            self._fill_picker()
            dialog = open_remote_dialog(action, self.remote_models, self._model_dir(), self)
            dialog.accepted.connect(lambda: self._on_remote_saved(dialog.result_endpoint))
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            self.remote_dialog = dialog
            dialog.open()
            return
        path = Path(self.model_picker.itemData(index, Qt.ItemDataRole.UserRole))
        if path != self._model_dir():
            self._on_model_changed(path)

    def _on_remote_saved(self, endpoint: RemoteEndpoint | None) -> None:
        """After the remote server dialog: chat with the saved server (removed: the next
        turn's load says the server is gone)."""
        if endpoint is not None:
            self._on_model_changed(endpoint.ref)

    def compare(self) -> CompareDialog | None:
        """Decode this chat's last message plain and with MTP, side by side (non-modal)."""
        history = self._compare_history()
        loaded = self._loaded
        if not history or loaded is None or loaded.mode != "mtp" or self.generating:
            return None
        settings = replace(self._engine_settings(), do_sample=False)  # MTP decodes greedily
        dialog = CompareDialog(self._engine.engine, history, settings, self, dark=self._dark)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.compared.connect(self._sync_compare)
        dialog.destroyed.connect(lambda: setattr(self, "compare_dialog", None))
        self.compare_dialog = dialog
        dialog.show()
        dialog.start()
        self._sync_compare()
        return dialog

    def _compare_history(self) -> list[Message]:
        """What Compare sends: the chat up to its last message of the user's."""
        if self._conversation is None:
            return []
        history = chat_history(self._conversation.system_prompt, self._messages)
        last_user = max((i for i, m in enumerate(history) if m.role == "user"), default=-1)
        history = history[: last_user + 1]
        if history and is_demo_model(self._model_dir()):
            history = single_turn(history)
        return history

    def _sync_compare(self) -> None:
        """Compare needs a message to run, a model that decodes with MTP, and a free engine."""
        loaded = self._loaded
        busy = self.generating or (self.compare_dialog is not None and self.compare_dialog.running)
        if loaded is None or loaded.mode != "mtp":
            reason = "Compare needs a model that can decode with MTP."
        elif not any(m.role == "user" for m in self._messages):
            reason = "Send a message first: Compare runs your last message again."
        elif busy:
            reason = "Wait for the answer being written."
        else:
            reason = ""
        self.compare_button.setEnabled(not reason)
        self.compare_button.setToolTip(
            reason
            or "Run your last message again with plain decoding and with MTP, side by side: "
            "both speeds, and the text MTP's guesses wrote"
        )

    def set_devices(self, devices: list[str]) -> None:
        self.settings_panel.set_devices(devices)

    def forget_recommendation(self, model_dir: Path) -> None:
        """A new benchmark result for `model_dir`: look "auto" up again."""
        self._auto.forget(model_dir)
        if not self.generating:
            self._want_model = None
            self._ensure_model()

    def reload_acceptance_reference(self, model_dir: Path) -> None:
        """A validation or benchmark of `model_dir` finished: compare with its new reference."""
        loaded = self._loaded
        if loaded is not None and loaded.model_dir.resolve() == Path(model_dir).resolve():
            self._load_health(loaded)

    def _load_health(self, loaded: LoadedModel) -> None:
        """Look the acceptance reference up off the GUI thread; no check without one."""
        self._health = None
        self.health_warning = None
        self.health_wrap.setVisible(False)
        if loaded.mode != "mtp":
            return
        model_dir, device = loaded.model_dir, loaded.device

        def find() -> tuple[AcceptanceReference, ModelState] | None:
            reference = load_reference(model_dir, device)
            return None if reference is None else (reference, current_state(model_dir))

        def found(result: tuple[AcceptanceReference, ModelState] | None) -> None:
            current = self._loaded
            if result is not None and current is not None and current.model_dir == model_dir:
                self._health = HealthMonitor(*result)

        self._runner.submit(find, found, self._on_store_error)

    def _on_revalidate(self) -> None:
        self.health_wrap.setVisible(False)
        self.validate_requested.emit(self._model_dir())

    def use_model(self, model_dir: Path) -> None:
        """Make `model_dir` this chat's model (from the model manager's "Open in chat")."""
        self._default_model = model_dir
        self._on_model_changed(model_dir)

    def new_chat(self) -> None:
        if self._store is None:
            return
        self.stop()
        self._conversation = None
        self._messages = []
        self.transcript.clear()
        self._show_last_figures()  # none: the previous chat's figures are not this one's
        self.conversations.set_current(None)
        self.settings_panel.set_settings(self._default_settings())
        self.settings_panel.set_system_prompt("")
        self._update_header()
        self._ensure_model()
        self.composer.editor.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        store = self._require_store()
        self.stop()

        def load() -> tuple[Conversation, list[StoredMessage]]:
            return store.get_conversation(conversation_id), store.messages(conversation_id)

        self._runner.submit(load, self._show_conversation, self._on_store_error)

    def send(self, text: str, image: Path | None = None) -> None:
        if self._stream is not None or self._store is None:
            return
        store = self._store
        if self._conversation is None:
            settings = self.settings_panel.settings
            model = str(self._model_dir())
            system_prompt = self.settings_panel.system_prompt.toPlainText().strip()
            self._runner.submit(
                lambda: start_conversation(
                    store,
                    text,
                    image,
                    model_dir=model,
                    system_prompt=system_prompt,
                    settings=settings,
                ),
                lambda started: self._after_created(*started, text, image),
                self._on_store_error,
            )
            return
        widget = self._add_widget("user", content=text, image=image)
        conversation_id = self._conversation.id
        self._runner.submit(
            lambda: start_turn(store, conversation_id, text, image),
            lambda stored: self._on_user_stored(widget, *stored),
            self._on_store_error,
        )

    def stop(self) -> None:
        if self._stream is not None:
            self._engine.cancel(self._stream.request_id)

    def shutdown(self) -> None:
        """Stop generating and write what is pending (the runner finishes queued writes)."""
        self.stop()
        self._flush_to_store()
        self._engine.shutdown()

    # ------------------------------------------------------------------------ store results

    def _on_store_opened(self, store: ChatStore) -> None:
        self._store = store
        if store.notice:
            # Non-modal: a modal box here would hold start-up (it can arrive before the
            # event loop runs, while the window paints for the first time).
            box = QMessageBox(
                QMessageBox.Icon.Warning,
                "Chat history was reset",
                store.notice,
                QMessageBox.StandardButton.Ok,
                self,
            )
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()
        self.settings_panel.set_settings(self._default_settings())
        self._refresh_list(open_newest=True)
        self._ensure_model()

    def _on_store_failed(self, exc: Exception) -> None:
        log.error("chat store failed to open: %s", exc)
        self._show_problem(f"Chat history could not be opened: {exc}")

    def _on_store_error(self, exc: Exception) -> None:
        log.error("chat store operation failed: %s", exc)
        self._show_problem(f"A chat could not be saved or read: {exc}")

    def _refresh_list(self, open_newest: bool = False) -> None:
        store = self._require_store()
        search = self._search or None

        def done(items: list[ConversationSummary]) -> None:
            current = self._conversation.id if self._conversation else None
            self.conversations.set_conversations(items, current)
            if open_newest and items and self._conversation is None:
                self.open_conversation(items[0].id)

        self._runner.submit(lambda: store.list_conversations(search), done, self._on_store_error)

    def _show_conversation(self, loaded: tuple[Conversation, list[StoredMessage]]) -> None:
        conversation, messages = loaded
        self._conversation = conversation
        self._messages = list(messages)
        self.transcript.clear()
        # Build only the newest messages; older ones appear when the user asks for them, so a
        # long chat opens at once (each message is a handful of widgets).
        shown = messages[-MESSAGES_PER_PAGE:]
        self.transcript.add_messages([self._message_widget(message) for message in shown])
        self.transcript.set_hidden_count(len(messages) - len(shown))
        QTimer.singleShot(0, self.transcript.scroll_to_bottom)
        self._show_last_figures()
        self.conversations.set_current(conversation.id)
        self.settings_panel.set_settings(conversation.settings)
        self.settings_panel.set_system_prompt(conversation.system_prompt)
        self._update_header()
        self._ensure_model()

    def _show_earlier(self) -> None:
        hidden = self.transcript.hidden_count
        if not hidden:
            return
        start = max(hidden - MESSAGES_PER_PAGE, 0)
        widgets = [self._message_widget(m) for m in self._messages[start:hidden]]
        self.transcript.prepend_messages(widgets)
        self.transcript.set_hidden_count(start)

    def _after_created(
        self,
        conversation: Conversation,
        user: StoredMessage,
        answer: StoredMessage,
        text: str,
        image: Path | None,
    ) -> None:
        self._conversation = conversation
        self._messages = []
        self._update_header()
        self._refresh_list()
        widget = self._add_widget("user", content=text, image=image)
        self._on_user_stored(widget, user, answer)

    def _on_user_stored(
        self, widget: MessageWidget, message: StoredMessage, answer: StoredMessage
    ) -> None:
        widget.message_id = message.id
        self._messages.append(message)
        self._start_generation(answer)

    # ------------------------------------------------------------------------ generation

    def _model_dir(self) -> Path:
        if self._conversation is not None and self._conversation.model_dir:
            return Path(self._conversation.model_dir)
        return self._default_model

    def _default_settings(self) -> ChatSettings:
        """A new chat's settings: the ones last chosen, else greedy decoding with MTP."""
        raw = self._ui_state.get(NEW_CHAT_SETTINGS_KEY)
        if raw:
            try:
                saved = json.loads(raw)
            except ValueError:
                saved = None
            if isinstance(saved, dict):
                return ChatSettings.from_dict(saved)
        return ChatSettings(temperature=0.0)

    def _engine_settings(self) -> GenerationSettings:
        depth = self._auto.depth(self._model_dir(), self.settings_panel.settings.device)
        return generation_settings(self.settings_panel.settings, depth)

    def _ensure_model(self) -> None:
        """Ask the engine process for this chat's model, device and mode if they differ."""
        settings = self.settings_panel.settings
        key = (self._model_dir(), settings.device)
        if settings.num_assistant_tokens == "auto" and not self._auto.known(*key):
            # Look the benchmark's verdict up off the GUI thread, then come back here.
            def found(recommendation: DepthRecommendation | None) -> None:
                self._auto.remember(*key, recommendation)
                self._ensure_model()
                self._update_header()

            self._runner.submit(lambda: AutoDecoding.lookup(*key), found, self._on_store_error)
            return
        # Auto keeps the MTP pipeline and adds a plain one beside it when it first runs plain
        # decoding (Engine), so it can probe MTP again later.
        mtp = settings.mtp
        wanted = (self._model_dir(), LoadOptions(device=settings.device, mtp=mtp))
        if self._want_model is not None and self._want_model == wanted:
            return
        self._want_model = wanted
        self._engine.load(
            wanted[0], LoadOptions(device=settings.device, mtp=mtp, cache_dir=self._cache_dir())
        )
        self._update_header()

    def _cache_dir(self) -> Path | None:
        from qwen_mtp_desktop.core.paths import app_paths

        return app_paths().compile_cache_dir

    def _start_generation(self, answer: StoredMessage) -> None:
        """Generate into `answer`, the empty message the store has begun for it."""
        if self._store is None:
            return
        if self._conversation is None or self._conversation.id != answer.conversation_id:
            # The user left that chat while its turn was being stored: no answer is coming.
            store = self._store
            self._runner.submit(lambda: store.delete_message(answer.id), None, self._on_store_error)
            return
        self._ensure_model()
        conversation = self._conversation
        history = chat_history(conversation.system_prompt, self._messages)
        if is_demo_model(self._model_dir()):
            history = single_turn(history)  # its answers go wrong with earlier turns
        turn = Turn(self._engine_settings())
        if self._auto_applies():
            loaded = self._loaded
            turn = self._auto.plan_turn(
                self._policy_key(),
                turn.settings,
                plain_ready=self._engine.plain_ready,
                load_s=loaded.load_s if loaded else None,
            )
        request_id = self._engine.generate(history, turn.settings)
        widget = self._add_widget("assistant")
        widget.begin_stream()
        widget.set_show_drafts(self._show_drafts)
        stream = _Stream(request_id, widget, turn)
        stream.message_id = widget.message_id = answer.id
        self._update_header()
        self._stream = stream
        self.model_picker.setEnabled(False)
        self._sync_compare()
        self.composer.set_generating(True)
        self.live_stats.setText("Waiting for the first token…")
        self._flush_timer.start()
        self.busy_changed.emit(True)

    def _on_chunks(self, request_id: int, chunks: list[StepChunk]) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            return
        # One widget update per batch: the widget's cost is per call, not per token.
        answer: list[str] = []
        reasoning: list[str] = []
        drafted: list[tuple[int, int]] = []
        offset = 0
        for chunk in chunks:
            if chunk.drafted_answer_chars:
                drafted.append((offset, offset + chunk.drafted_answer_chars))
            answer.append(chunk.answer)
            reasoning.append(chunk.reasoning)
            offset += len(chunk.answer)
            if chunk.token_ids:
                stream.sizes.append(len(chunk.token_ids))
                if stream.first_t is None:
                    stream.first_t = chunk.elapsed_s
                stream.last_t = chunk.elapsed_s
        answer_text, reasoning_text = "".join(answer), "".join(reasoning)
        stream.widget.append(answer_text, reasoning_text, drafted)
        stream.pending_answer.append(answer_text)
        stream.pending_reasoning.append(reasoning_text)
        self._show_live(stream)

    def _show_live(self, stream: _Stream) -> None:
        remote = self._engine.live_text(stream.request_id)
        if remote is not None:  # no token ids from a server: its figures come at the end
            self._show_figures("Generating  ·  " + remote)
            return
        loaded = self._loaded
        tokens = sum(stream.sizes)
        parts = [f"{tokens} tokens"]
        if stream.first_t is not None:
            parts.append(f"TTFT {stream.first_t * 1000:.0f} ms")
            span = stream.last_t - stream.first_t
            if span > 0 and len(stream.sizes) > 1:
                parts.insert(0, f"{(tokens - stream.sizes[0]) / span:.1f} tok/s")
        settings = stream.settings
        if loaded is not None and settings.prompt_lookup:
            # Proposed drafts are counted at the end (core.prompt_lookup); accepted ones show.
            accepted = tokens - len(stream.sizes)
            parts.append(
                f"prompt lookup K={settings.num_assistant_tokens}: {accepted} drafts accepted"
            )
        elif loaded is not None and loaded.mode == "mtp" and not settings.plain:
            n = settings.num_assistant_tokens
            drafted, accepted, _ = speculative_stats(
                stream.sizes, n, "mtp", settings.max_new_tokens
            )
            steps = len(stream.sizes) - 1
            parts.append(f"MTP n={n}")
            if drafted:
                parts.append(
                    f"{accepted / drafted:.0%} drafts accepted ({accepted / steps:.2f}/step)"
                )
        elif loaded is not None:
            parts.append("plain decoding")
        self._show_figures("Generating  ·  " + "  ·  ".join(parts))

    def _on_finished(self, request_id: int, stats: GenerationStats) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            return
        widget = stream.widget
        widget.end_stream()
        loaded = self._loaded
        record = stream.turn.finish(
            stats, loaded.model_dir if loaded else None, widget.drafted_ranges
        )
        widget.set_stats(record)
        if self._health is not None:
            warning = self._health.observe(stats)
            if warning is not None:
                self.health_warning = warning
                self.health_text.setText(warning.text)
                self.health_wrap.setVisible(True)
        if stats.finish_reason == "cancelled":
            widget.show_notice("Stopped. The answer so far is kept.")
        status = "complete"
        self._end_stream(
            stream,
            lambda store, mid, a, r: store.finish_message(
                mid, record, status, model=record["model"], answer_delta=a, reasoning_delta=r
            ),
        )
        self._show_figures("Last answer  ·  " + format_stats(record))

    def _on_failed(self, request_id: int, error: EngineError) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            self._show_problem(error.message)
            return
        widget = stream.widget
        widget.end_stream()
        text = f"{error.message} {error.fix}".strip() + f"\nLog file: {self._log_file}"
        widget.show_error(text)
        message = error.message

        def fail(store: ChatStore, message_id: int, answer: str, reasoning: str) -> None:
            if answer or reasoning:
                store.append_to_message(message_id, answer, reasoning)
            store.fail_message(message_id, message)

        self._end_stream(stream, fail)
        self._clear_figures()

    def _end_stream(self, stream: _Stream, write: Any) -> None:
        self._stream = None
        self.model_picker.setEnabled(True)
        self._flush_timer.stop()
        self.composer.set_generating(False)
        self.busy_changed.emit(False)
        store = self._require_store()
        answer, reasoning = "".join(stream.pending_answer), "".join(stream.pending_reasoning)
        stream.pending_answer, stream.pending_reasoning = [], []
        conversation = self._conversation

        def finish() -> StoredMessage | None:
            if stream.message_id is None:
                return None
            write(store, stream.message_id, answer, reasoning)
            return store.get_message(stream.message_id)

        def done(message: StoredMessage | None) -> None:
            if message is not None and conversation is self._conversation:
                self._messages.append(message)
            self._refresh_list()
            self._sync_compare()

        self._runner.submit(finish, done, self._on_store_error)

    def _flush_to_store(self) -> None:
        stream = self._stream
        if stream is None or not (any(stream.pending_answer) or any(stream.pending_reasoning)):
            return
        store = self._require_store()
        answer, reasoning = "".join(stream.pending_answer), "".join(stream.pending_reasoning)
        stream.pending_answer, stream.pending_reasoning = [], []

        def write() -> None:
            if stream.message_id is not None:
                store.append_to_message(stream.message_id, answer, reasoning)

        self._runner.submit(write, None, self._on_store_error)

    # ------------------------------------------------------------------------ engine status

    def _on_loading(self, model_dir: Path) -> None:
        self._loading = True
        self.settings_panel.set_mtp_problem(self._mtp_problems.get(Path(model_dir), ""))
        self._update_header()

    def _on_loaded(self, loaded: LoadedModel) -> None:
        self._loading = False
        self._loaded = loaded
        wanted_mtp = self._want_model is not None and self._want_model[1].mtp
        # A remote server decodes as it does; its settings are not "a missing MTP head".
        wanted_mtp = wanted_mtp and not is_remote(loaded.model_dir)
        if loaded.mode == "mtp":
            self._mtp_problems.pop(loaded.model_dir, None)
        elif wanted_mtp:
            # Asked for MTP, got plain decoding: the head is missing or damaged; say so where
            # the MTP controls are, and open sampling (plain decoding can sample).
            reason = next((w for w in loaded.warnings if "MTP" in w), "")
            self._mtp_problems[loaded.model_dir] = (
                reason or "This model cannot decode with MTP, so it decodes plain."
            )
        self.settings_panel.set_mtp_problem(self._mtp_problems.get(loaded.model_dir, ""))
        self._update_header()
        self._load_health(loaded)
        for warning in loaded.warnings:
            self._show_problem(warning, severity="warning")

    def _on_load_failed(self, error: EngineError) -> None:
        self._loading = False
        self._loaded = None
        self._want_model = None
        self._update_header()
        self._show_problem(f"{error.message} {error.fix}".strip())

    def _update_header(self) -> None:
        self.title_label.setText(self._conversation.title if self._conversation else "New chat")
        model_dir = self._model_dir()
        name = display_name(model_dir)
        settings = self.settings_panel.settings
        if self._loading:
            status = f"Loading {name} on {settings.device}…"
        elif self._loaded is not None and self._loaded.model_dir == model_dir:
            mode = self._mode_label()
            status = f"{self._loaded.device}  ·  {mode}"  # the picker beside it names the model
        else:
            status = "not loaded"
        self.model_status.setText(status)
        self.settings_panel.set_models(self._models, model_dir, self._engine.names())
        self._fill_picker()
        self.model_picker.setEnabled(self._stream is None)  # busy: the answer needs its model
        self._sync_compare()
        self.busy_bar.setVisible(self._loading)
        demo = is_demo_model(model_dir)
        self.banner_wrap.setVisible(demo)
        self._sync_examples()
        # One stat, not a scan: the image button is on only for models that can see.
        self.composer.set_vision((model_dir / VISION_ENCODER).is_file())

    def _sync_examples(self) -> None:
        """Example prompts in an empty chat only: the demo's own skills, or everyday tasks."""
        demo = is_demo_model(self._model_dir())
        self.examples.set_prompts(
            "Try what the demo model can do:" if demo else "Try an example:",
            example_prompts(demo),
        )
        messages = self.transcript.messages
        self.examples.setVisible(not messages and self._stream is None)
        self.demo_turn_note.setVisible(demo and any(w.role == "assistant" for w in messages))

    def _mode_label(self) -> str:
        """What decoding runs, and for Auto what it decided and why."""
        loaded = self._loaded
        settings = self.settings_panel.settings
        depth = self._engine_settings().num_assistant_tokens
        auto = settings.num_assistant_tokens == "auto"
        if loaded is None:
            return ""
        if is_remote(loaded.model_dir):
            return self._engine.status_text()
        if settings.prompt_lookup:
            return f"prompt lookup K={settings.lookup_tokens}, n-gram {settings.max_ngram_size}"
        if loaded.mode != "mtp":
            return "plain decoding"
        if not auto:
            return f"MTP n={depth}"
        key = self._policy_key() if self._conversation else None
        return self._auto.status(key, self._model_dir(), settings.device)

    def _policy_key(self) -> PolicyKey:
        conversation_id = self._conversation.id if self._conversation is not None else 0
        return (conversation_id, self._model_dir(), self.settings_panel.settings.device)

    def _auto_applies(self) -> bool:
        """Whether Auto chooses this turn's decoding (not for a fixed depth or without MTP)."""
        loaded = self._loaded
        return auto_applies(self.settings_panel.settings) and (
            loaded is not None and loaded.mode == "mtp"
        )

    # ------------------------------------------------------------------------ user actions

    def _on_settings_changed(self, settings: ChatSettings) -> None:
        self._ui_state[NEW_CHAT_SETTINGS_KEY] = json.dumps(settings.to_dict())
        self._update_header()
        if self._conversation is not None and self._store is not None:
            store, conversation_id = self._store, self._conversation.id

            def save() -> Conversation:
                return store.update_settings(conversation_id, settings)

            self._runner.submit(save, self._on_conversation_updated, self._on_store_error)
        if not self.generating:
            self._ensure_model()

    def _on_system_prompt_changed(self, text: str) -> None:
        if self._conversation is None or self._store is None:
            return  # a new chat takes it when it is created
        store, conversation_id = self._store, self._conversation.id
        self._runner.submit(
            lambda: store.set_system_prompt(conversation_id, text),
            self._on_conversation_updated,
            self._on_store_error,
        )

    def _on_model_changed(self, model_dir: Path) -> None:
        if self._conversation is not None and self._store is not None:
            store, conversation_id = self._store, self._conversation.id
            self._runner.submit(
                lambda: store.set_model_dir(conversation_id, str(model_dir)),
                self._on_model_saved,
                self._on_store_error,
            )
        else:
            self._default_model = model_dir
            self._update_header()
            if not self.generating:
                self._ensure_model()

    def _on_model_saved(self, conversation: Conversation) -> None:
        self._on_conversation_updated(conversation)
        if not self.generating:
            self._ensure_model()

    def _on_conversation_updated(self, conversation: Conversation) -> None:
        if self._conversation is not None and self._conversation.id == conversation.id:
            self._conversation = conversation
            self._update_header()

    def _on_search(self, text: str) -> None:
        self._search = text.strip()
        self._refresh_list()

    def _on_show_drafts(self, show: bool) -> None:
        self._show_drafts = show
        self._ui_state[DRAFTS_KEY] = "1" if show else "0"
        for widget in self.transcript.messages:
            if widget.role == "assistant":
                widget.set_show_drafts(show)

    def _on_conversation_action(self, action: str, conversation_id: int) -> None:
        store = self._require_store()
        if action == "rename":
            title, ok = QInputDialog.getText(self, "Rename chat", "Title:")
            if ok:
                self._runner.submit(
                    lambda: store.rename(conversation_id, title),
                    self._on_renamed,
                    self._on_store_error,
                )
        elif action == "delete":
            if self._conversation is not None and self._conversation.id == conversation_id:
                self.stop()
            self._runner.submit(
                lambda: store.delete(conversation_id), self._on_deleted, self._on_store_error
            )
        elif action in ("export-md", "export-json"):
            suffix = ".md" if action == "export-md" else ".json"
            filename, _ = QFileDialog.getSaveFileName(
                self,
                "Export chat",
                f"chat-{conversation_id}{suffix}",
                "Markdown (*.md)" if suffix == ".md" else "JSON (*.json)",
            )
            if filename:
                export = store.export_markdown if suffix == ".md" else store.export_json

                def write() -> None:
                    from qwen_mtp_desktop.core.fileio import write_user_file

                    write_user_file(Path(filename), export(conversation_id))

                self._runner.submit(write, None, self._on_store_error)

    def _on_deleted(self, deleted: DeletedConversation) -> None:
        if self._conversation is not None and self._conversation.id == deleted.conversation.id:
            self._conversation = None
            self._messages = []
            self.transcript.clear()
            self._update_header()
        self._refresh_list()
        self._last_deleted = deleted
        box = QMessageBox(self)
        box.setWindowTitle("Chat deleted")
        box.setText(f"“{deleted.conversation.title}” was deleted.")
        undo = box.addButton("Undo", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Ok)
        box.buttonClicked.connect(lambda button: self.undo_delete() if button is undo else None)
        self.delete_notice = box
        box.open()

    def undo_delete(self) -> None:
        deleted = self._last_deleted
        if deleted is None:
            return
        self._last_deleted = None
        store = self._require_store()
        self._runner.submit(lambda: store.restore(deleted), self._on_restored, self._on_store_error)

    def _on_renamed(self, conversation: Conversation) -> None:
        self._on_conversation_updated(conversation)
        self._refresh_list()

    def _on_restored(self, conversation: Conversation) -> None:
        self._refresh_list()
        self.open_conversation(conversation.id)

    def _on_message_action(self, widget: MessageWidget, action: str) -> None:
        if action == "copy":
            widget.copy_text()
            return
        if self.generating or widget.message_id is None:
            return
        store = self._require_store()
        message_id = widget.message_id
        if action == "delete":
            self._runner.submit(
                lambda: store.delete_message(message_id), None, self._on_store_error
            )
            self._messages = [m for m in self._messages if m.id != message_id]
            self.transcript.remove_message(widget)
            self._show_last_figures()  # the deleted answer's figures must not stay
            self._sync_examples()
            self._sync_compare()
        elif action == "regenerate":
            self._regenerate_from(widget)
        elif action == "edit":
            text, ok = QInputDialog.getMultiLineText(
                self, "Edit message", "Message:", widget.content
            )
            if ok and text.strip():
                self._edit_and_regenerate(widget, text.strip())

    def _regenerate_from(self, assistant: MessageWidget) -> None:
        widgets = self.transcript.messages
        index = widgets.index(assistant)
        previous_user = next(
            (w for w in reversed(widgets[:index]) if w.role == "user" and w.message_id), None
        )
        if previous_user is None:
            return
        self._truncate_and_generate(previous_user)

    def _edit_and_regenerate(self, user: MessageWidget, text: str) -> None:
        assert user.message_id is not None
        message_id = user.message_id
        user.set_content(text)
        self._messages = [
            replace(m, content=text) if m.id == message_id else m for m in self._messages
        ]
        self._truncate_and_generate(user, text)

    def _truncate_and_generate(self, user: MessageWidget, new_text: str | None = None) -> None:
        """Drop what followed `user` (after an edit, with its new text) and answer again: one
        store call (core.chat_session.restart_after)."""
        store = self._require_store()
        assert user.message_id is not None
        message_id = user.message_id
        widgets = self.transcript.messages
        for widget in widgets[widgets.index(user) + 1 :]:
            self.transcript.remove_message(widget)
        position = next(i for i, m in enumerate(self._messages) if m.id == message_id)
        self._messages = self._messages[: position + 1]
        self._runner.submit(
            lambda: restart_after(store, message_id, new_text),
            self._start_generation,
            self._on_store_error,
        )

    # ------------------------------------------------------------------------ helpers

    def _message_widget(self, message: StoredMessage) -> MessageWidget:
        widget = MessageWidget(
            message.role,
            dark=self._dark,
            content=message.content,
            reasoning=message.reasoning,
            image=Path(message.image_path) if message.image_path else None,
            stats=message.stats,
            status=message.status,
            error=message.error,
        )
        widget.message_id = message.id
        widget.action.connect(lambda action, w=widget: self._on_message_action(w, action))
        widget.link_requested.connect(self._open_link)
        if self._show_drafts and message.role == "assistant":
            widget.set_show_drafts(True)
        return widget

    def _add_widget(self, role: str, content: str = "", image: Path | None = None) -> MessageWidget:
        widget = MessageWidget(role, dark=self._dark, content=content, image=image)
        widget.action.connect(lambda action, w=widget: self._on_message_action(w, action))
        widget.link_requested.connect(self._open_link)
        self.transcript.add_message(widget)
        self.transcript.scroll_to_bottom()
        self._sync_examples()
        return widget

    def _open_link(self, url: QUrl) -> None:
        from qwen_mtp_desktop.core.link_display import link_target

        # The real target: punycode host, control and bidi characters shown as escapes.
        target = link_target(url.toString())
        if url.scheme() not in ("http", "https"):
            QMessageBox.information(
                self,
                "Link not opened",
                f"Only web links can be opened from a chat:\n{target.address}",
            )
            return
        answer = QMessageBox.question(
            self,
            "Open link?",
            f"The model's answer links to:\n\n{target.describe()}\n\nOpen it in your browser?",
        )
        if answer == QMessageBox.StandardButton.Yes:
            QDesktopServices.openUrl(url)

    def _show_figures(self, text: str) -> None:
        """The live or last answer's figures, with the legend and a tooltip explaining them."""
        self.live_stats.setText(keep_units(text))
        self.live_stats.setToolTip(stats_tooltip(text))
        self.legend.setVisible(True)

    def _show_last_figures(self) -> None:
        """The figures of this chat's last answer, or none."""
        last = next(
            (m for m in reversed(self._messages) if m.role == "assistant" and m.stats), None
        )
        if last is None or last.stats is None:
            self._clear_figures()
        else:
            self._show_figures("Last answer  ·  " + format_stats(last.stats))

    def _clear_figures(self) -> None:
        self.live_stats.setText("")
        self.live_stats.setToolTip("")
        self.legend.setVisible(False)

    def _show_problem(self, text: str, severity: str = "error") -> None:
        self.live_stats.setText(("Warning: " if severity == "warning" else "Problem: ") + text)
        self.live_stats.setToolTip("")
        self.legend.setVisible(False)

    def _require_store(self) -> ChatStore:
        if self._store is None:
            raise RuntimeError("the chat store is not open yet")
        return self._store
