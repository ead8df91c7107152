"""Continue's rules (issue 44, LM Studio item 3): which answers may be continued, what the
continued answer's record says, and the store taking an ended answer back to streaming."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.continuation import can_continue, continued_from, continued_note
from qwen_mtp_desktop.core.chat.store.records import ChatStoreError, StoredMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore


def _chat(store: ChatStore, stats: dict[str, object] | None, status: str) -> list[StoredMessage]:
    chat = store.create_conversation("c")
    store.add_message(chat.id, "user", "Count from 1 to 20.")
    answer = store.begin_assistant_message(chat.id)
    store.append_to_message(answer.id, "1 2 3")
    if status != "streaming":
        store.finish_message(answer.id, stats, status)  # type: ignore[arg-type]
    return store.messages(chat.id)


@pytest.fixture
def store(tmp_path: Path):
    with ChatStore(tmp_path / "chats.sqlite3") as opened:
        yield opened


@pytest.mark.parametrize(
    ("stats", "status", "offered"),
    [
        ({"finish_reason": "cancelled", "generated_tokens": 5}, "complete", True),
        ({"finish_reason": "length", "generated_tokens": 5}, "complete", True),
        (None, "incomplete", True),  # the window closed mid-answer
        ({"finish_reason": "eos", "generated_tokens": 5}, "complete", False),
        ({"finish_reason": "stop_string", "generated_tokens": 5}, "complete", False),
        ({"finish_reason": "length", "tool_calls": []}, "complete", False),
        (None, "error", False),
    ],
)
def test_which_answers_may_be_continued(
    store: ChatStore, stats: dict[str, object] | None, status: str, offered: bool
) -> None:
    branch = _chat(store, stats, status)
    assert can_continue(branch[-1], branch) is offered
    assert not can_continue(branch[0], branch)  # a question
    if offered:
        assert not can_continue(branch[-1], [*branch, replace(branch[0], id=999)])  # not last
        assert not can_continue(replace(branch[-1], content="  "), branch)  # no text
        pictured = [replace(branch[0], image_path=Path("a.png")), branch[-1]]
        assert not can_continue(branch[-1], pictured)  # images run on openvino-genai


def test_the_record_counts_what_came_before_across_continues(store: ChatStore) -> None:
    (_, stopped) = _chat(store, {"finish_reason": "cancelled", "generated_tokens": 7}, "complete")
    first = continued_from(stopped)
    assert first == {"after": "cancelled", "after_tokens": 7, "times": 1}
    assert continued_note(first) == "Continued after 7 tokens"
    again = replace(
        stopped,
        stats={"finish_reason": "length", "generated_tokens": 12, "continued": first},
    )
    assert continued_from(again) == {"after": "length", "after_tokens": 19, "times": 2}
    (_, interrupted) = _chat(store, None, "incomplete")
    unknown = continued_from(interrupted)
    assert unknown == {"after": "incomplete", "after_tokens": None, "times": 1}
    assert continued_note(unknown) == "Continued after an interruption"
    assert continued_note(None) == continued_note("x") == ""
    # A crafted record cannot make the note lie or fail.
    assert continued_note({"after_tokens": True}) == "Continued after an interruption"
    assert continued_from(replace(stopped, stats={"continued": "x"}))["after_tokens"] is None


def test_the_store_resumes_an_ended_answer_and_keeps_its_text(
    store: ChatStore, tmp_path: Path
) -> None:
    (question, answer) = _chat(store, {"finish_reason": "length"}, "complete")
    resumed = store.resume_message(answer.id)
    assert resumed.status == "streaming" and resumed.content == "1 2 3"
    store.append_to_message(answer.id, " 4")
    done = store.finish_message(answer.id, {"finish_reason": "eos"}, "complete", answer_delta=" 5")
    assert done.content == "1 2 3 4 5" and done.id == answer.id
    assert [m.id for m in store.messages(answer.conversation_id)] == [question.id, answer.id]
    for refused in (question.id, _chat(store, None, "streaming")[-1].id):
        with pytest.raises(ChatStoreError) as caught:
            store.resume_message(refused)
        assert caught.value.code == "NOT_CONTINUABLE"
    # The app dies while the continuation streams: the next open keeps every character.
    store.resume_message(answer.id)
    store.append_to_message(answer.id, " 6")
    store.close()
    with ChatStore(tmp_path / "chats.sqlite3") as reopened:
        recovered = reopened.get_message(answer.id)
    assert recovered.status == "incomplete" and recovered.content == "1 2 3 4 5 6"
