"""Ctrl+C while `generate` streams an answer (commands.answer_output.stream_answer): the answer
is cancelled as Stop cancels it and ends the usual way, then KeyboardInterrupt propagates (the
command says "interrupted", exit 130); a second Ctrl+C leaves at once when the answer does not
end; Python's own handler is back afterwards. Real signals, sent to this process.

The streams here are small AnswerStream implementations that pace themselves, so that the
signal lands mid-stream and one can refuse to end: the real answers are covered end to end by
tests/hostile/test_remote_streams.py (a terminal, a flooding server, the real command)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from qwen_mtp_desktop.commands.answer_output import stream_answer
from qwen_mtp_desktop.core.engine import AnswerStream, StepChunk


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


def _ctrl_c_after(seconds: float, times: int = 1) -> threading.Thread:
    def send() -> None:
        for _ in range(times):
            time.sleep(seconds)
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_cancels_the_answer_then_interrupts(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _Ticking()
    sender = _ctrl_c_after(0.2)
    with pytest.raises(KeyboardInterrupt):
        stream_answer(answer)
    sender.join()
    assert answer.cancelled and answer.chunks > 0
    assert answer.steps_begun == answer.steps_done  # the signal cut no step in two
    assert capsys.readouterr().out == "x" * answer.chunks + "\n"  # the line is ended
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_leaves_an_answer_that_does_not_end() -> None:
    answer = _Ticking(ignores_cancel=True)
    sender = _ctrl_c_after(0.2, times=2)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        stream_answer(answer, quiet=True)
    sender.join()
    assert answer.cancelled
    assert time.monotonic() - started < 5
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_answer_that_ends_leaves_no_handler_behind() -> None:
    answer = _Ticking()
    answer.cancel()  # ends at its first step
    stream_answer(answer)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
