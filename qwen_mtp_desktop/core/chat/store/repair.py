"""A chat database with tampered or damaged rows: find the damage, repair what would break the
app, keep the rest, and say what happened (issue 29).

Runs on every open, after the migrations. Reading is tolerant anyway (core.chat.store.rows); what
is repaired in the file is only what the store could not work with:

- values that break the schema's constraints (NULLs, a role or status outside the CHECK, a
  `selected` flag that is not 0 or 1): any later write to such a row would fail;
- messages of a chat that does not exist (the chat is recreated as "Recovered chat");
- the version tree: a message whose parent is missing, in another chat, or part of a cycle
  can never be shown, so it is attached after the last reachable message before it; a set of
  versions with no chosen one, or several, gets the newest chosen; then the shown branch is
  recomputed.

Before the first change the file is copied (SQLite's backup API) to
`<name>.before-repair-<time>`, so the exact original stays available. Wrong types and extreme
values that break nothing (text in a number column, a time in the year 10^300, JSON that is
not JSON) are left in the file and only counted: the reader shows them with stand-ins.
"""

from __future__ import annotations

import bisect
import logging
import sqlite3
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from qwen_mtp_desktop.core.chat.store import rows, versions
from qwen_mtp_desktop.core.chat.store.records import ROLES, STATUSES

log = logging.getLogger(__name__)

_ROLES_SQL = ", ".join(f"'{r}'" for r in ROLES)
_STATUSES_SQL = ", ".join(f"'{s}'" for s in STATUSES)
_TIME_BAD = "(typeof({c}) NOT IN ('integer', 'real') OR {c} < 0 OR {c} > " + f"{rows.MAX_TIME!r})"
_TEXT_BAD = "typeof({c}) != 'text'"
_OPTIONAL_TEXT_BAD = "({c} IS NOT NULL AND typeof({c}) != 'text')"
_JSON_BAD = "({c} IS NOT NULL AND (typeof({c}) != 'text' OR NOT json_valid({c})))"

#: Messages whose values are damaged (read with stand-ins).
_MESSAGE_DAMAGE = " OR ".join(
    [
        _TEXT_BAD.format(c="role"),
        f"role NOT IN ({_ROLES_SQL})",
        _TEXT_BAD.format(c="content"),
        _TEXT_BAD.format(c="reasoning"),
        "typeof(position) != 'integer'",
        _TIME_BAD.format(c="created_at"),
        _TEXT_BAD.format(c="status"),
        f"status NOT IN ({_STATUSES_SQL})",
        _OPTIONAL_TEXT_BAD.format(c="error"),
        _OPTIONAL_TEXT_BAD.format(c="image_path"),
        f"length(image_path) > {rows.MAX_PATH_CHARS} OR instr(image_path, char(0)) > 0",
        _JSON_BAD.format(c="stats_json"),
        "(parent_id IS NOT NULL AND typeof(parent_id) != 'integer')",
        "typeof(selected) != 'integer' OR selected NOT IN (0, 1)",
        "typeof(shown) != 'integer' OR shown NOT IN (0, 1)",
    ]
)
_CONVERSATION_DAMAGE = " OR ".join(
    [
        _TEXT_BAD.format(c="title"),
        _TIME_BAD.format(c="created_at"),
        _TIME_BAD.format(c="updated_at"),
        _OPTIONAL_TEXT_BAD.format(c="model_dir"),
        f"length(model_dir) > {rows.MAX_PATH_CHARS} OR instr(model_dir, char(0)) > 0",
        _TEXT_BAD.format(c="system_prompt"),
        "(typeof(settings_json) != 'text' OR NOT json_valid(settings_json))",
    ]
)
#: In-place fixes for values the schema's NOT NULL and CHECK constraints forbid: a later
#: UPDATE of such a row would fail. (column, condition, new value as SQL) `typeof(c) =
#: 'null'`, not `c IS NULL`: SQLite folds the latter to false on a NOT NULL column.
_MESSAGE_FIXES = [
    ("status", f"typeof(status) = 'null' OR status NOT IN ({_STATUSES_SQL})", "'error'"),
    (
        "error",
        f"typeof(role) = 'null' OR role NOT IN ({_ROLES_SQL})",
        "'This message was damaged in the chat file (its role was ' || "
        "quote(substr(CAST(role AS TEXT), 1, 40)) || ').'",
    ),
    ("status", f"typeof(role) = 'null' OR role NOT IN ({_ROLES_SQL})", "'error'"),
    ("role", f"typeof(role) = 'null' OR role NOT IN ({_ROLES_SQL})", f"'{rows.DEFAULT_ROLE}'"),
    ("content", "typeof(content) = 'null'", "''"),
    ("reasoning", "typeof(reasoning) = 'null'", "''"),
    ("position", "typeof(position) = 'null'", "0"),
    ("created_at", "typeof(created_at) = 'null'", "0"),
    ("selected", "typeof(selected) = 'null' OR selected NOT IN (0, 1)", "0"),
    ("shown", "typeof(shown) = 'null' OR shown NOT IN (0, 1)", "0"),
]
_CONVERSATION_FIXES = [
    ("title", "typeof(title) = 'null'", "'Recovered chat'"),
    ("created_at", "typeof(created_at) = 'null'", "0"),
    ("updated_at", "typeof(updated_at) = 'null'", "0"),
    ("system_prompt", "typeof(system_prompt) = 'null'", "''"),
    ("settings_json", "typeof(settings_json) = 'null'", "'{}'"),
]


@dataclass
class RepairReport:
    damaged_messages: int = 0
    damaged_chats: int = 0
    #: Values rewritten because the schema forbids them (NULLs, roles, statuses, flags).
    fixed_values: int = 0
    recreated_chats: int = 0
    relinked: int = 0
    reselected: int = 0
    backup: Path | None = None
    #: Titles of the chats with damaged values (the first few), for the notice.
    chats: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.fixed_values or self.recreated_chats or self.relinked or self.reselected)

    def notice(self) -> str | None:
        """What the user is told, in plain words; None when nothing was damaged."""
        parts = []
        if self.damaged_chats:
            parts.append(f"{self.damaged_chats} chat(s) with unreadable details")
        if self.damaged_messages:
            parts.append(f"{self.damaged_messages} message(s) with unreadable fields")
        if self.recreated_chats:
            parts.append(
                f'messages of {self.recreated_chats} missing chat(s), now under "Recovered chat"'
            )
        if self.relinked:
            parts.append(f"{self.relinked} message(s) cut off from their chat, now reattached")
        if self.reselected:
            parts.append(f"{self.reselected} set(s) of versions with no version chosen")
        if not parts:
            return None
        text = "Parts of your chat history were damaged: " + "; ".join(parts) + "."
        if self.chats:
            named = ", ".join(f"\u201c{title}\u201d" for title in self.chats[:3])
            more = len(self.chats) - 3
            text += f" In {named}" + (f" and {more} more chat(s)." if more > 0 else ".")
        text += " Nothing was deleted; damaged values are shown as placeholders."
        if self.backup is not None:
            text += f" The file as it was is kept as {self.backup}."
        return text


def repair(conn: sqlite3.Connection, path: Path | None) -> RepairReport:
    """Find and repair damage in an open, migrated chat database (see the module docstring).
    `path`: the file, for the backup copy (None: no copy, e.g. in memory)."""
    report = RepairReport()
    columns = {str(r[1]) for r in conn.execute("PRAGMA table_info(messages)")}
    if not {"parent_id", "selected", "shown"} <= columns:
        return report  # a schema this module does not know (only tests build one)
    # One scan per table counts both kinds of damage (10,000 messages: ~30 ms here).
    report.damaged_messages, message_breaks = _scan(
        conn, "messages", _MESSAGE_DAMAGE, _MESSAGE_BREAKS
    )
    report.damaged_chats, chat_breaks = _scan(
        conn, "conversations", _CONVERSATION_DAMAGE, _CHAT_BREAKS
    )
    if report.damaged_messages or report.damaged_chats:
        report.chats = _damaged_titles(conn)
    if not (message_breaks or chat_breaks or _tree_suspect(conn)):
        return report  # the usual case
    plan = _Plan(conn)
    if not (message_breaks or chat_breaks or plan.unreachable or plan.bad_groups):
        return report
    if path is not None:
        report.backup = _backup(conn, path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        report.fixed_values = _fix_values(conn)
        report.recreated_chats = _recreate_missing_chats(conn)
        tree = _Plan(conn)  # again: the fixes above can change the tree
        report.relinked = tree.relink(conn)
        report.reselected = tree.reselect(conn)
        for (conversation_id,) in conn.execute("SELECT id FROM conversations").fetchall():
            versions.reshow(conn, int(conversation_id))
        if _count(conn, "sqlite_master", "name = 'messages_fts'"):
            # Rows changed outside the app leave the search index out of step with them.
            conn.execute("INSERT INTO messages_fts (messages_fts) VALUES ('rebuild')")
            conn.execute("INSERT INTO conversations_fts (conversations_fts) VALUES ('rebuild')")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    if report.changed or report.damaged_messages or report.damaged_chats:
        # Counts only: chat titles are made from prompts, which the log never holds.
        log.warning(
            "chat store damage: %d chats, %d messages; repaired %d values, %d chats recreated, "
            "%d messages relinked, %d version sets reselected; backup %s",
            report.damaged_chats,
            report.damaged_messages,
            report.fixed_values,
            report.recreated_chats,
            report.relinked,
            report.reselected,
            report.backup,
        )
    return report


def _damaged_titles(conn: sqlite3.Connection) -> list[str]:
    """Titles (one line, at most 40 characters) of the chats with damaged values."""
    found = conn.execute(
        f"SELECT title FROM conversations WHERE ({_CONVERSATION_DAMAGE}) OR id IN "
        f"(SELECT conversation_id FROM messages WHERE {_MESSAGE_DAMAGE}) ORDER BY id"
    ).fetchall()
    titles = [" ".join(rows.text(row[0]).split())[:40] or "Untitled" for row in found]
    return titles


def _count(conn: sqlite3.Connection, table: str, condition: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table} WHERE {condition}").fetchone()[0])


def _scan(conn: sqlite3.Connection, table: str, damage: str, breaks: str) -> tuple[int, int]:
    row = conn.execute(
        f"SELECT coalesce(sum({damage}), 0), coalesce(sum({breaks}), 0) FROM {table}"
    ).fetchone()
    return int(row[0]), int(row[1])


_MESSAGE_BREAKS = " OR ".join(
    [f"({c})" for _col, c, _v in _MESSAGE_FIXES]
    + ["typeof(conversation_id) != 'integer'",
       "conversation_id NOT IN (SELECT id FROM conversations)"]
)  # fmt: skip
_CHAT_BREAKS = " OR ".join(f"({c})" for _col, c, _v in _CONVERSATION_FIXES)


def _tree_suspect(conn: sqlite3.Connection) -> bool:
    """Cheap signs of a broken version tree: a parent that is missing, in another chat, or not
    before its child (the app always puts a message after its parent, so a cycle needs such an
    edge), or a set of versions without exactly one chosen. `_Plan` then looks closely."""
    edges = conn.execute(
        "SELECT count(*) FROM messages AS m LEFT JOIN messages AS p ON p.id = m.parent_id "
        "WHERE m.parent_id IS NOT NULL AND (p.id IS NULL OR p.conversation_id IS NOT "
        "m.conversation_id OR NOT (p.position < m.position))"
    ).fetchone()[0]
    groups = conn.execute(
        "SELECT count(*) FROM (SELECT sum(selected = 1) AS chosen FROM messages "
        "GROUP BY conversation_id, parent_id HAVING chosen != 1)"
    ).fetchone()[0]
    return bool(edges or groups)


def _backup(conn: sqlite3.Connection, path: Path) -> Path | None:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.before-repair-{stamp}")
    counter = 1
    while target.exists():
        counter += 1
        target = path.with_name(f"{path.name}.before-repair-{stamp}-{counter}")
    from qwen_mtp_desktop.core.files.private_files import create_private_file

    try:
        create_private_file(target)
        with sqlite3.connect(target) as copy:
            conn.backup(copy)
        copy.close()
    except (sqlite3.Error, OSError) as exc:
        log.warning("could not copy the chat store before repairing it: %s", exc)
        return None
    return target


def _fix_values(conn: sqlite3.Connection) -> int:
    fixed = 0
    for table, fixes in (("messages", _MESSAGE_FIXES), ("conversations", _CONVERSATION_FIXES)):
        for column, condition, value in fixes:
            fixed += conn.execute(
                f"UPDATE {table} SET {column} = {value} WHERE {condition}"
            ).rowcount
    return fixed


def _recreate_missing_chats(conn: sqlite3.Connection) -> int:
    """A chat ("Recovered chat") for the messages of each chat that does not exist."""
    found = conn.execute(
        "SELECT id, conversation_id FROM messages WHERE typeof(conversation_id) != 'integer' "
        "OR conversation_id NOT IN (SELECT id FROM conversations)"
    ).fetchall()
    groups: dict[object, list[int]] = defaultdict(list)
    for message_id, old_id in found:  # by the value as read (bytes decoded leniently)
        groups[old_id].append(int(message_id))
    now = time.time()
    for message_ids in groups.values():
        # A new id, never the old one: an id near 2^63 would exhaust AUTOINCREMENT.
        insert = conn.execute(
            "INSERT INTO conversations (title, created_at, updated_at, system_prompt, "
            "settings_json) VALUES ('Recovered chat', ?, ?, '', '{}')",
            (now, now),
        )
        conn.executemany(  # by message id: a value read leniently may not match the stored one
            "UPDATE messages SET conversation_id = ? WHERE id = ?",
            [(insert.lastrowid, m) for m in message_ids],
        )
    return len(groups)


#: The parent of a message whose parent_id is not an id: no message has it (not an SQLite int).
_NOWHERE = -(2**70)


class _Plan:
    """The version tree as it is: which messages no root reaches, which sets of versions do
    not have exactly one chosen."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        found = conn.execute(
            "SELECT id, conversation_id, parent_id, position, created_at, selected FROM messages"
        ).fetchall()
        self.chat: dict[int, int] = {}
        self.parent: dict[int, int | None] = {}
        self.order: dict[int, tuple[int, int]] = {}
        self.created: dict[int, float] = {}
        self.selected: dict[int, bool] = {}
        for mid, cid, pid, position, created, selected in found:
            self.chat[mid] = rows.integer(cid, -1)
            # A parent that is not an id (text, a real number) leads nowhere: _NOWHERE.
            parent = rows.optional_id(pid)
            self.parent[mid] = parent if parent is not None or pid is None else _NOWHERE
            self.order[mid] = (rows.integer(position), mid)
            self.created[mid] = rows.timestamp(created)
            self.selected[mid] = selected == 1
        self.unreachable = self._unreachable()
        self.bad_groups = self._bad_groups()

    def _children(self) -> dict[int | None, list[int]]:
        children: dict[int | None, list[int]] = defaultdict(list)
        for mid, pid in self.parent.items():
            ok = pid is None or self.chat.get(pid) == self.chat[mid]
            children[pid if ok else -1].append(mid)
        return children

    def _unreachable(self) -> set[int]:
        children = self._children()
        seen: set[int] = set()
        stack = list(children.get(None, []))
        while stack:  # iterative: no recursion limit, cycles cannot repeat (seen)
            mid = stack.pop()
            if mid in seen:
                continue
            seen.add(mid)
            stack.extend(children.get(mid, []))
        return set(self.parent) - seen

    def _bad_groups(self) -> list[list[int]]:
        groups: dict[tuple[int, int | None], list[int]] = defaultdict(list)
        for mid, pid in self.parent.items():
            if mid not in self.unreachable:
                groups[(self.chat[mid], pid)].append(mid)
        return [g for g in groups.values() if sum(self.selected[m] for m in g) != 1]

    def relink(self, conn: sqlite3.Connection) -> int:
        """Attach each unreachable message after the last reachable one before it in its chat
        (or make it a first message), in order, so their own descendants come along."""
        moved = 0
        reachable = set(self.parent) - self.unreachable
        children = self._children()
        by_chat: dict[int, list[tuple[int, int]]] = defaultdict(list)  # sorted orders
        for mid in reachable:
            by_chat[self.chat[mid]].append(self.order[mid])
        for orders in by_chat.values():
            orders.sort()
        for mid in sorted(self.unreachable, key=lambda m: self.order[m]):
            if mid in reachable:
                continue  # reached through a message attached before it
            orders = by_chat[self.chat[mid]]
            index = bisect.bisect_left(orders, self.order[mid])
            new_parent = orders[index - 1][1] if index > 0 else None  # order = (position, id)
            conn.execute("UPDATE messages SET parent_id = ? WHERE id = ?", (new_parent, mid))
            self.parent[mid] = new_parent
            moved += 1
            stack = [mid]
            while stack:
                current = stack.pop()
                if current not in reachable:
                    reachable.add(current)
                    bisect.insort(orders, self.order[current])
                    stack.extend(c for c in children.get(current, []) if c in self.unreachable)
        self.unreachable = set()
        self.bad_groups = self._bad_groups()
        return moved

    def reselect(self, conn: sqlite3.Connection) -> int:
        """Exactly one chosen version per set of versions: the newest chosen one, else the
        newest."""
        for group in self.bad_groups:
            chosen = [m for m in group if self.selected[m]] or group
            keep = max(chosen, key=lambda m: (self.created[m], m))
            conn.executemany(
                "UPDATE messages SET selected = ? WHERE id = ?",
                [(int(m == keep), m) for m in group],
            )
        return len(self.bad_groups)
