"""Message versions in the real SQLite chat store: regenerate and edit keep earlier versions,
switching shows a version with its own answers and stats, delete has an exact undo, and a
version-1 database upgrades without losing anything."""

from __future__ import annotations

import copy
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from qwen_mtp_desktop.core.chat.store.migrations import MIGRATIONS
from qwen_mtp_desktop.core.chat.store.records import ChatStoreError, DeletedMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.turns import answer_again, start_turn


def _answer(store: ChatStore, message_id: int, text: str, tokens: int) -> None:
    store.finish_message(message_id, {"generated_tokens": tokens}, "complete", answer_delta=text)


def _shown(store: ChatStore, conversation_id: int) -> list[tuple[str, str, int, int]]:
    return [
        (m.role, m.content, m.version, m.version_count) for m in store.messages(conversation_id)
    ]


def test_regenerate_keeps_versions_each_with_its_stats(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation("t")
        user, first = start_turn(store, conv.id, "Count to 3")
        _answer(store, first.id, "1 2 3", 3)
        branch, second = answer_again(store, user.id)
        assert [m.id for m in branch] == [user.id]
        assert (second.version, second.version_count, second.status) == (2, 2, "streaming")
        _answer(store, second.id, "one two three", 5)
        assert _shown(store, conv.id) == [
            ("user", "Count to 3", 1, 1),
            ("assistant", "one two three", 2, 2),
        ]
        # Version 1 comes back with its own text and its own stats.
        shown = store.switch_version(second.id, -1)
        assert [(m.content, m.stats and m.stats["generated_tokens"]) for m in shown] == [
            ("Count to 3", None),
            ("1 2 3", 3),
        ]
        assert store.switch_version(first.id, -5)[-1].id == first.id  # clamped
        assert store.switch_version(first.id, +1)[-1].stats["generated_tokens"] == 5  # type: ignore[index]
        # The chat list counts and previews the shown branch only.
        (summary,) = store.list_conversations()
        assert (summary.message_count, summary.preview) == (2, "one two three")


def test_edit_keeps_the_old_question_with_its_own_answers(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation("t")
        user, answer = start_turn(store, conv.id, "Count to 3")
        _answer(store, answer.id, "1 2 3", 3)
        _, answer2 = start_turn(store, conv.id, "again")
        _answer(store, answer2.id, "1 2 3", 3)
        branch, fresh = answer_again(store, user.id, "Count to 4")
        assert [m.id for m in branch] == [user.id]  # the shown question keeps its id
        assert (branch[0].content, branch[0].version, branch[0].version_count) == (
            "Count to 4",
            2,
            2,
        )
        _answer(store, fresh.id, "1 2 3 4", 4)
        old = store.switch_version(user.id, -1)
        assert [m.content for m in old] == ["Count to 3", "1 2 3", "again", "1 2 3"]
        assert old[0].version == 1
        back = store.switch_version(old[0].id, +1)
        assert [m.content for m in back] == ["Count to 4", "1 2 3 4"]


def test_delete_and_undo_restore_exactly(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation("t")
        user, answer = start_turn(store, conv.id, "q")
        _answer(store, answer.id, "a1", 1)
        _, again = answer_again(store, user.id)
        _answer(store, again.id, "a2", 2)
        before_all = store.export_json(conv.id)
        before_time = store.get_conversation(conv.id).updated_at
        deleted = store.delete_message(again.id)
        assert isinstance(deleted, DeletedMessage)
        # The other version is shown, with its stats; nothing stale.
        assert _shown(store, conv.id) == [("user", "q", 1, 1), ("assistant", "a1", 1, 1)]
        restored = store.restore_messages(deleted)
        assert [m.id for m in restored] == [user.id, again.id]
        assert store.get_conversation(conv.id).updated_at == before_time
        assert (
            store.export_json(conv.id).split('"exported_at"')[1].split("\n", 1)[1]
            == (before_all.split('"exported_at"')[1].split("\n", 1)[1])
        )
        # Undo after the chat changed again is refused and changes nothing.
        deleted = store.delete_message(user.id)
        start_turn(store, conv.id, "new")
        shown = _shown(store, conv.id)
        with pytest.raises(ChatStoreError) as info:
            store.restore_messages(deleted)
        assert info.value.code == "MESSAGE_RESTORE_STALE"
        assert _shown(store, conv.id) == shown


def test_deleting_a_chat_and_undo_keep_hidden_versions(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation("t")
        user, answer = start_turn(store, conv.id, "q")
        _answer(store, answer.id, "a1", 1)
        _, again = answer_again(store, user.id)
        _answer(store, again.id, "a2", 2)
        store.restore(store.delete(conv.id))
        assert _shown(store, conv.id)[-1] == ("assistant", "a2", 2, 2)
        assert store.switch_version(again.id, -1)[-1].content == "a1"


# --------------------------------------------------------------------------- migration 1 -> 2

V1_ROWS = """
INSERT INTO conversations VALUES (3, 'Otters', 10.0, 20.0, '/m', 'be brief', '{"device": "GPU"}');
INSERT INTO conversations VALUES (4, 'Second', 30.0, 40.0, NULL, '', '{}');
INSERT INTO messages VALUES (7, 3, 0, 'user', 'tell me about otters', '', '/tmp/otter.png',
    11.0, 'complete', NULL, NULL);
INSERT INTO messages VALUES (8, 3, 1, 'assistant', 'Otters swim.', 'thinking...', NULL, 12.0,
    'complete', NULL, '{"generated_tokens": 3, "mode": "mtp", "model": "m"}');
INSERT INTO messages VALUES (11, 3, 4, 'user', 'more', '', NULL, 13.0, 'complete', NULL, NULL);
INSERT INTO messages VALUES (12, 3, 5, 'assistant', 'failed', '', NULL, 14.0, 'error',
    'ENGINE_STOPPED', NULL);
INSERT INTO messages VALUES (20, 4, 0, 'user', 'hello', '', NULL, 31.0, 'complete', NULL, NULL);
INSERT INTO messages VALUES (40, 4, 1, 'assistant', 'gone', '', NULL, 32.0, 'complete', NULL,
    NULL);
DELETE FROM messages WHERE id = 40;
"""


def test_migration_2_upgrades_a_version_1_database_without_losing_anything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chats.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    MIGRATIONS[0](conn)
    conn.execute("PRAGMA user_version = 1")
    conn.executescript(V1_ROWS)
    columns = "id, conversation_id, position, role, content, reasoning, image_path, created_at, "
    columns += "status, error, stats_json"
    before = conn.execute(f"SELECT {columns} FROM messages ORDER BY id").fetchall()
    conn.close()

    with ChatStore(path) as store:
        with store._read() as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 3
            after = db.execute(f"SELECT {columns} FROM messages ORDER BY id").fetchall()
            assert [tuple(row) for row in after] == before
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        # Each old chat is one straight branch, every message its only version.
        otters = store.messages(3)
        assert [m.id for m in otters] == [7, 8, 11, 12]
        assert [m.parent_id for m in otters] == [None, 7, 8, 11]
        assert {(m.version, m.version_count) for m in otters} == {(1, 1)}
        assert otters[1].stats == {"generated_tokens": 3, "mode": "mtp", "model": "m"}
        assert otters[0].image_path == Path("/tmp/otter.png")
        assert [m.id for m in store.messages(4)] == [20]
        # Search still finds old rows; a deleted id is still never handed out again.
        assert [s.id for s in store.list_conversations("otters swim")] == [3]
        assert store.add_message(4, "assistant", "new").id == 41
        # And the upgraded chat takes versions.
        _, answer = answer_again(store, 11)
        assert (answer.version, answer.version_count) == (2, 2)


# ------------------------------------------------------------- state machine vs a reference


@dataclass
class _Node:
    role: str
    content: str
    parent: int | None
    order: int
    selected: bool = True


@dataclass
class _Reference:
    """The versions as a plain tree: what the user should see after each action."""

    nodes: dict[int, _Node] = field(default_factory=dict)
    counter: int = 0

    def add(self, role: str, content: str, parent: int | None) -> int:
        self.counter += 1
        for node in self.children(parent):
            node_id = self.id_of(node)
            self.nodes[node_id].selected = False
        self.nodes[self.counter] = _Node(role, content, parent, self.counter)
        return self.counter

    def id_of(self, node: _Node) -> int:
        return node.order

    def children(self, parent: int | None) -> list[_Node]:
        return sorted((n for n in self.nodes.values() if n.parent == parent), key=lambda n: n.order)

    def shown(self) -> list[_Node]:
        branch: list[_Node] = []
        parent: int | None = None
        while True:
            chosen = [n for n in self.children(parent) if n.selected]
            assert len(chosen) <= 1
            if not chosen:
                return branch
            branch.append(chosen[0])
            parent = chosen[0].order

    def view(self) -> list[tuple[str, str, int, int]]:
        out = []
        for node in self.shown():
            versions = self.children(node.parent)
            out.append((node.role, node.content, versions.index(node) + 1, len(versions)))
        return out

    def switch(self, node: _Node, step: int) -> None:
        versions = self.children(node.parent)
        index = max(0, min(len(versions) - 1, versions.index(node) + step))
        for other in versions:
            other.selected = other is versions[index]

    def delete(self, node: _Node) -> None:
        versions = self.children(node.parent)
        if len(versions) == 1:
            for child in self.children(node.order):
                child.parent = node.parent
            del self.nodes[node.order]
            return
        doomed = [node.order]
        while doomed:
            current = doomed.pop()
            doomed += [c.order for c in self.children(current)]
            del self.nodes[current]
        if node.selected:
            index = versions.index(node)
            (versions[index - 1] if index > 0 else versions[1]).selected = True


class ConversationVersions(RuleBasedStateMachine):
    """Random send / regenerate / edit / switch / delete / undo sequences: the store's shown
    branch always equals the reference tree's."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(__import__("tempfile").mkdtemp())
        self.store = ChatStore(self.tmp / "chats.sqlite3")
        self.ref = _Reference()
        self.texts = 0
        self.undo: tuple[DeletedMessage, _Reference] | None = None

    @initialize()
    def start(self) -> None:
        self.conv = self.store.create_conversation("machine").id

    def _text(self, kind: str) -> str:
        self.texts += 1
        return f"{kind}{self.texts}"

    def _finish(self, answer_id: int, ref_parent: int) -> None:
        text = self._text("a")
        self.store.finish_message(
            answer_id, {"generated_tokens": self.texts}, "complete", answer_delta=text
        )
        self.ref.add("assistant", text, ref_parent)

    @rule()
    def send(self) -> None:
        text = self._text("u")
        _, answer = start_turn(self.store, self.conv, text)
        shown = self.ref.shown()
        parent = self.ref.add("user", text, shown[-1].order if shown else None)
        self._finish(answer.id, parent)
        self.undo = None

    @precondition(lambda self: any(n.role == "user" for n in self.ref.shown()))
    @rule(data=st.data(), edit=st.booleans())
    def answer_again(self, data: st.DataObject, edit: bool) -> None:
        shown = self.ref.shown()
        users = [i for i, n in enumerate(shown) if n.role == "user"]
        index = data.draw(st.sampled_from(users))
        stored = self.store.messages(self.conv)[index]
        node = shown[index]
        if edit:
            text = self._text("e")
            _, answer = answer_again(self.store, stored.id, text)
            parent = self.ref.add("user", text, node.parent)
        else:
            _, answer = answer_again(self.store, stored.id)
            parent = node.order
        self._finish(answer.id, parent)
        self.undo = None

    @precondition(lambda self: bool(self.ref.nodes))
    @rule(data=st.data(), step=st.sampled_from([-2, -1, 1, 2]))
    def switch(self, data: st.DataObject, step: int) -> None:
        shown = self.ref.shown()
        index = data.draw(st.integers(0, len(shown) - 1))
        branch = self.store.switch_version(self.store.messages(self.conv)[index].id, step)
        self.ref.switch(shown[index], step)
        assert [(m.role, m.content, m.version, m.version_count) for m in branch] == (
            self.ref.view()
        )
        self.undo = None

    @precondition(lambda self: bool(self.ref.nodes))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        shown = self.ref.shown()
        index = data.draw(st.integers(0, len(shown) - 1))
        saved = copy.deepcopy(self.ref)
        deleted = self.store.delete_message(self.store.messages(self.conv)[index].id)
        self.ref.delete(shown[index])
        self.undo = (deleted, saved)

    @precondition(lambda self: self.undo is not None)
    @rule()
    def undo_delete(self) -> None:
        assert self.undo is not None
        deleted, saved = self.undo
        self.store.restore_messages(deleted)
        self.ref = saved
        self.undo = None

    @invariant()
    def shown_branch_matches(self) -> None:
        if hasattr(self, "conv"):
            assert _shown(self.store, self.conv) == self.ref.view()
            # Every shown answer carries its own stats (the number written with its text).
            for message in self.store.messages(self.conv):
                if message.role == "assistant":
                    assert message.stats is not None
                    assert message.content.endswith(str(message.stats["generated_tokens"]))

    def teardown(self) -> None:
        self.store.close()
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)


ConversationVersions.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_conversation_versions_state_machine = ConversationVersions.TestCase
# A long state machine (~16 s): outside `make check`.
test_conversation_versions_state_machine.pytestmark = [pytest.mark.slow]
