"""The engine thread relays real generations to the GUI thread as signals."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding import GenerationStats
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, LoadedModel, Message
from qwen_mtp_desktop.core.paths import demo_model_dir
from qwen_mtp_desktop.workers.engine_thread import EngineThread

pytestmark = [pytest.mark.gui, pytest.mark.slow]

COUNTING = [Message("user", "Count from 1 to 40.")]


@pytest.fixture
def engine_thread(qtbot: QtBot) -> EngineThread:
    thread = EngineThread(coalesce_ms=30)
    yield thread
    assert thread.shutdown()


def _load(qtbot: QtBot, thread: EngineThread, path: Path) -> LoadedModel:
    with qtbot.waitSignal(thread.loaded, timeout=120_000) as blocker:
        thread.load(path)
    return blocker.args[0]


def test_generation_streams_through_signals(qtbot: QtBot, engine_thread: EngineThread) -> None:
    loaded = _load(qtbot, engine_thread, demo_model_dir())
    assert loaded.mode == "mtp"
    received: list[object] = []
    engine_thread.chunks.connect(lambda rid, chunks: received.extend(chunks))
    with qtbot.waitSignal(engine_thread.finished, timeout=120_000) as blocker:
        request = engine_thread.generate(COUNTING, GenerationSettings(max_new_tokens=100))
    finished_id, stats = blocker.args
    assert finished_id == request
    assert isinstance(stats, GenerationStats)
    text = "".join(chunk.answer for chunk in received)
    assert text.split()[:5] == ["1", "2", "3", "4", "5"]
    assert sum(len(chunk.token_ids) for chunk in received) == stats.generated_tokens


def test_cancel_through_thread(qtbot: QtBot, engine_thread: EngineThread) -> None:
    _load(qtbot, engine_thread, demo_model_dir())
    engine_thread.started.connect(lambda rid: engine_thread.cancel(rid))
    with qtbot.waitSignal(engine_thread.finished, timeout=120_000) as blocker:
        engine_thread.generate(COUNTING, GenerationSettings(max_new_tokens=500))
    stats = blocker.args[1]
    assert stats.finish_reason == "cancelled"
    assert stats.generated_tokens < 500


def test_errors_arrive_as_signals(
    qtbot: QtBot, engine_thread: EngineThread, tmp_path: Path
) -> None:
    with qtbot.waitSignal(engine_thread.load_failed, timeout=60_000) as blocker:
        engine_thread.load(tmp_path / "missing")
    error = blocker.args[0]
    assert isinstance(error, EngineError) and error.code == "MODEL_NOT_FOUND"
    with qtbot.waitSignal(engine_thread.failed, timeout=60_000) as blocker:
        engine_thread.generate(COUNTING, GenerationSettings())
    assert blocker.args[1].code == "NOT_LOADED"


def test_requests_are_serialized(qtbot: QtBot, engine_thread: EngineThread) -> None:
    _load(qtbot, engine_thread, demo_model_dir())
    order: list[int] = []
    engine_thread.finished.connect(lambda rid, stats: order.append(rid))
    first = engine_thread.generate(COUNTING, GenerationSettings(max_new_tokens=20))
    second = engine_thread.generate(COUNTING, GenerationSettings(max_new_tokens=20))
    qtbot.waitUntil(lambda: len(order) == 2, timeout=120_000)
    assert order == [first, second]
