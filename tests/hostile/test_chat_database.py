"""Class 13 (issue 29): a crafted chat database opens, says what is damaged, loses nothing.

The chats file is user data, and a tampered one (another program, a broken sync, a crafted
file) must not take the history down. A real database is built through the store (chats,
regenerated and edited versions, stats), then hypothesis tampers with its rows the way only
raw SQL can: the schema's NOT NULL and CHECK constraints are lifted (`writable_schema`, as a
crafted file would have them) and columns get NULLs, wrong types (text in number columns,
blobs, numbers in text columns), bytes that are not UTF-8, extreme numbers (±2^63, ±1e308,
infinities), bad JSON in stats and settings (deep, huge numbers, not objects), roles and
statuses outside the CHECK, `selected`/`shown` flags out of range, and the version tree gets
dangling parents, parents in other chats, cycles, extra roots, messages of chats that do not
exist. Then the constraints are put back, as the app's schema has them.

Properties, through the store API: it opens (never set aside as damaged: the file is sound,
its rows are not), its notice names the damage and the backup it kept; every message id is
still there and every message of a chat is reachable by switching versions (the tree is whole:
one parent each, no cycles, one chosen version per set); every read (list, search, open a chat,
export as JSON and Markdown) and the usual writes (add, switch versions, delete and undo,
regenerate, edit) work on every chat. Through the GUI: the real main window (offscreen) opens
the damaged database and shows every chat without an unhandled exception.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability import figures

STORE_EXAMPLES = 200
GUI_EXAMPLES = 12

_MESSAGE_COLUMNS = ["conversation_id", "position", "role", "content", "reasoning", "image_path",
                    "created_at", "status", "error", "stats_json", "parent_id", "selected",
                    "shown"]  # fmt: skip
_CHAT_COLUMNS = ["title", "created_at", "updated_at", "model_dir", "system_prompt",
                 "settings_json"]  # fmt: skip
#: Values as SQL expressions (so blobs, invalid UTF-8 and infinities can be written).
_VALUES = [
    "NULL", "0", "-1", "1", "7", "9223372036854775807", "-9223372036854775808", "1e308",
    "-1e308", "9e999", "-9e999", "0.5", "'abc'", "''", "x'00ff10'", "CAST(x'c3ffe2' AS TEXT)",
    "'tool'", "'bogus'", "'{'", "'[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1'",
    "'" + "[" * 2000 + "]" * 2000 + "'", "'{\"mode\": 5, \"generated_tokens\": -3}'",
    "'{\"temperature\": \"hot\", \"max_new_tokens\": 1e999}'", "'null'", "'1" + "0" * 400 + "'",
    "'/tmp/a' || char(0) || 'b.png'", "zeroblob(70000)", "printf('%.*c', 100000, 'x')",
]  # fmt: skip
_TREE = ["dangling", "self", "cycle", "foreign", "extra_root", "orphan_chat", "no_selected",
         "all_selected", "chat_deleted"]  # fmt: skip


def _build(path: Path) -> dict[str, Any]:
    """A real database made by the store: 3 chats, versions, stats, a system prompt."""
    from qwen_mtp_desktop.core.chat.store.store import ChatStore

    stats = {"mode": "mtp", "generated_tokens": 5, "acceptance_rate": 0.5, "ttft_s": 0.01}
    with ChatStore(path) as store:
        first = store.create_conversation("counting", system_prompt="You count.")
        question = store.add_message(first.id, "user", "Count from 1 to 5.")
        answer = store.begin_assistant_message(first.id)
        store.finish_message(answer.id, stats, answer_delta="1 2 3 4 5")
        again = store.begin_version(question.id)  # regenerate
        store.finish_message(again.id, stats, answer_delta="1 2 3 4 5.")
        edited = store.begin_version(question.id, "Count from 1 to 3.")  # edit
        store.finish_message(edited.id, stats, answer_delta="1 2 3")
        second = store.create_conversation("repeat")
        store.add_message(second.id, "user", "Say 'hi' twice.")
        store.add_message(second.id, "assistant", "hi hi", stats=stats)
        store.add_message(second.id, "user", "Again.")
        third = store.create_conversation("empty")
        ids = [m for c in (first, second, third) for m in _all_ids(store, c.id)]
    return {"chats": [first.id, second.id, third.id], "messages": ids}


def _all_ids(store: Any, conversation_id: int) -> list[int]:
    with store._read() as conn:  # every version, not only the shown branch
        rows = conn.execute(
            "SELECT id FROM messages WHERE conversation_id = ?", (conversation_id,)
        ).fetchall()
    return [int(r[0]) for r in rows]


def _lift_constraints(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Remove NOT NULL and CHECK from the tables' SQL, as a crafted file can; returns the
    original SQL to put back."""
    original = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE name IN ('messages', 'conversations')"
    ).fetchall()
    conn.execute("PRAGMA writable_schema = ON")
    for name, sql in original:
        loose = _drop_checks(sql)
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (loose, name))
    conn.commit()
    return [(str(n), str(s)) for n, s in original]


def _drop_checks(sql: str) -> str:
    out, depth, i = [], 0, 0
    sql = sql.replace("NOT NULL", "")
    while i < len(sql):
        if sql.startswith("CHECK", i):
            i += len("CHECK")
            while sql[i] != "(":
                i += 1
            depth = 0
            while True:
                depth += sql[i] == "("
                depth -= sql[i] == ")"
                i += 1
                if depth == 0:
                    break
            continue
        out.append(sql[i])
        i += 1
    return "".join(out)


def _restore_constraints(path: Path, original: list[tuple[str, str]]) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA writable_schema = ON")
        for name, sql in original:
            conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (sql, name))
        conn.commit()


@st.composite
def tampering(draw: st.DrawFn, built: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    ops = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["message", "message", "chat", "tree"]))
        if kind == "message":
            row, column = built["messages"], _MESSAGE_COLUMNS
        elif kind == "chat":
            row, column = built["chats"], _CHAT_COLUMNS
        else:
            ops.append(
                ("tree", draw(st.sampled_from(_TREE)), draw(st.sampled_from(built["messages"])),
                 draw(st.sampled_from(built["messages"])))
            )  # fmt: skip
            continue
        target = draw(st.sampled_from(row))
        ops.append((kind, target, draw(st.sampled_from(column)), draw(st.sampled_from(_VALUES))))
    return ops


def _tamper(path: Path, ops: list[tuple[str, Any, Any, Any]]) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        original = _lift_constraints(conn)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        for kind, a, b, c in ops:
            if kind == "message":
                conn.execute(f"UPDATE messages SET {b} = {c} WHERE id = ?", (a,))
            elif kind == "chat":
                conn.execute(f"UPDATE conversations SET {b} = {c} WHERE id = ?", (a,))
            elif a == "dangling":
                conn.execute("UPDATE messages SET parent_id = 999999 WHERE id = ?", (b,))
            elif a == "self":
                conn.execute("UPDATE messages SET parent_id = id WHERE id = ?", (b,))
            elif a == "cycle":
                conn.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (c, b))
                conn.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (b, c))
            elif a == "foreign":
                conn.execute(
                    "UPDATE messages SET parent_id = (SELECT id FROM messages AS o WHERE "
                    "o.conversation_id != messages.conversation_id LIMIT 1) WHERE id = ?",
                    (b,),
                )
            elif a == "extra_root":
                conn.execute("UPDATE messages SET parent_id = NULL WHERE id = ?", (b,))
            elif a == "orphan_chat":
                conn.execute("UPDATE messages SET conversation_id = 424242 WHERE id = ?", (b,))
            elif a == "no_selected":
                conn.execute(
                    "UPDATE messages SET selected = 0 WHERE parent_id IS "
                    "(SELECT parent_id FROM messages WHERE id = ?)",
                    (b,),
                )
            elif a == "all_selected":
                conn.execute(
                    "UPDATE messages SET selected = 1 WHERE parent_id IS "
                    "(SELECT parent_id FROM messages WHERE id = ?)",
                    (b,),
                )
            elif a == "chat_deleted":
                conn.execute(
                    "DELETE FROM conversations WHERE id = "
                    "(SELECT conversation_id FROM messages WHERE id = ?)",
                    (b,),
                )
        conn.commit()
    _restore_constraints(path, original)


def _tree_is_whole(path: Path) -> None:
    """One parent each in the same chat, no cycles, one chosen version per set."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        chats = {r[0] for r in conn.execute("SELECT id FROM conversations")}
        found = conn.execute(
            "SELECT id, conversation_id, parent_id, selected FROM messages"
        ).fetchall()
    chat = {m: c for m, c, _p, _s in found}
    for mid, cid, parent, _selected in found:
        assert cid in chats, (mid, cid)
        assert parent is None or chat.get(parent) == cid, (mid, parent)
        seen = {mid}
        while parent is not None:  # walks to a root without repeating
            assert parent not in seen, ("cycle", mid)
            seen.add(parent)
            parent = next(p for m, _c, p, _s in found if m == parent)
    groups: dict[tuple[int, int | None], int] = {}
    for _mid, cid, parent, selected in found:
        groups[(cid, parent)] = groups.get((cid, parent), 0) + (selected == 1)
    assert all(n == 1 for n in groups.values()), groups


def _exercise(store: Any) -> int:
    """Every read, and the usual writes, on every chat; returns the messages shown."""
    from qwen_mtp_desktop.core.chat.store.records import ChatStoreError

    shown = 0
    for summary in store.list_conversations():
        store.list_conversations(summary.title[:5] or "x")
        conversation = store.get_conversation(summary.id)
        messages = store.messages(conversation.id)
        shown += len(messages)
        store.export_json(conversation.id)
        store.export_markdown(conversation.id)
        for message in messages:
            if message.version_count > 1:
                store.switch_version(message.id, 1)
                store.switch_version(message.id, -1)
        if messages:
            deleted = store.delete_message(messages[-1].id)
            store.restore_messages(deleted)
            users = [m for m in store.messages(conversation.id) if m.role == "user"]
            if users:
                answer = store.begin_version(users[-1].id, users[-1].content + " (edited)")
                store.finish_message(answer.id, None, answer_delta="ok")
        try:
            store.add_message(conversation.id, "user", "still works")
        except ChatStoreError:
            raise
    return shown


class TestChatDatabaseRows:
    @pytest.mark.slow  # generated tampered databases (~8 s)
    def test_tampered_rows_open_are_reported_and_lose_nothing(self, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.chat.store.store import ChatStore

        template = tmp_path / "template.sqlite3"
        built = _build(template)
        counts = {"tried": 0, "noticed": 0, "repaired": 0, "shown": 0}

        @settings(
            max_examples=STORE_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(ops=tampering(built))
        def case(ops: list[tuple[str, Any, Any, Any]]) -> None:
            counts["tried"] += 1
            folder = tmp_path / f"case-{counts['tried']}"
            folder.mkdir()
            path = folder / "chats.sqlite3"
            shutil.copyfile(template, path)
            _tamper(path, ops)
            with contextlib.closing(sqlite3.connect(path)) as conn:
                before = {int(r[0]) for r in conn.execute("SELECT id FROM messages")}
            with ChatStore(path) as store:
                assert not list(folder.glob("*.damaged-*")), "a sound file was set aside"
                if store.notice is not None:
                    counts["noticed"] += 1
                    assert "Parts of your chat history were damaged" in store.notice
                    assert "Nothing was deleted" in store.notice
                backups = list(folder.glob("chats.sqlite3.before-repair-*"))
                if backups:
                    counts["repaired"] += 1
                    assert store.notice is not None and str(backups[0]) in store.notice
            _tree_is_whole(path)
            with contextlib.closing(sqlite3.connect(path)) as conn:
                after = {int(r[0]) for r in conn.execute("SELECT id FROM messages")}
                # Every NOT NULL and CHECK constraint holds again: later writes cannot fail.
                assert conn.execute("PRAGMA quick_check").fetchall() == [("ok",)]
            assert before <= after, ("messages lost", before - after)
            with ChatStore(path) as store:
                assert store.notice is None or "before-repair" not in store.notice  # fixed once
                counts["shown"] += _exercise(store)
            shutil.rmtree(folder)

        case()
        assert counts["noticed"] > 0 and counts["repaired"] > 0, counts
        figures.record(
            "hostile",
            chat_db_inputs=counts["tried"],
            chat_db_noticed=counts["noticed"],
            chat_db_repaired=counts["repaired"],
            chat_db_messages_shown=counts["shown"],
        )


def _open_every_chat(qtbot: Any, database: Path) -> int:
    """The real main window on `database` (offscreen): every chat opened and painted; no
    message box but the damage notice. Returns the chats opened."""
    from PySide6.QtWidgets import QApplication

    from qwen_mtp_desktop.core.chat.store.store import ChatStore
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore
    from qwen_mtp_desktop.ui.main_window import MainWindow
    from tests.reliability.test_damaged_state import _shown_messages

    paths = app_paths().ensure()
    target = paths.data_dir / "chats.sqlite3"
    for old in paths.data_dir.glob("chats.sqlite3*"):
        old.unlink()
    shutil.copyfile(database, target)
    seen, stop = _shown_messages(qtbot)
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    chat = window.chat
    try:
        qtbot.waitUntil(lambda: chat.store_ready, timeout=30_000)
        with ChatStore(target) as store:  # a second reader, as the CLI would be
            expected = {c.id: len(store.messages(c.id)) for c in store.list_conversations()}
        for conversation_id, count in expected.items():
            chat.open_conversation(conversation_id)
            qtbot.waitUntil(
                lambda cid=conversation_id, n=count: (
                    chat.conversation is not None
                    and chat.conversation.id == cid
                    and len(chat.transcript.messages) == n
                ),
                timeout=30_000,
            )
            window.grab()  # paint every message, damaged values included
            QApplication.processEvents()
        assert all("Chat history" not in t or "damaged" in t for t in seen), seen
        assert not [t for t in seen if "unexpected" in t.lower() or "INTERNAL" in t], seen
    finally:
        stop()
        window.close()
    return len(expected)


@pytest.mark.subprocess
@pytest.mark.gui
class TestChatDatabaseInTheWindow:
    def test_the_window_opens_every_damaged_chat(self, qtbot: Any, tmp_path: Path) -> None:
        template = tmp_path / "template.sqlite3"
        built = _build(template)
        counts = {"tried": 0, "chats": 0}

        @settings(
            max_examples=GUI_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(ops=tampering(built))
        def case(ops: list[tuple[str, Any, Any, Any]]) -> None:
            counts["tried"] += 1
            database = tmp_path / f"case-{counts['tried']}.sqlite3"
            shutil.copyfile(template, database)
            _tamper(database, ops)
            counts["chats"] += _open_every_chat(qtbot, database)

        case()
        figures.record("hostile", chat_db_window_inputs=counts["tried"],
                       chat_db_window_chats=counts["chats"])  # fmt: skip
