"""Item 4: a damaged settings file or chat database is detected, kept aside, and the app starts
with defaults and says so in its window."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import Settings, SettingsStore, load_settings
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.reliability import figures

pytestmark = pytest.mark.gui

DAMAGED_SETTINGS = (
    b'{"device": "GPU", "model_fol',  # cut off mid-write
    b"\x00\x00\x00\x00\x00\x00",  # zeroed blocks after a power cut
    b"[1, 2, 3]\n",  # valid JSON, wrong shape
    b'{"device": 5}',  # wrong type
    b'\xff\xfe{"device": "CPU"}',  # wrong encoding
)


def _shown_messages(qtbot: QtBot) -> tuple[list[str], Callable[[], None]]:
    """Texts of every message box the app opens (modal or not); boxes are closed once read."""
    seen: list[str] = []

    def poll() -> None:
        for widget in QApplication.topLevelWidgets():
            if isinstance(widget, QMessageBox) and widget.isVisible():
                seen.append(widget.text())
                widget.done(0)

    timer = QTimer()
    timer.setInterval(20)
    timer.timeout.connect(poll)
    timer.start()
    return seen, timer.stop


def _open_window(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.chat.store_ready, timeout=30_000)
    return window


@pytest.mark.subprocess
@pytest.mark.parametrize("content", DAMAGED_SETTINGS, ids=range(len(DAMAGED_SETTINGS)))
def test_damaged_settings_are_kept_aside_and_the_window_says_so(
    qtbot: QtBot, content: bytes
) -> None:
    paths = app_paths().ensure()
    paths.settings_file.write_bytes(content)
    seen, stop = _shown_messages(qtbot)
    window = _open_window(qtbot)
    qtbot.waitUntil(lambda: any("settings" in text for text in seen), timeout=10_000)
    stop()
    notice = next(text for text in seen if "settings" in text)
    assert "default settings" in notice
    backups = list(paths.settings_file.parent.glob(paths.settings_file.name + ".damaged-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == content
    assert str(backups[0]) in notice  # the user is told where the old file went
    assert window.model_dir.name == "openvino"  # defaults: the bundled demo model
    assert not paths.settings_file.exists() or load_settings(paths.settings_file).notice is None
    window.close()
    # Closing saved good settings; the next start is quiet.
    assert load_settings(paths.settings_file) == load_settings(paths.settings_file)
    assert load_settings(paths.settings_file).notice is None
    assert load_settings(paths.settings_file).settings.device == Settings().device


def test_settings_damaged_twice_in_a_second_keeps_both_backups(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    for content in (b"{broken one", b"{broken two"):
        path.write_bytes(content)
        assert load_settings(path).notice is not None
    backups = sorted(p.read_bytes() for p in tmp_path.glob("settings.json.damaged-*"))
    assert backups == [b"{broken one", b"{broken two"]


DAMAGED_DATABASES: dict[str, Callable[[Path], None]] = {
    "garbage": lambda path: path.write_bytes(b"this is not a database" * 100),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[:1500]),
    "zeroed-page": lambda path: path.write_bytes(
        path.read_bytes()[:4096] + b"\x00" * 4096 + path.read_bytes()[8192:]
    ),
    "empty-header": lambda path: path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84),
}


def _seed_database(path: Path) -> None:
    with ChatStore(path) as store:
        for i in range(30):
            conversation = store.create_conversation(f"chat {i}")
            store.add_message(conversation.id, "user", "hello " * 200)
    with sqlite3.connect(path) as conn:  # fold the WAL into the file, then damage the file
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


@pytest.mark.subprocess
@pytest.mark.parametrize("damage", list(DAMAGED_DATABASES))
def test_damaged_database_is_kept_aside_and_the_window_says_so(qtbot: QtBot, damage: str) -> None:
    paths = app_paths().ensure()
    database = paths.data_dir / "chats.sqlite3"
    _seed_database(database)
    DAMAGED_DATABASES[damage](database)
    damaged_bytes = database.read_bytes()
    seen, stop = _shown_messages(qtbot)
    window = _open_window(qtbot)
    qtbot.waitUntil(lambda: any("chat history" in text for text in seen), timeout=10_000)
    stop()
    notice = next(text for text in seen if "chat history" in text)
    assert "empty chat history" in notice
    backups = list(database.parent.glob("chats.sqlite3.damaged-*"))
    backups = [b for b in backups if not b.name.endswith(("-wal", "-shm"))]
    assert len(backups) == 1 and backups[0].read_bytes() == damaged_bytes
    assert str(backups[0]) in notice
    # The app works with the fresh store: a chat can be created and read back.
    assert window.chat.conversations.list.count() == 0
    window.close()
    with ChatStore(database) as store:
        assert store.notice is None
        conversation = store.create_conversation("after")
        assert store.get_conversation(conversation.id).title == "after"
    figures.record("damaged_state", **{f"database_{damage}": "kept aside, notice shown"})


@pytest.mark.subprocess
def test_start_up_with_damaged_files_is_not_blocked_by_a_dialog() -> None:
    """`make run`'s entry point with both files damaged: the notices must not hold start-up
    (a modal box before the event loop would hang `--screenshot` smoke runs for ever)."""
    paths = app_paths().ensure()
    paths.settings_file.write_bytes(b"{oops")
    (paths.data_dir / "chats.sqlite3").write_bytes(b"not a database" * 50)
    shot = paths.cache_dir / "damaged.png"
    result = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.is_file()
    assert "Traceback" not in result.stderr
    assert list(paths.settings_file.parent.glob("settings.json.damaged-*"))
    assert list(paths.data_dir.glob("chats.sqlite3.damaged-*"))
