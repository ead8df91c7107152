from __future__ import annotations

import json
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.store import migrations
from qwen_mtp_desktop.core.chat.store import store as chats
from qwen_mtp_desktop.core.chat.store.chat_file import EXPORT_FORMAT
from qwen_mtp_desktop.core.chat.store.migrations import SCHEMA_VERSION
from qwen_mtp_desktop.core.chat.store.records import (
    ChatSettings,
    ChatStoreError,
    UnknownConversationError,
    UnknownMessageError,
)
from qwen_mtp_desktop.core.chat.store.store import DEFAULT_TITLE, MAX_TITLE_CHARS, ChatStore
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.core.files.paths import app_paths

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / chats.DB_FILENAME


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    with ChatStore(db_path) as opened:
        yield opened


@pytest.fixture(params=["fts5", "like"])
def search_store(
    request: pytest.FixtureRequest, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ChatStore]:
    if request.param == "like":
        monkeypatch.setattr(migrations, "fts5_trigram_available", lambda: False)
    with ChatStore(db_path) as opened:
        assert opened.search_backend == request.param
        yield opened


def _stats(finish_reason: str = "eos") -> dict[str, object]:
    return build_stats(
        method=DecodingMethod.mtp(2),
        device="CPU",
        prompt_tokens=12,
        chunk_sizes=[1, 3, 2, 3],
        chunk_times=[0.25, 0.3, 0.35, 0.4],
        total_s=0.5,
        reasoning_tokens=2,
        answer_tokens=7,
        finish_reason=finish_reason,  # type: ignore[arg-type]
    ).to_json_dict()


# ------------------------------------------------------------------------------------ settings


def test_chat_settings_defaults_and_round_trip() -> None:
    defaults = ChatSettings()
    assert defaults.to_dict() == {
        "device": "CPU",
        "mtp": True,
        "num_assistant_tokens": "auto",  # Auto (core.auto.policy) is the default
        "thinking": False,
        "thinking_budget": None,  # no limit (issue 43, item 4)
        "max_new_tokens": 512,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 20,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "seed": None,
        "model_sampling": True,  # the model's generation_config.json (issue 26 item 3)
        "prompt_lookup": False,
        "lookup_tokens": 4,
        "max_ngram_size": 3,
        "mcp_servers": (),  # the chat's MCP servers (issue 27 item 5)
        "context_overflow": "stop",  # nothing left out unasked (issue 44)
    }
    custom = ChatSettings(device="GPU", mtp=False, num_assistant_tokens="auto", seed=7, top_k=0)
    tools = ChatSettings(mcp_servers=("files", "web"))
    assert ChatSettings.from_dict(json.loads(json.dumps(tools.to_dict()))) == tools
    assert ChatSettings.from_dict({"mcp_servers": [1, "x"]}).mcp_servers == ()
    lookup = ChatSettings(prompt_lookup=True, lookup_tokens=8, max_ngram_size=2)
    assert ChatSettings.from_dict(json.loads(json.dumps(lookup.to_dict()))) == lookup
    window = ChatSettings(context_overflow="rolling_window")
    assert ChatSettings.from_dict(json.loads(json.dumps(window.to_dict()))) == window
    assert ChatSettings.from_dict({"context_overflow": "drop all"}).context_overflow == "stop"
    budget = ChatSettings(thinking=True, thinking_budget=256)
    assert ChatSettings.from_dict(json.loads(json.dumps(budget.to_dict()))) == budget
    assert ChatSettings.from_dict(custom.to_dict()) == custom
    assert ChatSettings.from_dict(json.loads(json.dumps(custom.to_dict()))) == custom
    # JSON turns 1.0 into 1; it still reads back as a float.
    assert ChatSettings.from_dict({"repetition_penalty": 1}).repetition_penalty == 1.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("device", ""),
        ("mtp", 1),
        ("num_assistant_tokens", 0),
        ("num_assistant_tokens", "many"),
        ("prompt_lookup", 1),
        ("lookup_tokens", 0),
        ("thinking_budget", 0),
        ("thinking_budget", True),
        ("thinking_budget", 2_000_000),
        ("lookup_tokens", 17),
        ("max_ngram_size", 9),
        ("max_new_tokens", 0),
        ("temperature", -0.1),
        ("top_p", 0.0),
        ("top_p", 1.5),
        ("top_k", -1),
        ("repetition_penalty", 0),
        ("seed", 1.5),
        ("seed", True),
        ("temperature", float("nan")),
    ],
)
def test_chat_settings_reject_bad_values(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        ChatSettings(**{name: value})  # type: ignore[arg-type]
    # Reading a stored dict keeps the other fields and falls back for the bad one only.
    other, other_value = ("top_k", 5) if name != "top_k" else ("max_new_tokens", 64)
    loaded = ChatSettings.from_dict({name: value, other: other_value, "unknown_key": 1})
    # (A row from before the model's defaults follows them unless it chose its own values.)
    assert loaded == ChatSettings(**{other: other_value}, model_sampling=loaded.model_sampling)


# -------------------------------------------------------------------------------- conversations


def test_store_lives_under_data_dir_and_pragmas_are_set(app_home: Path) -> None:
    path = chats.default_db_path()
    assert path == app_paths().data_dir / "chats.sqlite3"
    with ChatStore(path) as store:
        assert path.is_file() and path.is_relative_to(app_home)
        assert store.notice is None
        with store._read() as conn:  # the store's own connection
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_create_get_and_defaults(store: ChatStore) -> None:
    conv = store.create_conversation()
    assert conv.title == DEFAULT_TITLE
    assert conv.settings == ChatSettings()
    assert conv.system_prompt == ""
    assert conv.model_dir is None
    assert conv.created_at == conv.updated_at
    assert store.get_conversation(conv.id) == conv
    assert store.messages(conv.id) == []

    custom = store.create_conversation(
        "Plans",
        model_dir="/models/qwen3.5-0.8b",
        system_prompt="Be brief.",
        settings=ChatSettings(thinking=True, num_assistant_tokens=3),
    )
    again = store.get_conversation(custom.id)
    assert again.settings.thinking and again.settings.num_assistant_tokens == 3
    assert (again.model_dir, again.system_prompt) == ("/models/qwen3.5-0.8b", "Be brief.")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", DEFAULT_TITLE),
        ("   \n\t ", DEFAULT_TITLE),
        ("  two\nlines  ", "two lines"),
        ("日本語のタイトル 🎌", "日本語のタイトル 🎌"),
    ],
)
def test_title_cleaning(store: ChatStore, given: str, expected: str) -> None:
    conv = store.create_conversation(given)
    assert conv.title == expected
    assert store.rename(conv.id, "x").title == "x"
    assert store.rename(conv.id, given).title == expected


def test_long_title_is_cut(store: ChatStore) -> None:
    title = store.create_conversation("word " * 500).title
    assert len(title) == MAX_TITLE_CHARS
    assert title.endswith("…")


def test_updates_keep_the_rest(store: ChatStore) -> None:
    conv = store.create_conversation("A", model_dir="/m")
    store.update_settings(conv.id, ChatSettings(device="GPU", seed=3))
    store.set_system_prompt(conv.id, "You are terse.")
    store.set_model_dir(conv.id, None)
    again = store.get_conversation(conv.id)
    assert again.settings == ChatSettings(device="GPU", seed=3)
    assert (again.title, again.system_prompt, again.model_dir) == ("A", "You are terse.", None)


def test_unknown_conversation_id_gives_a_clear_error(store: ChatStore) -> None:
    calls = [
        lambda: store.get_conversation(404),
        lambda: store.messages(404),
        lambda: store.rename(404, "x"),
        lambda: store.update_settings(404, ChatSettings()),
        lambda: store.set_system_prompt(404, ""),
        lambda: store.set_model_dir(404, None),
        lambda: store.delete(404),
        lambda: store.add_message(404, "user", "hi"),
        lambda: store.begin_assistant_message(404),
        lambda: store.export_json(404),
        lambda: store.export_markdown(404),
    ]
    for call in calls:
        with pytest.raises(UnknownConversationError) as info:
            call()
        assert info.value.conversation_id == 404
        assert info.value.code == "UNKNOWN_CONVERSATION"
        assert "Conversation 404 does not exist" in str(info.value)
        assert isinstance(info.value, LookupError)


def test_unknown_message_id_gives_a_clear_error(store: ChatStore) -> None:
    calls = [
        lambda: store.get_message(77),
        lambda: store.append_to_message(77, "x"),
        lambda: store.finish_message(77, None),
        lambda: store.fail_message(77, "boom"),
        lambda: store.edit_message(77, "x"),
        lambda: store.delete_message(77),
        lambda: store.truncate_after(77),
    ]
    for call in calls:
        with pytest.raises(UnknownMessageError, match="Message 77 does not exist"):
            call()


def test_bad_role_and_status_are_rejected(store: ChatStore) -> None:
    conv = store.create_conversation()
    with pytest.raises(ValueError, match="role"):
        store.add_message(conv.id, "robot", "hi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="status"):
        store.add_message(conv.id, "user", "hi", status="done")  # type: ignore[arg-type]
    assert store.messages(conv.id) == []


def test_closed_store_refuses_work(db_path: Path) -> None:
    store = ChatStore(db_path)
    store.close()
    store.close()  # twice is fine
    with pytest.raises(ChatStoreError, match="closed"):
        store.list_conversations()


# ------------------------------------------------------------------------------------- messages


def test_streaming_answer_life_cycle(store: ChatStore) -> None:
    conv = store.create_conversation("Chat", system_prompt="sys")
    user = store.add_message(conv.id, "user", "Describe this", image_path=Path("/tmp/cat.png"))
    assert (user.position, user.status, user.stats) == (0, "complete", None)
    assert user.image_path == Path("/tmp/cat.png")
    assert user.to_engine_message() == Message("user", "Describe this", Path("/tmp/cat.png"))

    answer = store.begin_assistant_message(conv.id)
    assert (answer.role, answer.status, answer.content, answer.position) == (
        "assistant",
        "streaming",
        "",
        1,
    )
    store.append_to_message(answer.id, "", "Let me think. ")
    store.append_to_message(answer.id, "A cat", "It is furry.")
    store.append_to_message(answer.id, " on a mat")
    done = store.finish_message(
        answer.id, _stats(), model="Qwen3.5-0.8B", answer_delta=".", reasoning_delta=""
    )
    assert done.status == "complete"
    assert done.content == "A cat on a mat."
    assert done.reasoning == "Let me think. It is furry."
    assert done.stats is not None
    assert done.stats["model"] == "Qwen3.5-0.8B"
    assert done.stats["method"] == DecodingMethod.mtp(2).to_record()
    assert done.stats["generated_tokens"] == 9
    assert done.stats["ttft_s"] == 0.25
    assert done.stats["acceptance_rate"] == pytest.approx(5 / 6)
    assert done.stats["finished_at"] >= done.created_at
    assert store.messages(conv.id) == [user, done]

    with pytest.raises(ChatStoreError) as info:
        store.append_to_message(answer.id, "more")
    assert info.value.code == "MESSAGE_NOT_STREAMING"
    with pytest.raises(ChatStoreError, match="no longer being written"):
        store.finish_message(answer.id, None)


def test_cancelled_and_failed_answers_keep_their_text(store: ChatStore) -> None:
    conv = store.create_conversation()
    cancelled = store.begin_assistant_message(conv.id)
    store.append_to_message(cancelled.id, "partial")
    assert store.finish_message(cancelled.id, _stats("cancelled")).status == "incomplete"

    failed = store.begin_assistant_message(conv.id)
    store.append_to_message(failed.id, "half an ans", "thinking")
    result = store.fail_message(failed.id, "GPU device lost")
    assert (result.status, result.error, result.content, result.reasoning) == (
        "error",
        "GPU device lost",
        "half an ans",
        "thinking",
    )
    explicit = store.begin_assistant_message(conv.id)
    with pytest.raises(ValueError, match="streaming"):
        store.finish_message(explicit.id, None, "streaming")
    assert store.finish_message(explicit.id, None, "complete").stats is None


def test_edit_truncate_and_delete_message(store: ChatStore) -> None:
    conv = store.create_conversation()
    ids = [
        store.add_message(conv.id, "user" if i % 2 == 0 else "assistant", f"m{i}").id
        for i in range(6)
    ]
    # Edit & regenerate the second question: change it, drop everything after it.
    edited = store.edit_message(ids[2], "m2 (edited)")
    assert edited.content == "m2 (edited)"
    assert store.truncate_after(ids[2]) == 3
    assert [m.content for m in store.messages(conv.id)] == ["m0", "m1", "m2 (edited)"]
    assert store.truncate_after(ids[2]) == 0
    # A regenerated answer goes after the edited question.
    regenerated = store.begin_assistant_message(conv.id)
    assert regenerated.position == 3
    store.delete_message(ids[1])
    assert [m.id for m in store.messages(conv.id)] == [ids[0], ids[2], regenerated.id]


def test_unicode_emoji_and_very_long_content(store: ChatStore) -> None:
    conv = store.create_conversation("Ünïcødé 🧪")
    weird = "emoji 👩‍👩‍👧‍👦🏳️‍🌈, CJK 你好，世界, RTL مرحبا, \u200b\u2028 'quotes\" --"
    long_text = ("0123456789abcdef" * 64 + "\n") * 5000  # ~5 MB
    first = store.add_message(conv.id, "user", weird)
    second = store.add_message(conv.id, "assistant", long_text, reasoning=weird * 100)
    streamed = store.begin_assistant_message(conv.id)
    for _ in range(10):
        store.append_to_message(streamed.id, "🙂" * 1000, "思考" * 500)
    store.finish_message(streamed.id, None)
    got = store.messages(conv.id)
    assert got[0].content == weird
    assert got[1].content == long_text and got[1].reasoning == weird * 100
    assert got[2].content == "🙂" * 10_000 and got[2].reasoning == "思考" * 5000
    assert [m.id for m in got] == [first.id, second.id, streamed.id]
    summary = store.list_conversations()[0]
    assert summary.title == "Ünïcødé 🧪"
    assert summary.preview.startswith("🙂") and len(summary.preview) <= chats.PREVIEW_CHARS


# -------------------------------------------------------------------------------- delete & undo


def test_delete_then_restore_gives_back_identical_rows(store: ChatStore) -> None:
    keep = store.create_conversation("keep")
    conv = store.create_conversation("to delete", model_dir="/m", system_prompt="sys")
    store.add_message(conv.id, "user", "question about zebras", image_path="/img.png")
    answer = store.begin_assistant_message(conv.id)
    store.append_to_message(answer.id, "zebras are striped", "hmm")
    store.finish_message(answer.id, _stats(), model="m")
    before = (store.get_conversation(conv.id), store.messages(conv.id))

    snapshot = store.delete(conv.id)
    assert [s.id for s in store.list_conversations()] == [keep.id]
    assert store.list_conversations("zebras") == []
    with pytest.raises(UnknownConversationError):
        store.get_conversation(conv.id)
    with store._read() as conn:  # messages went with it (ON DELETE CASCADE)
        assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0

    # Ids are never reused, so the undo cannot collide with a newer chat.
    newer = store.create_conversation("newer")
    assert newer.id > conv.id

    restored = store.restore(snapshot)
    assert (restored, store.messages(conv.id)) == before
    assert [s.id for s in store.list_conversations("zebras")] == [conv.id]
    with pytest.raises(ChatStoreError) as info:
        store.restore(snapshot)
    assert info.value.code == "ALREADY_RESTORED"


def test_restoring_a_chat_deleted_mid_answer_marks_the_answer_incomplete(
    store: ChatStore,
) -> None:
    conv = store.create_conversation()
    answer = store.begin_assistant_message(conv.id)
    store.append_to_message(answer.id, "partial")
    snapshot = store.delete(conv.id)
    with pytest.raises(UnknownMessageError):
        store.append_to_message(answer.id, " more")
    store.restore(snapshot)
    again = store.get_message(answer.id)
    assert (again.status, again.content) == ("incomplete", "partial")


# ------------------------------------------------------------------------------ listing, search


def test_listing_is_newest_first_with_preview(store: ChatStore) -> None:
    a = store.create_conversation("A")
    b = store.create_conversation("B")
    c = store.create_conversation("C")
    assert [s.id for s in store.list_conversations()] == [c.id, b.id, a.id]
    store.add_message(a.id, "user", "first line\n\n   second line")
    store.add_message(a.id, "assistant", "the reply")
    listed = store.list_conversations()
    assert [s.id for s in listed] == [a.id, c.id, b.id]
    assert (listed[0].preview, listed[0].preview_role, listed[0].message_count) == (
        "the reply",
        "assistant",
        2,
    )
    assert (listed[1].preview, listed[1].preview_role, listed[1].message_count) == ("", None, 0)
    # Renaming and settings changes do not reorder the list.
    store.rename(b.id, "B2")
    store.update_settings(b.id, ChatSettings(device="GPU"))
    assert [s.id for s in store.list_conversations()] == [a.id, c.id, b.id]
    assert [s.id for s in store.list_conversations(limit=2)] == [a.id, c.id]
    store.add_message(a.id, "user", "x " * 500)
    assert store.list_conversations()[0].preview.endswith("…")


def test_an_answer_stopped_before_its_first_token_is_previewed_as_such(
    store: ChatStore,
) -> None:
    """Stop while a long prompt is read leaves an empty answer: the list says what happened
    instead of "No messages" (and an empty answer that was not stopped stays empty)."""
    chat = store.create_conversation("Long question")
    store.add_message(chat.id, "user", "word " * 3000)
    stopped = {"finish_reason": "cancelled", "generated_tokens": 0}
    store.add_message(chat.id, "assistant", "", stats=stopped)
    assert store.list_conversations()[0].preview == "Stopped before the answer began"
    other = store.create_conversation("Silent")
    store.add_message(other.id, "assistant", "", stats={**stopped, "finish_reason": "eos"})
    assert store.list_conversations()[0].preview == ""


def test_search_titles_and_content(search_store: ChatStore) -> None:
    store = search_store
    recipes = store.create_conversation("Pasta recipes")
    store.add_message(recipes.id, "user", "How long do I boil spaghetti?")
    code = store.create_conversation("Debugging")
    store.add_message(code.id, "user", "Python raises KeyError in my dict code")
    store.add_message(code.id, "assistant", "Use dict.get() with 100% certainty_of_default")
    chinese = store.create_conversation("旅行")
    store.add_message(chinese.id, "user", "我想去北京旅游，推荐一些景点 🎉")
    empty = store.create_conversation("Nothing here")

    def ids(query: str | None) -> set[int]:
        return {s.id for s in store.list_conversations(query)}

    assert ids(None) == ids("") == ids("   ") == {recipes.id, code.id, chinese.id, empty.id}
    assert ids("pasta") == {recipes.id}  # title, case-insensitive
    assert ids("SPAGHETTI") == {recipes.id}  # content
    assert ids("ghett") == {recipes.id}  # substring
    assert ids("python keyerror") == {code.id}  # every term, same message
    assert ids("python certainty") == set()  # terms in different messages
    assert ids("100%") == {code.id}
    assert ids("%") == {code.id}  # LIKE wildcards are literal
    assert ids("_of_") == {code.id}
    assert ids("北京") == {chinese.id}  # short term (LIKE path in FTS mode too)
    assert ids("推荐一些景点") == {chinese.id}
    assert ids("🎉") == {chinese.id}
    assert ids('"quoted" it\'s') == set()
    assert ids("zzz-no-such-text") == set()
    # Streamed text is searchable as it arrives and after edits.
    answer = store.begin_assistant_message(empty.id)
    store.append_to_message(answer.id, "aurora borealis")
    assert ids("borealis") == {empty.id}
    store.edit_message(answer.id, "northern lights")
    assert ids("borealis") == set()
    assert ids("northern") == {empty.id}
    store.rename(recipes.id, "Italian food")
    assert ids("pasta") == set()
    assert ids("italian") == {recipes.id}


def test_search_index_is_rebuilt_when_fts_returns(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChatStore(db_path) as store:
        conv = store.create_conversation("before")
        store.add_message(conv.id, "user", "indexed with fts")
    # A build without FTS5 drops the triggers, so its writes do not fail...
    monkeypatch.setattr(migrations, "fts5_trigram_available", lambda: False)
    with ChatStore(db_path) as store:
        assert store.search_backend == "like"
        later = store.create_conversation("written without fts")
        store.add_message(later.id, "user", "galaxies")
    # ...and the next FTS5 build indexes what was written meanwhile.
    monkeypatch.undo()
    with ChatStore(db_path) as store:
        assert store.search_backend == "fts5"
        assert [s.id for s in store.list_conversations("galaxies")] == [later.id]
        assert [s.id for s in store.list_conversations("indexed")] == [conv.id]


# ------------------------------------------------------------------------------------- exports


def test_export_json_and_markdown(store: ChatStore) -> None:
    conv = store.create_conversation(
        "Export me", model_dir="/models/q", system_prompt="Be kind.", settings=ChatSettings(seed=1)
    )
    store.add_message(conv.id, "user", "Hi 👋", image_path="/pics/a b.png")
    answer = store.begin_assistant_message(conv.id)
    store.append_to_message(answer.id, "Hello!", "User greets me.")
    store.finish_message(answer.id, _stats(), model="Qwen3.5-0.8B")
    broken = store.begin_assistant_message(conv.id)
    store.append_to_message(broken.id, "Half")
    store.fail_message(broken.id, "out of memory")

    document = json.loads(store.export_json(conv.id))
    assert document["format"] == EXPORT_FORMAT
    assert document["conversation"]["title"] == "Export me"
    assert document["conversation"]["settings"]["seed"] == 1
    assert [m["role"] for m in document["messages"]] == ["user", "assistant", "assistant"]
    assert document["messages"][0]["content"] == "Hi 👋"
    assert document["messages"][1]["stats"]["model"] == "Qwen3.5-0.8B"
    assert document["messages"][1]["stats"]["decode_tokens_per_s"] == pytest.approx(8 / 0.15)
    assert document["messages"][2]["status"] == "error"

    markdown = store.export_markdown(conv.id)
    assert markdown.startswith("# Export me\n")
    assert "Be kind." in markdown
    assert "![image](</pics/a b.png>)" in markdown
    assert "<details><summary>Reasoning</summary>" in markdown and "User greets me." in markdown
    assert "*Qwen3.5-0.8B · CPU · MTP n=2 · 9 tokens · TTFT 0.25 s · 53.3 tok/s" in markdown
    assert "acceptance 83%" in markdown
    assert "*(Failed: out of memory)*" in markdown


# ----------------------------------------------------------------------------------- migrations

#: Schema version 1 exactly as shipped, frozen here: an "old file" must not follow code changes.
V1_SCHEMA = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, created_at REAL NOT NULL,
    updated_at REAL NOT NULL, model_dir TEXT, system_prompt TEXT NOT NULL DEFAULT '',
    settings_json TEXT NOT NULL DEFAULT '{}');
CREATE INDEX conversations_by_update ON conversations (updated_at, id);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
    content TEXT NOT NULL DEFAULT '', reasoning TEXT NOT NULL DEFAULT '', image_path TEXT,
    created_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'complete'
        CHECK (status IN ('complete', 'streaming', 'incomplete', 'error')),
    error TEXT, stats_json TEXT, UNIQUE (conversation_id, position));
CREATE INDEX messages_streaming ON messages (status) WHERE status = 'streaming';
INSERT INTO conversations VALUES (5, 'Old chat', 100.0, 200.0, '/m', 'sys', '{"device": "GPU"}');
INSERT INTO messages VALUES (9, 5, 0, 'user', 'old question about otters', '', NULL, 101.0,
    'complete', NULL, NULL);
INSERT INTO messages VALUES (10, 5, 1, 'assistant', 'old partial', '', NULL, 102.0,
    'streaming', NULL, NULL);
PRAGMA user_version = 1;
"""


def _make_v1_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.close()


def _add_pinned_column(conn: sqlite3.Connection) -> None:
    conn.execute("ALTER TABLE conversations ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
    conn.execute("UPDATE conversations SET pinned = 1 WHERE title = 'Old chat'")


def test_opening_an_old_schema_file_keeps_and_indexes_its_rows(db_path: Path) -> None:
    _make_v1_file(db_path)
    with ChatStore(db_path) as store:
        assert store.notice is None
        assert store.recovered_messages == 1
        conv = store.get_conversation(5)
        assert (conv.title, conv.settings.device, conv.system_prompt) == ("Old chat", "GPU", "sys")
        assert [m.content for m in store.messages(5)] == [
            "old question about otters",
            "old partial",
        ]
        assert store.messages(5)[1].status == "incomplete"
        # Rows written before the search index existed are found.
        assert [s.id for s in store.list_conversations("otters")] == [5]
        assert store.create_conversation().id == 6


def test_migrations_run_in_order_from_an_older_version(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make_v1_file(db_path)
    applied: list[int] = []

    def migration_2(conn: sqlite3.Connection) -> None:
        applied.append(2)
        _add_pinned_column(conn)

    def migration_3(conn: sqlite3.Connection) -> None:
        applied.append(3)
        conn.execute("CREATE TABLE tags (conversation_id INTEGER, tag TEXT)")

    # The v1 file meets the first shipped migration and two made up here as 2 and 3.
    monkeypatch.setattr(
        migrations, "MIGRATIONS", [*migrations.MIGRATIONS[:1], migration_2, migration_3]
    )
    with ChatStore(db_path) as store:
        assert applied == [2, 3]
        with store._read() as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
            assert conn.execute("SELECT pinned FROM conversations WHERE id = 5").fetchone()[0] == 1
        assert store.get_conversation(5).title == "Old chat"
    with ChatStore(db_path):
        assert applied == [2, 3]  # nothing re-applied


def test_a_failing_migration_leaves_the_old_version_intact(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _make_v1_file(db_path)

    def broken(conn: sqlite3.Connection) -> None:
        _add_pinned_column(conn)
        raise RuntimeError("bug in migration 2")

    # The v1 file meets a broken migration 2 (standing in for any later one).
    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS[:1], broken])
    with pytest.raises(RuntimeError, match="bug in migration 2"):
        ChatStore(db_path)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    columns = [row[1] for row in conn.execute("PRAGMA table_info(conversations)")]
    assert "pinned" not in columns
    assert conn.execute("SELECT title FROM conversations").fetchall() == [("Old chat",)]
    conn.close()
    assert sorted(p.name for p in db_path.parent.iterdir() if "damaged" in p.name) == []


def test_a_newer_schema_is_refused_and_left_untouched(db_path: Path) -> None:
    _make_v1_file(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    original = db_path.read_bytes()
    with pytest.raises(ChatStoreError) as info:
        ChatStore(db_path)
    assert info.value.code == "CHATS_TOO_NEW"
    assert "newer version" in str(info.value)
    assert db_path.read_bytes() == original
    assert not [p for p in db_path.parent.iterdir() if "damaged" in p.name]


# ------------------------------------------------------------------------------ damaged files


def _fill(path: Path) -> None:
    with ChatStore(path) as store:
        for i in range(30):
            conv = store.create_conversation(f"chat {i}")
            store.add_message(conv.id, "user", f"message {i} " * 100)


def _corrupt_messages_root(path: Path) -> None:
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages'").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with path.open("r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\xab" * page_size)


def _bad_freelist_count(path: Path) -> None:
    # Structurally readable, but quick_check reports the freelist size is wrong.
    data = bytearray(path.read_bytes())
    data[36:40] = struct.pack(">I", 7)
    path.write_bytes(data)


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_text("this is a text file, not a database\n" * 100),
        lambda p: p.write_bytes(os.urandom(8192)),
        _corrupt_messages_root,
        _bad_freelist_count,
    ],
    ids=["text-file", "random-bytes", "corrupt-page", "quick-check-fails"],
)
def test_damaged_file_is_moved_aside_and_an_empty_store_starts(
    db_path: Path, damage: object
) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    if damage in (_corrupt_messages_root, _bad_freelist_count):
        _fill(db_path)
    damage(db_path)  # type: ignore[operator]
    damaged_bytes = db_path.read_bytes()

    with ChatStore(db_path) as store:
        assert store.notice is not None
        assert "could not be read" in store.notice and "empty chat history" in store.notice
        assert "\n" not in store.notice
        assert store.list_conversations() == []
        conv = store.create_conversation("fresh start")
        assert store.get_conversation(conv.id).title == "fresh start"
    backups = [p for p in db_path.parent.iterdir() if p.name.startswith(f"{db_path.name}.damaged-")]
    main_backups = [p for p in backups if not p.name.endswith(("-wal", "-shm"))]
    assert len(main_backups) == 1
    assert str(main_backups[0]) in store.notice
    assert main_backups[0].read_bytes() == damaged_bytes
    with ChatStore(db_path) as reopened:  # the fresh store is healthy
        assert reopened.notice is None
        assert [s.title for s in reopened.list_conversations()] == ["fresh start"]


def test_unopenable_path_is_an_error_not_damage(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    path.mkdir()  # a folder where the file should be
    with pytest.raises(ChatStoreError) as info:
        ChatStore(path)
    assert info.value.code == "CHATS_UNAVAILABLE"
    assert path.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["chats.sqlite3"]


# ------------------------------------------------------------------------------ crash recovery

CHILD = """
import sys, time
from pathlib import Path
from qwen_mtp_desktop.core.chat.store.store import ChatStore

store = ChatStore(Path(sys.argv[1]))
conv = store.create_conversation("crash test")
store.add_message(conv.id, "user", "first question")
first = store.begin_assistant_message(conv.id)
store.append_to_message(first.id, "first answer", "first reasoning")
store.finish_message(first.id, {"mode": "mtp"}, model="m")
store.add_message(conv.id, "user", "second question")
answer = store.begin_assistant_message(conv.id)
print("ready", conv.id, answer.id, flush=True)
i = 0
while True:
    store.append_to_message(answer.id, f"chunk-{i} ", f"r{i} ")
    print("appended", i, flush=True)
    i += 1
    time.sleep(0.005)
"""


@pytest.mark.subprocess
@pytest.mark.timeout(120)
def test_answer_streaming_when_the_process_is_killed_is_kept_as_incomplete(
    db_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    try:
        ready = child.stdout.readline().split()
        assert ready[:1] == ["ready"], child.stderr.read() if child.stderr else ""
        conv_id, answer_id = int(ready[1]), int(ready[2])
        reported = -1
        while reported < 20:
            line = child.stdout.readline()
            assert line, "the child stopped writing early"
            reported = int(line.split()[1])
        kill = getattr(signal, "SIGKILL", signal.SIGTERM)  # Windows has no SIGKILL
        os.kill(child.pid, kill)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        if child.stderr is not None:
            child.stderr.close()
    assert child.returncode != 0

    with ChatStore(db_path) as store:
        assert store.notice is None
        assert store.recovered_messages == 1
        messages = store.messages(conv_id)
        assert [(m.role, m.status) for m in messages] == [
            ("user", "complete"),
            ("assistant", "complete"),
            ("user", "complete"),
            ("assistant", "incomplete"),
        ]
        assert [m.content for m in messages[:3]] == [
            "first question",
            "first answer",
            "second question",
        ]
        assert messages[1].reasoning == "first reasoning"
        assert messages[1].stats is not None
        assert (messages[1].stats["mode"], messages[1].stats["model"]) == ("mtp", "m")
        partial = messages[3]
        assert partial.id == answer_id
        # Every append the child reported is there, whole: a prefix of complete chunks.
        count = partial.content.count("chunk-")
        assert count > reported
        assert partial.content == "".join(f"chunk-{i} " for i in range(count))
        assert partial.reasoning == "".join(f"r{i} " for i in range(count))
    with ChatStore(db_path) as store:
        assert store.recovered_messages == 0


# --------------------------------------------------------------------------------- concurrency


def test_concurrent_writes_from_several_threads_are_all_kept(db_path: Path) -> None:
    threads_n, per_thread = 8, 40
    errors: list[BaseException] = []
    with ChatStore(db_path) as store, ChatStore(db_path) as other_connection:
        conv = store.create_conversation("busy")
        answer = store.begin_assistant_message(conv.id)

        def writer(k: int) -> None:
            # Half the threads use a second connection: the busy timeout covers them.
            target = store if k % 2 == 0 else other_connection
            try:
                for i in range(per_thread):
                    target.add_message(conv.id, "user", f"t{k}-{i}")
                    target.append_to_message(answer.id, f"[{k}:{i}]")
                    own = target.create_conversation(f"thread {k} chat {i}")
                    target.rename(own.id, f"thread {k} renamed {i}")
                    target.list_conversations("renamed")
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(k,)) for k in range(threads_n)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []

        messages = store.messages(conv.id)
        users = [m for m in messages if m.role == "user"]
        assert sorted(m.content for m in users) == sorted(
            f"t{k}-{i}" for k in range(threads_n) for i in range(per_thread)
        )
        positions = [m.position for m in messages]
        assert positions == list(range(len(messages)))  # unique and gap-free
        streamed = store.get_message(answer.id).content
        for k in range(threads_n):
            for i in range(per_thread):
                assert streamed.count(f"[{k}:{i}]") == 1
        assert len(store.list_conversations("renamed")) == threads_n * per_thread


# --------------------------------------------------------------------------------- performance


def test_large_history_is_fast(db_path: Path) -> None:
    with ChatStore(db_path) as store:
        started = time.perf_counter()
        big = store.create_conversation("Long chat")
        for i in range(200):
            store.add_message(big.id, "user" if i % 2 == 0 else "assistant", f"message {i} " * 80)
        for i in range(999):
            conv = store.create_conversation(f"Chat number {i}")
            store.add_message(conv.id, "user", f"question {i} about subject-{i % 7}-zz")
            store.add_message(conv.id, "assistant", f"answer {i} " * 40)
        fill_s = time.perf_counter() - started

    started = time.perf_counter()
    store = ChatStore(db_path)
    open_s = time.perf_counter() - started
    with store:
        started = time.perf_counter()
        listed = store.list_conversations()
        list_s = time.perf_counter() - started
        started = time.perf_counter()
        messages = store.messages(big.id)
        conversation = store.get_conversation(big.id)
        chat_s = time.perf_counter() - started
        started = time.perf_counter()
        found = store.list_conversations("subject-3-zz")
        search_s = time.perf_counter() - started
        started = time.perf_counter()
        found_short = store.list_conversations("zz")
        short_search_s = time.perf_counter() - started

    assert len(listed) == 1000 and len(messages) == 200
    assert conversation.title == "Long chat"
    assert len(found) == len([i for i in range(999) if i % 7 == 3])
    assert len(found_short) == 999
    print(
        f"\nchat store timings ({store.search_backend}): fill {fill_s:.2f} s, "
        f"open {open_s * 1000:.1f} ms, list 1000 {list_s * 1000:.1f} ms, "
        f"open chat of 200 {chat_s * 1000:.1f} ms, "
        f"search {search_s * 1000:.1f} ms, 2-char search {short_search_s * 1000:.1f} ms"
    )
    assert list_s < 0.5
    assert chat_s < 0.5
    assert search_s < 0.5


def test_stats_summary_shows_auto_and_reads_old_rows() -> None:
    from qwen_mtp_desktop.core.chat.store.records import stats_summary

    old_row = {"mode": "mtp", "num_assistant_tokens": 2, "generated_tokens": 10}
    assert stats_summary(old_row) == "MTP n=2 · 10 tokens"
    assert stats_summary({"mode": "baseline", "num_assistant_tokens": 0}) == "plain decoding"
    lookup = {"mode": "lookup", "num_assistant_tokens": 3, "max_ngram_size": 2}
    assert stats_summary(lookup) == "prompt lookup K=3, n-gram 2"
    new_row = {"method": DecodingMethod.lookup(3, 2).to_record(), "acceptance_rate": 0.5}
    assert stats_summary(new_row) == "prompt lookup K=3, n-gram 2 · acceptance 50%"
    auto_row = {
        **old_row,
        "decoding": "auto",
        "auto": {"summary": "MTP n=2: 78% accepted, 1.3x", "choice": "MTP n=2"},
    }
    assert stats_summary(auto_row).startswith("Auto: MTP n=2: 78% accepted, 1.3x · MTP n=2")
    broken = {**old_row, "auto": "not a dict"}
    assert stats_summary(broken) == "MTP n=2 · 10 tokens"


def test_export_carries_tool_calls_and_results(store: ChatStore) -> None:
    """An answer's rounds of tool calls (as the chat stores them) in both formats: JSON as the
    message's own `tool_calls`, Markdown as a folded block per call with its arguments and
    result, fenced so a result holding backticks cannot end the block."""
    from qwen_mtp_desktop.core.chat.tools import ToolRound, TracedCall, trace_record

    conv = store.create_conversation("Tools", model_dir="/models/q")
    store.add_message(conv.id, "user", "What is in notes.md?")
    answer = store.begin_assistant_message(conv.id)
    store.append_to_message(answer.id, "It lists two tasks.")
    read = TracedCall(
        "call_1", "read_file", "files", "read", '{"path": "notes.md", "lines": 2}', "ok",
        "```\n- task <a>\n```", 100.0, 0.25,
    )  # fmt: skip
    denied = TracedCall("call_2", "rm", "files", "rm", '{"path": "/"}', "denied")
    rounds = [ToolRound("Let me look.", (read,)), ToolRound("", (denied,))]
    store.finish_message(answer.id, {**_stats(), "tool_calls": trace_record(rounds)})

    document = json.loads(store.export_json(conv.id))
    exported = document["messages"][1]
    assert document["version"] == 3 and "tool_calls" not in exported["stats"]
    assert exported["tool_calls"] == trace_record(rounds)
    assert exported["content"] == "It lists two tasks."
    assert document["messages"][0]["tool_calls"] == []

    markdown = store.export_markdown(conv.id)
    assert (
        "Let me look.\n\n"
        "<details><summary>Tool: read (files) · done in 0.25 s</summary>\n\n"
        "Function `read_file`, arguments:\n\n"
        '```json\n{\n  "path": "notes.md",\n  "lines": 2\n}\n```\n\n'
        "Result:\n\n"
        "````text\n```\n- task <a>\n```\n````\n\n"
        "</details>\n\n"
        "<details><summary>Tool: rm (files) · denied</summary>"
    ) in markdown
    assert "Outcome:\n\n```text\n(none)\n```" in markdown
    # The calls come before the answer they led to.
    assert markdown.index("Tool: rm") < markdown.index("It lists two tasks.")


def test_export_survives_crafted_tool_calls(store: ChatStore) -> None:
    """A stored record's calls may be damaged or crafted (arguments nested past the parser's
    recursion limit, wrong types): the export shows what can be read and never fails."""
    conv = store.create_conversation("Crafted")
    answer = store.begin_assistant_message(conv.id)
    deep = "[" * 200_000
    crafted = [
        {"content": "", "calls": [
            {"id": "c", "function": "f", "server": "s", "tool": "t", "arguments": deep,
             "status": "ok", "result": "r"},
            {"id": 5, "function": "f"},
        ]},
        "not a round",
    ]  # fmt: skip
    store.finish_message(answer.id, {**_stats(), "tool_calls": crafted})
    markdown = store.export_markdown(conv.id)
    assert markdown.count("<details><summary>Tool: t (s) · done</summary>") == 1
    (call,) = json.loads(store.export_json(conv.id))["messages"][0]["tool_calls"][0]["calls"]
    assert call["arguments"] == deep[: len(call["arguments"])] and call["result"] == "r"


def test_preview_text_is_plain_words() -> None:
    """Issue 44, minor 6: the chat list shows words, not Markdown marks."""
    from qwen_mtp_desktop.core.chat.markdown import plain_text

    def shown(text: str) -> str:
        return " ".join(plain_text(text).split())

    assert shown("# Sorting in Python\n\nUse **sorted()** and `list.sort()`.") == (
        "Sorting in Python Use sorted() and list.sort()."
    )
    assert shown("- a\n- b\n> quoted\n1. one") == "a b quoted one"
    assert shown("| a | b |\n|---|---|\n| 1 | 2 |") == "a b 1 2"
    assert shown("See [the docs](http://x) ![pic](y)") == "See the docs pic"
    assert shown("```python\nprint(1)\n```") == "print(1)"
    assert shown("2 * 3 * 4 and snake_case_name") == "2 * 3 * 4 and snake_case_name"
