"""The engine process: the window's handle of the engine host (qwen_mtp_desktop.host).

The engine (openvino-genai and the app's decoder) runs in a child process, so a native crash or
an out-of-memory kill in the runtime cannot take the window down. This object has the signals
the panels connect to; requests are frames on the child's stdin (core.engine_protocol), events
come back on its stdout, read on a thread (core.host_process.HostProcess) and handed to the GUI
thread as queued signals. Nothing here blocks the GUI thread except `shutdown()` at exit.

When the child dies (a signal, an exit, a broken protocol), the request that was running fails
with ENGINE_STOPPED (the chat keeps the partial answer and marks it), `engine_stopped` says what
happened, and a new child starts and reloads the model that was loaded; `engine_restarted` says
when it is back. After three deaths in a row with no model loaded in between (a model that
crashes the runtime while loading, a broken install) it is not restarted until the next load,
so nothing loops (core.host_process.RestartPolicy). The child exits when its stdin closes,
which happens when this app exits or dies.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from qwen_mtp_desktop.core.engine import (
    EngineError,
    GenerationSettings,
    LoadedModel,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.engine_protocol import (
    ApiState,
    Cancel,
    Chunks,
    Failed,
    Finished,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Loading,
    Ready,
    ServeApi,
    Started,
    Unload,
    Unloaded,
)
from qwen_mtp_desktop.core.host_process import (
    MAX_DEATHS_IN_A_ROW,
    STOPPED_CODE,
    Exited,
    HostProcess,
    RestartPolicy,
)
from qwen_mtp_desktop.workers.foundation import RequestIds

__all__ = ["MAX_DEATHS_IN_A_ROW", "STOPPED_CODE", "EngineProcess"]


class EngineProcess(QObject):
    """GUI-side handle of the engine host process.

    Signals:
        loading(Path): a load started.
        loaded(LoadedModel): the model is ready (mode says mtp or baseline, warnings included).
        load_failed(EngineError): the model could not be loaded; the previous one is unloaded.
        unloaded(): the model was released.
        started(int): request id began generating.
        chunks(int, list[StepChunk]): new steps for a request, coalesced.
        finished(int, GenerationStats): a request ended (also after cancel: finish_reason says).
        failed(int, EngineError): a request could not run or failed midway (chunks already
            delivered stay valid); code ENGINE_STOPPED when the engine process died.
        engine_stopped(str): the engine process died; the text says how, in plain words.
        engine_restarted(str): a new engine process is up (and the model reloaded, if one was).
        api_state(str | None, EngineError | None): the local API server's URL while it runs
            (None when stopped), and the error that kept it from starting; `api_network_urls`
            says where other computers reach it.
    """

    loading = Signal(object)
    loaded = Signal(object)
    load_failed = Signal(object)
    unloaded = Signal()
    started = Signal(int)
    chunks = Signal(int, object)
    finished = Signal(int, object)
    failed = Signal(int, object)
    engine_stopped = Signal(str)
    engine_restarted = Signal(str)
    api_state = Signal(object, object)

    _event = Signal(int, object)  # incarnation, event: from the reader thread

    def __init__(
        self,
        coalesce_ms: int = 30,
        parent: QObject | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        super().__init__(parent)
        self._coalesce_s = coalesce_ms / 1000
        self._ids = RequestIds()
        self._host = HostProcess(self._event.emit, command)
        self._policy = RestartPolicy()
        self._closing = False
        self._loaded: LoadedModel | None = None
        self._plain_ready = False
        #: The last load asked for, reloaded after a restart (None after unload()).
        self._want: tuple[Path, LoadOptions] | None = None
        self._outstanding: set[int] = set()
        self._restart_note: str | None = None
        #: The local API server as the user wants it (re-applied after a restart).
        self._api_wanted: ServeApi | None = None
        self.api_url: str | None = None
        self.api_network_urls: tuple[str, ...] = ()
        #: Seconds from the host sending a chunk batch to this process receiving it.
        self.hop_s = self._host.hop_s
        self._event.connect(self._on_event)
        self._start()

    # ------------------------------------------------------------------ what panels read

    @property
    def loaded_model(self) -> LoadedModel | None:
        return self._loaded

    @property
    def plain_ready(self) -> bool:
        """Whether plain decoding runs without loading a pipeline first (Auto's switch cost)."""
        return self._plain_ready

    @property
    def pid(self) -> int | None:
        """The engine process's id (None while it is not running)."""
        return self._host.pid

    @property
    def running(self) -> bool:
        return self._host.running

    # ------------------------------------------------------------------ requests

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None:
        options = options or LoadOptions()
        self._want = (model_dir, options)
        if self._host.pid is None:  # stopped restarting after repeated crashes: try again
            self._policy.useful()
            self._start()
        self._send(Load(model_dir, options))

    def unload(self) -> None:
        self._want = None
        self._send(Unload())

    def generate(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        request_id = self._ids.next()
        self._outstanding.add(request_id)
        if self._host.pid is None:
            self._fail(request_id, "the inference engine is not running", restarting=False)
            return request_id
        self._send(Generate(request_id, tuple(messages), settings, self._coalesce_s))
        return request_id

    def serve_api(self, host: str, port: int, api_key: str | None) -> None:
        """Run the local API server in the engine process, on its engine (`api_state` says
        where, or why not)."""
        self._api_wanted = ServeApi(host, port, api_key)
        self._send(self._api_wanted)

    def stop_api(self) -> None:
        self._api_wanted = None
        self._send(ServeApi(None))

    def cancel(self, request_id: int | None = None) -> None:
        """Stop a request (or the running one) at its next decoding step."""
        self._send(Cancel(request_id))

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel, let the host release the model and exit. True if it ended in time (else
        it is killed)."""
        self._closing = True
        return self._host.stop(timeout_ms / 1000)

    # ------------------------------------------------------------------ the child

    def _start(self) -> None:
        self._host.start()
        if self._api_wanted is not None:  # the server was on: it comes back with the engine
            self._send(self._api_wanted)

    def _send(self, request: object) -> None:
        self._host.send(request)

    # ------------------------------------------------------------------ events (GUI thread)

    @Slot(int, object)
    def _on_event(self, incarnation: int, event: Any) -> None:
        if incarnation != self._host.incarnation or self._closing:
            return  # a late event of a child that was replaced or is being shut down
        if isinstance(event, Ready):
            if self._want is None:
                self._policy.useful()  # up, with nothing to load
            return
        if isinstance(event, Loading):
            self.loading.emit(event.model_dir)
        elif isinstance(event, Loaded):
            self._loaded, self._plain_ready = event.model, event.plain_ready
            self._policy.useful()
            self.loaded.emit(event.model)
            self._announce_restart("model reloaded")
        elif isinstance(event, LoadFailed):
            self._loaded, self._plain_ready = None, False
            self._want = None  # a clean refusal: a restart must not try it again
            self.load_failed.emit(event.error)
            self._announce_restart("the model could not be reloaded")
        elif isinstance(event, Unloaded):
            self._loaded, self._plain_ready = None, False
            self.unloaded.emit()
        elif isinstance(event, Started):
            self.started.emit(event.request_id)
        elif isinstance(event, Chunks):
            self.chunks.emit(event.request_id, event.chunks)
        elif isinstance(event, Finished):
            self._outstanding.discard(event.request_id)
            self._plain_ready = event.plain_ready
            self.finished.emit(event.request_id, event.stats)
        elif isinstance(event, Failed):
            self._outstanding.discard(event.request_id)
            self.failed.emit(event.request_id, event.error)
        elif isinstance(event, ApiState):
            self.api_url, self.api_network_urls = event.url, event.network_urls
            self.api_state.emit(event.url, event.error)
        elif isinstance(event, Exited):
            self._on_exit(event)

    def _on_exit(self, exited: Exited) -> None:
        self._host.forget()
        how = exited.how
        self._loaded, self._plain_ready = None, False
        if self.api_url is not None:
            self.api_url, self.api_network_urls = None, ()
            self.api_state.emit(None, None)
        restart = self._policy.died()
        for request_id in sorted(self._outstanding):
            self._fail(request_id, f"the inference engine stopped ({how})", restarting=restart)
        if restart:
            self._start()
            if self._want is not None:
                self._restart_note = f"The inference engine stopped ({how}); restarted"
                self._send(Load(*self._want))
                self.engine_stopped.emit(
                    f"The inference engine stopped ({how}); restarting and reloading the model."
                )
            else:
                self.engine_stopped.emit(f"The inference engine stopped ({how}); restarted.")
                self.engine_restarted.emit(f"The inference engine stopped ({how}); restarted.")
        else:
            deaths = self._policy.deaths_in_a_row
            text = (
                f"The inference engine stopped ({how}) {deaths} times in a row before a model "
                "was loaded; it was not restarted."
            )
            self.engine_stopped.emit(text)
            if self._want is not None:
                self.load_failed.emit(
                    EngineError(
                        text,
                        "Send a message or load a model to start it again, or choose another "
                        "model or device.",
                        code=STOPPED_CODE,
                    )
                )

    def _announce_restart(self, what: str) -> None:
        if self._restart_note is not None:
            note, self._restart_note = self._restart_note, None
            self.engine_restarted.emit(f"{note}, {what}.")

    def _fail(self, request_id: int, what: str, *, restarting: bool) -> None:
        self._outstanding.discard(request_id)
        fix = (
            "The partial answer is kept. Regenerate to try again once the model is reloaded."
            if restarting
            else "The partial answer is kept. Load the model again to continue."
        )
        error = EngineError(f"The answer stopped: {what}.", fix, code=STOPPED_CODE)
        self.failed.emit(request_id, error)
