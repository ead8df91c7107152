"""Shared test setup: offscreen Qt, offline hub, a private app home per test, leak guards,
and the tiny Qwen3.5+MTP models (built once, cached under .cache/fixtures by builder version)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

# Before anything imports Qt or transformers.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from qwen_mtp_desktop.core.privacy import block_telemetry

block_telemetry()

REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE_ROOT = Path(os.environ.get("QWEN_MTP_TEST_CACHE", REPO_ROOT / ".cache" / "fixtures"))
SCREENSHOT_DIR = REPO_ROOT / ".cache" / "screenshots"


@pytest.fixture(autouse=True)
def app_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own app home, so no test touches a real profile."""
    home = tmp_path / "app-home"
    monkeypatch.setenv("QWEN_MTP_DESKTOP_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a non-daemon Python thread running."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [
            t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon
        ]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not leaked, f"test leaked running threads: {[t.name for t in leaked]}"


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Fail a test that leaves a child process running (an engine host, a server, an
    exporter): it would outlive the test and fail a later one that counts processes."""
    import psutil

    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 10.0
    while True:
        leaked = []
        for child in me.children(recursive=True):
            try:
                if child.pid not in before and child.status() != psutil.STATUS_ZOMBIE:
                    leaked.append(child)
            except psutil.NoSuchProcess:
                continue
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    described = []
    for child in leaked:  # end them, so one leak does not fail the tests after it
        try:
            described.append(" ".join(child.cmdline()[:4]))
            child.kill()
        except psutil.NoSuchProcess:
            continue
    assert not described, f"test left child processes running: {described}"


@pytest.fixture(autouse=True)
def no_leaked_qthreads() -> Iterator[None]:
    """Fail a test that leaves a worker QThread running (every worker thread is made by
    workers.foundation, which tracks them). Unit tests that never import Qt skip the check."""
    foundation = sys.modules.get("qwen_mtp_desktop.workers.foundation")
    before = {id(t) for t in foundation.running_threads()} if foundation is not None else set()
    yield
    foundation = sys.modules.get("qwen_mtp_desktop.workers.foundation")
    if foundation is None:
        return
    deadline = time.monotonic() + 5.0
    while True:
        leaked = [t for t in foundation.running_threads() if id(t) not in before]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    names = [t.objectName() for t in leaked]
    for thread in leaked:  # stop them, so one leak does not fail the tests after it
        thread.quit()
        thread.wait(10_000)
    assert not leaked, f"test left QThreads running: {names}"


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    return SCREENSHOT_DIR
