"""Message versions in the chat store: the SQL behind regenerate, edit, switch and delete.

A chat's messages form a tree (schema version 2, `migrations._migration_2_versions`): each row's
`parent_id` is the message it follows, and the children of one message are the versions of the
next one (regenerating an answer adds a sibling answer; editing a question adds a sibling
question). `selected` marks the chosen version among siblings, and `shown` the rows on the branch
the chat shows: from the root, the selected child of each shown message. Every function here runs
inside the caller's write transaction (`ChatStore._write`) and ends with `reshow`, so `shown`
always matches `selected`.

Version numbers follow creation time: an edit keeps the shown message's id (callers hold it) and
moves the older text to a new row that keeps the older time, so it stays "1/2".
"""

from __future__ import annotations

import sqlite3

#: Every message column plus its version number and count among its siblings.
MESSAGE_SELECT = """
    SELECT m.*,
        (SELECT count(*) FROM messages AS s
         WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id)
            AS version_count,
        (SELECT count(*) FROM messages AS s
         WHERE s.conversation_id = m.conversation_id AND s.parent_id IS m.parent_id
           AND (s.created_at < m.created_at OR (s.created_at = m.created_at AND s.id <= m.id)))
            AS version
    FROM messages AS m
"""

_ROW_COLUMNS = (
    "conversation_id, position, role, content, reasoning, image_path, created_at, status, "
    "error, stats_json, parent_id"
)


def reshow(conn: sqlite3.Connection, conversation_id: int) -> None:
    """Set `shown` on exactly the selected path from the root."""
    conn.execute(
        """
        WITH RECURSIVE branch (id) AS (
            SELECT id FROM messages
            WHERE conversation_id = ? AND parent_id IS NULL AND selected = 1
            UNION
            SELECT m.id FROM messages AS m JOIN branch AS b ON m.parent_id = b.id
            WHERE m.selected = 1
        )
        UPDATE messages SET shown = (id IN (SELECT id FROM branch))
        WHERE conversation_id = ? AND shown != (id IN (SELECT id FROM branch))
        """,
        (conversation_id, conversation_id),
    )


def last_shown(conn: sqlite3.Connection, conversation_id: int) -> sqlite3.Row | None:
    """The shown branch's last message (what a new message follows)."""
    row: sqlite3.Row | None = conn.execute(
        "SELECT id, position FROM messages WHERE conversation_id = ? AND shown = 1 "
        "ORDER BY position DESC LIMIT 1",
        (conversation_id,),
    ).fetchone()
    return row


def descendants(conn: sqlite3.Connection, message_id: int) -> list[int]:
    """Ids of every message after this one, in every version."""
    rows = conn.execute(
        """
        WITH RECURSIVE below (id) AS (
            SELECT id FROM messages WHERE parent_id = ?
            UNION
            SELECT m.id FROM messages AS m JOIN below AS b ON m.parent_id = b.id
        )
        SELECT id FROM below
        """,
        (message_id,),
    ).fetchall()
    return [int(row[0]) for row in rows]


def siblings(conn: sqlite3.Connection, row: sqlite3.Row) -> list[sqlite3.Row]:
    """The versions of `row`'s message (itself included), oldest first."""
    return list(
        conn.execute(
            "SELECT id, selected FROM messages WHERE conversation_id = ? AND parent_id IS ? "
            "ORDER BY created_at, id",
            (row["conversation_id"], row["parent_id"]),
        ).fetchall()
    )


def select(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """Make `row` the chosen version among its siblings and show its branch."""
    conn.execute(
        "UPDATE messages SET selected = (id = ?) WHERE conversation_id = ? AND parent_id IS ?",
        (row["id"], row["conversation_id"], row["parent_id"]),
    )
    reshow(conn, int(row["conversation_id"]))


def deselect_children(conn: sqlite3.Connection, message_id: int) -> None:
    """Hide every version that follows `message_id` (a new one is about to be selected)."""
    conn.execute("UPDATE messages SET selected = 0 WHERE parent_id = ?", (message_id,))


def keep_old_text(conn: sqlite3.Connection, row: sqlite3.Row) -> int:
    """Before an edit: copy the message as it is into a new, unselected sibling that takes over
    what followed it, so the old text and its answers stay one version back."""
    cursor = conn.execute(
        f"INSERT INTO messages ({_ROW_COLUMNS}, selected, shown) "
        f"SELECT {_ROW_COLUMNS}, 0, 0 FROM messages WHERE id = ?",
        (row["id"],),
    )
    copy_id = cursor.lastrowid
    assert copy_id is not None
    conn.execute("UPDATE messages SET parent_id = ? WHERE parent_id = ?", (copy_id, row["id"]))
    return copy_id


def remove(conn: sqlite3.Connection, row: sqlite3.Row) -> None:
    """Delete one message.

    A message without other versions goes alone: what followed it moves up to its parent (the
    chat reads on without it, as before versions existed). A message with other versions goes
    with everything that followed it (that version's branch), and the next older version, else
    the next newer one, is shown instead.
    """
    conversation_id = int(row["conversation_id"])
    versions = siblings(conn, row)
    if len(versions) == 1:
        conn.execute(
            "UPDATE messages SET parent_id = ? WHERE parent_id = ?", (row["parent_id"], row["id"])
        )
        conn.execute("DELETE FROM messages WHERE id = ?", (row["id"],))
    else:
        doomed = [int(row["id"]), *descendants(conn, int(row["id"]))]
        conn.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in doomed])
        if row["selected"]:
            index = [int(v["id"]) for v in versions].index(int(row["id"]))
            neighbour = versions[index - 1] if index > 0 else versions[1]
            conn.execute("UPDATE messages SET selected = 1 WHERE id = ?", (neighbour["id"],))
    reshow(conn, conversation_id)
