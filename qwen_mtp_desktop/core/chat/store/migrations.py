"""The chat database schema: versioned migrations and the optional FTS5 search index."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable

Migration = Callable[[sqlite3.Connection], None]


def _migration_1_initial(conn: sqlite3.Connection) -> None:
    # AUTOINCREMENT so a deleted id is never handed out again: undo restores ids verbatim.
    conn.execute(
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            model_dir TEXT,
            system_prompt TEXT NOT NULL DEFAULT '',
            settings_json TEXT NOT NULL DEFAULT '{}'
        )
        """
    )
    conn.execute("CREATE INDEX conversations_by_update ON conversations (updated_at, id)")
    conn.execute(
        """
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL
                REFERENCES conversations (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            content TEXT NOT NULL DEFAULT '',
            reasoning TEXT NOT NULL DEFAULT '',
            image_path TEXT,
            created_at REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'complete'
                CHECK (status IN ('complete', 'streaming', 'incomplete', 'error')),
            error TEXT,
            stats_json TEXT,
            UNIQUE (conversation_id, position)
        )
        """
    )
    # Partial index: the crash-recovery scan on open touches only streaming rows.
    conn.execute("CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming'")


_MESSAGE_COLUMNS = (
    "id, conversation_id, position, role, content, reasoning, image_path, created_at, status, "
    "error, stats_json"
)


def _migration_2_versions(conn: sqlite3.Connection) -> None:
    """Versions of a message (regenerate, edit): messages form a tree.

    `parent_id` is the message a message follows (NULL for a chat's first one); the children of
    one message are the versions of the next one. `selected` marks the version chosen among its
    siblings; `shown` marks the rows on the branch the chat shows (the selected path from the
    root), kept by the store so reads stay plain `WHERE shown = 1`. Positions of versions are
    equal, so the old UNIQUE (conversation_id, position) goes: SQLite drops a constraint only by
    rebuilding the table. Existing chats become one straight branch, every row shown.
    """
    sequence = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    conn.execute(
        """
        CREATE TABLE messages_v2 (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL
                REFERENCES conversations (id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
            content TEXT NOT NULL DEFAULT '',
            reasoning TEXT NOT NULL DEFAULT '',
            image_path TEXT,
            created_at REAL NOT NULL,
            status TEXT NOT NULL DEFAULT 'complete'
                CHECK (status IN ('complete', 'streaming', 'incomplete', 'error')),
            error TEXT,
            stats_json TEXT,
            parent_id INTEGER,
            selected INTEGER NOT NULL DEFAULT 1 CHECK (selected IN (0, 1)),
            shown INTEGER NOT NULL DEFAULT 1 CHECK (shown IN (0, 1))
        )
        """
    )
    conn.execute(
        f"""
        INSERT INTO messages_v2 ({_MESSAGE_COLUMNS}, parent_id, selected, shown)
        SELECT {_MESSAGE_COLUMNS},
            (SELECT p.id FROM messages AS p
             WHERE p.conversation_id = m.conversation_id AND p.position < m.position
             ORDER BY p.position DESC LIMIT 1),
            1, 1
        FROM messages AS m
        """
    )
    # Dropping the table drops its search triggers; the store re-creates them on open and
    # rebuilds the index from the new table.
    conn.execute("DROP TABLE messages")
    conn.execute("ALTER TABLE messages_v2 RENAME TO messages")
    if sequence is not None:
        # AUTOINCREMENT's high-water mark survives: a deleted id is still never reused.
        conn.execute(
            "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'messages'", (sequence[0],)
        )
        if conn.execute("SELECT changes()").fetchone()[0] == 0:
            conn.execute(
                "INSERT INTO sqlite_sequence (name, seq) VALUES ('messages', ?)", (sequence[0],)
            )
    conn.execute("CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming'")
    conn.execute("CREATE INDEX messages_by_parent ON messages (conversation_id, parent_id)")
    conn.execute("CREATE INDEX messages_shown ON messages (conversation_id, shown, position)")


def _migration_3_pinned(conn: sqlite3.Connection) -> None:
    """Pinned chats stay at the top of the chat list. A column with a default: SQLite adds it
    without rewriting the table, and every existing chat starts unpinned."""
    conn.execute(
        "ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0 "
        "CHECK (pinned IN (0, 1))"
    )
    conn.execute("CREATE INDEX conversations_by_pin ON conversations (pinned, updated_at, id)")


#: MIGRATIONS[i] upgrades the schema from version i to i + 1. Append; never edit a shipped one.
MIGRATIONS: list[Migration] = [_migration_1_initial, _migration_2_versions, _migration_3_pinned]

SCHEMA_VERSION = len(MIGRATIONS)


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def detect_version(conn: sqlite3.Connection) -> int:
    """The schema version the file's tables show, for a file whose `user_version` is damaged
    (negative: no app writes that). Each migration leaves a mark read here; a migration
    appended to MIGRATIONS adds its mark first."""
    conversations = _columns(conn, "conversations")
    if not conversations:
        return 0
    if "pinned" in conversations:
        return 3
    return 2 if "parent_id" in _columns(conn, "messages") else 1


FTS_TABLES = ("conversations_fts", "messages_fts")


# The search index (created on open when FTS5 with the trigram tokenizer is available).
# External-content tables: the text lives once, in the base tables; triggers keep the index in step.
FTS_OBJECTS = (
    """CREATE VIRTUAL TABLE IF NOT EXISTS conversations_fts USING fts5(
        title, content='conversations', content_rowid='id', tokenize='trigram')""",
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
        content, content='messages', content_rowid='id', tokenize='trigram')""",
    """CREATE TRIGGER IF NOT EXISTS conversations_fts_ai AFTER INSERT ON conversations BEGIN
        INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title); END""",
    """CREATE TRIGGER IF NOT EXISTS conversations_fts_ad AFTER DELETE ON conversations BEGIN
        INSERT INTO conversations_fts (conversations_fts, rowid, title)
        VALUES ('delete', old.id, old.title); END""",
    """CREATE TRIGGER IF NOT EXISTS conversations_fts_au AFTER UPDATE OF title ON conversations
        BEGIN
        INSERT INTO conversations_fts (conversations_fts, rowid, title)
        VALUES ('delete', old.id, old.title);
        INSERT INTO conversations_fts (rowid, title) VALUES (new.id, new.title); END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_ai AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content); END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_ad AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content); END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_au AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
        INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content); END""",
)

FTS_TRIGGERS = (
    "conversations_fts_ai",
    "conversations_fts_ad",
    "conversations_fts_au",
    "messages_fts_ai",
    "messages_fts_ad",
    "messages_fts_au",
)


def fts5_trigram_available() -> bool:
    """Whether this SQLite build can create an FTS5 table with the trigram tokenizer (3.34+)."""
    if sqlite3.sqlite_version_info < (3, 34, 0):
        return False
    try:
        with contextlib.closing(sqlite3.connect(":memory:")) as probe:
            probe.execute("CREATE VIRTUAL TABLE temp.probe USING fts5(x, tokenize='trigram')")
    except sqlite3.Error:
        return False
    return True
