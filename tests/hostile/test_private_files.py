"""Class 15 (issue 29): conversations, their database's WAL and shared-memory files, logs and
settings are owner-only on POSIX, and a start tightens what an older version left readable.

Hypothesis builds the state an older version (or a careless copy) leaves in the app's folders:
the chat database with WAL and SHM files, rotated logs, settings, a crash dump, reports in a
sub-folder, damaged-file backups, each with a drawn mode (0644, 0666, 0640, 0604, 0600, 0400)
and folders drawn 0755, 0775 or 0700; plus what must not be touched: a link to the user's own
files, a link to a folder of theirs, a FIFO, and an export in the models folder. Then the start
sequence runs (`app_paths().ensure()`, the settings, the logs, the chat store). Properties:
every file and folder of the app is owner-only afterwards, nothing's content changed (the
database still holds every message), the links' targets, the FIFO and the models keep their
modes. A real app start in a fresh profile creates its folders 0700 and every private file
owner-only, the database's WAL and SHM files included, which are checked while the app runs.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO_ROOT
from tests.hostile.conftest import snapshot, touched
from tests.reliability import figures

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")

EXAMPLES = 60
_FILE_MODES = [0o644, 0o666, 0o640, 0o604, 0o600, 0o400]
_DIR_MODES = [0o755, 0o775, 0o700]
#: (folder key, relative path) of the files an older version leaves.
_FILES = [
    ("data", "chats.sqlite3.damaged-20261101-101010"),
    ("data", "recommendations.json"),
    ("data", "reports/2026-11-30-validate.json"),
    ("config", "settings.json"),
    ("config", "remote_endpoints.json"),
    ("logs", "app.log"),
    ("logs", "app.log.1"),
    ("logs", "app.log.2"),
    ("logs", "native-crash.previous.log"),
]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _old_database(path: Path, mode: int) -> None:
    """A real chat database in WAL mode with its -wal and -shm files, as a running older
    version leaves them (copied while a connection holds them)."""
    from qwen_mtp_desktop.core.chat.store.store import ChatStore

    scratch = path.parent / ".scratch"
    scratch.mkdir()
    with ChatStore(scratch / "chats.sqlite3") as store:
        conversation = store.create_conversation("kept")
        store.add_message(conversation.id, "user", "my private question")
        store.add_message(conversation.id, "assistant", "the answer")
        for suffix in ("", "-wal", "-shm"):
            source = scratch / f"chats.sqlite3{suffix}"
            if source.exists():
                shutil.copyfile(source, path.with_name(path.name + suffix))
                path.with_name(path.name + suffix).chmod(mode)
    shutil.rmtree(scratch)


def _reset_logging() -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_qwen_mtp_desktop", False):
            root.removeHandler(handler)
            handler.close()


class TestPrivateFiles:
    def test_a_start_tightens_what_was_left_readable_and_keeps_it(
        self, tmp_path: Path, decoy: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from qwen_mtp_desktop.core.chat.store.store import ChatStore
        from qwen_mtp_desktop.core.files.paths import app_paths
        from qwen_mtp_desktop.core.settings.store import SettingsStore
        from qwen_mtp_desktop.core.system.logs import setup_logging

        decoy_modes = {p: _mode(p) for p in decoy.rglob("*")}
        before = snapshot(decoy)
        counts = {"tried": 0, "tightened": 0}

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            file_modes=st.lists(
                st.sampled_from(_FILE_MODES), min_size=len(_FILES) + 1, max_size=len(_FILES) + 1
            ),
            dir_modes=st.lists(st.sampled_from(_DIR_MODES), min_size=4, max_size=4),
            hostile=st.sets(st.sampled_from(["file_link", "folder_link", "fifo", "models"])),
        )
        def case(file_modes: list[int], dir_modes: list[int], hostile: set[str]) -> None:
            counts["tried"] += 1
            home = tmp_path / f"home-{counts['tried']}"
            monkeypatch.setenv("QWEN_MTP_DESKTOP_HOME", str(home))
            paths = app_paths()
            folders = {"data": paths.data_dir, "config": paths.config_dir,
                       "cache": paths.cache_dir, "logs": paths.log_dir}  # fmt: skip
            for folder in folders.values():
                folder.mkdir(parents=True)
            for (key, name), mode in zip(_FILES, file_modes, strict=False):
                path = folders[key] / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{name} content\n" if name != "settings.json" else "{}")
                path.chmod(mode)
            _old_database(paths.chats_db, file_modes[-1])
            for folder, mode in zip(folders.values(), dir_modes, strict=True):
                folder.chmod(mode)
            (paths.data_dir / "reports").chmod(dir_modes[0])
            kept: dict[Path, int] = {}
            if "file_link" in hostile:
                (paths.data_dir / "thesis-link.txt").symlink_to(decoy / "Documents" / "thesis.txt")
            if "folder_link" in hostile:
                (paths.log_dir / "pictures").symlink_to(decoy / "Pictures")
            if "fifo" in hostile:
                os.mkfifo(paths.data_dir / "pipe", 0o644)
                kept[paths.data_dir / "pipe"] = 0o644
            if "models" in hostile:
                export = paths.default_models_dir / "my-export"
                export.mkdir(parents=True)
                (export / "openvino_language_model.bin").write_bytes(b"weights")
                (export / "openvino_language_model.bin").chmod(0o644)
                export.chmod(0o755)
                kept[export] = 0o755
                kept[export / "openvino_language_model.bin"] = 0o644
            contents = {
                p: _sha(p)
                for p in home.rglob("*")
                if p.is_file() and not p.is_symlink() and "chats.sqlite3" not in p.name
                and p.name != "app.log"
            }  # fmt: skip

            # The start sequence of app.run_gui, then the chat store the window opens.
            started = app_paths().ensure()
            SettingsStore(started.settings_file)
            try:
                setup_logging(started.log_file)
                logging.getLogger("hostile").info("a start")
            finally:
                _reset_logging()
            with ChatStore(started.chats_db) as store:
                (conversation,) = store.list_conversations()
                texts = [m.content for m in store.messages(conversation.id)]
                assert texts == ["my private question", "the answer"]
                store.add_message(conversation.id, "user", "after the start")
                wal = started.chats_db.with_name("chats.sqlite3-wal")
                assert wal.exists() and not _mode(wal) & 0o077, oct(_mode(wal))

            for path, digest in contents.items():
                assert _sha(path) == digest, f"{path} changed"
            models = paths.default_models_dir
            for path in [home, *home.rglob("*")]:
                if path.is_symlink() or path in kept or models in path.parents:
                    continue
                if path == models or not (path.is_file() or path.is_dir()):
                    continue
                if path == home:
                    continue  # the user's QWEN_MTP_DESKTOP_HOME itself is theirs
                assert not _mode(path) & 0o077, f"{path} is {oct(_mode(path))}"
            for path, mode in kept.items():
                assert _mode(path) == mode, f"{path} changed to {oct(_mode(path))}"
            counts["tightened"] += sum(1 for m in file_modes if m & 0o077)

        case()
        assert {p: _mode(p) for p in decoy.rglob("*")} == decoy_modes
        files_touched = touched(before, snapshot(decoy))
        assert files_touched == 0
        assert counts["tried"] >= EXAMPLES * 0.9 and counts["tightened"] > 0
        figures.record(
            "hostile",
            private_files_inputs=counts["tried"],
            private_files_tightened=counts["tightened"],
            private_files_touched=files_touched,
        )

    @pytest.mark.subprocess
    def test_a_real_start_creates_everything_owner_only(self, tmp_path: Path) -> None:
        home = tmp_path / "profile"
        env = {
            **os.environ,
            "QWEN_MTP_DESKTOP_HOME": str(home),
            "QT_QPA_PLATFORM": "offscreen",
            "PYTHONPATH": str(REPO_ROOT),
        }
        app = subprocess.Popen(
            [sys.executable, "-m", "qwen_mtp_desktop", "--quit-after-ms", "8000"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen: dict[str, int] = {}
        try:
            deadline = time.monotonic() + 60
            while app.poll() is None and time.monotonic() < deadline:
                for path in home.rglob("*"):
                    if path.is_file() and not path.is_symlink():
                        seen[path.relative_to(home).as_posix()] = _mode(path)
                time.sleep(0.05)
            _out, err = app.communicate(timeout=60)
        finally:
            if app.poll() is None:
                app.kill()
        assert app.returncode == 0, err[-3000:]
        assert "Traceback" not in err
        for name in ("data/chats.sqlite3", "data/chats.sqlite3-wal", "data/chats.sqlite3-shm",
                     "logs/app.log"):  # fmt: skip
            assert name in seen, (name, sorted(seen))
        # Not private, and inside 0700 folders anyway: OpenVINO's compiled-model cache and
        # the single-instance lock (a process id).
        private = {
            n: m for n, m in seen.items() if not n.startswith("cache/") and n != "data/app.lock"
        }
        loose = {name: oct(mode) for name, mode in private.items() if mode & 0o077}
        assert not loose, loose
        for folder in ("data", "config", "cache", "logs"):
            assert _mode(home / folder) == 0o700, folder
        figures.record("hostile", private_files_seen_at_start=len(private))
