"""The chat database file: open it, detect damage and set a damaged file aside, refuse a
schema from a newer app, run the migrations, and fit the search index to this SQLite build.

A file that is not a database, or fails `PRAGMA quick_check`, is moved aside to
`<name>.damaged-<timestamp>` and an empty database is started, which `OpenedDatabase.notice`
says in plain words. Answers found still "streaming" (the app died mid-answer) are marked
"incomplete" with their partial text kept.

Damage that loses nothing is repaired in place and said in the notice (issue 45): a schema
number no app writes (a negative `user_version`) is read from the tables the file holds, and a
search index that is missing or unreadable is rebuilt from the chats (it is derived data).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.chat.store import migrations
from qwen_mtp_desktop.core.chat.store.records import ChatStoreError, SearchBackend
from qwen_mtp_desktop.core.chat.store.repair import repair
from qwen_mtp_desktop.core.files.private_files import (
    PRIVATE_DIR_MODE,
    create_private_file,
    make_private,
)

log = logging.getLogger(__name__)

BUSY_TIMEOUT_S = 10.0


@dataclass
class OpenedDatabase:
    conn: sqlite3.Connection
    search_backend: SearchBackend
    #: Answers found still "streaming" (the app died) and marked incomplete.
    recovered_messages: int
    #: A plain-language message when the file was damaged and set aside, or when damaged rows
    #: were found (core.chat.store.repair), else None.
    notice: str | None = None
    #: The notice's title: what happened to the history.
    notice_title: str = "Chat history was repaired"


class _DamagedDatabaseError(Exception):
    pass


def _is_damage(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in (
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
    )


def open_database(path: Path) -> OpenedDatabase:
    """The database at `path`, migrated to this app's schema (a damaged one set aside)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    # Conversations are private: the file is created owner-only (SQLite gives its -wal and
    # -shm files the same mode), and one an older version left readable is tightened.
    create_private_file(path)
    for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        make_private(part)
    try:
        return _connect(path)
    except (sqlite3.Error, _DamagedDatabaseError) as exc:
        if isinstance(exc, sqlite3.Error) and not _is_damage(exc):
            raise ChatStoreError(
                f"The chat history at {path} could not be opened ({exc}).",
                "Check that the folder is writable and that no other program locks it.",
                code="CHATS_UNAVAILABLE",
            ) from exc
        backup = _move_aside(path)
        if backup is None:
            raise ChatStoreError(
                f"The chat history at {path} is damaged ({exc}) and could not be moved aside.",
                "Move or delete the file by hand, then restart the app.",
                code="CHATS_DAMAGED",
            ) from exc
        log.warning("chat store %s is damaged (%s); starting an empty one", path, exc)
        create_private_file(path)
        opened = _connect(path)
        opened.notice = (
            f"Your chat history could not be read ({exc}). It was kept as {backup}. "
            "The app started with an empty chat history."
        )
        opened.notice_title = "Chat history was reset"
        return opened


def _connect(path: Path) -> OpenedDatabase:
    # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in ChatStore._write).
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
    )
    try:
        conn.row_factory = sqlite3.Row
        # Text that is not UTF-8 (a damaged or crafted file) reads with U+FFFD instead of
        # failing every query that touches the row.
        conn.text_factory = _lenient_text
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        needs_reindex = _check_structure(conn)
        _refuse_newer_schema(conn, path)  # before anything writes to the file
        notices = [_repair_schema_version(conn)]
        if needs_reindex:  # indexes are derived data: rebuilt, nothing lost
            conn.execute("REINDEX")
            if _check_structure(conn):
                raise _DamagedDatabaseError("its indexes cannot be rebuilt")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. some network file systems
            log.warning("chat store could not use WAL mode (got %s)", mode)
        # NORMAL is durable against app crashes in WAL mode; only power loss can drop the
        # last commits, and it spares an fsync per streamed batch.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn)
        report = repair(conn, path)  # tampered rows: repaired or read with stand-ins
        backend, search_notice = _set_up_search(conn)
        notices += [report.notice(), search_notice]
        recovered = conn.execute(
            "UPDATE messages SET status = 'incomplete' WHERE status = 'streaming'"
        ).rowcount
        if recovered:
            log.info("marked %d interrupted answer(s) incomplete", recovered)
    except BaseException:
        conn.close()
        raise
    notice = " ".join(n for n in notices if n) or None
    return OpenedDatabase(conn, backend, recovered, notice)


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


#: quick_check lines that are about rows, not the file: NOT NULL and CHECK constraints a
#: crafted file breaks (core.chat.store.repair fixes those rows), and indexes out of step with
#: their table (REINDEX rebuilds them).
_ROW_PROBLEMS = ("CHECK constraint failed", "NULL value in ")
_INDEX_PROBLEMS = ("missing from index", "wrong # of entries in index", "non-unique entry in")


def _check_structure(conn: sqlite3.Connection) -> bool:
    """PRAGMA quick_check, read: _DamagedDatabaseError when the file itself is damaged (the
    caller sets it aside); True when only indexes need rebuilding."""
    check = [str(row[0]) for row in conn.execute("PRAGMA quick_check")]
    if check == ["ok"]:
        return False
    serious = [
        line
        for line in check
        if not line.startswith(_ROW_PROBLEMS) and not any(p in line for p in _INDEX_PROBLEMS)
    ]
    if serious:
        # quick_check's report spans lines; the notice wants one.
        raise _DamagedDatabaseError(" ".join(" ".join(serious[:3]).split()))
    return any(any(p in line for p in _INDEX_PROBLEMS) for line in check)


def _refuse_newer_schema(conn: sqlite3.Connection, path: Path) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    known = len(migrations.MIGRATIONS)
    if version > known:
        raise ChatStoreError(
            f"The chat history at {path} was written by a newer version of the app "
            f"(schema {version}; this version knows {known}).",
            "Update the app to open it. The file was left untouched.",
            code="CHATS_TOO_NEW",
        )


def _repair_schema_version(conn: sqlite3.Connection) -> str | None:
    """A negative schema number (no app writes one; the migrations would index MIGRATIONS
    with it) set from the tables the file holds; the notice says so, else None."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version >= 0:
        return None
    found = migrations.detect_version(conn)
    conn.execute(f"PRAGMA user_version = {int(found)}")
    log.warning("chat store schema number %d is damaged; set to %d from its tables", version, found)
    return (
        f"The chat history's schema number was damaged ({version}); it was set to {found} "
        "from the tables the file holds. No chat was changed."
    )


def _migrate(conn: sqlite3.Connection) -> None:
    steps = migrations.MIGRATIONS  # read at open time, so tests can append a migration
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    for target in range(version + 1, len(steps) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            steps[target - 1](conn)
            conn.execute(f"PRAGMA user_version = {target}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        log.info("chat store schema upgraded to version %d", target)


def _search_index_readable(conn: sqlite3.Connection) -> bool:
    """Whether both FTS tables exist and open (a crafted or half-copied file can lack one, or
    its shadow tables: then every write's trigger and every search failed)."""
    present = {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if not all(name in present for name in migrations.FTS_TABLES):
        return False
    try:
        for name in migrations.FTS_TABLES:
            conn.execute(f"SELECT rowid FROM {name} LIMIT 1").fetchall()
    except sqlite3.Error:
        return False
    return True


def _drop_search_index(conn: sqlite3.Connection) -> None:
    """The triggers and FTS tables gone (a damaged FTS table may refuse DROP: then it is
    left, and rebuilding it fails, which the caller turns into LIKE search)."""
    for name in migrations.FTS_TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    for name in migrations.FTS_TABLES:
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"DROP TABLE IF EXISTS {name}")


def _set_up_search(conn: sqlite3.Connection) -> tuple[SearchBackend, str | None]:
    """The search backend, and a notice when a damaged index was rebuilt or given up."""
    present = {
        str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
    }
    has_triggers = all(name in present for name in migrations.FTS_TRIGGERS)
    if not migrations.fts5_trigram_available():
        # Without FTS5 the triggers would make every write fail; drop them. A later build
        # with FTS5 sees them missing and rebuilds the index.
        for name in migrations.FTS_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        return "like", None
    if has_triggers and _search_index_readable(conn):
        return "fts5", None
    backend = rebuild_search_index(conn)
    if not has_triggers and backend == "fts5":
        # A first open, an upgrade (migration 2 drops the messages triggers) or a file from
        # a build without FTS5: the index was due, nothing to say.
        return backend, None
    log.warning("chat search index was missing or damaged; rebuilt as %s", backend)
    if backend == "fts5":
        return backend, "The chat search index was missing or damaged and was rebuilt."
    return backend, (
        "The chat search index is damaged and could not be rebuilt; search still works, more "
        "slowly. No chat was changed."
    )


def rebuild_search_index(conn: sqlite3.Connection) -> SearchBackend:
    """Make the FTS index again from the chats ("fts5"); "like" when it cannot be (the
    triggers are then gone, so writes work and search reads the tables). The chats' own
    rows are never touched: the index is derived data. Runs its own transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        _drop_search_index(conn)
        for statement in migrations.FTS_OBJECTS:
            conn.execute(statement)
        # Rows written without the triggers (older build, fresh upgrade) get indexed.
        conn.execute("INSERT INTO conversations_fts (conversations_fts) VALUES ('rebuild')")
        conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        log.warning("chat search index could not be rebuilt (%s); using LIKE search", exc)
        for name in migrations.FTS_TRIGGERS:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        return "like"
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return "fts5"


def _move_aside(path: Path) -> Path | None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.damaged-{stamp}")
    counter = 1
    while backup.exists():
        counter += 1
        backup = path.with_name(f"{path.name}.damaged-{stamp}-{counter}")
    try:
        path.replace(backup)
    except OSError:
        return None
    for suffix in ("-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        with contextlib.suppress(OSError):
            if side.exists():
                side.replace(backup.with_name(backup.name + suffix))
    return backup
