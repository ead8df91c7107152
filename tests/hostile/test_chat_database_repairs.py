"""Chat database damage that loses nothing gets a clear message and is repaired (issue 45
item 8): `PRAGMA user_version = -5` raised IndexError, a 1,000-word search raised
`OperationalError: Expression tree is too large`, and a database without its `messages_fts`
table made search, add and delete raise raw `sqlite3.OperationalError`.

Hypothesis draws schema numbers (negative ones down to -2^31), searches of up to 1,500 words
of any script and length (repeated or not), and FTS damage (either index table or its shadow
tables dropped, triggers dropped, while closed or while the app runs). Properties: the store
opens, no raw sqlite3 error reaches the caller, a notice or a ChatStoreError says what
happened, every chat and message is still there, and search, add and delete work after."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.migrations import SCHEMA_VERSION
from qwen_mtp_desktop.core.chat.store.records import ChatStoreError
from qwen_mtp_desktop.core.chat.store.store import MAX_SEARCH_TERMS, ChatStore

_fast = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _build(path: Path) -> dict[int, list[str]]:
    """Two chats with versions; their message texts by chat."""
    with ChatStore(path) as store:
        first = store.create_conversation("quick brown fox")
        store.add_message(first.id, "user", "needle in the haystack")
        store.add_message(first.id, "assistant", "中文的回答")
        store.begin_version(store.messages(first.id)[-1].id)
        second = store.create_conversation("second chat")
        store.add_message(second.id, "user", "lazy dog")
        return {c.id: _texts(store, c.id) for c in store.list_conversations()}


def _texts(store: ChatStore, conversation_id: int) -> list[str]:
    return sorted(m.content for m in store.messages(conversation_id))


def _all(store: ChatStore) -> dict[int, list[str]]:
    return {c.id: _texts(store, c.id) for c in store.list_conversations()}


def _works(store: ChatStore, before: dict[int, list[str]]) -> None:
    """Nothing lost; search, add and delete work."""
    assert _all(store) == before
    assert [c.title for c in store.list_conversations("needle")] == ["quick brown fox"]
    assert [c.title for c in store.list_conversations("中文")] == ["quick brown fox"]
    chat = next(c for c in store.list_conversations() if c.title == "second chat")
    added = store.add_message(chat.id, "user", "fresh words")
    assert [c.title for c in store.list_conversations("fresh")] == ["second chat"]
    store.delete_message(added.id)
    assert store.list_conversations("fresh") == []


@_fast
@given(version=st.integers(-(2**31), -1))
@example(version=-5)  # the report's
@example(version=-1)
def test_a_negative_schema_number_is_repaired(
    version: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("chats") / "chats.sqlite3"
    before = _build(path)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {version}")
    with ChatStore(path) as store:
        assert store.notice is not None and f"({version})" in store.notice
        assert f"set to {SCHEMA_VERSION}" in store.notice
        _works(store, before)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    with ChatStore(path) as store:
        assert store.notice is None  # repaired for good


def test_a_negative_schema_number_on_an_empty_file_starts_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = -5")
    with ChatStore(path) as store:
        assert store.notice is not None and "set to 0" in store.notice
        assert store.list_conversations() == []


_word = st.sampled_from(["a", "ab", "the", "needle", "中", "中文", "😀", "%", "_", '"', "\\"]) | (
    st.text(min_size=1, max_size=8).filter(lambda t: not any(c.isspace() for c in t))
)


@_fast
@given(words=st.lists(_word, max_size=1500), repeat=st.integers(1, 1000))
@example(words=[f"w{i}" for i in range(1000)], repeat=1)  # the report's: 1,000 different
@example(words=["ab"], repeat=1000)  # 1,000 short words, one different
@example(words=[f"a{i}" for i in range(MAX_SEARCH_TERMS)], repeat=1)
def test_any_search_answers_or_says_it_is_too_long(
    words: list[str], repeat: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("chats") / "chats.sqlite3"
    _build(path)
    query = " ".join(words * repeat if len(words) * repeat <= 3000 else words)
    distinct = len(dict.fromkeys(query.replace("\x00", " ").split()))
    with ChatStore(path) as store:
        try:
            found = store.list_conversations(query)
        except ChatStoreError as exc:
            assert distinct > MAX_SEARCH_TERMS and exc.code == "CHATS_SEARCH_TOO_LONG"
            assert f"at most {MAX_SEARCH_TERMS}" in exc.message
            return
        assert distinct <= MAX_SEARCH_TERMS
        if distinct == 0:
            assert len(found) == 2


_DAMAGE = {
    "no messages_fts": ["DROP TABLE messages_fts"],
    "no conversations_fts": ["DROP TABLE conversations_fts"],
    "no index tables": ["DROP TABLE messages_fts", "DROP TABLE conversations_fts"],
    "no shadow data": ["DROP TABLE messages_fts_data"],
    "no shadow config": ["DROP TABLE conversations_fts_config"],
    "no trigger": ["DROP TRIGGER messages_fts_ai"],
    "no triggers, no table": ["DROP TRIGGER messages_fts_ad", "DROP TABLE messages_fts"],
}


def _damage(path: Path, statements: list[str]) -> None:
    with sqlite3.connect(path) as conn:
        for statement in statements:
            conn.execute(statement)


@_fast
@given(damage=st.sampled_from(sorted(_DAMAGE)))
@example(damage="no messages_fts")  # the report's
def test_a_damaged_search_index_is_rebuilt_on_open(
    damage: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("chats") / "chats.sqlite3"
    before = _build(path)
    _damage(path, _DAMAGE[damage])
    with ChatStore(path) as store:
        if "trigger" not in damage:  # every trigger there, its table not: said
            assert store.notice is not None and "search index" in store.notice
        _works(store, before)


@_fast
@given(
    damage=st.sampled_from(["no messages_fts", "no conversations_fts", "no index tables"]),
    first=st.sampled_from(["search", "add", "delete"]),
)
def test_an_index_lost_while_the_app_runs_is_rebuilt(
    damage: str, first: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("chats") / "chats.sqlite3"
    before = _build(path)
    with ChatStore(path) as store:
        chat = next(c for c in store.list_conversations() if c.title == "second chat")
        doomed = store.add_message(chat.id, "user", "to delete")
        before[chat.id] = _texts(store, chat.id)
        _damage(path, _DAMAGE[damage])
        try:
            if first == "search":
                store.list_conversations("needle")  # repaired and answered at once
            elif first == "add":
                extra = store.add_message(chat.id, "user", "extra")
                store.delete_message(extra.id)  # a write the lost table's triggers skip
            else:
                store.delete_message(doomed.id)
        except ChatStoreError as exc:  # a write: not saved, said, and the index rebuilt
            assert exc.code == "CHATS_INDEX_REBUILT" and first != "search"
        if first == "delete" and "to delete" not in _texts(store, chat.id):
            before[chat.id].remove("to delete")  # it went through (its triggers were there)
        assert _all(store) == before  # a failed write saved nothing
        if "to delete" in _texts(store, chat.id):
            store.delete_message(doomed.id)
            before[chat.id].remove("to delete")
        _works(store, before)
