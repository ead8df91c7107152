"""The chat's model in the engine process: which model, device and mode to load, what loaded,
Auto's decisions (core.chat.turns.AutoDecoding), what the header says about decoding, and the
live acceptance-health check. Lookups that read the data dir run on the store's runner thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from qwen_mtp_desktop.core.chat.generation_defaults import ModelSampling, read_generation_defaults
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.chat.turns import (
    AutoDecoding,
    PolicyKey,
    Turn,
    auto_applies,
    generation_settings,
)
from qwen_mtp_desktop.core.decoding.method import PLAIN
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.measure.acceptance_health import (
    HealthMonitor,
    HealthWarning,
    current_state,
    load_lookup_references,
    load_reference,
)
from qwen_mtp_desktop.core.measure.fullsize_figures import demo_mtp_note
from qwen_mtp_desktop.core.measure.recommendations import DepthRecommendation
from qwen_mtp_desktop.core.models.library import is_demo_model, model_key
from qwen_mtp_desktop.core.prompt.context_limit import context_length
from qwen_mtp_desktop.workers.model_router import ModelRouter, is_remote
from qwen_mtp_desktop.workers.tasks import TaskRunner

log = logging.getLogger(__name__)

#: What the session needs to know about the open chat: its model folder, its settings, and its
#: conversation id (0 for a chat not yet stored).
ChatState = Callable[[], tuple[Path, ChatSettings, int]]


@dataclass(frozen=True)
class ModelFacts:
    """What the chat reads from a model's folder: its context length (the meter's limit), its
    sampling defaults (the chat's "model default") and what names it (core.models.library.
    model_key: which saved defaults new chats of it start with)."""

    context_length: int | None
    sampling: ModelSampling
    key: str | None = None


def read_model_facts(model_dir: Path) -> ModelFacts:
    """Reads three small files: on the runner thread, never the GUI's."""
    return ModelFacts(
        context_length(model_dir), read_generation_defaults(model_dir), model_key(model_dir)
    )


class ModelSession(QObject):
    """Signals:
    changed(): the model's state changed (loading, loaded, failed, Auto learnt): redraw.
    problem(str, str): text and severity ("error" or "warning") to show the user.
    mtp_problem(str): why the chat's model cannot use MTP ("" when it can).
    health_warned(HealthWarning): live acceptance fell far below the measured one.
    health_reset(): a new model or reference: no warning stands.
    facts_changed(): a model's context length and sampling defaults were read (`facts`).
    """

    changed = Signal()
    problem = Signal(str, str)
    mtp_problem = Signal(str)
    health_warned = Signal(object)
    health_reset = Signal()
    facts_changed = Signal()

    def __init__(
        self,
        router: ModelRouter,
        runner: TaskRunner,
        chat: ChatState,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        #: Where the chat's turns run: the engine process, or a remote server.
        self.router = router
        self._runner = runner
        self._chat = chat
        self.want: tuple[Path, LoadOptions] | None = None
        #: The model being ejected: gone for the chat at once, before the engine says so.
        self._ejecting: LoadedModel | None = None
        self.loading = False
        #: The user ejected the model; the next turn loads it again.
        self.ejected = False
        #: Why a model cannot use MTP (missing or damaged head), learnt from its loads.
        self._mtp_problems: dict[Path, str] = {}
        #: The benchmark's verdicts and Auto's policies (core.chat.turns).
        self.auto = AutoDecoding()
        #: Live MTP acceptance against validate's / bench's (core.measure.acceptance_health).
        self.health: HealthMonitor | None = None
        self.health_warning: HealthWarning | None = None
        #: The budget for kept conversation states at the next load (LoadOptions'
        #: state_cache_bytes; the window reads it from Settings › Conversation memory).
        self.state_cache_bytes: Callable[[], int | None] = lambda: None
        #: Each local model's context length and sampling defaults, once read.
        self.facts: dict[Path, ModelFacts] = {}
        self._facts_asked: set[Path] = set()
        router.loading.connect(self._on_loading)
        router.loaded.connect(self._on_loaded)
        router.load_failed.connect(self._on_load_failed)

    # ------------------------------------------------------------------------ loading

    @property
    def loaded(self) -> LoadedModel | None:
        """The chat's loaded model, as the router knows it (one copy of that state)."""
        loaded = self.router.loaded_model
        return None if loaded is not None and loaded is self._ejecting else loaded

    @property
    def model_dir(self) -> Path:
        """The open chat's model (a folder, or a remote model's reference)."""
        return self._chat()[0]

    def _effective(self) -> tuple[Path, ChatSettings, int]:
        """The chat's state, its settings with the model's sampling defaults filled in while
        it follows them (ChatSettings.following)."""
        model_dir, settings, conversation_id = self._chat()
        facts = self.facts.get(model_dir)
        return (
            model_dir,
            settings.following(facts.sampling.sampling if facts else None),
            (conversation_id),
        )

    def model_facts(self) -> ModelFacts | None:
        """The chat's model's facts, once read (None before)."""
        return self.facts.get(self._chat()[0])

    def model_key(self) -> str | None:
        """What names the chat's model (ModelFacts.key); None until its facts are read."""
        facts = self.model_facts()
        return facts.key if facts is not None else None

    def _read_facts(self, model_dir: Path) -> None:
        if model_dir in self._facts_asked:
            return
        self._facts_asked.add(model_dir)
        if is_remote(model_dir):  # a server samples with what the chat sends; no file here
            note = "A remote server's own defaults are not known here: the values below apply."
            key = model_key(model_dir)  # no file: the server's id
            self.facts[model_dir] = ModelFacts(None, ModelSampling(None, (note,)), key)
            return

        def found(facts: ModelFacts) -> None:
            self.facts[model_dir] = facts
            self.facts_changed.emit()

        def failed(exc: Exception) -> None:
            self._facts_asked.discard(model_dir)
            log.warning(
                "could not read %s's context length and sampling defaults: %s", model_dir, exc
            )

        self._runner.submit(lambda: read_model_facts(model_dir), found, failed)

    def ensure(self) -> None:
        """Ask the engine process for the chat's model, device and mode if they differ."""
        self._read_facts(self._chat()[0])
        model_dir, settings, _ = self._effective()
        key = (model_dir, settings.device)
        if settings.method == "auto" and not self.auto.known(*key):
            # Look the benchmark's verdict up off the GUI thread, then come back here.
            def found(recommendation: DepthRecommendation | None) -> None:
                self.auto.remember(*key, recommendation)
                self.ensure()
                self.changed.emit()

            self._runner.submit(lambda: AutoDecoding.lookup(*key), found, self._lookup_failed)
            return
        # Auto keeps the MTP pipeline and adds a plain one beside it when it first runs plain
        # decoding (Engine), so it can probe MTP again later.
        wanted = (model_dir, LoadOptions(device=settings.device, mtp=settings.mtp))
        if self.want is not None and self.want == wanted:
            return
        self.want = wanted
        self.ejected = False
        self.router.load(
            model_dir,
            LoadOptions(
                device=settings.device,
                mtp=settings.mtp,
                cache_dir=_cache_dir(),
                state_cache_bytes=self.state_cache_bytes(),
            ),
        )
        self.changed.emit()

    def eject(self) -> None:
        """Unload the local model to free its memory (LM Studio's and Jan's Eject); the next
        turn loads it again (`ensure()`)."""
        loaded = self.loaded
        if loaded is None or is_remote(loaded.model_dir):
            return
        self.want = None
        self._ejecting = loaded
        self.ejected = True
        self.router.unload()
        self.changed.emit()

    def reload(self) -> None:
        """Load again even if nothing changed (a new benchmark verdict)."""
        self.want = None
        self.ensure()

    def forget_recommendation(self, model_dir: Path) -> None:
        self.auto.forget(model_dir)

    def _on_loading(self, model_dir: Path) -> None:
        self.loading = True
        self.mtp_problem.emit(self._mtp_problems.get(Path(model_dir), ""))
        self.changed.emit()

    def _on_loaded(self, loaded: LoadedModel) -> None:
        self.loading = False
        self._ejecting = None
        wanted_mtp = self.want is not None and self.want[1].mtp
        # A remote server decodes as it does; its settings are not "a missing MTP head".
        wanted_mtp = wanted_mtp and not is_remote(loaded.model_dir)
        if loaded.mtp:
            self._mtp_problems.pop(loaded.model_dir, None)
        elif wanted_mtp:
            # Asked for MTP, got plain decoding: the head is missing or damaged; say so where
            # the MTP controls are, and open sampling (plain decoding can sample).
            reason = next((w for w in loaded.warnings if "MTP" in w), "")
            self._mtp_problems[loaded.model_dir] = (
                reason or "This model cannot decode with MTP, so it decodes plain."
            )
        self.mtp_problem.emit(self._mtp_problems.get(loaded.model_dir, ""))
        self.changed.emit()
        self.load_health(loaded)
        for warning in loaded.warnings:
            self.problem.emit(warning, "warning")

    def _on_load_failed(self, error: EngineError) -> None:
        self.loading = False
        self.want = None
        self.changed.emit()
        self.problem.emit(f"{error.message} {error.fix}".strip(), "error")

    def _lookup_failed(self, exc: Exception) -> None:
        log.error("chat lookup failed: %s", exc)
        self.problem.emit(f"A chat could not be saved or read: {exc}", "error")

    # ------------------------------------------------------------------------ decoding

    @property
    def decodes_mtp(self) -> bool:
        return self.loaded is not None and self.loaded.mtp

    def engine_settings(self) -> GenerationSettings:
        model_dir, settings, _ = self._effective()
        return generation_settings(settings, self.auto.start(model_dir, settings.device))

    def policy_key(self) -> PolicyKey:
        model_dir, settings, conversation_id = self._chat()
        return (conversation_id, model_dir, settings.device)

    def plan_turn(self, history: Sequence[Message] = ()) -> Turn:
        """This turn's settings; under Auto, its policy's decision (`history`, what the model
        will read, prices the prefill)."""
        turn = Turn(self.engine_settings())
        _, settings, _ = self._effective()
        if auto_applies(settings) and self.decodes_mtp:
            loaded = self.loaded
            turn = self.auto.plan_turn(
                self.policy_key(),
                turn.settings,
                plain_ready=self.router.plain_ready,
                load_s=loaded.load_s if loaded else None,
                history=history,
            )
        return turn

    def decoding_label(self, stored_chat: bool) -> tuple[str, str]:
        """What decoding runs ("MTP n=2", "prompt lookup K=4, n-gram 3", "plain decoding"), and
        for Auto what it decided, in one plain sentence; with the details for a tooltip (Auto's
        technical reason; on the demo model, why MTP cannot win there)."""
        loaded = self.loaded
        model_dir, settings, _ = self._effective()
        if loaded is None:
            return "", ""
        if is_remote(loaded.model_dir):
            text = self.router.status_text()
            return text, text
        method = settings.method
        demo = f"\n\n{demo_mtp_note()}" if is_demo_model(model_dir) else ""
        if method == "auto" and loaded.mtp:
            key = self.policy_key() if stored_chat else None
            sentence = self.auto.sentence(key, model_dir, settings.device)
            return f"Auto · {sentence}", self.auto.status(key, model_dir, settings.device) + demo
        if method == "auto" or (method.uses_mtp_head and not loaded.mtp):
            return PLAIN.label, PLAIN.label  # no MTP head loaded
        return method.label, method.label + demo

    # ------------------------------------------------------------------------ acceptance health

    def load_health(self, loaded: LoadedModel) -> None:
        """Look the acceptance reference up off the GUI thread; no check without one."""
        self.health = None
        self.health_warning = None
        self.health_reset.emit()
        model_dir, device, mtp = loaded.model_dir, loaded.device, loaded.mtp

        def find() -> HealthMonitor | None:
            # Prompt lookup runs without an MTP head too: its references count either way.
            reference = load_reference(model_dir, device) if mtp else None
            lookups = load_lookup_references(model_dir, device)
            if reference is None and not lookups:
                return None
            return HealthMonitor(reference, current_state(model_dir), lookups)

        def found(monitor: HealthMonitor | None) -> None:
            current = self.loaded
            if monitor is not None and current is not None and current.model_dir == model_dir:
                self.health = monitor

        self._runner.submit(find, found, self._lookup_failed)

    def observe(self, stats: GenerationStats, request: str = "") -> None:
        """A finished answer's acceptance, checked against the reference (`request`: what it
        answered, whose workload prompt lookup is compared by)."""
        if self.health is None:
            return
        warning = self.health.observe(stats, request)
        if warning is not None:
            self.health_warning = warning
            self.health_warned.emit(warning)


def _cache_dir() -> Path | None:
    from qwen_mtp_desktop.core.files.paths import app_paths

    return app_paths().compile_cache_dir
