"""EngineSupervisor: the restart, reload and failure rules both front ends share, on real child
processes (a stand-in host that reads its stdin until it closes, killed for real)."""

from __future__ import annotations

import os
import queue
import signal
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, LoadedModel, LoadOptions
from qwen_mtp_desktop.core.hosting.process import MAX_DEATHS_IN_A_ROW, STOPPED_CODE, Exited
from qwen_mtp_desktop.core.hosting.protocol import (
    AnswerFailed,
    AnswerFinished,
    Load,
    Loaded,
    LoadFailed,
    Ready,
)
from qwen_mtp_desktop.core.hosting.supervisor import Death, EngineSupervisor

pytestmark = pytest.mark.subprocess

IDLE_HOST = [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]
MODEL = LoadedModel(Path("/models/demo"), "CPU", "mtp", "qwen3_5", 0.1)


class Harness:
    """A supervisor whose events are read from the real reader thread."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[tuple[int, object]] = queue.SimpleQueue()
        self.supervisor = EngineSupervisor(lambda n, e: self.events.put((n, e)), IDLE_HOST)
        self.supervisor.start()

    def kill(self) -> Death:
        """SIGKILL the current process and hand its Exited event to the supervisor."""
        pid = self.supervisor.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        while True:
            incarnation, event = self.events.get(timeout=30)
            if isinstance(event, Exited):
                outcome = self.supervisor.handle(incarnation, event)
                assert isinstance(outcome, Death)
                return outcome

    def event(self, event: object) -> object:
        return self.supervisor.handle(self.supervisor.host.incarnation, event)

    def close(self) -> None:
        assert self.supervisor.stop(10)


@pytest.fixture
def harness() -> Harness:
    made = Harness()
    yield made
    made.close()


def _finished(request_id: int) -> AnswerFinished:
    stats = GenerationStats(
        method=DecodingMethod.mtp(1), device="CPU", prompt_tokens=1, generated_tokens=1,
        reasoning_tokens=0, answer_tokens=1, ttft_s=0.0, decode_tokens_per_s=0.0, total_s=0.0,
        steps=1, drafted_tokens=0, accepted_tokens=0, acceptance_rate=0.0,
        mean_accepted_per_step=0.0, acceptance_by_position=[], finish_reason="eos",
    )  # fmt: skip
    return AnswerFinished(request_id, stats, plain_ready=True)


def test_a_death_fails_requests_in_flight_restarts_and_reloads(harness: Harness) -> None:
    sup = harness.supervisor
    sup.load(Path("/models/demo"), LoadOptions())
    assert harness.event(Loaded(MODEL, plain_ready=False)) is not None
    assert sup.loaded == MODEL
    sup.in_flight.update({3, 4})
    assert harness.event(_finished(4)) is not None and sup.in_flight == {3}
    first_pid = sup.pid

    death = harness.kill()
    assert (death.how, death.restarting, death.reloading) == ("SIGKILL", True, True)
    assert death.failed_requests == (3,) and sup.in_flight == set()
    assert death.error.code == STOPPED_CODE and "(SIGKILL)" in death.error.message
    assert "partial answer is kept" in death.error.fix
    assert death.text.endswith("restarting and reloading the model.")
    assert sup.pid not in (None, first_pid) and sup.restarts == 1
    assert sup.loaded is None and sup.reloading == MODEL and not sup.plain_ready
    assert sup.take_restart_note() is None  # not until the reload ended

    harness.event(Loaded(MODEL, plain_ready=False))
    assert sup.reloading is None and sup.loaded == MODEL
    assert (
        sup.take_restart_note()
        == "The inference engine stopped (SIGKILL); restarted, model reloaded."
    )
    assert sup.take_restart_note() is None  # said once


def test_a_reload_that_fails_is_said_and_not_retried(harness: Harness) -> None:
    sup = harness.supervisor
    sup.load(Path("/models/demo"), LoadOptions())
    harness.event(Loaded(MODEL, plain_ready=False))
    harness.kill()
    harness.event(LoadFailed(EngineError("broken", code="LOAD_FAILED")))
    assert sup.want is None and sup.loaded is None and sup.reloading is None
    assert sup.take_restart_note() == (
        "The inference engine stopped (SIGKILL); restarted, the model could not be reloaded."
    )
    death = harness.kill()  # nothing to reload now
    assert death.restarting and not death.reloading
    assert death.text == "The inference engine stopped (SIGKILL); restarted."


def test_repeated_deaths_without_a_load_stop_the_restarts(harness: Harness) -> None:
    sup = harness.supervisor
    sup.load(Path("/models/crashes-on-load"), LoadOptions())
    deaths = [harness.kill() for _ in range(MAX_DEATHS_IN_A_ROW)]
    assert [d.restarting for d in deaths] == [True] * (MAX_DEATHS_IN_A_ROW - 1) + [False]
    assert sup.pid is None and "was not restarted" in deaths[-1].text
    assert f"{MAX_DEATHS_IN_A_ROW} times in a row" in deaths[-1].text
    assert "not restarted" in deaths[-1].error.fix
    assert sup.not_running_error().code == STOPPED_CODE
    # A new load is the user's word: the engine starts again.
    sup.load(Path("/models/demo"), LoadOptions())
    assert sup.pid is not None


def test_a_useful_process_resets_the_count(harness: Harness) -> None:
    for _ in range(MAX_DEATHS_IN_A_ROW * 2):
        harness.event(Ready(pid=1))  # up with nothing to load: useful
        assert harness.kill().restarting


def test_stale_and_closing_events_are_ignored(harness: Harness) -> None:
    sup = harness.supervisor
    old = sup.host.incarnation
    harness.kill()
    assert sup.handle(old, Loaded(MODEL, plain_ready=True)) is None
    assert sup.loaded is None
    sup.in_flight.add(7)
    assert harness.event(AnswerFailed(7, EngineError("x"))) is not None and sup.in_flight == set()


def test_sticky_requests_follow_every_new_process(harness: Harness) -> None:
    """What the local API server relies on: it comes back with the engine."""
    sent: list[object] = []
    sup = harness.supervisor
    sup.sticky["api"] = "serve-api"
    sup.host.send = sent.append  # type: ignore[method-assign]
    sup.load(Path("/models/demo"), LoadOptions())
    harness.event(Loaded(MODEL, plain_ready=False))
    harness.kill()
    assert sent[0] == Load(Path("/models/demo"), LoadOptions())
    assert sent[1:] == ["serve-api", Load(Path("/models/demo"), LoadOptions())]


def test_nothing_starts_a_process_after_stop(harness: Harness) -> None:
    """A load that arrives after the app shut the engine down (a queued signal, a timer) must
    not start a process nobody will stop (found by the test-suite's leak check)."""
    sup = harness.supervisor
    assert sup.stop(10)
    sup.load(Path("/models/demo"), LoadOptions())
    sup.start()
    assert sup.pid is None and sup.want is None
