"""The chat panel: lays out the chat and turns the user's actions into turns of the model.

Who does what (ui/chat/):
- `conversation.ConversationController`: the open chat, its shown branch and every store call.
- `live_figures`: the answer being streamed (`Stream`) and the figures line (`LiveFigures`).
- `header.ChatHeader`: title, model picker and toggles; `banners`: demo, health and undo bars.
- This module: layout, the engine (load, generate, its results), and the message actions.

A generation starts in one place, `_start_generation` (the seam another backend plugs into).

Threads: the model runs in the engine process (EngineProcess); every database call runs on the
store's TaskRunner thread. The GUI thread only updates widgets, so it never waits for either.
Streamed text reaches the database at most every STORE_FLUSH_MS, so a crash loses at most that
much of an answer, and the store marks the answer incomplete on the next start.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QWidget

from qwen_mtp_desktop.core.acceptance_health import HealthMonitor, HealthWarning
from qwen_mtp_desktop.core.chat_session import chat_history, single_turn
from qwen_mtp_desktop.core.chats.export_names import export_filename
from qwen_mtp_desktop.core.chats.records import (
    ChatSettings,
    Conversation,
    ConversationSummary,
    DeletedConversation,
    StoredMessage,
)
from qwen_mtp_desktop.core.chats.store import ChatStore
from qwen_mtp_desktop.core.context_usage import conversation_usage
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, LoadedModel, StepChunk
from qwen_mtp_desktop.core.model_library import display_name, is_demo_model
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.core.settings import UI_NEW_CHAT_SETTINGS, UI_SHOW_DRAFTS
from qwen_mtp_desktop.ui.chat import shortcuts as keys
from qwen_mtp_desktop.ui.chat.chat_layout import ChatLayout
from qwen_mtp_desktop.ui.chat.compare import (
    COMPARE_TIP,
    CompareDialog,
    compare_blocked,
    compare_history,
)
from qwen_mtp_desktop.ui.chat.conversation import AnswerWrite, ConversationController
from qwen_mtp_desktop.ui.chat.examples import show_examples
from qwen_mtp_desktop.ui.chat.links import open_answer_link
from qwen_mtp_desktop.ui.chat.live_figures import Stream
from qwen_mtp_desktop.ui.chat.message_actions import MessageActions
from qwen_mtp_desktop.ui.chat.message_widget import MessageWidget, format_stats
from qwen_mtp_desktop.ui.chat.missing_model import MissingModel
from qwen_mtp_desktop.ui.chat.model_session import ModelSession
from qwen_mtp_desktop.ui.chat.remote_picker import open_remote_dialog
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.remote_chat import ModelRouter, RemoteModels, is_remote
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

STORE_FLUSH_MS = 500
MESSAGES_PER_PAGE = 12
VISION_ENCODER = "openvino_vision_embeddings_model.xml"
#: ui_state keys (validated by core.settings): the Drafts toggle, a new chat's settings.
DRAFTS_KEY, NEW_CHAT_SETTINGS_KEY = UI_SHOW_DRAFTS, UI_NEW_CHAT_SETTINGS


class ChatPanel(ChatLayout):
    """Signals:
    export_requested(): the user wants the export wizard (from the demo banner).
    validate_requested(Path): the user wants to validate MTP on a model.
    validate_lookup_requested(Path, str, DecodingMethod): the user wants prompt lookup (the
        chat's) validated on a model, on a workload's prompt set (health banner).
    busy_changed(bool): a generation started or ended.
    """

    export_requested = Signal()
    validate_requested = Signal(object)
    validate_lookup_requested = Signal(object, str, object)
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
        super().__init__(parent)  # the widgets, laid out (ui.chat.chat_layout)
        #: The app settings' UI state (saved with them): what this panel remembers between runs.
        self._ui_state = ui_state if ui_state is not None else {}
        self._runner = store_runner
        # Local models run in the engine process, remote ones on their server: one handle.
        self.remote_models = RemoteModels(store_runner, self)
        self._engine = ModelRouter(engine, self.remote_models, self)
        self.remote_dialog: QWidget | None = None
        self._default_model = default_model
        self._log_file = log_file
        self.dark = dark  # ui.chat.theme.restyle_chat follows a theme change
        self._stream: Stream | None = None
        self._request_text = ""  # the running answer's request (acceptance health)
        self._show_drafts = False
        self._search = ""
        self._models: list[Path] = []
        self._model_details: dict[Path, str] = {}
        self._titles: dict[int, str] = {}
        self._last_deleted: DeletedConversation | None = None
        self.compare_dialog: CompareDialog | None = None
        self.model = ModelSession(self._engine, store_runner, self._chat_state, self)
        # The store opens on the runner; its result arrives through the event loop, after
        # the connections below.
        self._chats = ConversationController(store_runner, database, self)
        self.message_actions = MessageActions(self)
        self.missing = MissingModel(self, self._update_header)  # its model folder vanished
        self._connect()
        self.drafts_toggle.setChecked(self._ui_state.get(DRAFTS_KEY) == "1")
        self._wire_engine()
        self._flush_timer = QTimer(self)
        self._flush_timer.setInterval(STORE_FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush_to_store)
        self._chats.ready.connect(self._on_store_opened)
        self._chats.open_failed.connect(self._show_problem)
        self._chats.failed.connect(self._show_problem)
        self._update_header()
        self._update_tab_order()

    def _connect(self) -> None:
        """The layout's widgets to what they do."""
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.search_changed.connect(self._on_search)
        self.conversations.action.connect(self._on_conversation_action)
        self.header.model_chosen.connect(self._on_picker)
        self.header.remote_action.connect(self._on_remote_action)
        self.header.eject_button.clicked.connect(self.model.eject)
        self.remote_models.changed.connect(self._update_header)
        self.remote_models.problem.connect(lambda text: self._show_problem(text, "warning"))
        self.drafts_toggle.toggled.connect(self._on_show_drafts)
        self.compare_button.clicked.connect(self.compare)
        self.banner_wrap.export_requested.connect(self.export_requested)
        self.health_wrap.revalidate_requested.connect(self._on_revalidate)
        self.missing.attach(self.health_wrap, self._on_model_changed, self.model_picker.showPopup)
        self.transcript.earlier_requested.connect(self._show_earlier)
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.edit_last_requested.connect(self.edit_last_message)
        self.examples.chosen.connect(self.send)
        self.settings_panel.settings_changed.connect(self._on_settings_changed)
        self.settings_panel.system_prompt_changed.connect(self._on_system_prompt_changed)
        self.settings_panel.model_changed.connect(self._on_model_changed)
        self.model.facts_changed.connect(self._show_model_facts)
        self.settings_panel.validate_requested.connect(
            lambda: self.validate_requested.emit(self._model_dir())
        )
        QShortcut(QKeySequence.StandardKey.New, self, self.new_chat)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.stop)
        QShortcut(QKeySequence(keys.REGENERATE_KEYS), self, self.regenerate_last)
        QShortcut(
            QKeySequence(keys.PREVIOUS_VERSION_KEYS), self, lambda: self.switch_last_answer(-1)
        )
        QShortcut(QKeySequence(keys.NEXT_VERSION_KEYS), self, lambda: self.switch_last_answer(1))

    def _wire_engine(self) -> None:
        self.model.changed.connect(self._update_header)
        self.model.problem.connect(self._show_problem)
        self.model.mtp_problem.connect(self.settings_panel.set_mtp_problem)
        self.model.health_warned.connect(self._on_health_warned)
        self.model.health_reset.connect(lambda: self.health_wrap.setVisible(False))
        self._engine.chunks.connect(self._on_chunks)
        self._engine.finished.connect(self._on_finished)
        self._engine.failed.connect(self._on_failed)

    # ------------------------------------------------------------------------ public API

    @property
    def generating(self) -> bool:
        return self._stream is not None

    @property
    def store_ready(self) -> bool:
        return self._chats.store is not None

    @property
    def conversation(self) -> Conversation | None:
        return self._chats.conversation

    # The model's state, by the names the rest of the app (and its tests) read.
    @property
    def _loaded(self) -> LoadedModel | None:
        return self.model.loaded

    @property
    def _loading(self) -> bool:
        return self.model.loading

    @property
    def _health(self) -> HealthMonitor | None:
        return self.model.health

    @property
    def health_warning(self) -> HealthWarning | None:
        return self.model.health_warning

    def _on_health_warned(self, warning: HealthWarning) -> None:
        self.health_wrap.revalidate_button.setToolTip(
            f"Check prompt lookup against plain decoding on the {warning.workload} prompts "
            "again and measure its acceptance there"
            if warning.reference.compares_workloads
            else "Check MTP against plain decoding on this model again and measure its acceptance"
        )
        self.health_wrap.show_warning(warning.text)

    def _on_revalidate(self) -> None:
        """Run the validation that measured what the warning compared with: MTP's, or prompt
        lookup's on the workload's prompt set at the chat's drafts per step."""
        warning = self.health_warning
        if warning is not None and warning.reference.compares_workloads and warning.workload:
            lookup = self.settings_panel.settings.replay_lookup
            self.validate_lookup_requested.emit(self._model_dir(), warning.workload, lookup)
            return
        self.validate_requested.emit(self._model_dir())

    def _chat_state(self) -> tuple[Path, ChatSettings, int]:
        conversation_id = self.conversation.id if self.conversation is not None else 0
        return self._model_dir(), self.settings_panel.settings, conversation_id

    def _ensure_model(self) -> None:
        self.model.ensure()

    def _show_model_facts(self) -> None:
        """The model's sampling defaults in the settings; the context meter, from the engine's
        counts in the stored stats (nothing is tokenized here)."""
        facts, chat = self.model.model_facts(), self.conversation
        self.settings_panel.set_model_sampling(facts.sampling if facts else None)
        limit, system = facts.context_length if facts else None, chat.system_prompt if chat else ""
        self.composer.meter.show_usage(conversation_usage(self._messages, system, limit))

    def _engine_settings(self) -> GenerationSettings:
        return self.model.engine_settings()

    @property
    def _messages(self) -> list[StoredMessage]:
        """The open chat's shown branch (what the model reads next)."""
        return self._chats.messages

    def set_models(self, models: list[Path]) -> None:
        self._models = models
        self.settings_panel.set_models(models, self._model_dir(), self._engine.names())
        self._fill_picker()

    def set_model_details(self, details: dict[Path, str]) -> None:
        """What the picker says about each model ("Qwen3.5 dense · 1.8 MB · FP16 · MTP")."""
        self._model_details = dict(details)
        self._fill_picker()

    def _fill_picker(self) -> None:
        self.header.fill_picker(
            self._model_dir(), self._models, self._model_details, self.remote_models.endpoints
        )

    def _on_picker(self, path: Path) -> None:
        if path != self._model_dir():
            self._on_model_changed(path)

    def _on_remote_action(self, action: str) -> None:
        self.header.refill()  # show the chosen model again, not the action row
        self._fill_picker()
        dialog = open_remote_dialog(action, self.remote_models, self._model_dir(), self)
        dialog.accepted.connect(lambda: self._on_remote_saved(dialog.result_endpoint))
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.remote_dialog = dialog
        dialog.open()

    def _on_remote_saved(self, endpoint: RemoteEndpoint | None) -> None:
        """After the remote server dialog: chat with the saved server (removed: the next
        turn's load says the server is gone)."""
        if endpoint is not None:
            self._on_model_changed(endpoint.ref)

    def compare(self) -> CompareDialog | None:
        """Decode this chat's last message plain and with MTP, side by side (non-modal)."""
        conversation = self.conversation
        if conversation is None or not self.model.decodes_mtp or self.generating:
            return None
        demo = is_demo_model(self._model_dir())
        history = compare_history(conversation.system_prompt, self._messages, demo)
        if not history:
            return None
        settings = self._engine_settings()  # Compare decodes greedily (compared_methods)
        dialog = CompareDialog(self._engine.engine, history, settings, self, dark=self.dark)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.compared.connect(self._sync_compare)
        dialog.destroyed.connect(lambda: setattr(self, "compare_dialog", None))
        self.compare_dialog = dialog
        dialog.show()
        dialog.start()
        self._sync_compare()
        return dialog

    def _sync_compare(self) -> None:
        busy = self.generating or (self.compare_dialog is not None and self.compare_dialog.running)
        reason = compare_blocked(self.model.decodes_mtp, self._messages, busy)
        self.compare_button.setEnabled(not reason)
        self.compare_button.setToolTip(reason or COMPARE_TIP)

    def set_devices(self, devices: list[str]) -> None:
        self.settings_panel.set_devices(devices)

    def forget_recommendation(self, model_dir: Path) -> None:
        """A new benchmark result for `model_dir`: look "auto" up again."""
        self.model.forget_recommendation(model_dir)
        if not self.generating:
            self.model.reload()

    def reload_acceptance_reference(self, model_dir: Path) -> None:
        """A validation or benchmark of `model_dir` finished: compare with its new reference."""
        loaded = self._loaded
        if loaded is not None and loaded.model_dir.resolve() == Path(model_dir).resolve():
            self.model.load_health(loaded)

    def use_model(self, model_dir: Path) -> None:
        """Make `model_dir` this chat's model (from the model manager's "Open in chat")."""
        self._default_model = model_dir
        self._on_model_changed(model_dir)

    def new_chat(self, model_dir: Path | None = None) -> None:
        """An empty chat, with `model_dir` as its model when given ("Open in chat")."""
        if model_dir is not None:
            self._default_model = model_dir
        if self._chats.store is None:
            return
        self.stop()
        self.undo_bar.close()
        self._chats.clear()
        self.transcript.clear()
        self.figures.show_last([])  # none: the previous chat's figures are not this one's
        self.conversations.set_current(None)
        self.settings_panel.set_settings(self._default_settings())
        self.settings_panel.set_system_prompt("")
        self._update_header()
        self._ensure_model()
        self.composer.editor.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if self._chats.store is None:
            raise RuntimeError("the chat store is not open yet")
        self.stop()
        self.undo_bar.close()
        self._chats.open(conversation_id, self._show_conversation)

    def send(self, text: str, image: Path | None = None) -> None:
        if self._stream is not None or self._chats.store is None:
            return
        self.undo_bar.close()
        widget = None
        if self.conversation is not None:
            widget = self._add_widget("user", content=text, image=image)

        def stored(user: StoredMessage, answer: StoredMessage) -> None:
            shown = widget
            if shown is None:  # a new chat: its row and title exist now
                self._update_header()
                self._refresh_list()
                shown = self._add_widget("user", content=text, image=image)
            shown.message_id = user.id
            shown.stored = user
            self._start_generation(answer)

        self._chats.send(
            text,
            image,
            model_dir=str(self._model_dir()),
            system_prompt=self.settings_panel.system_prompt.toPlainText().strip(),
            settings=self.settings_panel.settings,
            done=stored,
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
        if store.notice:
            # Non-modal: a modal box here would hold start-up (it can arrive before the
            # event loop runs, while the window paints for the first time).
            box = QMessageBox(
                QMessageBox.Icon.Warning,
                store.notice_title,
                store.notice,
                QMessageBox.StandardButton.Ok,
                self,
            )
            box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            box.open()
        self.settings_panel.set_settings(self._default_settings())
        self._refresh_list(open_newest=True)
        self._ensure_model()

    def _refresh_list(self, open_newest: bool = False) -> None:
        def done(items: list[ConversationSummary]) -> None:
            self._titles = {item.id: item.title for item in items}
            current = self.conversation.id if self.conversation else None
            self.conversations.set_conversations(items, current)
            if open_newest and items and self.conversation is None:
                self.open_conversation(items[0].id)

        self._chats.list_chats(self._search or None, done)

    def _show_conversation(self, conversation: Conversation, messages: list[StoredMessage]) -> None:
        self.transcript.clear()
        # Build only the newest messages; older ones appear when the user asks for them, so a
        # long chat opens at once (each message is a handful of widgets).
        shown = messages[-MESSAGES_PER_PAGE:]
        self.transcript.add_messages([self._message_widget(message) for message in shown])
        self.transcript.set_hidden_count(len(messages) - len(shown))
        QTimer.singleShot(0, self.transcript.scroll_to_bottom)
        self.figures.show_last(messages)
        self.conversations.set_current(conversation.id)
        self.settings_panel.set_settings(conversation.settings)
        self.settings_panel.set_system_prompt(conversation.system_prompt)
        self._update_header()
        self._ensure_model()
        self._update_tab_order()

    def _show_branch(self, branch: list[StoredMessage]) -> None:
        """Redraw the transcript for a new shown branch (a version switched, an undo): the
        messages that stayed keep their widgets, the rest are rebuilt."""
        widgets = self.transcript.messages
        shown = branch[min(self.transcript.hidden_count, len(branch)) :]
        keep = 0
        while (
            keep < min(len(widgets), len(shown))
            and widgets[keep].stored is not None
            and widgets[keep].stored == shown[keep]
        ):
            keep += 1
        for widget in widgets[keep:]:
            self.transcript.remove_message(widget)
        for message in shown[keep:]:
            self.transcript.add_message(self._message_widget(message))
        self.figures.show_last(branch)  # this version's figures, never another's
        self._show_model_facts()
        self._refresh_list()  # the list's preview is the shown branch's last message
        self._sync_examples()
        self._sync_compare()
        self._update_tab_order()

    def _show_earlier(self) -> None:
        hidden = self.transcript.hidden_count
        if not hidden:
            return
        start = max(hidden - MESSAGES_PER_PAGE, 0)
        widgets = [self._message_widget(m) for m in self._messages[start:hidden]]
        self.transcript.prepend_messages(widgets)
        self.transcript.set_hidden_count(start)
        self._update_tab_order()

    # ------------------------------------------------------------------------ generation

    def _model_dir(self) -> Path:
        conversation = self.conversation
        if conversation is not None and conversation.model_dir:
            return Path(conversation.model_dir)
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

    def _start_generation(self, answer: StoredMessage) -> None:
        """Generate into `answer`, the empty message the store has begun for it: the one
        place a turn starts (send, regenerate and edit all come here)."""
        if self._chats.store is None:
            return
        conversation = self.conversation
        if conversation is None or conversation.id != answer.conversation_id:
            # The user left that chat while its turn was being stored: no answer is coming.
            self._chats.discard_answer(answer.id)
            return
        self._ensure_model()
        # The model reads the shown branch: after a version switch, that version's turns.
        history = chat_history(conversation.system_prompt, self._messages)
        if is_demo_model(self._model_dir()):
            history = single_turn(history)  # its answers go wrong with earlier turns
        turn = self.model.plan_turn(history)
        # The request answered: the acceptance health check reads its workload kind.
        self._request_text = next((m.content for m in reversed(history) if m.role == "user"), "")
        request_id = self._engine.generate(history, turn.settings)
        widget = self._add_widget("assistant")
        widget.begin_stream()
        widget.set_show_drafts(self._show_drafts)
        widget.set_version(answer.version, answer.version_count)
        stream = Stream(request_id, widget, turn)
        stream.message_id = widget.message_id = answer.id
        self._update_header()
        self._stream = stream
        self.model_picker.setEnabled(False)
        self._sync_compare()
        self.composer.set_generating(True)
        self.figures.show_waiting()
        self._flush_timer.start()
        self.busy_changed.emit(True)

    def _on_chunks(self, request_id: int, chunks: list[StepChunk]) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            return
        stream.take(chunks)
        remote = self._engine.live_text(stream.request_id)
        if remote is not None:  # no token ids from a server: its figures come at the end
            self.figures.show_figures("Generating  ·  " + remote)
        else:
            self.figures.show_figures(stream.live_text(self._loaded))

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
        self.model.observe(stats, self._request_text)
        if stats.finish_reason == "cancelled":
            widget.show_notice("Stopped. The answer so far is kept.")
        self._end_stream(
            stream,
            lambda store, mid, a, r: store.finish_message(
                mid, record, "complete", model=record["model"], answer_delta=a, reasoning_delta=r
            ),
        )
        self.figures.show_figures("Last answer  ·  " + format_stats(record))

    def _on_failed(self, request_id: int, error: EngineError) -> None:
        stream = self._stream
        if stream is None or stream.request_id != request_id:
            self._show_problem(error.message)
            return
        widget = stream.widget
        widget.end_stream()
        error = self.missing.explain(error)
        text = f"{error.message} {error.fix}".strip() + f"\nLog file: {self._log_file}"
        widget.show_error(text)
        message = error.message

        def fail(store: ChatStore, message_id: int, answer: str, reasoning: str) -> None:
            if answer or reasoning:
                store.append_to_message(message_id, answer, reasoning)
            store.fail_message(message_id, message)

        self._end_stream(stream, fail)
        self.figures.clear()

    def _end_stream(self, stream: Stream, write: AnswerWrite) -> None:
        self._stream = None
        self.model_picker.setEnabled(True)
        self._flush_timer.stop()
        self.composer.set_generating(False)
        self.busy_changed.emit(False)
        answer, reasoning = stream.take_pending()

        def done() -> None:
            # The widget now stands for the stored answer (version arrows, branch redraws).
            if self._messages and self._messages[-1].id == stream.message_id:
                stream.widget.stored = self._messages[-1]
            self._show_model_facts()
            self._refresh_list()
            self._sync_compare()

        if stream.message_id is not None:
            self._chats.finish(stream.message_id, write, answer, reasoning, done)
        self._update_tab_order()

    def _flush_to_store(self) -> None:
        stream = self._stream
        if stream is None or not stream.has_pending or stream.message_id is None:
            return
        answer, reasoning = stream.take_pending()
        self._chats.append(stream.message_id, answer, reasoning)

    # ------------------------------------------------------------------------ engine status

    def _update_header(self) -> None:
        self.title_label.setText(self.conversation.title if self.conversation else "New chat")
        model_dir = self._model_dir()
        self.missing.follow(model_dir)
        name = display_name(model_dir)
        settings = self.settings_panel.settings
        if self._loading:
            status = f"Loading {name} on {settings.device}…"
        elif self._loaded is not None and self._loaded.model_dir == model_dir:
            mode = self.model.decoding_label(self.conversation is not None)
            status = f"{self._loaded.device}  ·  {mode}"  # the picker beside it names the model
        else:  # ejected: the Eject button's tooltip says the next message reloads
            status = self.missing.header_status(model_dir, self.model.ejected)
        self.model_status.setText(status)
        loaded = self._loaded
        self.header.eject_button.setVisible(
            loaded is not None and not self._loading and not is_remote(loaded.model_dir)
        )
        self.header.eject_button.setEnabled(self._stream is None)
        self.settings_panel.set_models(self._models, model_dir, self._engine.names())
        self._fill_picker()
        self.model_picker.setEnabled(self._stream is None)  # busy: the answer needs its model
        self._sync_compare()
        self.busy_bar.setVisible(self._loading)
        self.banner_wrap.setVisible(is_demo_model(model_dir))
        self._sync_examples()
        # One stat, not a scan: the image button is on only for models that can see.
        self.composer.set_vision((model_dir / VISION_ENCODER).is_file())
        self._show_model_facts()

    def _sync_examples(self) -> None:
        messages, demo = self.transcript.messages, is_demo_model(self._model_dir())
        answered = any(w.role == "assistant" for w in messages)
        busy = bool(messages) or self._stream is not None  # examples only in an empty chat
        show_examples(self.examples, self.demo_turn_note, demo, busy, answered)

    # ------------------------------------------------------------------------ chat settings

    def _on_settings_changed(self, settings: ChatSettings) -> None:
        self._ui_state[NEW_CHAT_SETTINGS_KEY] = json.dumps(settings.to_dict())
        self._update_header()
        self._chats.save_settings(settings, self._on_conversation_updated)
        if not self.generating:
            self._ensure_model()

    def _on_system_prompt_changed(self, text: str) -> None:
        # A new chat takes it when it is created.
        self._chats.save_system_prompt(text, self._on_conversation_updated)

    def _on_model_changed(self, model_dir: Path) -> None:
        if self.conversation is not None and self._chats.store is not None:
            self._chats.save_model_dir(model_dir, self._on_model_saved)
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
        if self._chats.updated(conversation):
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

    # ------------------------------------------------------------------------ chat list actions

    def _on_conversation_action(self, action: str, conversation_id: int) -> None:
        if action == "rename":
            title, ok = QInputDialog.getText(self, "Rename chat", "Title:")
            if ok:
                self._chats.rename(conversation_id, title, self._on_renamed)
        elif action == "delete":
            if self._chats.is_current(conversation_id):
                self.stop()
            self._chats.delete_chat(conversation_id, self._on_deleted)
        elif action in ("export-md", "export-json"):
            markdown = action == "export-md"
            title = self._titles.get(conversation_id, f"chat-{conversation_id}")
            filename, _ = QFileDialog.getSaveFileName(
                self,
                "Export chat",
                export_filename(title, ".md" if markdown else ".json"),
                "Markdown (*.md)" if markdown else "JSON (*.json)",
            )
            if filename:
                self._chats.export(conversation_id, Path(filename), markdown)

    def _on_deleted(self, deleted: DeletedConversation) -> None:
        if self.conversation is None:
            self.transcript.clear()
            self.figures.show_last([])
            self._update_header()
        self._refresh_list()
        self._last_deleted = deleted
        self.undo_bar.offer(f"“{deleted.conversation.title}” was deleted.", self.undo_delete)
        self._update_tab_order()

    def undo_delete(self) -> None:
        deleted = self._last_deleted
        if deleted is None:
            return
        self._last_deleted = None
        self._chats.restore_chat(deleted, self._on_restored)

    def _on_renamed(self, conversation: Conversation) -> None:
        self._on_conversation_updated(conversation)
        self._refresh_list()

    def _on_restored(self, conversation: Conversation) -> None:
        self._refresh_list()
        self.open_conversation(conversation.id)

    # ------------------------------------------------------------------------ message actions
    # (ui.chat.message_actions; these names are what the composer, shortcuts and tests call)

    def _on_message_action(self, widget: MessageWidget, action: str) -> None:
        self.message_actions.on_action(widget, action)

    def _edit_and_regenerate(self, user: MessageWidget, text: str) -> None:
        self.message_actions.edit_and_regenerate(user, text)

    def edit_last_message(self) -> None:
        self.message_actions.edit_last()

    def regenerate_last(self) -> None:
        self.message_actions.regenerate_last()

    def switch_last_answer(self, step: int) -> None:
        self.message_actions.switch_last_answer(step)

    # ------------------------------------------------------------------------ helpers

    def _message_widget(self, message: StoredMessage) -> MessageWidget:
        widget = MessageWidget(
            message.role,
            dark=self.dark,
            content=message.content,
            reasoning=message.reasoning,
            image=Path(message.image_path) if message.image_path else None,
            stats=message.stats,
            status=message.status,
            error=message.error,
        )
        widget.message_id = message.id
        widget.stored = message
        widget.set_version(message.version, message.version_count)
        self._connect_widget(widget)
        if self._show_drafts and message.role == "assistant":
            widget.set_show_drafts(True)
        return widget

    def _add_widget(self, role: str, content: str = "", image: Path | None = None) -> MessageWidget:
        widget = MessageWidget(role, dark=self.dark, content=content, image=image)
        self._connect_widget(widget)
        self.transcript.add_message(widget)
        self.transcript.scroll_to_bottom()
        self._sync_examples()
        self._update_tab_order()
        return widget

    def _connect_widget(self, widget: MessageWidget) -> None:
        widget.action.connect(lambda action, w=widget: self._on_message_action(w, action))
        widget.version_step.connect(
            lambda step, w=widget: self.message_actions.switch_version(w, step)
        )
        widget.edit_submitted.connect(lambda text, w=widget: self._edit_and_regenerate(w, text))
        widget.link_requested.connect(self._open_link)

    def _open_link(self, url: QUrl) -> None:
        open_answer_link(self, url)

    def _show_problem(self, text: str, severity: str = "error") -> None:
        self.figures.show_problem(text, severity)
