"""The chat panel: wires the chat's parts together and shows what they do.

Who does what (ui/chat/):
- `conversation.ConversationController`: the open chat, its shown branch and every store call.
- `turn.TurnController`: a turn's life (start, stream, store writes, stop, stats, its end);
  a generation starts in one place, `TurnController.start`.
- `model_session.ModelSession`: which model loads, Auto, acceptance health.
- `message_actions.MessageActions`: edit, answer again, versions, delete (public API only).
- `header.ChatHeader`: title, model picker and toggles; `banners`: demo, health and undo bars.
- This module: the header's status, the transcript's redraws, chat settings, the chat list.

Threads: the model runs in the engine process (EngineProcess); every database call runs on the
store's TaskRunner thread. The GUI thread only updates widgets, so it never waits for either.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QMessageBox, QWidget

from qwen_mtp_desktop.core.chat.context_usage import conversation_usage
from qwen_mtp_desktop.core.chat.new_chat import (
    new_chat_sampling_source,
    new_chat_settings,
    new_chat_system_prompt,
    sampling_key,
)
from qwen_mtp_desktop.core.chat.store.records import (
    ChatSettings,
    Conversation,
    ConversationSummary,
    StoredMessage,
)
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.engine import LoadedModel
from qwen_mtp_desktop.core.measure.acceptance_health import HealthMonitor, HealthWarning
from qwen_mtp_desktop.core.models.library import display_name, is_demo_model
from qwen_mtp_desktop.core.settings.presets import ChatPreset
from qwen_mtp_desktop.core.settings.store import UI_NEW_CHAT_SETTINGS, UI_SHOW_DRAFTS
from qwen_mtp_desktop.ui.chat import shortcuts as keys
from qwen_mtp_desktop.ui.chat.compare import (
    COMPARE_TIP,
    CompareDialog,
    compare_blocked,
    compare_history,
)
from qwen_mtp_desktop.ui.chat.composer.examples import show_examples
from qwen_mtp_desktop.ui.chat.conversations.list_actions import ChatListActions
from qwen_mtp_desktop.ui.chat.conversations.open_chat import ConversationController
from qwen_mtp_desktop.ui.chat.layout import ChatLayout
from qwen_mtp_desktop.ui.chat.missing_model import MissingModel
from qwen_mtp_desktop.ui.chat.options.model_defaults import ModelDefaultsOptions
from qwen_mtp_desktop.ui.chat.options.presets import PresetOptions
from qwen_mtp_desktop.ui.chat.remote.picker import MANAGE, open_remote_dialog
from qwen_mtp_desktop.ui.chat.remote.servers import RemoteServersDialog
from qwen_mtp_desktop.ui.chat.transcript.links import open_answer_link
from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
from qwen_mtp_desktop.ui.chat.turns.controller import TurnController
from qwen_mtp_desktop.ui.chat.turns.message_actions import MessageActions
from qwen_mtp_desktop.ui.chat.turns.model_session import ModelSession
from qwen_mtp_desktop.ui.chat.turns.tool_turns import ToolTurns
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.model_router import ModelRouter, RemoteModels, is_remote
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

MESSAGES_PER_PAGE = 12
VISION_ENCODER = "openvino_vision_embeddings_model.xml"
#: ui_state keys (validated by core.settings.store): the Drafts toggle, a new chat's settings.
DRAFTS_KEY, NEW_CHAT_SETTINGS_KEY = UI_SHOW_DRAFTS, UI_NEW_CHAT_SETTINGS


class ChatPanel(ChatLayout):
    """Signals:
    discover_requested(): the user wants to find a real model (from the demo banner).
    validate_requested(Path): the user wants to validate MTP on a model.
    validate_lookup_requested(Path, str, DecodingMethod): the user wants prompt lookup (the
        chat's) validated on a model, on a workload's prompt set (health banner).
    busy_changed(bool): a generation started or ended.
    answered(dict): an answer finished; its stats record (what decoded it).
    last_answer(object): a chat (or a version of it) was shown: its last answer's stats
        record, or None for a chat with no answer yet.
    presets_changed(list, object): the chat presets (list[ChatPreset]) or the one new chats
        start from (a name or None) changed: the app's settings keep them.
    """

    discover_requested = Signal()
    validate_requested = Signal(object)
    validate_lookup_requested = Signal(object, str, object)
    busy_changed = Signal(bool)
    answered = Signal(object)
    last_answer = Signal(object)
    presets_changed = Signal(list, object)

    def __init__(
        self,
        engine_process: EngineProcess,
        store_runner: TaskRunner,
        database: Path,
        default_model: Path,
        log_file: Path,
        parent: QWidget | None = None,
        *,
        dark: bool = False,
        ui_state: dict[str, str] | None = None,
        presets: Sequence[ChatPreset] = (),
        default_preset: str | None = None,
    ) -> None:
        super().__init__(parent)  # the widgets, laid out (ui.chat.layout)
        #: The app settings' UI state (saved with them): what this panel remembers between runs.
        self._ui_state = ui_state if ui_state is not None else {}
        self.banner_wrap.remember_in(self._ui_state)
        self._runner = store_runner
        # Local models run in the engine process, remote ones on their server: one handle.
        self.remote_models = RemoteModels(store_runner, self)
        self._router = ModelRouter(engine_process, self.remote_models, self)
        self.remote_dialog: QWidget | None = None
        self.remote_servers_dialog: RemoteServersDialog | None = None
        self._default_model = default_model
        self._sampling_key: tuple[object, ...] = ()  # the sampling values last explained
        self.dark = dark  # ui.chat.theme.restyle_chat follows a theme change
        self.conversations.set_dark(dark)
        self._show_drafts = False
        self._search = ""
        #: A chat was opened on request: the start-up's "open the chat used last" (which comes
        #: when the first list does) must not replace it.
        self._open_requested = False
        self._models: list[Path] = []
        self._model_details: dict[Path, str] = {}
        self._titles: dict[int, str] = {}
        self.compare_dialog: CompareDialog | None = None
        self.model = ModelSession(self._router, store_runner, self._chat_state, self)
        # The store opens on the runner; its result arrives through the event loop, after
        # the connections below.
        self._chats = ConversationController(store_runner, database, self)
        self.missing = MissingModel(self, self._update_header)  # its model folder vanished
        # A turn's life: start, stream, store writes, stop, its end (ui.chat.turns.controller).
        self.turns = TurnController(
            self._router,
            self._chats,
            self.model,
            self._answer_widget,
            self,
            explain=self.missing.explain,
        )
        # MCP tools: the loop a turn runs when the model calls tools (ui.chat.turns.tool_turns).
        self.tool_turns = ToolTurns(self, self._chats, self._router, self.turns, self)
        self.turns.tools = self.tool_turns
        self.message_actions = MessageActions(self, self._chats, self.turns, log_file)
        self.list_actions = ChatListActions(  # rename, delete and Undo, export
            self,
            self._chats,
            self.undo_bar,
            titles=lambda: self._titles,
            stop=self.stop,
            renamed=self._on_renamed,
            deleted=self._on_deleted,
            restored=self._on_restored,
        )
        # Presets: a system prompt with sampling settings, app-wide (ui.chat.options.presets).
        self.presets = PresetOptions(self._chat_options)
        self.presets.set_presets(presets, default_preset)
        # What new chats of this model start with (ui.chat.options.model_defaults).
        self.model_defaults = ModelDefaultsOptions(
            self._chat_options,
            lambda: (self.model.model_key(), self.settings_panel.model_combo.currentText()),
            self.presets.default_preset,
        )
        for section in (self.presets, self.model_defaults):
            self.settings_panel.preset_section.addWidget(section)
        self._connect()
        self.drafts_toggle.setChecked(self._ui_state.get(DRAFTS_KEY) == "1")
        self._wire_engine()
        self._chats.ready.connect(self._on_store_opened)
        self._chats.open_failed.connect(self.show_problem)
        self._chats.failed.connect(self.show_problem)
        self._update_header()
        self._update_tab_order()

    def _connect(self) -> None:
        """The layout's widgets to what they do."""
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.selected.connect(self.open_conversation)
        self.conversations.match_opened.connect(self.open_match)
        self.conversations.search_changed.connect(self._on_search)
        self.conversations.action.connect(self._on_conversation_action)
        self.header.model_chosen.connect(self._on_picker)
        self.header.remote_action.connect(self._on_remote_action)
        self.header.eject_button.clicked.connect(self.model.eject)
        self.remote_models.changed.connect(self._update_header)
        self.remote_models.problem.connect(lambda text: self.show_problem(text, "warning"))
        self.drafts_toggle.toggled.connect(self._on_show_drafts)
        self.compare_button.clicked.connect(self.compare)
        self.banner_wrap.discover_requested.connect(self.discover_requested)
        self.health_wrap.revalidate_requested.connect(self._on_revalidate)
        self.missing.attach(self.health_wrap, self._on_model_changed, self.model_picker.showPopup)
        self.missing.relocated.connect(self._on_model_relocated)
        self.transcript.earlier_requested.connect(self._show_earlier)
        self.composer.send_requested.connect(self.send)
        self.composer.stop_requested.connect(self.stop)
        self.composer.edit_last_requested.connect(self.edit_last_message)
        self.examples.chosen.connect(self.send)
        self.settings_panel.settings_changed.connect(self._on_settings_changed)
        self.presets.apply_requested.connect(self._apply_preset)
        self.presets.changed.connect(self.presets_changed)
        self.presets.changed.connect(self.model_defaults.refresh)
        self.settings_panel.system_prompt_changed.connect(self._on_system_prompt_changed)
        self.settings_panel.model_changed.connect(self._on_model_changed)
        self.model.facts_changed.connect(self._show_model_facts)
        self.settings_panel.validate_requested.connect(
            lambda: self.validate_requested.emit(self.current_model_dir())
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
        self.model.problem.connect(self.show_problem)
        self.model.mtp_problem.connect(self.settings_panel.set_mtp_problem)
        self.model.health_warned.connect(self.health_wrap.show_health)
        self.model.health_reset.connect(lambda: self.health_wrap.setVisible(False))
        self.turns.started.connect(self._on_turn_started)
        self.turns.figures.connect(self.figures.show_figures)
        self.turns.answered.connect(self.answered)
        self.figures.last_answer.connect(self.last_answer)
        self.turns.ended.connect(self._on_turn_ended)
        self.turns.stored.connect(self._on_turn_stored)
        self.turns.problem.connect(self.show_problem)

    # ------------------------------------------------------------------------ public API

    @property
    def generating(self) -> bool:
        return self.turns.running

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

    def _on_revalidate(self) -> None:
        """Run the validation that measured what the warning compared with: MTP's, or prompt
        lookup's on the workload's prompt set at the chat's drafts per step."""
        warning = self.health_warning
        if warning is not None and warning.reference.compares_workloads and warning.workload:
            lookup = self.settings_panel.settings.replay_lookup
            self.validate_lookup_requested.emit(self.current_model_dir(), warning.workload, lookup)
            return
        self.validate_requested.emit(self.current_model_dir())

    def _chat_state(self) -> tuple[Path, ChatSettings, int]:
        conversation_id = self.conversation.id if self.conversation is not None else 0
        return self.current_model_dir(), self.settings_panel.settings, conversation_id

    def _ensure_model(self) -> None:
        self.model.ensure()

    def _show_model_facts(self) -> None:
        """The model's sampling defaults in the settings; the context meter, from the engine's
        counts in the stored stats (nothing is tokenized here)."""
        facts, chat = self.model.model_facts(), self.conversation
        self.settings_panel.set_model_sampling(facts.sampling if facts else None)
        self.model_defaults.refresh()
        if self.conversation is None and self.model_defaults.restart_due(*self._chat_options()):
            self._start_new_chat_options()  # the model's defaults, now that it is known
        limit, system = facts.context_length if facts else None, chat.system_prompt if chat else ""
        self.composer.meter.show_usage(conversation_usage(self._messages, system, limit))

    @property
    def _messages(self) -> list[StoredMessage]:
        """The open chat's shown branch (what the model reads next)."""
        return self._chats.messages

    def set_models(self, models: list[Path]) -> None:
        self._models = models
        self.settings_panel.set_models(models, self.current_model_dir(), self._router.names())
        self._fill_picker()

    def set_model_details(self, details: dict[Path, str]) -> None:
        """What the picker says about each model ("Qwen3.5 dense · 1.8 MB · FP16 · MTP")."""
        self._model_details = dict(details)
        self._fill_picker()

    def _fill_picker(self) -> None:
        self.header.fill_picker(
            self.current_model_dir(),
            self._models,
            self._model_details,
            self.remote_models.endpoints,
        )

    def _on_picker(self, path: Path) -> None:
        if path != self.current_model_dir():
            self._on_model_changed(path)

    def _on_remote_action(self, action: str) -> None:
        self.header.refill()  # show the chosen model again, not the action row
        self._fill_picker()
        if action == MANAGE:
            self.show_remote_servers()
            return
        dialog = open_remote_dialog(
            action, self.remote_models, self.current_model_dir(), self, self._on_model_changed
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.remote_dialog = dialog
        dialog.open()

    def show_remote_servers(self) -> RemoteServersDialog:
        """Tools > Remote servers… (non-modal; one at a time): list, add, edit, remove."""
        if self.remote_servers_dialog is None:
            self.remote_servers_dialog = RemoteServersDialog(self.remote_models, self)
        self.remote_servers_dialog.show()
        self.remote_servers_dialog.raise_()
        return self.remote_servers_dialog

    def compare(self) -> CompareDialog | None:
        """Decode this chat's last message plain and with MTP, side by side (non-modal)."""
        conversation = self.conversation
        if conversation is None or not self.model.decodes_mtp or self.generating:
            return None
        demo = is_demo_model(self.current_model_dir())
        history = compare_history(conversation.system_prompt, self._messages, demo)
        if not history:
            return None
        settings = self.model.engine_settings()  # Compare decodes greedily (compared_methods)
        dialog = CompareDialog(
            self._router.engine_process, history, settings, self, dark=self.dark, demo=demo
        )
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
        self.message_actions.offer_continue(busy)  # Continue follows the same facts

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
        self._start_new_chat_options()
        self._update_header()
        self._ensure_model()
        self.composer.editor.setFocus()

    def open_conversation(self, conversation_id: int, at_message: int | None = None) -> None:
        """Open a chat at its end, or scrolled to `at_message` (marked a moment)."""
        if self._chats.store is None:
            raise RuntimeError("the chat store is not open yet")
        self.stop()
        self.undo_bar.close()
        self._open_requested = True
        self._chats.open(conversation_id, lambda c, m: self._show_conversation(c, m, at_message))

    def open_match(self, conversation_id: int, message_id: int) -> None:
        """A search's result: its chat opened at the message that matched (the open chat, a
        turn maybe running, is only scrolled)."""
        if self._chats.is_current(conversation_id):
            self.transcript.show_message(message_id)
        else:
            self.open_conversation(conversation_id, message_id)

    def send(self, text: str, image: Path | None = None) -> None:
        if self.turns.running or self._chats.store is None:
            return
        self.undo_bar.close()
        widget = None
        if self.conversation is not None:
            widget = self._add_widget("user", content=text, image=image)

        def stored(user: StoredMessage) -> None:
            shown = widget
            if shown is None:  # a new chat: its row and title exist now
                self._update_header()
                self._refresh_list()
                shown = self._add_widget("user", content=text, image=image)
            shown.message_id = user.id
            shown.stored = user

        self.turns.send(
            text,
            image,
            model_dir=self.current_model_dir(),
            system_prompt=self.settings_panel.system_prompt.toPlainText().strip(),
            settings=self.settings_panel.settings,
            shown=stored,
        )

    def stop(self) -> None:
        self.turns.stop()

    def shutdown(self) -> None:
        """Stop generating and write what is pending (the runner finishes queued writes)."""
        self.turns.close()
        self._router.shutdown()

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
        self._start_new_chat_options()
        self._refresh_list(open_newest=True)
        self._ensure_model()

    def _refresh_list(self, open_newest: bool = False) -> None:
        def done(items: list[ConversationSummary]) -> None:
            self._titles = {item.id: item.title for item in items}
            current = self.conversation.id if self.conversation else None
            self.conversations.set_conversations(items, current)
            if open_newest and items and self.conversation is None and not self._open_requested:
                # The chat used last, pinned or not (pinned chats head the list).
                newest = max(items, key=lambda item: (item.updated_at, item.id))
                self.open_conversation(newest.id)

        self._chats.list_chats(self._search or None, done)

    def refresh_list(self) -> None:
        """Read the chat list again (a theme change redraws its pin marks)."""
        if self._chats.store is not None:
            self._refresh_list()

    def _show_conversation(
        self, conversation: Conversation, messages: list[StoredMessage], at: int | None = None
    ) -> None:
        self.transcript.clear()
        # Build only the newest messages; older ones appear when the user asks for them, so a
        # long chat opens at once (each message is a handful of widgets).
        shown = messages[-MESSAGES_PER_PAGE:]
        self.transcript.add_messages([self._message_widget(message) for message in shown])
        self.transcript.set_hidden_count(len(messages) - len(shown))
        QTimer.singleShot(0, lambda: self.transcript.show_message(at))  # at, else the end
        self.figures.show_last(messages)
        self.conversations.set_current(conversation.id)
        self.settings_panel.set_settings(conversation.settings)
        self.settings_panel.set_system_prompt(conversation.system_prompt)
        self._say_sampling("Kept with this chat")
        self.model_defaults.opened()
        self._update_header()
        self._ensure_model()
        self._update_tab_order()

    def show_branch(self, branch: list[StoredMessage]) -> None:
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

    def current_model_dir(self) -> Path:
        conversation = self.conversation
        if conversation is not None and conversation.model_dir:
            return Path(conversation.model_dir)
        return self._default_model

    def _apply_preset(self, preset: ChatPreset) -> None:
        self.settings_panel.apply_preset(preset.values, preset.system_prompt)
        self._say_sampling(f"From the preset “{preset.name}”")

    def _say_sampling(self, text: str) -> None:
        self._sampling_key = sampling_key(self.settings_panel.settings)
        self.settings_panel.set_sampling_source(text)

    def _chat_options(self) -> tuple[ChatSettings, str]:
        return self.settings_panel.settings, self.settings_panel.system_prompt.toPlainText().strip()

    def _start_new_chat_options(self) -> None:
        """The options a new chat starts with (core.chat.new_chat.NEW_CHAT_RULE: this model's
        defaults, else the default preset, else the model's own), said where they came from."""
        preset, model = self.presets.default_preset(), self.model_defaults.current()
        remembered = self._ui_state.get(NEW_CHAT_SETTINGS_KEY)
        self.settings_panel.set_settings(new_chat_settings(remembered, preset, model))
        self.settings_panel.set_system_prompt(new_chat_system_prompt(preset, model))
        self._say_sampling(new_chat_sampling_source(preset, model))
        self.model_defaults.started(*self._chat_options())

    def _answer_widget(self, answer: StoredMessage) -> MessageWidget:
        """A turn's answer, streaming into a new widget at the transcript's end (the turn
        controller asks for it once its request is on its way)."""
        widget = self._add_widget("assistant")
        widget.begin_stream()
        widget.set_show_drafts(self._show_drafts)
        widget.set_version(answer.version, answer.version_count)
        self._update_header()
        return widget

    def _on_turn_started(self) -> None:
        self.model_picker.setEnabled(False)
        self._sync_compare()
        self.composer.set_generating(True)
        self.figures.show_waiting()
        self.busy_changed.emit(True)

    def _on_turn_ended(self, answered: bool) -> None:
        self.model_picker.setEnabled(True)
        self.composer.set_generating(False)
        self.busy_changed.emit(False)
        self._update_tab_order()
        if answered:
            self.figures.answered()  # the answer's own line has its figures
        else:
            self.figures.clear()

    def _on_turn_stored(self) -> None:
        self._show_model_facts()
        self._refresh_list()
        self._sync_compare()

    # ------------------------------------------------------------------------ engine status

    def _update_header(self) -> None:
        self.title_label.setText(self.conversation.title if self.conversation else "New chat")
        model_dir = self.current_model_dir()
        self.missing.follow(model_dir)
        self.transcript.set_chat_model(str(model_dir))
        name = display_name(model_dir)
        settings = self.settings_panel.settings
        details = ""
        if self._loading:
            status = f"Loading {name} on {settings.device}…"
        elif self._loaded is not None and self._loaded.model_dir == model_dir:
            mode, details = self.model.decoding_label(self.conversation is not None)
            status = f"{self._loaded.device}  ·  {mode}"  # the picker beside it names the model
        else:  # ejected: the Eject button's tooltip says the next message reloads
            status = self.missing.header_status(model_dir, self.model.ejected)
        self.header.show_status(status, details)
        loaded = self._loaded
        self.header.eject_button.setVisible(
            loaded is not None and not self._loading and not is_remote(loaded.model_dir)
        )
        self.header.eject_button.setEnabled(not self.turns.running)
        self.settings_panel.set_models(self._models, model_dir, self._router.names())
        self._fill_picker()
        self.model_picker.setEnabled(not self.turns.running)  # busy: the answer needs its model
        self._sync_compare()
        self.busy_bar.setVisible(self._loading)
        self.banner_wrap.show_for(is_demo_model(model_dir))
        self._sync_examples()
        # One stat, not a scan: the image button is on only for models that can see.
        self.composer.set_vision((model_dir / VISION_ENCODER).is_file())
        self._show_model_facts()

    def sync_controls(self) -> None:
        """The example prompts and Compare follow the transcript (a message removed)."""
        self._sync_examples()
        self._sync_compare()

    def _sync_examples(self) -> None:
        messages, demo = self.transcript.messages, is_demo_model(self.current_model_dir())
        answered = any(w.role == "assistant" for w in messages)
        busy = bool(messages) or self.turns.running  # examples only in an empty chat
        show_examples(self.examples, self.demo_turn_note, demo, busy, answered)

    # ------------------------------------------------------------------------ chat settings

    def _on_settings_changed(self, settings: ChatSettings) -> None:
        if sampling_key(settings) != self._sampling_key:
            self._say_sampling("Chosen in this chat")
        remembered = replace(settings, mcp_servers=())  # per chat, never a new chat's
        self._ui_state[NEW_CHAT_SETTINGS_KEY] = json.dumps(remembered.to_dict())
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

    def _on_model_relocated(self, gone: Path, located: Path) -> None:
        """The gone folder was located: new chats open the model at its new place too (not
        the vanished path, which would fail and unload the model that works)."""
        if self._default_model == gone or not self._default_model.is_dir():
            self._default_model = located

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
        self.list_actions.on_action(action, conversation_id)

    def undo_delete(self) -> None:
        self.list_actions.undo_delete()

    def _on_deleted(self) -> None:
        if self.conversation is None:
            self.transcript.clear()
            self.figures.show_last([])
            self._update_header()
        self._refresh_list()
        self._update_tab_order()

    def _on_renamed(self, conversation: Conversation) -> None:
        self._on_conversation_updated(conversation)
        self._refresh_list()

    def _on_restored(self, conversation: Conversation) -> None:
        self._refresh_list()
        self.open_conversation(conversation.id)

    # ------------------------------------------------------------------------ message actions
    # (ui.chat.turns.message_actions; these names are what the composer, shortcuts and tests call)

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

    def show_problem(self, text: str, severity: str = "error") -> None:
        self.figures.show_problem(text, severity)
