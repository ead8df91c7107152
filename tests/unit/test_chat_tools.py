"""A chat's MCP tools, Qt-free (core.chat.tools): tools offered as OpenAI functions with
unique names, a forced call's grammar that the parser reads back, the stored trace (hostile
records read without raising) and the history a later turn reads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.chat.tools import (
    ToolCatalog,
    ToolRound,
    TracedCall,
    round_messages,
    trace_from_record,
    trace_record,
)
from qwen_mtp_desktop.core.chat.turns import chat_history
from qwen_mtp_desktop.core.tools.calls import Calls, parse, render_calls
from qwen_mtp_desktop.core.tools.mcp.client import ToolInfo

ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def test_catalog_names_are_unique_and_map_back() -> None:
    catalog = ToolCatalog.of(
        [
            ToolInfo("one", "search", "Search one", {}),
            ToolInfo("two", "search", "Search two", {}),
            ToolInfo("one", "add", "Add", ADD),
            ToolInfo("two", "we ird<name>", "", {}),
        ]
    )
    assert catalog.functions == {
        "one__search": ("one", "search"),
        "two__search": ("two", "search"),
        "add": ("one", "add"),
        "we_ird_name_": ("two", "we ird<name>"),
    }
    tools = json.loads(catalog.tools_json)
    assert tools[2]["function"]["parameters"] == ADD
    assert tools[0]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_forced_call_grammar_admits_what_the_parser_reads() -> None:
    catalog = ToolCatalog.of([ToolInfo("s", "add", "", ADD), ToolInfo("s", "ping", "", {})])
    constraint = catalog.forced("add")
    assert constraint.kind == "lark" and "add" in constraint.source
    text = render_calls([("add", {"a": 1, "b": 2})])
    parsed = parse(text, catalog.tools)
    assert isinstance(parsed, Calls) and parsed.calls[0].name == "add"
    with pytest.raises(ValueError, match="not offered"):
        catalog.forced("nope")


def test_calls_the_model_opens_get_the_lazy_grammar_when_it_compiles() -> None:
    catalog = ToolCatalog.of([ToolInfo("s", "add", "", ADD), ToolInfo("s", "ping", "", {})])
    lazy = catalog.lazy()
    assert lazy is not None and lazy.lazy and lazy.name == "tool_calls_auto"
    assert "call_head[lazy]" in lazy.source and "<function=add>" in lazy.source
    assert ToolCatalog().lazy() is None
    # A schema the grammar engine refuses: the chat's calls are read as written, not refused.
    broken = {"type": "object", "properties": {"q": {"type": "string", "pattern": "("}}}
    assert ToolCatalog.of([ToolInfo("s", "find", "", broken)]).lazy() is None


def _call(status: str = "ok", result: str = "pong") -> TracedCall:
    return TracedCall("call_1", "ping", "s", "ping", "{}", status, result, 1.0, 0.5)  # type: ignore[arg-type]


def test_trace_round_trips_and_feeds_the_next_turn() -> None:
    rounds = [ToolRound("Let me check.", (_call(), _call("denied", "Denied by the user.")))]
    record = json.loads(json.dumps(trace_record(rounds)))
    assert trace_from_record(record) == rounds
    messages = round_messages(rounds)
    assert [m.role for m in messages] == ["assistant", "tool", "tool"]
    assert messages[0].tool_calls[0].name == "ping" and messages[1].content == "pong"
    assert messages[2].content == "The user denied this tool call."
    answer = StoredMessage(
        2,
        1,
        1,
        "assistant",
        "Done.",
        "",
        None,
        0.0,
        "complete",
        None,
        {"tool_calls": record},
    )
    user = StoredMessage(1, 1, 0, "user", "Ping it.", "", None, 0.0, "complete", None, None)
    history = chat_history("", [user, answer])
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert history[-1].content == "Done."


def test_a_call_stored_mid_turn_reads_as_cancelled() -> None:
    record = trace_record([ToolRound("", (_call("asking", ""),))])
    assert trace_from_record(record)[0].calls[0].status == "cancelled"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_any_stored_value_reads_without_raising(value: object) -> None:
    rounds = trace_from_record(value)
    assert all(r.calls for r in rounds)
    round_messages(rounds)  # and the model can read what was kept


def test_a_fast_call_shows_its_time_in_milliseconds() -> None:
    """'done in 0.00 s' read as if nothing ran (issue 44, minor 7)."""
    from qwen_mtp_desktop.core.chat.tools import TracedCall, call_summary

    call = TracedCall("c1", "ping", "tests", "ping", "{}", status="done")
    assert call_summary(call.with_result("done", "pong", 0.0004)).endswith("done in 0.4 ms")
    assert call_summary(call.with_result("done", "pong", 0.21)).endswith("done in 0.21 s")
