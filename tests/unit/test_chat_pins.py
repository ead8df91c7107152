"""Pinned chats in the real SQLite chat store: a version-2 database (before pins) upgrades with
nothing lost, pinned chats head the list whatever their time, pinning keeps a chat's time, and
delete + undo keeps the pin. The chat list's "last used" words."""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.store.migrations import MIGRATIONS
from qwen_mtp_desktop.core.chat.store.records import UnknownConversationError
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.ui.chat.conversations.list import last_used

#: A chat database as version 2 of the schema wrote it (no pinned column).
V2_ROWS = """
INSERT INTO conversations VALUES (3, 'Otters', 10.0, 20.0, '/m', 'be brief', '{"device": "GPU"}');
INSERT INTO conversations VALUES (4, 'Second', 30.0, 40.0, NULL, '', '{}');
INSERT INTO messages VALUES (7, 3, 0, 'user', 'tell me about otters', '', NULL, 11.0, 'complete',
    NULL, NULL, NULL, 1, 1);
INSERT INTO messages VALUES (8, 3, 1, 'assistant', 'Otters swim.', '', NULL, 12.0, 'complete',
    NULL, '{"generated_tokens": 3, "model": "m"}', 7, 1, 1);
INSERT INTO messages VALUES (9, 4, 0, 'user', 'hello', '', NULL, 31.0, 'complete', NULL, NULL,
    NULL, 1, 1);
"""


def _version_2_file(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](conn)
    MIGRATIONS[1](conn)
    conn.execute("PRAGMA user_version = 2")
    conn.executescript(V2_ROWS)
    before = [tuple(r) for r in conn.execute("SELECT * FROM conversations ORDER BY id")]
    conn.close()
    return before


def test_a_version_2_database_upgrades_with_every_chat_unpinned_and_nothing_lost(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.sqlite3"
    before = _version_2_file(path)
    with ChatStore(path) as store:
        with store._read() as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 3
            after = [tuple(r) for r in db.execute("SELECT * FROM conversations ORDER BY id")]
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        # Every old column and value as it was; the new one is 0.
        assert after == [(*row, 0) for row in before]
        assert [s.id for s in store.list_conversations()] == [4, 3]  # newest first, as before
        assert not any(s.pinned for s in store.list_conversations())
        otters = store.get_conversation(3)
        assert (otters.title, otters.system_prompt, otters.settings.device) == (
            "Otters",
            "be brief",
            "GPU",
        )
        assert [m.content for m in store.messages(3)] == ["tell me about otters", "Otters swim."]
        assert [s.id for s in store.list_conversations("otters")] == [3]  # search still finds it
        # Pinning works on the upgraded file and moves the older chat to the top.
        assert store.set_pinned(3, True).pinned
        assert [(s.id, s.pinned) for s in store.list_conversations()] == [(3, True), (4, False)]
    with ChatStore(path) as store:  # and is kept
        assert store.get_conversation(3).pinned


def test_pinned_chats_head_the_list_and_keep_their_time(tmp_path: Path) -> None:
    clock = iter(float(t) for t in range(100, 10_000))
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        store._now = lambda: next(clock)  # type: ignore[method-assign]
        ids = [store.create_conversation(f"chat {n}").id for n in range(5)]
        order = [s.id for s in store.list_conversations()]
        assert order == ids[::-1]
        touched = store.get_conversation(ids[1]).updated_at
        store.set_pinned(ids[1], True)
        store.set_pinned(ids[3], True)
        assert store.get_conversation(ids[1]).updated_at == touched  # pinning is no use
        listed = store.list_conversations()
        # Pinned first (newest of them first), then the rest, newest first.
        assert [s.id for s in listed] == [ids[3], ids[1], ids[4], ids[2], ids[0]]
        assert [s.pinned for s in listed] == [True, True, False, False, False]
        # A message moves a chat up within its group only.
        store.add_message(ids[0], "user", "hello")
        assert [s.id for s in store.list_conversations()][2] == ids[0]
        # Search keeps the order too.
        assert [s.id for s in store.list_conversations("chat")][:2] == [ids[3], ids[1]]
        store.set_pinned(ids[3], False)
        assert store.list_conversations()[0].id == ids[1]
        with pytest.raises(UnknownConversationError):
            store.set_pinned(999, True)


def test_delete_and_undo_keep_the_pin(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        kept = store.create_conversation("kept").id
        pinned = store.set_pinned(kept, True)
        store.add_message(kept, "user", "hi")
        restored = store.restore(store.delete(kept))
        assert restored.pinned and restored.updated_at == store.get_conversation(kept).updated_at
        assert pinned.pinned and store.list_conversations()[0].pinned


def test_a_damaged_pinned_value_reads_as_unpinned(tmp_path: Path) -> None:
    """A file edited by hand (the CHECK dropped, a 7 or a string written) still opens."""
    path = tmp_path / "chats.sqlite3"
    with ChatStore(path) as store:
        chat = store.create_conversation("odd").id
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = 1")
    conn.execute("UPDATE conversations SET pinned = 'yes' WHERE id = ?", (chat,))
    conn.commit()
    conn.close()
    with ChatStore(path) as store:
        assert not store.get_conversation(chat).pinned
        assert not store.list_conversations()[0].pinned


def _at(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").timestamp()


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("2026-12-02 14:02", "14:02"),
        ("2026-12-02 00:00", "00:00"),
        ("2026-12-01 23:59", "Yesterday"),
        ("2026-11-28 09:00", "Saturday"),
        ("2026-11-25 09:00", "25 Nov"),  # a week ago: the date
        ("2026-01-03 09:00", "3 Jan"),
        ("2025-12-03 09:00", "3 Dec 2025"),
        ("2026-12-05 09:00", "5 Dec"),  # the future (a clock set back): its date
    ],
)
def test_last_used_reads_as_chat_lists_say_it(when: str, expected: str) -> None:
    assert last_used(_at(when), now=_at("2026-12-02 18:30")) == expected


def test_last_used_of_now_is_the_time_of_day() -> None:
    now = time.time()
    assert last_used(now) == datetime.fromtimestamp(now).strftime("%H:%M")
