"""The chat list's search in SQL: which chats match every searched word (FTS5 trigram, or LIKE),
and in each the message that matched, with a snippet around the match (core.chat.snippets).

Runs on the store's thread like every store call. A match is one message holding every word;
a chat whose title alone matches has none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from qwen_mtp_desktop.core.chat.markdown import plain_text
from qwen_mtp_desktop.core.chat.snippets import search_terms, snippet
from qwen_mtp_desktop.core.chat.store import rows
from qwen_mtp_desktop.core.chat.store.records import ChatStoreError, SearchBackend, SearchMatch

#: Trigram FTS needs at least three characters per term; shorter terms are matched with LIKE.
MIN_FTS_TERM = 3
#: Different words a search may hold: each is an AND in the SQL, and SQLite refuses a query
#: whose expression is 1,000 deep ("Expression tree is too large"); no one types 100.
MAX_SEARCH_TERMS = 100


def checked_terms(search: str | None) -> list[str]:
    """The search's words (a NUL ends an FTS5 query string early, so none holds one), or
    CHATS_SEARCH_TOO_LONG."""
    terms = list(search_terms(search or ""))
    if len(terms) > MAX_SEARCH_TERMS:
        raise ChatStoreError(
            f"A search can hold at most {MAX_SEARCH_TERMS} different words (this one has "
            f"{len(terms):,}).",
            "Search for fewer words.",
            code="CHATS_SEARCH_TOO_LONG",
        )
    return terms


def _like_pattern(term: str) -> str:
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _uses_fts(terms: Sequence[str], backend: SearchBackend) -> bool:
    return backend == "fts5" and any(len(t) >= MIN_FTS_TERM for t in terms)


def _fts_parts(terms: Sequence[str], column: str) -> tuple[str, str, list[str]]:
    """The FTS query of the long terms, the LIKE clauses of the short ones, their patterns."""
    query = " AND ".join(_fts_phrase(t) for t in terms if len(t) >= MIN_FTS_TERM)
    short = [t for t in terms if len(t) < MIN_FTS_TERM]
    like = "".join(f" AND {column} LIKE ? ESCAPE '\\'" for _ in short)
    return query, like, [_like_pattern(t) for t in short]


def _messages_sql(terms: Sequence[str], backend: SearchBackend) -> tuple[str, list[Any]]:
    """SQL selecting the ids of messages that hold every term, and its parameters."""
    if _uses_fts(terms, backend):
        query, like, patterns = _fts_parts(terms, "hit.content")
        return (
            "SELECT hit.id FROM messages_fts JOIN messages AS hit ON hit.id = messages_fts.rowid "
            f"WHERE messages_fts MATCH ?{like}",
            [query, *patterns],
        )
    like = " AND ".join("content LIKE ? ESCAPE '\\'" for _ in terms)
    return f"SELECT id FROM messages WHERE {like}", [_like_pattern(t) for t in terms]


def conversations_sql(terms: Sequence[str], backend: SearchBackend) -> tuple[str, list[Any]]:
    """SQL selecting the ids of conversations whose title, or one message, holds every term."""
    messages, message_params = _messages_sql(terms, backend)
    if _uses_fts(terms, backend):
        query, like, patterns = _fts_parts(terms, "c2.title")
        titles = (
            "SELECT c2.id FROM conversations_fts JOIN conversations AS c2 "
            f"ON c2.id = conversations_fts.rowid WHERE conversations_fts MATCH ?{like}"
        )
        title_params: list[Any] = [query, *patterns]
    else:
        titles = "SELECT id FROM conversations WHERE " + " AND ".join(
            "title LIKE ? ESCAPE '\\'" for _ in terms
        )
        title_params = [_like_pattern(t) for t in terms]
    sql = f"{titles} UNION SELECT conversation_id FROM messages WHERE id IN ({messages})"
    return sql, [*title_params, *message_params]


def matches(
    conn: sqlite3.Connection,
    terms: Sequence[str],
    backend: SearchBackend,
    conversation_ids: Sequence[int],
) -> dict[int, SearchMatch]:
    """Each listed conversation's matching message: the newest one in the shown branch, else
    the newest earlier version; with its snippet."""
    if not terms or not conversation_ids:
        return {}
    wanted = set(conversation_ids)
    sql, params = _messages_sql(terms, backend)
    chosen: dict[int, sqlite3.Row] = {}
    for row in conn.execute(
        "SELECT m.id, m.conversation_id, m.role, m.shown FROM messages AS m "
        f"WHERE m.id IN ({sql}) ORDER BY m.shown DESC, m.position DESC",
        params,
    ):
        conversation_id = rows.integer(row["conversation_id"])
        if conversation_id in wanted and conversation_id not in chosen:
            chosen[conversation_id] = row
    found = {}
    for conversation_id, row in chosen.items():
        content = conn.execute("SELECT content FROM messages WHERE id = ?", (row["id"],)).fetchone()
        text = rows.text(content["content"]) if content is not None else ""
        found[conversation_id] = SearchMatch(
            message_id=int(row["id"]),
            role=rows.role(row["role"]) or rows.DEFAULT_ROLE,
            shown=rows.integer(row["shown"]) == 1,
            snippet=snippet(text, terms, plain=plain_text),
        )
    return found
