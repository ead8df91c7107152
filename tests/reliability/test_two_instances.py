"""Item 5: two app instances. A second start brings the first forward and exits; two processes
writing the same chat database lose nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.ui.single_instance import SingleInstance, server_name
from tests.conftest import REPO_ROOT
from tests.reliability import figures

pytestmark = pytest.mark.gui


def test_second_instance_activates_the_first(qtbot: QtBot, tmp_path: Path) -> None:
    first = SingleInstance(tmp_path)
    assert first.claim() and first.primary
    with qtbot.waitSignal(first.activated, timeout=5000):
        second = SingleInstance(tmp_path)
        assert not second.claim()
        assert not second.primary
    first.release()
    # Once the first is gone, the next start is the primary again.
    third = SingleInstance(tmp_path)
    assert third.claim()
    third.release()


def test_profiles_do_not_share_an_instance(tmp_path: Path) -> None:
    assert server_name(tmp_path / "a") != server_name(tmp_path / "b")
    a, b = SingleInstance(tmp_path / "a"), SingleInstance(tmp_path / "b")
    assert a.claim() and b.claim()
    a.release()
    b.release()


def _start_app(extra: list[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", *(extra or [])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        cwd=REPO_ROOT,
    )


def _log_text() -> str:
    log = app_paths().log_file
    return log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""


def _wait_for(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.subprocess
def test_real_app_second_start_focuses_the_first_and_survives_a_crashed_one() -> None:
    paths = app_paths().ensure()
    lock = paths.data_dir / "app.lock"
    first = _start_app()
    try:
        assert _wait_for(lambda: lock.exists() and "starting" in _log_text(), 60)
        time.sleep(1.0)  # let the first reach its event loop
        started = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "qwen_mtp_desktop"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
            cwd=REPO_ROOT,
        )
        second_s = time.monotonic() - started
        assert second.returncode == 0, second.stderr[-2000:]
        assert "Traceback" not in second.stderr
        assert _wait_for(lambda: "asked this window to come forward" in _log_text(), 10)
        assert "already running" in _log_text()
        assert first.poll() is None, "the first instance must keep running"
        # The first one crashes (SIGKILL leaves its lock file and socket behind) ...
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        # ... and the next start is a normal one, not a "focus the dead one" exit.
        again = _start_app(["--quit-after-ms", "1500"])
        assert again.wait(timeout=90) == 0
        assert _log_text().count("already running") == 1
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    figures.record("two_instances", second_start_exit_s=round(second_s, 2), focus_request="ok")


WRITER = """
import sys, time
from pathlib import Path
from qwen_mtp_desktop.core.chat.store.store import ChatStore

db, name, count, go = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
store = ChatStore(db)
print("open", flush=True)
while not go.exists():
    time.sleep(0.01)
conversation = store.create_conversation(name)
for i in range(count):
    store.add_message(conversation.id, "user", f"{name} question {i}")
    answer = store.begin_assistant_message(conversation.id)
    for part in range(3):
        store.append_to_message(answer.id, f"{name}-{i}-{part} ")
    store.finish_message(answer.id, {"mode": "mtp", "finish_reason": "eos"})
store.close()
print("done", conversation.id, flush=True)
"""


@pytest.mark.subprocess
def test_two_processes_writing_one_database_lose_nothing(tmp_path: Path) -> None:
    database = tmp_path / "chats.sqlite3"
    ChatStore(database).close()
    go = tmp_path / "go"
    count = 150
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(database), name, str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in ("alpha", "beta")
    ]
    for writer in writers:  # both have the file open before either writes
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "open"
    started = time.monotonic()
    go.touch()
    conversations = []
    for writer in writers:
        out, err = writer.communicate(timeout=240)
        assert writer.returncode == 0, err[-2000:]
        conversations.append(int(out.split()[-1]))
    elapsed = time.monotonic() - started
    with ChatStore(database) as store:
        assert store.recovered_messages == 0
        for name, conversation in zip(("alpha", "beta"), conversations, strict=True):
            messages = store.messages(conversation)
            assert len(messages) == 2 * count
            for i in range(count):
                user, answer = messages[2 * i], messages[2 * i + 1]
                assert user.content == f"{name} question {i}"
                assert answer.content == "".join(f"{name}-{i}-{p} " for p in range(3))
                assert answer.status == "complete"
    figures.record(
        "two_instances",
        concurrent_writers=2,
        writes_per_writer=count * 6,
        lost_writes=0,
        concurrent_write_s=round(elapsed, 1),
    )
