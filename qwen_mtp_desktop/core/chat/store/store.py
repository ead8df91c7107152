"""The conversation store (`ChatStore`): chats, their messages and per-answer statistics in SQLite.

One file, `app_paths().data_dir / "chats.sqlite3"`, in WAL mode with foreign keys on. The schema
is versioned with `PRAGMA user_version`; `MIGRATIONS[i]` takes the database from version i to
i + 1 and each one runs in its own transaction, so a failed upgrade leaves the old version intact.

Threading: one connection, opened with `check_same_thread=False` and guarded by a re-entrant lock.
The GUI thread and the worker threads take turns; writes are a few rows each, so serializing them
costs nothing noticeable, and it means the app never races itself into SQLITE_BUSY. The busy
timeout is still set, for another process (the CLI) using the same file.

Crash consistency: an answer is written while it streams (`append_to_message`, which the caller
batches to about one call every 0.5 s). When the app dies mid-answer, the next open marks that
message "incomplete" and keeps its partial text. The store assumes one app process owns the file:
a second process opening it would mark the first one's streaming answer incomplete.

Search uses an FTS5 trigram index when this SQLite build has one (substring matching that also
works for Chinese and other text without spaces), else LIKE. The index is derived data, not part
of the versioned schema: it is created, or dropped, on open to suit the running build.

A file that is not a database, or fails `PRAGMA quick_check`, is moved aside to
`<name>.damaged-<timestamp>` and the store starts empty, saying so through `notice`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from qwen_mtp_desktop.core.chat.markdown import plain_text
from qwen_mtp_desktop.core.chat.store import rows, search, versions
from qwen_mtp_desktop.core.chat.store.chat_file import chat_json, chat_markdown
from qwen_mtp_desktop.core.chat.store.database import open_database, rebuild_search_index
from qwen_mtp_desktop.core.chat.store.records import (
    ROLES,
    STATUSES,
    ChatSettings,
    ChatStoreError,
    Conversation,
    ConversationSummary,
    DeletedConversation,
    DeletedMessage,
    MessageStatus,
    SearchBackend,
    SearchMatch,
    StoredMessage,
    UnknownConversationError,
    UnknownMessageError,
)
from qwen_mtp_desktop.core.chat.store.search import MAX_SEARCH_TERMS as MAX_SEARCH_TERMS
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import Role
from qwen_mtp_desktop.core.files.paths import app_paths

log = logging.getLogger(__name__)

DB_FILENAME = "chats.sqlite3"
DEFAULT_TITLE = "New chat"
MAX_TITLE_CHARS = 200
PREVIEW_CHARS = 120
#: How an answer's stored stats (json.dumps' default separators) say it was stopped: a list of
#: conversations finds "stopped before the answer began" without parsing every stats row.
STOPPED_STATS = '"finish_reason": "cancelled"'
# ---------------------------------------------------------------------------------------- store


def default_db_path() -> Path:
    """Where the app keeps its chats: `chats.sqlite3` in the data dir."""
    return app_paths().data_dir / DB_FILENAME


def _clean_title(title: str) -> str:
    # One line, no runaway lengths (titles are often made from the first prompt).
    cleaned = " ".join(title.split())
    if len(cleaned) > MAX_TITLE_CHARS:
        cleaned = cleaned[: MAX_TITLE_CHARS - 1].rstrip() + "…"
    return cleaned or DEFAULT_TITLE


def _check_role(role: str) -> Role:
    if role not in ROLES:
        raise ValueError(f"unknown message role {role!r}; expected one of {', '.join(ROLES)}")
    return cast(Role, role)


def _search_index_fault(exc: sqlite3.Error) -> bool:
    """Whether an error is the FTS index's (its table or shadow tables gone or damaged),
    which rebuilding it from the chats repairs; not the chats' own tables."""
    text = str(exc).lower()
    return "_fts" in text or "fts5" in text or "vtable constructor failed" in text


class ChatStore:
    """The conversation store. Every method is safe to call from any thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        #: A plain-language message when the file was damaged and set aside, or damaged rows
        #: were repaired, else None; `notice_title` says which.
        self.notice: str | None = None
        #: Answers found still "streaming" on open (the app died) and marked incomplete.
        self.recovered_messages = 0
        self.search_backend: SearchBackend = "like"
        self._lock = threading.RLock()
        self._last_stamp = 0.0
        opened = open_database(path)
        self.notice = opened.notice
        self.notice_title = opened.notice_title
        self.recovered_messages = opened.recovered_messages
        self.search_backend = opened.search_backend
        self._conn: sqlite3.Connection | None = opened.conn

    # ----------------------------------------------------------------------------------- close

    def close(self) -> None:
        with self._lock:
            if self._conn is None:
                return
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()
            self._conn = None

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------- helpers

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise ChatStoreError("The chat store is closed.", code="CHATS_CLOSED")
            yield self._conn

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._read() as conn:
            # IMMEDIATE takes the write lock up front, so a read-then-write never deadlocks
            # against another process.
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except sqlite3.OperationalError as exc:
                conn.execute("ROLLBACK")
                if not _search_index_fault(exc):
                    raise
                # The search triggers failed (the index went missing while the app ran):
                # rebuilt from the chats, so trying again works; nothing was written.
                self._repair_search(conn, exc)
                raise ChatStoreError(
                    "The chat search index was damaged, so the change was not saved. The "
                    "index was rebuilt.",
                    "Try again.",
                    code="CHATS_INDEX_REBUILT",
                ) from exc
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _repair_search(self, conn: sqlite3.Connection, exc: sqlite3.Error) -> None:
        log.warning("chat search index failed (%s); rebuilding it", exc)
        self.search_backend = rebuild_search_index(conn)

    def _now(self) -> float:
        # Strictly increasing, so "newest first" is stable even on coarse clocks.
        with self._lock:
            self._last_stamp = max(time.time(), self._last_stamp + 1e-6)
            return self._last_stamp

    @staticmethod
    def _require_conversation(conn: sqlite3.Connection, conversation_id: int) -> None:
        row = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
        if row.fetchone() is None:
            raise UnknownConversationError(conversation_id)

    @staticmethod
    def _touch(conn: sqlite3.Connection, conversation_id: int, now: float) -> None:
        conn.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))

    # Every row is read through core.chat.store.rows, which never raises on a damaged value.
    _conversation_from_row = staticmethod(rows.conversation)
    _message_from_row = staticmethod(rows.message)

    def _get_message(self, conn: sqlite3.Connection, message_id: int) -> StoredMessage:
        row = conn.execute(versions.MESSAGE_SELECT + " WHERE m.id = ?", (message_id,)).fetchone()
        if row is None:
            raise UnknownMessageError(message_id)
        return self._message_from_row(row)

    @staticmethod
    def _message_row(conn: sqlite3.Connection, message_id: int) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM messages WHERE id = ?", (message_id,)
        ).fetchone()
        if row is None:
            raise UnknownMessageError(message_id)
        return row

    def _branch(self, conn: sqlite3.Connection, conversation_id: int) -> list[StoredMessage]:
        rows = conn.execute(
            versions.MESSAGE_SELECT + " WHERE m.conversation_id = ? AND m.shown = 1 "
            "ORDER BY m.position",
            (conversation_id,),
        ).fetchall()
        return [self._message_from_row(row) for row in rows]

    def _every_message(self, conn: sqlite3.Connection, conversation_id: int) -> list[StoredMessage]:
        rows = conn.execute(
            versions.MESSAGE_SELECT + " WHERE m.conversation_id = ? ORDER BY m.id",
            (conversation_id,),
        ).fetchall()
        return [self._message_from_row(row) for row in rows]

    def _insert_messages(
        self, conn: sqlite3.Connection, conversation_id: int, messages: Sequence[StoredMessage]
    ) -> None:
        """Put messages back verbatim (ids, versions, times, stats): undo of a delete."""
        conn.executemany(
            "INSERT INTO messages (id, conversation_id, position, role, content, reasoning, "
            "image_path, created_at, status, error, stats_json, parent_id, selected) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.id,
                    conversation_id,
                    m.position,
                    m.role,
                    m.content,
                    m.reasoning,
                    str(m.image_path) if m.image_path is not None else None,
                    m.created_at,
                    "incomplete" if m.status == "streaming" else m.status,
                    m.error,
                    json.dumps(m.stats) if m.stats is not None else None,
                    m.parent_id,
                    int(m.selected),
                )
                for m in messages
            ],
        )
        versions.reshow(conn, conversation_id)

    def _require_streaming(self, conn: sqlite3.Connection, message_id: int) -> None:
        message = self._get_message(conn, message_id)
        if message.status != "streaming":
            raise ChatStoreError(
                f"Message {message_id} is no longer being written (status {message.status}).",
                code="MESSAGE_NOT_STREAMING",
            )

    # ------------------------------------------------------------------------- conversations

    def create_conversation(
        self,
        title: str = "",
        *,
        model_dir: str | None = None,
        system_prompt: str = "",
        settings: ChatSettings | None = None,
    ) -> Conversation:
        """A new, empty conversation. An empty title becomes DEFAULT_TITLE."""
        chosen = settings or ChatSettings()
        now = self._now()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO conversations (title, created_at, updated_at, model_dir, "
                "system_prompt, settings_json) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    _clean_title(title),
                    now,
                    now,
                    model_dir,
                    system_prompt,
                    json.dumps(chosen.to_dict()),
                ),
            )
            new_id = cursor.lastrowid
        assert new_id is not None
        return self.get_conversation(new_id)

    def get_conversation(self, conversation_id: int) -> Conversation:
        with self._read() as conn:
            row = conn.execute(
                "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise UnknownConversationError(conversation_id)
        return self._conversation_from_row(row)

    def rename(self, conversation_id: int, title: str) -> Conversation:
        """Set the title (an empty one becomes DEFAULT_TITLE). Does not reorder the list."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE conversations SET title = ? WHERE id = ?",
                (_clean_title(title), conversation_id),
            )
            if cursor.rowcount == 0:
                raise UnknownConversationError(conversation_id)
        return self.get_conversation(conversation_id)

    def update_settings(self, conversation_id: int, settings: ChatSettings) -> Conversation:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE conversations SET settings_json = ? WHERE id = ?",
                (json.dumps(settings.to_dict()), conversation_id),
            )
            if cursor.rowcount == 0:
                raise UnknownConversationError(conversation_id)
        return self.get_conversation(conversation_id)

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> Conversation:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE conversations SET system_prompt = ? WHERE id = ?",
                (system_prompt, conversation_id),
            )
            if cursor.rowcount == 0:
                raise UnknownConversationError(conversation_id)
        return self.get_conversation(conversation_id)

    def set_model_dir(self, conversation_id: int, model_dir: str | None) -> Conversation:
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE conversations SET model_dir = ? WHERE id = ?", (model_dir, conversation_id)
            )
            if cursor.rowcount == 0:
                raise UnknownConversationError(conversation_id)
        return self.get_conversation(conversation_id)

    def set_pinned(self, conversation_id: int, pinned: bool) -> Conversation:
        """Pin a chat to the top of the list, or unpin it. Its time is unchanged."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE conversations SET pinned = ? WHERE id = ?",
                (1 if pinned else 0, conversation_id),
            )
            if cursor.rowcount == 0:
                raise UnknownConversationError(conversation_id)
        return self.get_conversation(conversation_id)

    def delete(self, conversation_id: int) -> DeletedConversation:
        """Delete a conversation and its messages; pass the result to `restore` to undo."""
        with self._write() as conn:
            snapshot = DeletedConversation(
                self.get_conversation(conversation_id),
                tuple(self._every_message(conn, conversation_id)),
            )
            conn.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        return snapshot

    def restore(self, deleted: DeletedConversation) -> Conversation:
        """Put a deleted conversation back with the same ids, text, times and stats.

        An answer that was streaming when it was deleted comes back "incomplete": its generation
        could not write to it in the meantime.
        """
        conv = deleted.conversation
        with self._write() as conn:
            try:
                conn.execute(
                    "INSERT INTO conversations (id, title, created_at, updated_at, model_dir, "
                    "system_prompt, settings_json, pinned) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        conv.id,
                        conv.title,
                        conv.created_at,
                        conv.updated_at,
                        conv.model_dir,
                        conv.system_prompt,
                        json.dumps(conv.settings.to_dict()),
                        1 if conv.pinned else 0,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise ChatStoreError(
                    f"Conversation {conv.id} cannot be restored: it already exists.",
                    code="ALREADY_RESTORED",
                ) from exc
            self._insert_messages(conn, conv.id, deleted.messages)
        return self.get_conversation(conv.id)

    def list_conversations(
        self, search_text: str | None = None, *, limit: int | None = None
    ) -> list[ConversationSummary]:
        """Conversations: pinned ones first, then most recently active first.

        `search_text` keeps those whose title, or any one message, contains every
        whitespace-separated term (case-insensitive substring match); each one found in a
        message says which, with a snippet (`ConversationSummary.match`).
        """
        terms = search.checked_terms(search_text)
        with self._read() as conn:
            try:
                found, hits = self._search(conn, terms, limit)
            except sqlite3.OperationalError as exc:
                if not terms or not _search_index_fault(exc):
                    raise
                # The index went missing while the app ran: rebuilt (or LIKE search from
                # now on), and the search asked again.
                self._repair_search(conn, exc)
                found, hits = self._search(conn, terms, limit)
        summaries = []
        for row in found:
            # The last message's words, Markdown marks removed ("# Sorting" reads "Sorting");
            # while the first answer streams (no text yet), the question before it.
            preview = " ".join(plain_text(rows.text(row["preview"])).split())
            if not preview and row["preview_status"] == "streaming":
                preview = " ".join(plain_text(rows.text(row["preview_before"])).split())
            if not preview and row["preview_status"] == "error":
                # An answer that failed before any text: say so, not "No messages".
                preview = "Failed: " + " ".join(rows.text(row["preview_error"]).split())
            elif not preview and row["preview_stopped"] == 1:
                preview = "Stopped before the answer began"
            if len(preview) > PREVIEW_CHARS:
                preview = preview[: PREVIEW_CHARS - 1].rstrip() + "…"
            summaries.append(rows.summary(row, preview, hits.get(int(row["id"]))))
        return summaries

    def _search(
        self, conn: sqlite3.Connection, terms: Sequence[str], limit: int | None
    ) -> tuple[list[sqlite3.Row], dict[int, SearchMatch]]:
        found = conn.execute(*self._list_sql(terms, limit)).fetchall()
        ids = [int(row["id"]) for row in found]
        return found, search.matches(conn, terms, self.search_backend, ids)

    def _list_sql(self, terms: Sequence[str], limit: int | None) -> tuple[str, list[Any]]:
        """The conversation list's SQL (matching every term, up to `limit`), its parameters."""
        where = ""
        params: list[Any] = []
        if terms:
            hits_sql, params = search.conversations_sql(terms, self.search_backend)
            where = f"WHERE c.id IN ({hits_sql})"
        limit_sql = ""
        if limit is not None:
            limit_sql = "LIMIT ?"
            params.append(max(limit, 0))
        sql = f"""
            SELECT c.id, c.title, c.created_at, c.updated_at, c.model_dir, c.pinned,
                (SELECT count(*) FROM messages WHERE conversation_id = c.id AND shown = 1)
                    AS message_count,
                substr(last.content, 1, {PREVIEW_CHARS * 4}) AS preview,
                last.role AS preview_role, last.status AS preview_status,
                substr((SELECT content FROM messages WHERE conversation_id = c.id AND shown = 1
                        AND position < last.position AND content != ''
                        ORDER BY position DESC LIMIT 1), 1, {PREVIEW_CHARS * 4})
                    AS preview_before,
                substr(last.error, 1, {PREVIEW_CHARS * 4}) AS preview_error,
                last.content = '' AND instr(last.stats_json, '{STOPPED_STATS}') > 0
                    AS preview_stopped
            FROM conversations AS c
            LEFT JOIN messages AS last ON last.id = (
                SELECT id FROM messages WHERE conversation_id = c.id AND shown = 1
                ORDER BY position DESC LIMIT 1)
            {where}
            ORDER BY c.pinned DESC, c.updated_at DESC, c.id DESC
            {limit_sql}
        """
        return sql, params

    # ------------------------------------------------------------------------------ messages

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        """The conversation's shown branch in order: for each message the version chosen
        (regenerate and edit keep older versions; `switch_version` chooses)."""
        with self._read() as conn:
            self._require_conversation(conn, conversation_id)
            return self._branch(conn, conversation_id)

    def get_message(self, message_id: int) -> StoredMessage:
        with self._read() as conn:
            return self._get_message(conn, message_id)

    def add_message(
        self,
        conversation_id: int,
        role: Role,
        content: str,
        *,
        reasoning: str = "",
        image_path: Path | str | None = None,
        status: MessageStatus = "complete",
        stats: Mapping[str, Any] | None = None,
    ) -> StoredMessage:
        """Append a message at the end of the conversation."""
        checked_role = _check_role(role)
        if status not in STATUSES:
            raise ValueError(f"unknown message status {status!r}")
        now = self._now()
        with self._write() as conn:
            self._require_conversation(conn, conversation_id)
            last = versions.last_shown(conn, conversation_id)
            cursor = conn.execute(
                "INSERT INTO messages (conversation_id, position, role, content, reasoning, "
                "image_path, created_at, status, stats_json, parent_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    0 if last is None else rows.next_position(last["position"]),
                    checked_role,
                    content,
                    reasoning,
                    str(image_path) if image_path is not None else None,
                    now,
                    status,
                    json.dumps(dict(stats)) if stats is not None else None,
                    None if last is None else int(last["id"]),
                ),
            )
            self._touch(conn, conversation_id, now)
            new_id = cursor.lastrowid
            assert new_id is not None
            return self._get_message(conn, new_id)

    def begin_assistant_message(self, conversation_id: int) -> StoredMessage:
        """An empty assistant message in status "streaming", to fill with `append_to_message`."""
        return self.add_message(conversation_id, "assistant", "", status="streaming")

    def append_to_message(
        self, message_id: int, answer_delta: str = "", reasoning_delta: str = ""
    ) -> None:
        """Add streamed text to a streaming message. Callers batch: about one call per 0.5 s."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE messages SET content = content || ?, reasoning = reasoning || ? "
                "WHERE id = ? AND status = 'streaming'",
                (answer_delta, reasoning_delta, message_id),
            )
            if cursor.rowcount == 0:
                self._require_streaming(conn, message_id)

    def finish_message(
        self,
        message_id: int,
        stats: GenerationStats | Mapping[str, Any] | None,
        status: MessageStatus | None = None,
        *,
        model: str | None = None,
        answer_delta: str = "",
        reasoning_delta: str = "",
    ) -> StoredMessage:
        """End a streaming message: add the last deltas, store the stats, set the status.

        Without `status`, a cancelled generation ends "incomplete" and any other "complete".
        """
        if isinstance(stats, GenerationStats):
            stats_dict: dict[str, Any] | None = stats.to_json_dict()
        else:
            stats_dict = dict(stats) if stats is not None else None
        if status is None:
            cancelled = stats_dict is not None and stats_dict.get("finish_reason") == "cancelled"
            status = "incomplete" if cancelled else "complete"
        if status not in STATUSES or status == "streaming":
            raise ValueError(f"a finished message cannot have status {status!r}")
        now = self._now()
        if stats_dict is not None:
            stats_dict = {**stats_dict, "model": model, "finished_at": now}
        return self._end_message(
            message_id, status, None, stats_dict, answer_delta, reasoning_delta, now
        )

    def fail_message(
        self,
        message_id: int,
        error: str,
        stats: GenerationStats | Mapping[str, Any] | None = None,
    ) -> StoredMessage:
        """Mark a streaming message as failed, keeping the text it had so far."""
        if isinstance(stats, GenerationStats):
            stats_dict: dict[str, Any] | None = stats.to_json_dict()
        else:
            stats_dict = dict(stats) if stats is not None else None
        return self._end_message(message_id, "error", error, stats_dict, "", "", self._now())

    def resume_message(self, message_id: int) -> StoredMessage:
        """An ended answer streaming again (Continue): its text and stats stay until
        `finish_message` adds the continuation and its stats; a crash meanwhile leaves it
        "incomplete" with every character written so far."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE messages SET status = 'streaming', error = NULL WHERE id = ? "
                "AND role = 'assistant' AND status IN ('complete', 'incomplete')",
                (message_id,),
            )
            if cursor.rowcount == 0:
                self._message_row(conn, message_id)  # UnknownMessageError when it is gone
                raise ChatStoreError(
                    "Only an answer that has ended can be continued.", code="NOT_CONTINUABLE"
                )
            return self._get_message(conn, message_id)

    def _end_message(
        self,
        message_id: int,
        status: MessageStatus,
        error: str | None,
        stats: dict[str, Any] | None,
        answer_delta: str,
        reasoning_delta: str,
        now: float,
    ) -> StoredMessage:
        with self._write() as conn:
            self._require_streaming(conn, message_id)
            conn.execute(
                "UPDATE messages SET content = content || ?, reasoning = reasoning || ?, "
                "status = ?, error = ?, stats_json = ? WHERE id = ?",
                (
                    answer_delta,
                    reasoning_delta,
                    status,
                    error,
                    json.dumps(stats) if stats is not None else None,
                    message_id,
                ),
            )
            message = self._get_message(conn, message_id)
            self._touch(conn, message.conversation_id, now)
            return message

    def edit_message(self, message_id: int, content: str) -> StoredMessage:
        """Replace a message's text (edit & regenerate: edit, then `truncate_after`)."""
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE messages SET content = ? WHERE id = ?", (content, message_id)
            )
            if cursor.rowcount == 0:
                raise UnknownMessageError(message_id)
            message = self._get_message(conn, message_id)
            self._touch(conn, message.conversation_id, self._now())
            return message

    def delete_message(self, message_id: int) -> DeletedMessage:
        """Delete one message (`versions.remove` says what goes with it); pass the result to
        `restore_messages` to undo."""
        with self._write() as conn:
            row = self._message_row(conn, message_id)
            conversation_id = int(row["conversation_id"])
            conversation = self.get_conversation(conversation_id)
            before = tuple(self._every_message(conn, conversation_id))
            versions.remove(conn, row)
            self._touch(conn, conversation_id, self._now())
            after = conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ?", (conversation_id,)
            ).fetchall()
            return DeletedMessage(
                message_id, conversation, before, frozenset(int(r[0]) for r in after)
            )

    def restore_messages(self, deleted: DeletedMessage) -> list[StoredMessage]:
        """Undo `delete_message`: the chat's messages, versions and time exactly as before.
        Refused when the chat changed since (its later messages would be lost)."""
        conversation_id = deleted.conversation.id
        with self._write() as conn:
            self._require_conversation(conn, conversation_id)
            now = conn.execute(
                "SELECT id FROM messages WHERE conversation_id = ?", (conversation_id,)
            ).fetchall()
            if frozenset(int(r[0]) for r in now) != deleted.remaining_ids:
                raise ChatStoreError(
                    "The message cannot be restored: the chat has changed since it was deleted.",
                    code="MESSAGE_RESTORE_STALE",
                )
            conn.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            self._insert_messages(conn, conversation_id, deleted.messages)
            self._touch(conn, conversation_id, deleted.conversation.updated_at)
            return self._branch(conn, conversation_id)

    def truncate_after(self, message_id: int) -> int:
        """Delete every message after this one, in every version; returns how many went."""
        with self._write() as conn:
            message = self._get_message(conn, message_id)
            doomed = versions.descendants(conn, message_id)
            conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in doomed])
            self._touch(conn, message.conversation_id, self._now())
        return len(doomed)

    def begin_version(self, message_id: int, new_text: str | None = None) -> StoredMessage:
        """Answer a message again, keeping what followed it as an earlier version: with
        `new_text`, the message itself gets a new version first (edit). Returns the empty,
        streaming answer, now on the shown branch."""
        now = self._now()
        with self._write() as conn:
            row = self._message_row(conn, message_id)
            conversation_id = int(row["conversation_id"])
            if new_text is not None:
                versions.keep_old_text(conn, row)
                conn.execute(
                    "UPDATE messages SET content = ?, created_at = ?, stats_json = NULL, "
                    "error = NULL WHERE id = ?",
                    (new_text, now, message_id),
                )
            versions.deselect_children(conn, message_id)
            cursor = conn.execute(
                "INSERT INTO messages (conversation_id, position, role, content, created_at, "
                "status, parent_id, selected) VALUES (?, ?, 'assistant', '', ?, 'streaming', ?, 1)",
                (conversation_id, rows.next_position(row["position"]), self._now(), message_id),
            )
            versions.reshow(conn, conversation_id)
            self._touch(conn, conversation_id, now)
            new_id = cursor.lastrowid
            assert new_id is not None
            return self._get_message(conn, new_id)

    def switch_version(self, message_id: int, step: int) -> list[StoredMessage]:
        """Show the version `step` places after (negative: before) this message's, clamped to
        the first and last; returns the shown branch."""
        with self._write() as conn:
            row = self._message_row(conn, message_id)
            ordered = versions.siblings(conn, row)
            index = [int(v["id"]) for v in ordered].index(message_id)
            target = ordered[max(0, min(len(ordered) - 1, index + step))]
            versions.select(conn, self._message_row(conn, int(target["id"])))
            return self._branch(conn, int(row["conversation_id"]))

    # -------------------------------------------------------------------------------- export

    def export_json(self, conversation_id: int) -> str:
        """The conversation as JSON (core.chat.store.chat_file)."""
        with self._read():  # holding the lock: no thread writes between the two reads
            return chat_json(self.get_conversation(conversation_id), self.messages(conversation_id))

    def export_markdown(self, conversation_id: int) -> str:
        """The conversation as Markdown (core.chat.store.chat_file)."""
        with self._read():
            return chat_markdown(
                self.get_conversation(conversation_id), self.messages(conversation_id)
            )
