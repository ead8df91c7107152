"""Ctrl+C while `generate` streams an answer (commands.answer_output.stream_answer): the answer
is cancelled as Stop cancels it and ends the usual way, then KeyboardInterrupt propagates (the
command says "interrupted", exit 130); a second Ctrl+C leaves at once when the answer does not
end; Python's own handler is back afterwards.

Real signals, each case in a fresh interpreter (tests.hostile.isolation), as the command runs:
sent to the test process itself, a signal lands on whichever of the suite's leftover native
threads the kernel picks, and one such run died of SIGSEGV. The streams are small AnswerStream
implementations that pace themselves, so that the signal lands mid-stream and one can refuse
to end; the real answers are covered end to end by tests/hostile/test_remote_streams.py (a
terminal, a flooding server, the real command)."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from typing import Any

import pytest

from qwen_mtp_desktop.core.engine import AnswerStream, StepChunk
from tests.hostile.isolation import run_isolated

pytestmark = pytest.mark.subprocess


class _Ticking(AnswerStream):
    """A chunk every 10 ms until cancelled (or for ever, when it ignores cancel)."""

    def __init__(self, *, ignores_cancel: bool = False) -> None:
        super().__init__()
        self._cancel = threading.Event()
        self._ignores_cancel = ignores_cancel
        self.chunks = 0
        self.steps_begun = self.steps_done = 0

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        if self._finished:
            raise StopIteration
        # A step's work, as a real stream's bookkeeping: an exception raised in the middle
        # (Python's own Ctrl+C handler raises wherever the main thread is) leaves it torn.
        self.steps_begun += 1
        stopping = self._cancel.wait(0.01) and not self._ignores_cancel
        self.steps_done += 1
        if stopping:
            self._finished = True
            raise StopIteration
        self.chunks += 1
        return self._take(StepChunk((), "", "x", 0.0))


def ctrl_c_case(
    signals: int, ignores_cancel: bool, quiet: bool, ignored: bool = False
) -> dict[str, Any]:
    """Stream a _Ticking answer and send this process `signals` SIGINTs, 0.2 s apart (run in
    the child). SIGINT starts as on a terminal (Python's handler) or, with `ignored`, as a
    command started in the background by a script (ignored, as the child may inherit)."""
    from qwen_mtp_desktop.commands.answer_output import stream_answer

    before = signal.SIG_IGN if ignored else signal.default_int_handler
    signal.signal(signal.SIGINT, before)
    answer = _Ticking(ignores_cancel=ignores_cancel)
    if signals == 0:
        answer.cancel()  # ends at its first step
    elif ignored:  # the signals change nothing: the answer ends when a timer cancels it
        threading.Timer(0.2 * signals + 0.3, answer.cancel).start()

    def send() -> None:
        for _ in range(signals):
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    shown, real = io.StringIO(), sys.stdout
    started = time.monotonic()
    sender.start()
    sys.stdout = shown
    try:
        stream_answer(answer, quiet=quiet)
        interrupted = False
    except KeyboardInterrupt:
        interrupted = True
    finally:
        sys.stdout = real
    sender.join()
    return {
        "interrupted": interrupted,
        "seconds": time.monotonic() - started,
        "cancelled": answer.cancelled,
        "chunks": answer.chunks,
        "torn": answer.steps_begun - answer.steps_done,
        "shown": shown.getvalue(),
        "handler_back": signal.getsignal(signal.SIGINT) is before,
    }


def _case(
    signals: int, *, ignores_cancel: bool = False, quiet: bool = False, ignored: bool = False
) -> dict[str, Any]:
    return run_isolated(
        "tests.unit.test_ctrl_c_streams:ctrl_c_case",
        timeout_s=60,
        memory_mb=2048,
        signals=signals,
        ignores_cancel=ignores_cancel,
        quiet=quiet,
        ignored=ignored,
    )


def test_ctrl_c_cancels_the_answer_then_interrupts() -> None:
    outcome = _case(1)
    assert outcome["interrupted"] and outcome["cancelled"] and outcome["chunks"] > 0
    assert outcome["torn"] == 0  # the signal cut no step in two (Python's own handler did)
    assert outcome["shown"] == "x" * outcome["chunks"] + "\n"  # the line is ended
    assert outcome["handler_back"]


def test_a_second_ctrl_c_leaves_an_answer_that_does_not_end() -> None:
    outcome = _case(2, ignores_cancel=True, quiet=True)
    assert outcome["interrupted"] and outcome["cancelled"]
    assert outcome["seconds"] < 5
    assert outcome["handler_back"]


def test_an_answer_that_ends_leaves_no_handler_behind() -> None:
    outcome = _case(0)
    assert not outcome["interrupted"] and outcome["handler_back"]


def test_a_command_started_to_ignore_ctrl_c_keeps_ignoring_it() -> None:
    """A script's background command inherits SIGINT ignored; the stream does not take it
    back: the answer runs to its end (cancelled here by a timer after both signals)."""
    outcome = _case(2, quiet=True, ignored=True)
    assert not outcome["interrupted"] and outcome["chunks"] > 20
    assert outcome["handler_back"]
