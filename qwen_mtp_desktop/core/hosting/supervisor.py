"""The engine host as a front end keeps it: one `HostProcess`, restarted after a death by
`RestartPolicy`, with the model reloaded into the new process, the requests in flight failed
with ENGINE_STOPPED, and the death told in plain words.

A request that had produced no text yet when the engine died is sent again, once, to the new
process behind the reload (issue 29): a native crash at the first generate (openvino-genai
#4425 describes such crashes) then costs the user a wait, not an error. A request that
streamed text fails as before (its partial answer is kept), and one that dies twice fails.

Shared by the window's `workers.engine_process.EngineProcess` (events become Qt signals on the
GUI thread) and `core.hosting.client.HostedEngine` (events feed blocking calls, for `serve`), so
both front ends restart, reload and report a crash the same way. Not thread-safe by itself: the
front end calls it from one thread at a time (the GUI thread, or under HostedEngine's lock).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.engine import EngineError, LoadedModel, LoadOptions
from qwen_mtp_desktop.core.hosting.process import STOPPED_CODE, Exited, HostProcess, RestartPolicy
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerChunks,
    AnswerFailed,
    AnswerFinished,
    Cancel,
    Generate,
    Load,
    Loaded,
    LoadFailed,
    Ready,
    Unload,
    Unloaded,
)


@dataclass(frozen=True)
class Death:
    """What a front end does when its engine process died."""

    #: How it ended, in plain words ("SIGSEGV", "exit code 3").
    how: str
    #: A new engine process was started (False: given up after repeated deaths).
    restarting: bool
    #: The model that was loaded is being reloaded into the new process.
    reloading: bool
    #: Requests that were in flight; each fails with `error`.
    failed_requests: tuple[int, ...]
    error: EngineError
    #: The status line: what happened and what is being done about it.
    text: str
    #: Requests that had produced nothing yet, sent again to the new process (not failed).
    retried_requests: tuple[int, ...] = ()


def engine_stopped_error(how: str, *, restarting: bool) -> EngineError:
    """The error of an answer cut short by the engine's death (code ENGINE_STOPPED)."""
    fix = (
        "The partial answer is kept. The engine is being restarted and the model reloaded; "
        "regenerate (or send the request again) in a moment."
        if restarting
        else "The partial answer is kept. The engine was not restarted after repeated crashes: "
        "load the model again, or choose another model or device."
    )
    return EngineError(
        f"The answer stopped: the inference engine stopped ({how}).", fix, code=STOPPED_CODE
    )


class EngineSupervisor:
    """One engine host kept running for a front end.

    `on_event(incarnation, event)` is the front end's handler, called on the host's reader
    thread; the front end passes each event to `handle()` (on its own thread), which keeps the
    state and returns the event to route, a `Death`, or None for an event that was consumed or
    came from a process that was replaced."""

    def __init__(
        self, on_event: Callable[[int, object], None], command: Sequence[str] | None = None
    ) -> None:
        self.host = HostProcess(on_event, command)
        self.policy = RestartPolicy()
        #: The last load asked for, reloaded after a restart (None after unload()).
        self.want: tuple[Path, LoadOptions] | None = None
        self.loaded: LoadedModel | None = None
        #: The model that was loaded when the engine died, while it is reloaded.
        self.reloading: LoadedModel | None = None
        self.plain_ready = False
        self.in_flight: set[int] = set()
        #: Requests sent that have produced no text yet, and the ones already sent again.
        self._unanswered: dict[int, Generate] = {}
        self._retried: set[int] = set()
        self.restarts = 0
        self.closing = False
        #: Requests sent again to every new process (the local API server while it is on).
        self.sticky: dict[str, object] = {}
        self._restart_note: str | None = None
        self._announcement: str | None = None

    @property
    def pid(self) -> int | None:
        return self.host.pid

    def start(self) -> None:
        if self.closing:  # stopped for good: a late request must not start a new process
            return
        self.host.start()
        for request in self.sticky.values():
            self.host.send(request)

    def send(self, request: object) -> None:
        self.host.send(request)

    def submit(self, request: Generate) -> None:
        """Send a turn, and keep it until it produces text (to send it again after a crash)."""
        self.in_flight.add(request.request_id)
        self._unanswered[request.request_id] = request
        self.host.send(request)

    def cancel(self, request_id: int | None) -> None:
        """Cancel a turn (None: the running one); a cancelled turn is never sent again."""
        if request_id is None:
            self._unanswered.clear()
        else:
            self._unanswered.pop(request_id, None)
        self.host.send(Cancel(request_id))

    def load(self, model_dir: Path, options: LoadOptions) -> None:
        if self.closing:
            return
        self.want = (model_dir, options)
        if self.host.pid is None:  # not restarted after repeated crashes: try again
            self.policy.useful()
            self.start()
        self.send(Load(model_dir, options))

    def unload(self) -> None:
        self.want = None
        self.send(Unload())

    def stop(self, timeout_s: float) -> bool:
        """End the engine process for good (True if it ended in time, else it was killed)."""
        self.closing = True
        return self.host.stop(timeout_s)

    def not_running_error(self) -> EngineError:
        return EngineError(
            "The inference engine is not running: it stopped repeatedly and was not restarted.",
            "Load the model again, or choose another model or device.",
            code=STOPPED_CODE,
        )

    def take_restart_note(self) -> str | None:
        """Once, after the reload that followed a restart ended: "The inference engine stopped
        (SIGSEGV); restarted, model reloaded." (or "..., the model could not be reloaded.")."""
        note, self._announcement = self._announcement, None
        return note

    def handle(self, incarnation: int, event: object) -> object | Death | None:
        if incarnation != self.host.incarnation or self.closing:
            return None  # a late event of a process that was replaced or is being stopped
        if isinstance(event, Ready):
            if self.want is None:
                self.policy.useful()  # up, with nothing to load
            return None
        if isinstance(event, Loaded):
            self.loaded, self.plain_ready, self.reloading = event.model, event.plain_ready, None
            self.policy.useful()
            self._note_reload("model reloaded")
        elif isinstance(event, LoadFailed):
            self.loaded, self.plain_ready, self.reloading = None, False, None
            self.want = None  # a clean refusal: a restart must not try it again
            self._note_reload("the model could not be reloaded")
        elif isinstance(event, Unloaded):
            self.loaded, self.plain_ready, self.reloading = None, False, None
        elif isinstance(event, AnswerChunks):
            self._unanswered.pop(event.request_id, None)  # text shown: no silent retry
        elif isinstance(event, AnswerFinished | AnswerFailed):
            self.in_flight.discard(event.request_id)
            self._unanswered.pop(event.request_id, None)
            self._retried.discard(event.request_id)
            if isinstance(event, AnswerFinished):
                self.plain_ready = event.plain_ready
        elif isinstance(event, Exited):
            return self._died(event)
        return event

    def _died(self, exited: Exited) -> Death:
        self.host.forget()
        how = exited.how
        reloading = self.loaded
        self.loaded, self.plain_ready = None, False
        restarting = self.policy.died()
        retry: list[Generate] = []
        if restarting and self.want is not None:
            retry = [r for i, r in sorted(self._unanswered.items()) if i not in self._retried]
        retried = tuple(r.request_id for r in retry)
        failed = tuple(sorted(self.in_flight - set(retried)))
        self.in_flight = set(retried)
        self._unanswered.clear()
        self._retried = set(retried)
        if restarting:
            self.restarts += 1
            self.start()
            if self.want is not None:
                self.reloading = reloading
                self._restart_note = f"The inference engine stopped ({how}); restarted"
                self.send(Load(*self.want))  # requests sent after this wait behind it
                text = f"The inference engine stopped ({how}); restarting and reloading the model."
                if retry:
                    text = text[:-1] + "; the answer is being asked for again."
                for request in retry:
                    self.submit(request)
            else:
                text = f"The inference engine stopped ({how}); restarted."
        else:
            self.reloading = None
            text = (
                f"The inference engine stopped ({how}) {self.policy.deaths_in_a_row} times in a "
                "row before a model was loaded; it was not restarted."
            )
        return Death(
            how,
            restarting,
            restarting and self.want is not None,
            failed,
            engine_stopped_error(how, restarting=restarting),
            text,
            retried,
        )

    def _note_reload(self, what: str) -> None:
        if self._restart_note is not None:
            self._announcement = f"{self._restart_note}, {what}."
            self._restart_note = None
