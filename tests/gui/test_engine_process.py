"""The engine process relays real generations to the GUI thread as signals, and survives its
own death: the request fails with ENGINE_STOPPED, a new process starts and reloads the model."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, LoadedModel, Message
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.workers.engine_process import MAX_DEATHS_IN_A_ROW, EngineProcess

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

COUNTING = [Message("user", "Count from 1 to 40.")]


@pytest.fixture
def engine(qtbot: QtBot) -> EngineProcess:
    process = EngineProcess(coalesce_ms=30)
    yield process
    assert process.shutdown()
    assert not process.running


def _load(qtbot: QtBot, process: EngineProcess, path: Path) -> LoadedModel:
    with qtbot.waitSignal(process.loaded, timeout=120_000) as blocker:
        process.load(path)
    return blocker.args[0]


def test_generation_streams_through_signals(qtbot: QtBot, engine: EngineProcess) -> None:
    loaded = _load(qtbot, engine, demo_model_dir())
    assert loaded.mtp
    received: list[object] = []
    engine.chunks.connect(lambda rid, chunks: received.extend(chunks))
    with qtbot.waitSignal(engine.finished, timeout=120_000) as blocker:
        request = engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=100))
    finished_id, stats = blocker.args
    assert finished_id == request
    assert isinstance(stats, GenerationStats)
    text = "".join(chunk.answer for chunk in received)
    assert text.split()[:5] == ["1", "2", "3", "4", "5"]
    assert sum(len(chunk.token_ids) for chunk in received) == stats.generated_tokens


def test_cancel_through_the_process(qtbot: QtBot, engine: EngineProcess) -> None:
    _load(qtbot, engine, demo_model_dir())
    engine.started.connect(lambda rid: engine.cancel(rid))
    with qtbot.waitSignal(engine.finished, timeout=120_000) as blocker:
        engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=500))
    stats = blocker.args[1]
    assert stats.finish_reason == "cancelled"
    assert stats.generated_tokens < 500


def test_errors_arrive_as_signals(qtbot: QtBot, engine: EngineProcess, tmp_path: Path) -> None:
    with qtbot.waitSignal(engine.load_failed, timeout=60_000) as blocker:
        engine.load(tmp_path / "missing")
    error = blocker.args[0]
    assert isinstance(error, EngineError) and error.code == "MODEL_NOT_FOUND"
    with qtbot.waitSignal(engine.failed, timeout=60_000) as blocker:
        engine.start_generation(COUNTING, GenerationSettings())
    assert blocker.args[1].code == "NOT_LOADED"


def test_requests_are_serialized(qtbot: QtBot, engine: EngineProcess) -> None:
    _load(qtbot, engine, demo_model_dir())
    order: list[int] = []
    engine.finished.connect(lambda rid, stats: order.append(rid))
    first = engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=20))
    second = engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=20))
    qtbot.waitUntil(lambda: len(order) == 2, timeout=120_000)
    assert order == [first, second]


def _stream_then_kill(qtbot: QtBot, engine: EngineProcess, sig: int) -> tuple[str, EngineError]:
    """Start a long answer, kill the engine process once text arrived; the partial text and
    the request's error."""
    received: list[str] = []
    engine.chunks.connect(lambda rid, chunks: received.extend(c.answer for c in chunks))
    pid = engine.pid
    assert pid is not None
    with qtbot.waitSignal(engine.failed, timeout=120_000) as blocker:
        engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=2000, ignore_eos=True))
        qtbot.waitUntil(lambda: len("".join(received).split()) >= 3, timeout=60_000)
        os.kill(pid, sig)
    engine.chunks.disconnect()
    return "".join(received), blocker.args[1]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_engine_death_fails_the_request_and_reloads(
    qtbot: QtBot, engine: EngineProcess, sig: int
) -> None:
    loaded = _load(qtbot, engine, demo_model_dir())
    first_pid = engine.pid
    stopped: list[str] = []
    engine.engine_stopped.connect(stopped.append)
    with qtbot.waitSignal(engine.engine_restarted, timeout=120_000) as restarted:
        partial, error = _stream_then_kill(qtbot, engine, sig)
    assert partial.split()[:3] == ["1", "2", "3"]
    assert error.code == "ENGINE_STOPPED"
    assert signal.Signals(sig).name in error.message
    assert stopped and signal.Signals(sig).name in stopped[0]
    assert restarted.args[0].endswith("restarted, model reloaded.")
    # A new process, the same model, and it answers.
    assert engine.pid not in (None, first_pid)
    assert engine.loaded_model is not None
    assert engine.loaded_model.model_dir == loaded.model_dir
    with qtbot.waitSignal(engine.finished, timeout=120_000) as blocker:
        engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=10))
    assert blocker.args[1].generated_tokens == 10


def test_an_engine_that_keeps_dying_is_not_restarted_in_a_loop(qtbot: QtBot) -> None:
    """A broken engine (here: one that crashes as it starts) is tried three times, then left
    stopped with a plain message until the user loads a model again."""
    crashing = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    engine = EngineProcess(command=crashing)
    stopped: list[str] = []
    engine.engine_stopped.connect(stopped.append)
    qtbot.waitUntil(lambda: len(stopped) == MAX_DEATHS_IN_A_ROW, timeout=60_000)
    assert all("SIGSEGV" in text for text in stopped)
    assert "not restarted" in stopped[-1]
    assert engine.pid is None and not engine.running
    qtbot.wait(500)
    assert len(stopped) == MAX_DEATHS_IN_A_ROW  # no loop
    with qtbot.waitSignal(engine.failed, timeout=10_000) as failed:
        engine.start_generation(COUNTING, GenerationSettings(max_new_tokens=5))
    assert failed.args[1].code == "ENGINE_STOPPED"
    # Loading tries again (three more times), and says so once more.
    with qtbot.waitSignal(engine.load_failed, timeout=60_000) as blocker:
        engine.load(demo_model_dir())
    assert blocker.args[0].code == "ENGINE_STOPPED"
    assert len(stopped) == 2 * MAX_DEATHS_IN_A_ROW
    assert engine.shutdown()


def test_the_engine_restarts_after_every_death_once_it_loaded(
    qtbot: QtBot, engine: EngineProcess
) -> None:
    _load(qtbot, engine, demo_model_dir())
    for _ in range(MAX_DEATHS_IN_A_ROW + 1):
        pid = engine.pid
        assert pid is not None
        with qtbot.waitSignal(engine.engine_restarted, timeout=120_000) as restarted:
            os.kill(pid, signal.SIGKILL)
        assert "model reloaded" in restarted.args[0]
        assert engine.loaded_model is not None


def test_engine_process_ends_when_its_stdin_closes(qtbot: QtBot) -> None:
    """What happens when the app dies: the pipe closes and the engine exits."""
    engine = EngineProcess()
    _load(qtbot, engine, demo_model_dir())
    process = engine._supervisor.host._process
    writer = engine._supervisor.host._writer
    assert process is not None and writer is not None
    writer.close()
    assert process.wait(timeout=30) == 0
    engine.shutdown()


def test_the_engine_process_lists_the_devices(qtbot: QtBot, engine: EngineProcess) -> None:
    """The window asks the engine host, so it never imports OpenVINO itself; a host that dies
    before answering is asked again once restarted."""
    with qtbot.waitSignal(engine.devices_listed, timeout=60_000) as blocker:
        engine.list_devices()
    assert "CPU" in blocker.args[0]
    qtbot.waitUntil(lambda: engine.pid is not None, timeout=10_000)
    first = engine.pid
    assert first is not None
    if sys.platform == "win32":
        return  # no SIGSTOP: the host could answer before it dies
    os.kill(first, signal.SIGSTOP)  # the request waits unread in the pipe...
    with qtbot.waitSignal(engine.devices_listed, timeout=120_000) as blocker:
        engine.list_devices()
        os.kill(first, signal.SIGKILL)  # ...and dies with it
    assert "CPU" in blocker.args[0] and engine.pid not in (None, first)
