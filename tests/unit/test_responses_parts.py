"""Parts of /v1/responses that need no engine: the bounded store, the translation of input
items into a chat request (and errors back into the Responses API's names), and the chat's
`image_url.detail: "low"` shrinking."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from qwen_mtp_desktop.server.generation.images import LOW_DETAIL_PIXELS, low_detail
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.responses.input import Translation, translate
from qwen_mtp_desktop.server.responses.schema import ResponsesRequest
from qwen_mtp_desktop.server.responses.store import ResponseStore


@given(st.lists(st.integers(min_value=0, max_value=3000), max_size=40))
def test_store_keeps_both_bounds_and_the_newest(sizes: list[int]) -> None:
    store = ResponseStore(max_count=5, max_bytes=8000)
    kept = []
    for number, size in enumerate(sizes):
        if store.put(f"resp_{number}", [{"role": "user", "content": "x" * size}], {"id": number}):
            kept.append(f"resp_{number}")
        count, used = store.sizes()
        assert count <= 5 and used <= 8000
    if kept:
        assert store.get(kept[-1]) is not None  # the newest is never the one let go


def test_store_refuses_what_alone_is_too_large_and_deletes() -> None:
    store = ResponseStore(max_count=5, max_bytes=100)
    assert not store.put("big", [{"content": "x" * 200}], {})
    assert store.put("small", [], {"id": "small"})
    assert store.delete("small") and not store.delete("small")
    assert store.sizes() == (0, 0)


def chat_of(body: dict[str, Any], store: ResponseStore | None = None) -> Translation:
    into = Translation()
    translate(
        ResponsesRequest.model_validate({"model": "m", **body}), store or ResponseStore(), into
    )
    return into


def test_items_become_chat_messages() -> None:
    into = chat_of(
        {
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "Time?"},
                {"type": "reasoning", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "12:00"},
                {"type": "function_call_output", "call_id": "c2", "output": "13:00"},
            ],
        }
    )
    assert into.chat is not None
    roles = [m.role for m in into.chat.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool"]
    assert [c.id for c in into.chat.messages[2].tool_calls or ()] == ["c1", "c2"]
    assert into.conversation[0] == {"role": "user", "content": "Time?"}  # no instructions
    error = into.error(ApiError(400, "messages[3] is wrong", param="messages[3].tool_call_id"))
    assert error.param == "input[4].tool_call_id" and error.message == "input[4] is wrong"


def test_previous_response_is_prepended_and_unknown_is_refused() -> None:
    store = ResponseStore()
    store.put(
        "resp_1", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], {}
    )
    into = chat_of({"input": "c", "previous_response_id": "resp_1"}, store)
    assert into.chat is not None and [m.content for m in into.chat.messages] == ["a", "b", "c"]
    with pytest.raises(ApiError) as caught:
        chat_of({"input": "c", "previous_response_id": "resp_2"}, store)
    assert caught.value.code == "previous_response_not_found"


def test_low_detail_shrinks_to_512() -> None:
    out = io.BytesIO()
    Image.new("RGB", (2000, 1000), "red").save(out, format="JPEG")
    data, suffix = low_detail(out.getvalue())
    with Image.open(io.BytesIO(data)) as image:
        assert image.size == (LOW_DETAIL_PIXELS, LOW_DETAIL_PIXELS // 2) and suffix == ".png"
