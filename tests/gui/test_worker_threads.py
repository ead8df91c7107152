"""The worker foundation: every background thread is made in one place, tracked, and stopped."""

from __future__ import annotations

import psutil
import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.core.errors import UserFacingError, as_user_error
from qwen_mtp_desktop.workers.foundation import running_threads
from qwen_mtp_desktop.workers.tasks import TaskRunner
from qwen_mtp_desktop.workers.threads import BackgroundThreads

pytestmark = pytest.mark.gui

APP_THREADS = {
    "chat-store",
    "io",
    "model-library",
    "model-verify",
    "model-deploy",
    "bench-io",
}


@pytest.mark.subprocess
def test_the_apps_threads_are_made_once_and_all_stop(qtbot: QtBot) -> None:
    before = set(map(id, running_threads()))
    threads = BackgroundThreads()
    started = [t for t in running_threads() if id(t) not in before]
    # The benchmark job starts its thread per run, so it is not running yet; the engine runs
    # in its own process, which starts with the threads and stops with them.
    assert sorted(t.objectName() for t in started) == sorted(APP_THREADS)
    # The export queue's thread comes with the Export panel, after the first paint.
    before_export = set(map(id, running_threads()))
    assert threads.exports is threads.exports
    assert [t.objectName() for t in running_threads() if id(t) not in before_export] == ["export"]
    engine_pid = threads.engine_process.pid
    assert engine_pid is not None and threads.engine_process.running

    results: list[int] = []
    threads.store.submit(lambda: 6 * 7, results.append)
    qtbot.waitUntil(lambda: results == [42], timeout=5_000)

    assert threads.shutdown(10_000)
    assert not [t for t in running_threads() if id(t) not in before]
    assert not threads.engine_process.running
    assert not psutil.pid_exists(engine_pid) or (
        psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE
    )


def test_a_runner_reports_errors_and_stops(qtbot: QtBot) -> None:
    runner = TaskRunner("test-runner")
    try:
        assert "test-runner" in [t.objectName() for t in running_threads()]
        errors: list[Exception] = []

        def fail() -> None:
            raise ValueError("broken")

        runner.submit(fail, None, errors.append)
        qtbot.waitUntil(lambda: len(errors) == 1, timeout=5_000)
        assert isinstance(errors[0], ValueError)
    finally:
        assert runner.shutdown(10_000)
    assert "test-runner" not in [t.objectName() for t in running_threads()]


def test_one_error_path_keeps_user_errors_and_wraps_bugs() -> None:
    mine = EngineError("The model folder is gone.", "Pick another.", code="MISSING")
    assert as_user_error(mine, EngineError) is mine
    wrapped = as_user_error(KeyError("x"), EngineError)
    assert isinstance(wrapped, EngineError) and wrapped.code == "INTERNAL"
    assert wrapped.message == "Unexpected error: KeyError: 'x'"
    assert wrapped.fix == "Details are in the log file."
    plain = as_user_error(RuntimeError("boom"), UserFacingError)
    assert type(plain) is UserFacingError and plain.code == "INTERNAL"
