"""The engine host process: `python -m qwen_mtp_desktop.host`, started by the app's window.

It reads requests (core.hosting.protocol) from stdin and writes events to a private copy of its
stdout; fd 1 itself is pointed at stderr first, so whatever the native runtime prints cannot
corrupt the protocol. Everything it logs goes to stderr, which the window forwards to the app's
log file (one writer per file).

Threads:
- main: reads requests. Cancel is handled right there; everything else is queued in order.
- window-requests: runs the queued requests one by one (load, unload, generate, measure), each
  taking its turn on the `EngineService`, which other front ends (the local API server) share.
- devices: lists OpenVINO's devices when asked (importing OpenVINO takes a moment).
- api-control: starts and stops the local API server (qwen_mtp_desktop.server) when the window
  asks; uvicorn then serves on its own thread, on the same EngineService, so the window and API
  clients take turns on the one loaded model.
The host ends when its stdin closes: the window closed it, or the window's process died (the
pipe closes with it), so the engine never outlives the app.

The window starts one host for the chat and a separate one for each validation or benchmark
run of the Benchmark panel (a `Measure` request, host.measurements), so a run's own engines
and whatever crashes in them stay out of the chat's process.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.core.errors import UserFacingError, as_user_error
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    AnswerFailed,
    AnswerFinished,
    AnswerStarted,
    ApiRequest,
    ApiState,
    Cancel,
    FrameWriter,
    Generate,
    ListDevices,
    Load,
    Loaded,
    LoadFailed,
    Loading,
    Measure,
    MeasureFailed,
    ProtocolError,
    Ready,
    ServeApi,
    Shutdown,
    StateCacheQuery,
    StateCacheState,
    Unload,
    Unloaded,
    read_frame,
)
from qwen_mtp_desktop.core.hosting.service import EngineService, WaitCancelledError, coalesced
from qwen_mtp_desktop.core.system.logs import DEBUG_LOG_ENV
from qwen_mtp_desktop.core.system.privacy import block_telemetry
from qwen_mtp_desktop.host.measurements import list_devices, run_measure

log = logging.getLogger("qwen_mtp_desktop.host")


class WindowPipe:
    """Serves the window's requests over one pair of pipes."""

    def __init__(self, requests: IO[bytes], events: FrameWriter, service: EngineService) -> None:
        self._requests = requests
        self._events = events
        self._service = service
        self._queue: queue.SimpleQueue[
            Load | Unload | Generate | StateCacheQuery | Measure | None
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._cancelled: set[int] = set()
        #: The running request's id and how to stop it (an answer's or a measurement's cancel).
        self._current: tuple[int, Callable[[], None]] | None = None
        self._api: ApiControl = ApiControl(service, events)

    def run(self) -> None:
        """Until the window closes the pipe or says Shutdown."""
        worker = threading.Thread(target=self._work, name="window-requests", daemon=True)
        worker.start()
        self._events.send(Ready(os.getpid()))
        try:
            while True:
                try:
                    request = read_frame(self._requests)
                except ProtocolError:
                    log.exception("bad request frame; closing")
                    break
                if request is None or isinstance(request, Shutdown):
                    break
                if isinstance(request, Cancel):
                    self._cancel(request.request_id)
                elif isinstance(request, ServeApi):
                    self._api.request(request)
                elif isinstance(request, ListDevices):
                    threading.Thread(target=self._list_devices, name="devices", daemon=True).start()
                elif isinstance(request, Load | Unload | Generate | StateCacheQuery | Measure):
                    self._queue.put(request)
                else:
                    log.error("unknown request %s", type(request).__name__)
        finally:
            self._cancel(None)
            self._api.close(timeout=10)
            self._queue.put(None)
            worker.join(timeout=10)

    def _cancel(self, request_id: int | None) -> None:
        with self._lock:
            if request_id is not None:
                self._cancelled.add(request_id)
            current = self._current
            if current is not None and request_id in (None, current[0]):
                current[1]()

    def _work(self) -> None:
        while (request := self._queue.get()) is not None:
            try:
                if isinstance(request, Load):
                    self._load(request)
                elif isinstance(request, Unload):
                    with self._service.exclusive() as engine:
                        engine.unload()
                    self._events.send(Unloaded())
                elif isinstance(request, StateCacheQuery):
                    with self._service.exclusive() as engine:
                        report = engine.state_cache_report()
                    self._events.send(StateCacheState(report))
                elif isinstance(request, Measure):
                    self._measure(request)
                else:
                    self._generate(request)
            except OSError:  # the window is gone; the main thread sees the pipe close
                return
        with self._service.exclusive() as engine:
            engine.unload()

    def _load(self, request: Load) -> None:
        with self._service.exclusive() as engine:
            self._events.send(Loading(request.model_dir))
            try:
                model = engine.load(request.model_dir, request.options)
            except Exception as exc:
                self._events.send(LoadFailed(as_user_error(exc, EngineError)))
                return
            self._events.send(Loaded(model, engine.plain_ready))

    def _generate(self, request: Generate) -> None:
        rid = request.request_id
        taken = time.perf_counter()  # off the queue: waiting for the engine begins
        with self._lock:
            if rid in self._cancelled:  # cancelled while still queued
                self._cancelled.discard(rid)
                self._send_stopped_before_start(request, waited_s=0.0)  # nothing was timed
                return

        def gave_up() -> bool:
            return rid in self._cancelled

        try:
            with self._service.turn(
                request.messages, request.settings, gave_up, raw_prompt=request.raw_prompt
            ) as generation:
                with self._lock:
                    self._current = (rid, generation.cancel)
                    if rid in self._cancelled:
                        generation.cancel()
                self._events.send(AnswerStarted(rid))
                for batch in coalesced(generation, request.coalesce_s):
                    self._events.send(AnswerChunks(rid, batch, time.time()))
                assert generation.stats is not None
                stats = generation.stats
            self._events.send(AnswerFinished(rid, stats, self._service.engine.plain_ready))
        except OSError:
            raise
        except WaitCancelledError:  # Stop while a load or another answer held the engine
            self._send_stopped_before_start(request, waited_s=time.perf_counter() - taken)
        except Exception as exc:
            self._events.send(AnswerFailed(rid, as_user_error(exc, EngineError)))
        finally:
            with self._lock:
                self._current = None
                self._cancelled.discard(rid)

    def _send_stopped_before_start(self, request: Generate, *, waited_s: float) -> None:
        """End an answer stopped before the engine took it (queued behind a load or another
        answer) as a stopped answer, as a Stop during its prefill ends: nothing failed."""
        engine = self._service.engine
        loaded = engine.loaded
        stats = build_stats(
            method=request.settings.method,
            device=loaded.device if loaded is not None else "",
            prompt_tokens=0,  # not read: the chat shows no prompt figure
            chunk_sizes=[],
            chunk_times=[],
            total_s=waited_s,
            reasoning_tokens=0,
            answer_tokens=0,
            finish_reason="cancelled",
        )
        self._events.send(AnswerFinished(request.request_id, stats, engine.plain_ready))

    def _measure(self, request: Measure) -> None:
        """A validation or benchmark (host.measurements) with engines of its own. The window
        sends it to a host started for the run, where nothing else runs; it still takes its
        turn on the EngineService, so it never shares the CPU with an answer of this host."""
        rid = request.request_id
        cancel = threading.Event()
        cancelled = MeasureFailed(rid, UserFacingError("The run was cancelled.", code="CANCELLED"))
        with self._lock:
            if rid in self._cancelled:  # cancelled while still queued
                self._cancelled.discard(rid)
                self._events.send(cancelled)
                return
            self._current = (rid, cancel.set)
        try:
            with self._service.exclusive(cancel.is_set):
                run_measure(request, self._events.send, cancel)
        except WaitCancelledError:  # cancelled while an answer held the engine
            self._events.send(cancelled)
        finally:
            with self._lock:
                self._current = None
                self._cancelled.discard(rid)

    def _list_devices(self) -> None:
        with contextlib.suppress(OSError):  # the window is gone
            self._events.send(list_devices())


class ApiControl:
    """Starts and stops the local API server on its own thread, one change at a time, the
    newest request winning (a start overtaken by a stop never serves)."""

    def __init__(self, service: EngineService, events: FrameWriter) -> None:
        self._service = service
        self._events = events
        #: ServeApi requests; None ends the thread.
        self._wanted: queue.SimpleQueue[ServeApi | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._handle: Any = None  # server.runner.ServerHandle while it runs

    def request(self, request: ServeApi) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="api-control", daemon=True)
            self._thread.start()
        self._wanted.put(request)

    def close(self, timeout: float) -> None:
        """Stop the server, if any, and end the thread."""
        if self._thread is not None:
            self._wanted.put(None)
            self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            request = self._wanted.get()
            while request is not None and not self._wanted.empty():
                request = self._wanted.get()  # only the newest wish counts
            self._stop()
            if request is None:
                return
            if request.host is None:
                self._send(ApiState(None))
                continue
            try:
                # Imported on demand: a window that never serves never loads the web stack.
                from qwen_mtp_desktop.server.runner import ServerConfig, start_server_thread

                config = ServerConfig(
                    host=request.host,
                    port=request.port,
                    api_key=request.api_key,
                    on_request=self._send_request,
                )
                self._handle = start_server_thread(self._service, config)
            except UserFacingError as exc:
                self._send(ApiState(None, EngineError(exc.message, exc.fix, code=exc.code)))
                continue
            except Exception as exc:
                self._send(ApiState(None, as_user_error(exc, EngineError)))
                continue
            log.info("local API server at %s", self._handle.url)
            self._send(ApiState(self._handle.url, None, tuple(self._handle.network_urls)))

    def _stop(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.stop()

    def _send(self, state: ApiState) -> None:
        with contextlib.suppress(OSError):
            self._events.send(state)

    def _send_request(self, record: ApiRequest) -> None:
        """An answered request, for the window's list (server.http.request_log)."""
        with contextlib.suppress(OSError):
            self._events.send(record)


class RecordLines(logging.Formatter):
    """Each log record as one JSON line (level, logger, message with its newlines), so the app
    writes it to its log as the record it was (core.hosting.process.forward_log)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + self.formatException(record.exc_info)
        return json.dumps({"level": record.levelno, "name": record.name, "message": message})


def _protocol_streams() -> tuple[IO[bytes], IO[bytes]]:
    """stdin for requests, and a private copy of stdout for events; fd 1 becomes stderr."""
    events_fd = os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if sys.platform == "win32":
        import msvcrt

        msvcrt.setmode(events_fd, os.O_BINARY)
    return sys.stdin.buffer, os.fdopen(events_fd, "wb", buffering=0)


def main() -> int:
    requests, events = _protocol_streams()
    faulthandler.enable()  # a native crash leaves its Python stack in the app's log
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RecordLines())
    logging.basicConfig(
        level=logging.DEBUG if os.environ.get(DEBUG_LOG_ENV) else logging.INFO,
        handlers=[handler],
    )
    block_telemetry()
    pipe = WindowPipe(requests, FrameWriter(events), EngineService())
    with contextlib.suppress(OSError):  # the window is gone
        pipe.run()
    # Skip interpreter teardown: native runtime objects may still be referenced by daemon
    # threads, and nothing is left to save.
    sys.stderr.flush()
    os._exit(0)
