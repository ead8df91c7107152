"""Per-chat settings, shown as "Chat options" (apart from the app's Settings, Ctrl+,): presets,
model, device, MTP or prompt lookup, draft depth, thinking and sampling."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.chat.generation_defaults import ModelSampling
from qwen_mtp_desktop.core.chat.new_chat import NEW_CHAT_RULE
from qwen_mtp_desktop.core.chat.store.records import MAX_THINKING_BUDGET, ChatSettings
from qwen_mtp_desktop.core.decoding.method import MAX_LOOKUP_DRAFTS, MAX_NGRAM, DecodingMethod
from qwen_mtp_desktop.core.models.library import display_name
from qwen_mtp_desktop.core.prompt.context_limit import OVERFLOW_WORDS
from qwen_mtp_desktop.workers.remote_models import is_remote

#: The chat's own settings, named apart from the app's Settings (File > Settings, Ctrl+,).
CHAT_OPTIONS = "Chat options"
EXPERIMENTAL_DEPTH_NOTE = (
    "More than 1 draft token per step is experimental: not validated for every model and "
    "device. Use Validate to check it."
)
#: Under the decoding controls while the chat's model is a remote server's.
REMOTE_DECODING_NOTE = (
    "A remote server runs this model on its own device with its own decoding: Device, the MTP "
    "head, Draft tokens and Prompt lookup apply to local models only (kept for them)."
)


class ChatSettingsPanel(QFrame):
    """Signals:
    settings_changed(ChatSettings): the user changed a generation setting.
    settings_shown(ChatSettings): a chat's settings were shown (another chat opened).
    system_prompt_changed(str): the user edited the system prompt (debounced).
    model_changed(Path): the user picked another model.
    validate_requested(): the user asked to validate MTP on this model.
    """

    settings_changed = Signal(object)
    settings_shown = Signal(object)
    system_prompt_changed = Signal(str)
    model_changed = Signal(object)
    validate_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chatSettings")
        self.setFixedWidth(300)
        self._settings = ChatSettings()
        self._updating = False
        #: Why the loaded model cannot use MTP ("" when it can, or while that is unknown).
        self._mtp_problem = ""
        #: The temperature the user chose (0: none yet), kept while prompt lookup forces
        #: greedy decoding.
        self._sampling_temperature = 0.0
        #: The loaded model's sampling defaults (core.chat.generation_defaults); None: not known
        #: yet.
        self._model: ModelSampling | None = None
        # The options scroll on a short window rather than squeezing a wrapped note.
        frame = QVBoxLayout(self)
        frame.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setObjectName("chatSettingsScroll")
        scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # Tab goes to the options inside
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        content = QWidget()
        content.setObjectName("chatSettingsContent")
        frame.addWidget(scroll)
        outer = QVBoxLayout(content)
        outer.setContentsMargins(16, 16, 16, 16)
        outer.setSpacing(10)
        title = QLabel(CHAT_OPTIONS)
        title.setObjectName("sectionTitle")
        outer.addWidget(title)
        self.preset_section = QVBoxLayout()  # the chat's presets (ui.chat.options.presets)
        outer.addLayout(self.preset_section)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(8)

        self.model_combo = QComboBox()
        self.model_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.model_combo.setMinimumContentsLength(12)
        self.model_combo.activated.connect(self._on_model)
        self.device_combo = QComboBox()
        self.device_combo.addItem("CPU")
        self.device_combo.activated.connect(self._emit)
        self.mtp_check = QCheckBox("Use the MTP head")
        self.mtp_check.setToolTip(
            "Let the model's MTP head guess tokens ahead; the answer stays the same, only faster "
            "when guesses are kept. Off: plain decoding, with sampling."
        )
        self.mtp_check.toggled.connect(self._emit)
        self.mtp_note = QLabel()
        self.mtp_note.setObjectName("warningNote")
        self.mtp_note.setWordWrap(True)
        self.mtp_note.setVisible(False)
        self.depth_spin = QSpinBox()
        self.depth_spin.setRange(0, 8)
        self.depth_spin.setSpecialValueText("Auto")
        self.depth_spin.setToolTip(
            "Draft tokens the MTP head proposes per step. Auto (the default) starts from the "
            "depth the Benchmark panel found fastest for this model and device (1 without a "
            "benchmark), then adapts turn by turn from measured acceptance and speed: deeper, "
            "shallower, or plain decoding when drafts are rejected. The chat header and each "
            "answer show what it chose and why."
        )
        self.depth_spin.valueChanged.connect(self._emit)
        self.depth_note = QLabel(EXPERIMENTAL_DEPTH_NOTE)
        self.depth_note.setObjectName("warningNote")
        self.depth_note.setWordWrap(True)
        # Prompt lookup: the third decoding method (core.decoding.prompt_lookup); it needs
        # no MTP head.
        self.lookup_check = QCheckBox("Prompt lookup")
        self.lookup_check.setToolTip(
            "Instead of the MTP head: draft by finding the last few tokens earlier in the "
            "conversation and proposing what "
            "followed there: free to produce, fast where answers copy the prompt (editing, "
            "quoting, summaries). Greedy; the answer stays the same. Works without an MTP head."
        )
        self.lookup_check.toggled.connect(self._emit)
        self.lookup_spin = QSpinBox()
        self.lookup_spin.setRange(1, MAX_LOOKUP_DRAFTS)
        self.lookup_spin.setToolTip("Tokens prompt lookup proposes per step when it finds a match.")
        self.lookup_spin.valueChanged.connect(self._emit)
        self.ngram_spin = QSpinBox()
        self.ngram_spin.setRange(1, MAX_NGRAM)
        self.ngram_spin.setToolTip(
            "Longest run of recent tokens searched for earlier in the conversation."
        )
        self.ngram_spin.valueChanged.connect(self._emit)
        self.thinking_check = QCheckBox("Thinking mode")
        self.thinking_check.toggled.connect(self._emit)
        self.thinking_budget_spin = QSpinBox()
        self.thinking_budget_spin.setRange(0, MAX_THINKING_BUDGET)
        self.thinking_budget_spin.setSingleStep(256)
        self.thinking_budget_spin.setSpecialValueText("no limit")
        self.thinking_budget_spin.setSuffix(" tokens")
        self.thinking_budget_spin.setToolTip(
            "The most tokens the model may think for. When they are spent, the thinking is "
            "ended for it and the model answers; a quarter of Max new tokens is always kept "
            "for the answer."
        )
        self.thinking_budget_spin.valueChanged.connect(self._emit)
        self.max_tokens_spin = QSpinBox()
        self.max_tokens_spin.setRange(1, 32768)
        self.max_tokens_spin.setSingleStep(64)
        self.max_tokens_spin.valueChanged.connect(self._emit)
        self.overflow_combo = QComboBox()
        # As narrow as the other fields: the panel is a 286 px column beside the chat.
        self.overflow_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.overflow_combo.setMinimumContentsLength(10)
        for policy, words in OVERFLOW_WORDS.items():
            self.overflow_combo.addItem(words, policy)
        self.overflow_combo.setToolTip(
            "What happens when this chat no longer fits the model's context. Stop: the message "
            "is not sent and you are told how long the chat is. Skip the middle: the model "
            "reads the system prompt, the first exchange and the latest ones that fit. Skip "
            "the oldest: the system prompt and the latest exchanges that fit. Nothing is "
            "deleted; each answer says how many messages the model did not read."
        )
        self.overflow_combo.currentIndexChanged.connect(self._emit)
        # Where this chat's sampling values came from (the default preset, the model's
        # defaults, a preset applied, or the user's own choice), so none sticks unseen.
        self.sampling_source = QLabel()
        self.sampling_source.setObjectName("muted")
        self.sampling_source.setWordWrap(True)
        self.sampling_source.setToolTip(
            "Where this chat's sampling values came from. "
            + NEW_CHAT_RULE
            + " Values chosen in a chat stay with that chat."
        )
        self.model_default_check = QCheckBox("Model's sampling")
        self.model_default_check.setToolTip(
            "Sample as the model's makers advise in its generation_config.json. Turn off to "
            "choose your own values for this chat."
        )
        self.model_default_check.toggled.connect(self._emit)
        self.model_default_label = QLabel()
        self.model_default_label.setObjectName("muted")
        self.model_default_label.setWordWrap(True)
        self.temperature_spin = self._double(0.0, 2.0, 0.05)
        self.top_p_spin = self._double(0.01, 1.0, 0.05)
        self.top_k_spin = QSpinBox()
        self.top_k_spin.setRange(0, 1000)
        self.top_k_spin.valueChanged.connect(self._emit)
        self.repetition_spin = self._double(0.5, 2.0, 0.05)
        self.presence_spin = self._double(-2.0, 2.0, 0.1)
        self.presence_spin.setToolTip(
            "Makes tokens already in the answer less likely (Qwen advises up to 1.5 for "
            "quantized models when answers repeat); 0 is off."
        )
        self.seed_spin = QSpinBox()
        self.seed_spin.setRange(-1, 2**31 - 1)
        self.seed_spin.setSpecialValueText("random")
        self.seed_spin.valueChanged.connect(self._emit)

        form.addRow("Model", self.model_combo)
        form.addRow("Device", self.device_combo)
        form.addRow("", self.mtp_check)
        form.addRow("Draft tokens", self.depth_spin)
        form.addRow("", self.depth_note)
        form.addRow("", self.lookup_check)
        form.addRow("Lookup tokens", self.lookup_spin)
        form.addRow("N-gram size", self.ngram_spin)
        self._form = form
        form.addRow("", self.thinking_check)
        form.addRow("Thinking budget", self.thinking_budget_spin)
        form.addRow("Max new tokens", self.max_tokens_spin)
        form.addRow("When too long", self.overflow_combo)
        form.addRow("Sampling", self.sampling_source)
        form.addRow("", self.model_default_check)
        form.addRow("", self.model_default_label)
        form.addRow("Temperature", self.temperature_spin)
        form.addRow("Top-p", self.top_p_spin)
        form.addRow("Top-k", self.top_k_spin)
        form.addRow("Repetition penalty", self.repetition_spin)
        form.addRow("Presence penalty", self.presence_spin)
        form.addRow("Seed", self.seed_spin)
        outer.addLayout(form)
        # Full width under the form: a form row would clip a wrapped, several-line reason.
        outer.addWidget(self.mtp_note)
        prompt_label = QLabel("System prompt")
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setTabChangesFocus(True)  # Tab moves on; it must not trap the keyboard
        self.system_prompt.setPlaceholderText("Optional instructions for the whole chat")
        self.system_prompt.setFixedHeight(70)
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(600)
        self._prompt_timer.timeout.connect(
            lambda: self.system_prompt_changed.emit(self.system_prompt.toPlainText().strip())
        )
        self.system_prompt.textChanged.connect(self._on_prompt_edited)
        outer.addWidget(prompt_label)
        outer.addWidget(self.system_prompt)
        self.sampling_hint = QLabel()
        self.sampling_hint.setObjectName("muted")
        self.sampling_hint.setWordWrap(True)
        outer.addWidget(self.sampling_hint)
        self.tool_section = QVBoxLayout()  # the chat's MCP tools (ui.chat.options.tools)
        outer.addLayout(self.tool_section)
        self.validate_button = QPushButton("Validate MTP on this model…")
        self.validate_button.clicked.connect(self.validate_requested)
        outer.addWidget(self.validate_button)
        outer.addStretch(1)
        scroll.setWidget(content)
        self.set_settings(self._settings)

    def _double(self, low: float, high: float, step: float) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setRange(low, high)
        spin.setSingleStep(step)
        spin.setDecimals(2)
        spin.valueChanged.connect(self._emit)
        return spin

    @property
    def settings(self) -> ChatSettings:
        return self._settings

    def set_models(
        self, models: list[Path], current: Path, names: dict[Path, str] | None = None
    ) -> None:
        """`names`: what to call models that are no folder (remote servers)."""
        self._updating = True
        self.model_combo.clear()
        if current not in models:
            models = [current, *models]
        names = names or {}
        for path in models:
            self.model_combo.addItem(names.get(path) or display_name(path), str(path))
            self.model_combo.setItemData(
                self.model_combo.count() - 1, str(path), Qt.ItemDataRole.ToolTipRole
            )
        self.model_combo.setCurrentIndex(models.index(current))
        self._updating = False
        self._show_applicable()

    def set_devices(self, devices: list[str]) -> None:
        self._updating = True
        current = self._settings.device
        self.device_combo.clear()
        for device in devices or ["CPU"]:
            self.device_combo.addItem(device)
        index = self.device_combo.findText(current)
        self.device_combo.setCurrentIndex(max(index, 0))
        self._updating = False

    @property
    def mtp_problem(self) -> str:
        return self._mtp_problem

    def set_mtp_problem(self, problem: str) -> None:
        """What the loaded model can do: "" when it can decode with MTP, else why it cannot
        (then the MTP controls are off with the reason, and sampling is open). The chat's own
        MTP setting is kept, so a repaired model uses MTP again."""
        self._mtp_problem = problem
        self._show_applicable()
        self._settings = replace(self._settings, temperature=self.temperature_spin.value())

    @property
    def _remote(self) -> bool:
        """The chat's model is a remote server's: it decodes as that server does."""
        current = self.model_combo.currentData()
        return isinstance(current, str) and is_remote(current)

    @property
    def _names_defaults(self) -> bool:
        """The chat's model names sampling defaults the chat could follow."""
        return self._model is not None and self._model.sampling is not None

    def _show_applicable(self) -> None:
        """Show the chat's choices as they apply to its model: a box for something the model
        cannot do (MTP without a head, anything a remote server decides, the defaults of a
        model that names none) is off and disabled, the chat's own choice kept for a model that
        can (`_emit`)."""
        self._updating, updating = True, self._updating
        settings, remote = self._settings, self._remote
        self.mtp_check.setChecked(settings.mtp and not self._mtp_problem and not remote)
        self.lookup_check.setChecked(settings.prompt_lookup and not remote)
        self.model_default_check.setChecked(settings.model_sampling and self._names_defaults)
        self._updating = updating
        self._sync_enabled()

    def set_settings(self, settings: ChatSettings) -> None:
        self._updating = True
        self._settings = settings
        if settings.temperature > 0:
            self._sampling_temperature = settings.temperature
        if self.device_combo.findText(settings.device) < 0:
            self.device_combo.addItem(settings.device)
        self.device_combo.setCurrentText(settings.device)
        # The boxes first: every widget set below re-derives the form from them
        # (`_sync_enabled`), and the previous chat's would show its sampling here.
        self.mtp_check.setChecked(settings.mtp and not self._mtp_problem and not self._remote)
        self.lookup_check.setChecked(settings.prompt_lookup and not self._remote)
        self.model_default_check.setChecked(settings.model_sampling and self._names_defaults)
        depth = settings.num_assistant_tokens
        self.depth_spin.setValue(depth if isinstance(depth, int) else 0)
        self.lookup_spin.setValue(settings.lookup_tokens)
        self.ngram_spin.setValue(settings.max_ngram_size)
        self.thinking_check.setChecked(settings.thinking)
        self.thinking_budget_spin.setValue(settings.thinking_budget or 0)
        self.max_tokens_spin.setValue(settings.max_new_tokens)
        self.overflow_combo.setCurrentIndex(
            max(self.overflow_combo.findData(settings.context_overflow), 0)
        )
        self._show_sampling(settings)
        self.seed_spin.setValue(-1 if settings.seed is None else settings.seed)
        self._updating = False
        self._show_applicable()
        self._settings = replace(self._settings, temperature=self.temperature_spin.value())
        self.settings_shown.emit(self._settings)

    def apply_preset(self, values: Mapping[str, Any], system_prompt: str) -> None:
        """A preset's values and system prompt (core.settings.presets), shown and kept as the
        user's own change; the model and decoding method stay."""
        self.set_settings(replace(self._settings, **values))
        self.set_system_prompt(system_prompt)
        self.settings_changed.emit(self._settings)
        self.system_prompt_changed.emit(system_prompt)

    def set_sampling_source(self, text: str) -> None:
        """Say where the chat's sampling values came from."""
        self.sampling_source.setText(text)

    def change(self, settings: ChatSettings) -> None:
        """A change made outside the form (the chat's MCP servers): kept and announced."""
        self._settings = settings
        self.settings_changed.emit(settings)

    def _show_sampling(self, settings: ChatSettings) -> None:
        """The sampling values that run: the model's while the chat follows them."""
        shown = settings.following(self._model.sampling if self._model else None)
        self.temperature_spin.setValue(shown.temperature)
        self.top_p_spin.setValue(shown.top_p)
        self.top_k_spin.setValue(shown.top_k)
        self.repetition_spin.setValue(shown.repetition_penalty)
        self.presence_spin.setValue(shown.presence_penalty)

    def set_model_sampling(self, found: ModelSampling | None) -> None:
        """The loaded model's sampling defaults (None: not known, e.g. a remote model)."""
        self._model = found
        if found is None or found.sampling is None:
            text = "This model names no sampling defaults; the values below apply."
            if found is None:
                text = "The model's sampling defaults are read when it loads."
        else:
            text = found.describe()
        notes = found.notes if found is not None else ()
        if found is not None and found.sampling is None and notes:
            text = ""  # the note says why, and that the values below apply
        self.model_default_label.setText("\n".join(line for line in (text, *notes) if line))
        self.model_default_label.setToolTip(
            "From the model folder's generation_config.json. Values outside what the chat "
            "accepts are ignored and named here."
            if notes
            else ""
        )
        self._updating = True
        self._show_sampling(self._settings)
        self._updating = False
        self._show_applicable()

    def set_system_prompt(self, text: str) -> None:
        self._updating = True
        self.system_prompt.setPlainText(text)
        self._updating = False
        self._prompt_timer.stop()

    def _on_prompt_edited(self) -> None:
        if not self._updating:
            self._prompt_timer.start()

    def _sync_enabled(self) -> None:
        remote = self._remote
        problem = REMOTE_DECODING_NOTE if remote else self._mtp_problem
        self.mtp_check.setEnabled(not problem)
        self.mtp_note.setText(problem)
        self.mtp_note.setVisible(bool(problem))
        self.validate_button.setEnabled(not problem)
        self.validate_button.setToolTip(problem)
        self.device_combo.setEnabled(not remote)
        self.overflow_combo.setEnabled(not remote)  # a server fits its own context
        self.lookup_check.setEnabled(not remote)
        for spin in (self.lookup_spin, self.ngram_spin):
            spin.setEnabled(not remote)
        lookup = self.lookup_check.isChecked()
        mtp = self.mtp_check.isChecked() and not problem and not lookup
        # MTP's depth or prompt lookup's own numbers, whichever method drafts.
        for spin, shown in (
            (self.depth_spin, not lookup),
            (self.lookup_spin, lookup),
            (self.ngram_spin, lookup),
        ):
            spin.setVisible(shown)
            label = self._form.labelForField(spin)
            if label is not None:
                label.setVisible(shown)
        self.depth_spin.setEnabled(mtp)
        self.thinking_budget_spin.setEnabled(self.thinking_check.isChecked())
        self.depth_note.setVisible(mtp and self.depth_spin.value() > 1)
        # Prompt lookup is kept greedy so its output equals plain decoding's; plain decoding
        # and MTP sample (MTP exactly: the answer is distributed as plain sampling's).
        follows = self.model_default_check.isChecked() and self._names_defaults
        was_greedy = self._settings.prompt_lookup
        self.temperature_spin.setEnabled(not lookup and not follows)
        self.temperature_spin.setToolTip(
            "Prompt lookup decodes greedily; turn it off to sample" if lookup else "0 = greedy"
        )
        updating, self._updating = self._updating, True
        if lookup and self.temperature_spin.value() > 0:
            self._sampling_temperature = self.temperature_spin.value()
            self.temperature_spin.setValue(0.0)
        elif (
            not lookup
            and self.temperature_spin.value() == 0
            and was_greedy
            and self._sampling_temperature > 0
            and not follows
        ):
            # Prompt lookup forced greedy decoding; sampling gets the user's temperature back.
            self.temperature_spin.setValue(self._sampling_temperature)
        elif not lookup and follows:
            self._show_sampling(replace(self._settings, model_sampling=True))
        self._updating = updating
        self.model_default_check.setEnabled(not lookup and self._names_defaults)
        if remote:
            hint = "The remote server samples with the values above (temperature 0 is greedy)."
        elif lookup:
            hint = (
                "Prompt lookup decodes greedily (temperature 0), so its output equals plain "
                "decoding. Turn it off to sample with a temperature."
            )
        elif mtp:
            hint = (
                "MTP samples exactly: answers are distributed as plain sampling's, only "
                "faster. Temperature 0 is greedy (the same answer as plain decoding)."
            )
        else:
            hint = (
                "Plain decoding: temperature, top-p, top-k and seed apply "
                "(temperature 0 is greedy)."
            )
        self.sampling_hint.setText(hint)
        sampling = self.temperature_spin.value() > 0
        for widget in (self.top_p_spin, self.top_k_spin):
            widget.setEnabled(sampling and not follows)
        self.seed_spin.setEnabled(sampling)
        for widget in (self.repetition_spin, self.presence_spin):
            widget.setEnabled(not follows)

    def method(self) -> DecodingMethod | Literal["auto"]:
        """The decoding method these settings choose, or "auto" (`ChatSettings.method`)."""
        return self.settings.method

    def _on_model(self, index: int) -> None:
        if self._updating:
            return
        self.model_changed.emit(Path(self.model_combo.itemData(index)))

    def _emit(self, *_args: object) -> None:
        self._sync_enabled()
        if self._updating:
            return
        seed = self.seed_spin.value()
        if self.temperature_spin.value() > 0:
            self._sampling_temperature = self.temperature_spin.value()
        kept, remote = self._settings, self._remote
        self._settings = replace(
            self._settings,
            device=(self.device_combo.currentText() or "CPU") if not remote else kept.device,
            # While the model cannot use MTP (or a server decodes it) the box is off and
            # disabled: keep the choice, as for prompt lookup and the model's defaults.
            mtp=self.mtp_check.isChecked() if not (self._mtp_problem or remote) else kept.mtp,
            num_assistant_tokens=self.depth_spin.value() or "auto",
            prompt_lookup=self.lookup_check.isChecked() if not remote else kept.prompt_lookup,
            lookup_tokens=self.lookup_spin.value(),
            max_ngram_size=self.ngram_spin.value(),
            thinking=self.thinking_check.isChecked(),
            thinking_budget=self.thinking_budget_spin.value() or None,
            max_new_tokens=self.max_tokens_spin.value(),
            context_overflow=self.overflow_combo.currentData() or "stop",
            temperature=self.temperature_spin.value(),
            top_p=self.top_p_spin.value(),
            top_k=self.top_k_spin.value(),
            repetition_penalty=self.repetition_spin.value(),
            presence_penalty=self.presence_spin.value(),
            model_sampling=self.model_default_check.isChecked()
            if self._names_defaults
            else kept.model_sampling,
            seed=None if seed < 0 else seed,
        )
        self.settings_changed.emit(self._settings)
