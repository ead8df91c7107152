"""HostedEngine: the Engine interface with the engine in a host process that is restarted."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, Message
from qwen_mtp_desktop.core.hosting.client import HostedEngine
from qwen_mtp_desktop.core.hosting.process import MAX_DEATHS_IN_A_ROW

pytestmark = pytest.mark.subprocess

COUNTING = [Message("user", "Count from 1 to 40.")]


def test_it_answers_like_the_engine_and_survives_a_crash(demo_model: Path) -> None:
    stopped: list[str] = []
    engine = HostedEngine(on_stopped=stopped.append)
    try:
        loaded = engine.load(demo_model)
        assert loaded.mtp and engine.require_loaded() == loaded
        generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=20))
        stats = generation.run_to_end()
        assert generation.answer.split()[:3] == ["1", "2", "3"]
        assert stats.generated_tokens == 20 == len(generation.token_ids)

        long = engine.generate(COUNTING, GenerationSettings(max_new_tokens=3000, ignore_eos=True))
        first = long.next_chunk(timeout=60)
        assert first is not None
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGSEGV)
        with pytest.raises(EngineError) as failed:
            long.run_to_end()
        assert failed.value.code == "ENGINE_STOPPED" and "SIGSEGV" in failed.value.message
        assert stopped and "restarting and reloading the model" in stopped[0]
        # The next request waits behind the reload in the new engine process.
        again = engine.generate(COUNTING, GenerationSettings(max_new_tokens=10))
        assert again.run_to_end().generated_tokens == 10
        assert engine.pid not in (None, pid) and engine.restarts == 1
        assert engine.loaded is not None
    finally:
        assert engine.close()
    assert engine.pid is None


def test_an_engine_that_keeps_dying_is_left_stopped(demo_model: Path) -> None:
    crashing = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    stopped: list[str] = []
    engine = HostedEngine(crashing, on_stopped=stopped.append)
    with pytest.raises(EngineError) as failed:
        engine.load(demo_model)
    assert failed.value.code == "ENGINE_STOPPED"
    # Deaths: the first start, then restarts until the policy gives up; nothing loops.
    import time

    deadline = time.monotonic() + 30
    while len(stopped) < MAX_DEATHS_IN_A_ROW and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert len(stopped) == MAX_DEATHS_IN_A_ROW
    assert "not restarted" in stopped[-1]
    with pytest.raises(EngineError) as refused:
        engine.generate(COUNTING, GenerationSettings())
    assert refused.value.code == "ENGINE_STOPPED"
    engine.close()
