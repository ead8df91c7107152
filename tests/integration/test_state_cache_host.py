"""The kept conversation states through the real engine host process: each answer's
`reused_tokens` crosses the protocol and is stored with the answer; the new StateCacheQuery
request reports what is held; an unload, a reload or an engine restart drops it."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.engine import GenerationSettings, LoadOptions, Message
from qwen_mtp_desktop.core.hosting.client import HostedEngine
from qwen_mtp_desktop.ui.chat.transcript.message import format_stats

pytestmark = pytest.mark.subprocess

FIRST = [Message("user", "Count from 1 to 20.")]
SETTINGS = GenerationSettings(max_new_tokens=12)


def test_reused_tokens_and_the_cache_report_cross_the_host(
    demo_model: Path, tmp_path: Path
) -> None:
    engine = HostedEngine()
    try:
        engine.load(demo_model)
        assert engine.state_cache_report() is not None
        empty = engine.state_cache_report()
        assert empty is not None and empty.sequences == 0 and empty.tokens == 0
        first = engine.generate(FIRST, SETTINGS)
        first_stats = first.run_to_end()
        assert first_stats.reused_tokens == 0
        follow_up = [*FIRST, Message("assistant", first.answer), Message("user", "Again.")]
        second = engine.generate(follow_up, SETTINGS)
        stats = second.run_to_end()
        # The first turn's prompt (at least) was kept and reused: only the rest was prefilled.
        assert 0 < stats.reused_tokens < stats.prompt_tokens
        assert stats.reused_tokens >= first_stats.prompt_tokens - 8
        held = engine.state_cache_report()
        assert held is not None
        assert held.sequences >= 1 and held.tokens > 0 and 0 < held.bytes <= held.budget_bytes
        assert held.turns >= 2 and held.reused_turns >= 1

        # Stored with the answer and read back; the stats line says it.
        with ChatStore(tmp_path / "chats.db") as store:
            chat = store.create_conversation("t")
            answer = store.begin_assistant_message(chat.id)
            store.finish_message(answer.id, stats, model="demo")
            (kept,) = store.messages(chat.id)
        assert kept.stats is not None and kept.stats["reused_tokens"] == stats.reused_tokens
        line = format_stats(kept.stats).replace("\u00a0", " ")
        assert f"{stats.reused_tokens:,} of {stats.prompt_tokens:,} prompt tokens reused" in line

        # Eject drops it; a reload starts empty.
        engine.unload()
        assert engine.state_cache_report() is None
        engine.load(demo_model)
        again = engine.state_cache_report()
        assert again is not None and again.sequences == 0 and again.tokens == 0
        engine.generate(FIRST, SETTINGS).run_to_end()
        assert (engine.state_cache_report() or again).tokens > 0

        # A model loaded with a zero budget keeps nothing.
        engine.load(demo_model, LoadOptions(state_cache_bytes=0))
        engine.generate(FIRST, SETTINGS).run_to_end()
        reused = engine.generate(follow_up, SETTINGS).run_to_end().reused_tokens
        zero = engine.state_cache_report()
        assert zero is not None and zero.budget_bytes == 0 and zero.tokens == 0
        assert reused == 0

        # An engine restart (the process killed) comes back with nothing kept.
        engine.load(demo_model)
        engine.generate(FIRST, SETTINGS).run_to_end()
        pid = engine.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while (engine.pid in (None, pid) or engine.loaded is None) and time.monotonic() < deadline:
            time.sleep(0.1)
        after = engine.state_cache_report()
        assert after is not None and after.tokens == 0 and after.sequences == 0
    finally:
        assert engine.close()
