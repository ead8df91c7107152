"""The engine process: the window's handle of the engine host (qwen_mtp_desktop.host).

The engine (openvino-genai and the app's decoder) runs in a child process, so a native crash or
an out-of-memory kill in the runtime cannot take the window down. This object has the signals
the panels connect to; requests are frames on the child's stdin (core.hosting.protocol), events
come back on its stdout, read on a thread (core.hosting.process.HostProcess) and handed to the GUI
thread as queued signals. Nothing here blocks the GUI thread except `shutdown()` at exit.

When the child dies (a signal, an exit, a broken protocol), the request that was running fails
with ENGINE_STOPPED (the chat keeps the partial answer and marks it), `engine_stopped` says what
happened, and a new child starts and reloads the model that was loaded; `engine_restarted` says
when it is back. After three deaths in a row with no model loaded in between (a model that
crashes the runtime while loading, a broken install) it is not restarted until the next load,
so nothing loops (core.hosting.process.RestartPolicy). The child exits when its stdin closes,
which happens when this app exits or dies.
"""

from __future__ import annotations

import logging
from collections import deque
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
from qwen_mtp_desktop.core.hosting.process import MAX_DEATHS_IN_A_ROW, STOPPED_CODE
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    AnswerFailed,
    AnswerFinished,
    AnswerStarted,
    ApiRequest,
    ApiState,
    Devices,
    Generate,
    ListDevices,
    Loaded,
    LoadFailed,
    Loading,
    ServeApi,
    StateCacheQuery,
    StateCacheState,
    Unloaded,
)
from qwen_mtp_desktop.core.hosting.supervisor import Death, EngineSupervisor
from qwen_mtp_desktop.workers.foundation import RequestIds

log = logging.getLogger(__name__)

#: Answered API requests kept for the server dialog's list.
API_REQUESTS_KEPT = 50

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
        api_request(ApiRequest): the local API server answered a request (time, endpoint,
            status, tokens, duration; no prompt); the latest are in `api_requests`.
        state_cache(CacheReport | None): the answer to `query_state_cache()`: what the engine
            keeps of conversations between turns (None: no model with the app's decoder).
        devices_listed(list[str]): OpenVINO's devices, asked with `list_devices()` (["CPU"]
            when the runtime could not say): the engine process lists them, so the window
            never loads OpenVINO itself.
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
    api_request = Signal(object)
    state_cache = Signal(object)
    devices_listed = Signal(list)

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
        self._supervisor = EngineSupervisor(self._event.emit, command)
        self.api_url: str | None = None
        self.api_network_urls: tuple[str, ...] = ()
        #: The local API server's latest answered requests, oldest first (ApiRequest).
        self.api_requests: deque[ApiRequest] = deque(maxlen=API_REQUESTS_KEPT)
        #: Seconds from the host sending a chunk batch to this process receiving it.
        self.hop_s = self._supervisor.host.hop_s
        self._event.connect(self._on_event)
        self._supervisor.start()

    # ------------------------------------------------------------------ what panels read

    @property
    def loaded_model(self) -> LoadedModel | None:
        return self._supervisor.loaded

    @property
    def plain_ready(self) -> bool:
        """Whether plain decoding runs without loading a pipeline first (Auto's switch cost)."""
        return self._supervisor.plain_ready

    @property
    def pid(self) -> int | None:
        """The engine process's id (None while it is not running)."""
        return self._supervisor.pid

    @property
    def running(self) -> bool:
        return self._supervisor.host.running

    # ------------------------------------------------------------------ requests

    def load(self, model_dir: Path, options: LoadOptions | None = None) -> None:
        self._supervisor.load(model_dir, options or LoadOptions())

    def unload(self) -> None:
        self._supervisor.unload()

    def start_generation(self, messages: Sequence[Message], settings: GenerationSettings) -> int:
        request_id = self._ids.next()
        if self._supervisor.pid is None:
            self.failed.emit(request_id, self._supervisor.not_running_error())
            return request_id
        self._supervisor.submit(Generate(request_id, tuple(messages), settings, self._coalesce_s))
        return request_id

    def serve_api(self, host: str, port: int, api_key: str | None) -> None:
        """Run the local API server in the engine process, on its engine (`api_state` says
        where, or why not); it comes back with the engine after a restart."""
        request = ServeApi(host, port, api_key)
        self._supervisor.sticky["api"] = request
        self._supervisor.send(request)

    def stop_api(self) -> None:
        self._supervisor.sticky.pop("api", None)
        self._supervisor.send(ServeApi(None))

    def query_state_cache(self) -> None:
        """Ask what the engine keeps of conversations; `state_cache` answers (after the
        requests already sent), or nothing when no engine process runs."""
        if self._supervisor.pid is not None:
            self._supervisor.send(StateCacheQuery())

    def list_devices(self) -> None:
        """Ask the engine process which devices OpenVINO has (`devices_listed` answers). Asked
        again of a restarted process until an answer came (a death must not lose it)."""
        self._supervisor.sticky["devices"] = ListDevices()
        self._supervisor.send(ListDevices())

    def cancel(self, request_id: int | None = None) -> None:
        """Stop a request (or the running one) at its next decoding step."""
        self._supervisor.cancel(request_id)

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        """Cancel, let the host release the model and exit. True if it ended in time (else
        it is killed)."""
        return self._supervisor.stop(timeout_ms / 1000)

    # ------------------------------------------------------------------ events (GUI thread)

    @Slot(int, object)
    def _on_event(self, incarnation: int, received: Any) -> None:
        event = self._supervisor.handle(incarnation, received)
        if isinstance(event, Loading):
            self.loading.emit(event.model_dir)
        elif isinstance(event, Loaded):
            self.loaded.emit(event.model)
        elif isinstance(event, LoadFailed):
            self.load_failed.emit(event.error)
        elif isinstance(event, Unloaded):
            self.unloaded.emit()
        elif isinstance(event, AnswerStarted):
            self.started.emit(event.request_id)
        elif isinstance(event, AnswerChunks):
            self.chunks.emit(event.request_id, event.chunks)
        elif isinstance(event, AnswerFinished):
            self.finished.emit(event.request_id, event.stats)
        elif isinstance(event, AnswerFailed):
            self.failed.emit(event.request_id, event.error)
        elif isinstance(event, ApiState):
            self.api_url, self.api_network_urls = event.url, event.network_urls
            self.api_state.emit(event.url, event.error)
        elif isinstance(event, ApiRequest):
            self.api_requests.append(event)
            self.api_request.emit(event)
        elif isinstance(event, StateCacheState):
            self.state_cache.emit(event.report)
        elif isinstance(event, Devices):
            self._supervisor.sticky.pop("devices", None)
            if event.error:
                log.warning("could not list OpenVINO's devices: %s", event.error)
            self.devices_listed.emit(list(event.names) or ["CPU"])
        elif isinstance(event, Death):
            self._on_death(event)
        note = self._supervisor.take_restart_note()
        if note is not None:
            self.engine_restarted.emit(note)

    def _on_death(self, death: Death) -> None:
        if self.api_url is not None:
            self.api_url, self.api_network_urls = None, ()
            self.api_state.emit(None, None)
        for request_id in death.failed_requests:
            self.failed.emit(request_id, death.error)
        self.engine_stopped.emit(death.text)
        if death.restarting and not death.reloading:
            self.engine_restarted.emit(death.text)
        elif not death.restarting and self._supervisor.want is not None:
            self.load_failed.emit(
                EngineError(
                    death.text,
                    "Send a message or load a model to start it again, or choose another "
                    "model or device.",
                    code=STOPPED_CODE,
                )
            )
