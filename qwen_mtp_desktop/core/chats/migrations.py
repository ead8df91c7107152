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


#: MIGRATIONS[i] upgrades the schema from version i to i + 1. Append; never edit a shipped one.
MIGRATIONS: list[Migration] = [_migration_1_initial]

SCHEMA_VERSION = len(MIGRATIONS)


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
