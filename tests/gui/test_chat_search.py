"""Search with snippets (issue 44, minor 17 and "what LM Studio users reach for" item 4): a
search's row shows the matching words of the message that matched, marked, not the chat's last
message; choosing the row opens the chat scrolled to that message, marked a moment. The real
window offscreen with its engine host on the demo model, and the real chat store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store import search
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.ui.chat.conversations.rows import LINE_ROLE
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.chat.transcript.view import FOUND_MARK_MS
from qwen_mtp_desktop.ui.widgets.style import FOUND_MARK
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, window_idle

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SHOTS = Path("/tmp/shots")
ANSWER = (
    "Python's sorted() uses Timsort. For comparison, the <b>quicksort</b> algorithm picks a "
    "pivot, splits the list around it and sorts each side; " + "its average cost is n log n. " * 30
)


def _seed() -> dict[str, int]:
    """Three chats; in the long one the match is an early answer, off the first page."""
    ids: dict[str, int] = {}
    with ChatStore(app_paths().ensure().data_dir / "chats.sqlite3") as store:
        hostile = store.create_conversation("Pasted log")
        store.add_message(hostile.id, "user", "What is in this?")
        store.add_message(
            hostile.id, "assistant", "x" * 200_000 + "<script>quicksort pivot</script>" + "y" * 9
        )
        ids["hostile"] = hostile.id
        other = store.create_conversation("Trip to Lisbon")
        store.add_message(other.id, "user", "Where should I eat in Alfama?")
        store.add_message(other.id, "assistant", "Try the small tascas near the cathedral.")
        ids["other"] = other.id
        sorting = store.create_conversation("Sorting in Python")
        store.add_message(sorting.id, "user", "How does Python sort a list?")
        ids["answer"] = store.add_message(sorting.id, "assistant", ANSWER).id
        for turn in range(14):  # later turns push the answer off the first page
            store.add_message(sorting.id, "user", f"Question {turn} about dictionaries")
            store.add_message(sorting.id, "assistant", f"Answer {turn}: use dict.get().")
        ids["sorting"] = sorting.id
    return ids


def _row(chat: ChatPanel, conversation_id: int) -> int:
    items = chat.conversations.list
    for row in range(items.count()):
        if items.item(row).data(Qt.ItemDataRole.UserRole) == conversation_id:
            return row
    raise AssertionError(f"no row for chat {conversation_id}")


def _has_color(image: QImage, rect: QRect, color: QColor) -> bool:
    """Whether any pixel in `rect` is (nearly) `color`: the mark behind a searched word."""
    for y in range(rect.top(), rect.bottom(), 2):
        for x in range(rect.left(), rect.right()):
            pixel = image.pixelColor(x, y)
            if (
                abs(pixel.red() - color.red())
                + abs(pixel.green() - color.green())
                + abs(pixel.blue() - color.blue())
                < 12
            ):
                return True
    return False


def _visible_in_transcript(chat: ChatPanel, message_id: int) -> bool:
    (widget,) = [w for w in chat.transcript.messages if w.message_id == message_id]
    viewport = chat.transcript.viewport()
    top_left = widget.mapTo(viewport, QPoint(0, 0))
    return QRect(top_left, widget.size()).intersects(viewport.rect()) and widget.isVisible()


def test_a_search_row_shows_the_match_marked_and_opens_the_chat_at_it(
    qtbot: QtBot, screenshot_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _seed()
    # The search and its snippets run on the store's thread, never on the GUI thread.
    threads: list[threading.Thread] = []
    real_matches = search.matches

    def matches(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread())
        return real_matches(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(search, "matches", matches)
    window = _open_window(qtbot)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 3, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: window_idle(chat) and chat.conversation is not None)
    # Start in another chat: the match must open its own.
    chat.open_conversation(ids["other"])
    qtbot.waitUntil(lambda: chat.conversation is not None and chat.conversation.id == ids["other"])

    chat.conversations.search.setText("QUICKSORT pivot")
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 2, timeout=LONG_WAIT)
    assert threads and all(t is not threading.main_thread() for t in threads)
    items = chat.conversations.list
    sorting = items.item(_row(chat, ids["sorting"]))
    title, second = sorting.text().split("\n")
    # The snippet of the answer that matched, not the last message ("Answer 13: ...").
    assert title == "Sorting in Python" and "Answer 13" not in second
    assert "the <b>quicksort</b> algorithm picks a pivot" in second, second
    parts = sorting.data(LINE_ROLE)
    assert [text for text, marked in parts if marked] == ["quicksort", "pivot"]
    assert "Found in an answer: " in sorting.toolTip()
    # The hostile answer: a bounded line around its match, its markup kept as characters.
    hostile = items.item(_row(chat, ids["hostile"])).text().split("\n")[1]
    assert "<script>quicksort pivot</script>" in hostile and len(hostile) < 160

    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        chat.chats_toggle.setChecked(True)
        QApplication.processEvents()
        # The marks are painted: the mark's colour behind the words in the row.
        viewport = items.viewport()
        image = viewport.grab().toImage()
        ratio = image.devicePixelRatio()
        rect = items.visualItemRect(sorting)
        scaled = QRect(
            int(rect.x() * ratio),
            int(rect.y() * ratio),
            int(rect.width() * ratio),
            int(rect.height() * ratio),
        )
        assert _has_color(image, scaled, QColor(FOUND_MARK[chat.dark])), "no mark painted"
        for folder in (screenshot_dir, SHOTS):
            folder.mkdir(parents=True, exist_ok=True)
            assert window.grab().save(str(folder / f"chat-search-{width}x{height}.png"))

    # Opening the row opens the chat scrolled to the answer, which is marked a moment.
    qtbot.mouseClick(items.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(
        lambda: chat.conversation is not None and chat.conversation.id == ids["sorting"],
        timeout=LONG_WAIT,
    )
    answer = ids["answer"]
    qtbot.waitUntil(
        lambda: any(w.message_id == answer for w in chat.transcript.messages), timeout=10_000
    )
    (found,) = [w for w in chat.transcript.messages if w.message_id == answer]
    assert found.property("found") is True
    qtbot.wait(300)  # the messages settle their heights; the answer stays in view
    assert _visible_in_transcript(chat, answer)
    last = chat.transcript.messages[-1]
    assert not _visible_in_transcript(chat, last.message_id or -1)  # not at the bottom
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        QApplication.processEvents()
        for folder in (screenshot_dir, SHOTS):
            assert window.grab().save(str(folder / f"chat-search-opened-{width}x{height}.png"))
    qtbot.waitUntil(lambda: found.property("found") is False, timeout=FOUND_MARK_MS + 2_000)

    # The open chat's row again: scrolled back to the match (nothing reloaded).
    chat.transcript.scroll_to_bottom()
    QApplication.processEvents()
    rect = items.visualItemRect(items.item(_row(chat, ids["sorting"])))
    qtbot.mouseClick(items.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert found.property("found") is True
    qtbot.wait(300)
    assert _visible_in_transcript(chat, answer)
    # Without a search the rows are previews again.
    chat.conversations.search.clear()
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 3, timeout=LONG_WAIT)
    row = items.item(_row(chat, ids["sorting"])).text()
    assert "Answer 13: use dict.get()." in row and "quicksort" not in row
    qtbot.waitUntil(lambda: window_idle(chat))
    window.close()
