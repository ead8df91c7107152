"""Qwen3.5 tool-call output read as OpenAI tool calls (core.tools.calls): generated calls
rendered as the model's chat template renders them are read back exactly; cut, damaged or
random output is a typed `Malformed` (or plain text), never an exception."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.tools.calls import (
    ArgumentsPiece,
    CallOpened,
    CallReader,
    Calls,
    Malformed,
    Text,
    ToolCall,
    parse,
    render_calls,
)

names = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
TYPES = ["string", "integer", "number", "boolean", "array", "object", "null"]
json_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
#: Any text a value may hold except the one sequence the format cannot carry (see the module).
value_text = (
    st.lists(
        st.text(max_size=6)
        | st.sampled_from(["\n", "<", ">", "</parameter>", "</function>", "<parameter=a>", "12"]),
        max_size=8,
    )
    .map("".join)
    .filter(lambda s: "\n</parameter>\n" not in s)
)


def value_of(kind: str) -> st.SearchStrategy[Any]:
    return {
        "string": value_text,
        "integer": st.integers(),
        "number": st.floats(allow_nan=False, allow_infinity=False),
        "boolean": st.booleans(),
        "array": st.lists(json_leaf, max_size=4),
        "object": st.dictionaries(st.text(max_size=6), json_leaf, max_size=4),
        "null": st.none(),
    }[kind]


@st.composite
def tools_and_calls(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[tuple[str, dict]]]:
    signatures = draw(
        st.dictionaries(
            names,
            st.dictionaries(names, st.sampled_from(TYPES), max_size=4),
            min_size=1,
            max_size=4,
        )
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {
                    "type": "object",
                    "properties": {key: {"type": kind} for key, kind in params.items()},
                },
            },
        }
        for name, params in signatures.items()
    ]
    calls = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        name = draw(st.sampled_from(sorted(signatures)))
        params = signatures[name]
        chosen = draw(st.lists(st.sampled_from(sorted(params)), unique=True)) if params else []
        calls.append((name, {key: draw(value_of(params[key])) for key in chosen}))
    return tools, calls


content_text = st.text(max_size=30).filter(lambda s: "<tool_call>" not in s)


@pytest.mark.slow  # 500 generated calls (~5 s)
@settings(max_examples=500, deadline=None)
@given(case=tools_and_calls(), content=content_text)
def test_rendered_calls_are_read_back_exactly(
    case: tuple[list[dict[str, Any]], list[tuple[str, dict]]], content: str
) -> None:
    tools, calls = case
    parsed = parse(render_calls(calls, content), tools)
    assert isinstance(parsed, Calls), parsed
    assert parsed.content == content.rstrip("\n ")
    assert [call.name for call in parsed.calls] == [name for name, _ in calls]
    assert [json.loads(call.arguments) for call in parsed.calls] == [args for _, args in calls]


@settings(max_examples=300, deadline=None)
@given(case=tools_and_calls(), cut=st.floats(min_value=0, max_value=1, exclude_max=True))
def test_cut_calls_are_malformed_not_errors(
    case: tuple[list[dict[str, Any]], list[tuple[str, dict]]], cut: float
) -> None:
    """An answer cut short (its token budget ran out mid-call) is Malformed."""
    tools, calls = case
    text = render_calls(calls)
    short = text[: int(len(text) * cut)]
    parsed = parse(short, tools)
    if "<tool_call>" not in short:
        assert parsed == Text(short)
    elif isinstance(parsed, Calls):  # cut just after a whole call: the calls before the cut
        assert short.rstrip().endswith("</tool_call>")
        whole = parse(text, tools)
        assert isinstance(whole, Calls) and parsed.calls == whole.calls[: len(parsed.calls)]
        assert len(parsed.calls) < len(calls)
    else:
        assert isinstance(parsed, Malformed) and parsed.reason and parsed.text == short


@settings(max_examples=500, deadline=None)
@given(
    text=st.lists(
        st.sampled_from(
            [
                "<tool_call>\n",
                "<function=f>\n",
                "<function=g>\n",
                "<parameter=a>\n",
                "<parameter=n>\n",
                "\n</parameter>\n",
                "</function>\n",
                "</tool_call>",
                "12",
                '"x"',
                "\n",
            ]
        )
        | st.text(max_size=5),
        max_size=14,
    ).map("".join)
)
def test_any_output_is_text_calls_or_malformed(text: str) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"properties": {"a": {"type": "string"}, "n": {"type": "integer"}}},
            },
        }
    ]
    parsed = parse(text, tools)
    assert isinstance(parsed, Text | Calls | Malformed)
    if isinstance(parsed, Calls):
        for call in parsed.calls:
            assert call.name == "f"
            arguments = json.loads(call.arguments)
            assert set(arguments) <= {"a", "n"} and isinstance(arguments.get("n", 0), int)


WEATHER = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "units": {"type": ["string", "null"]},
                    "extra": {},
                },
            },
        },
    }
]


def test_a_call_in_qwen_format() -> None:
    text = (
        "I will look it up.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n"
        "Paris\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=extra>\n"
        '{"a": [1]}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n'
        "<function=get_weather>\n<parameter=city>\n42\n</parameter>\n</function>\n</tool_call>\n"
    )
    parsed = parse(text, WEATHER)
    assert isinstance(parsed, Calls) and parsed.content == "I will look it up."
    first, second = parsed.calls
    assert json.loads(first.arguments) == {"city": "Paris", "days": 3, "extra": {"a": [1]}}
    assert json.loads(second.arguments) == {"city": "42"}  # a string parameter stays text
    call = first.to_openai(index=0)
    assert call["type"] == "function" and call["function"]["name"] == "get_weather"
    assert call["id"].startswith("call_") and call["index"] == 0
    assert ToolCall("f", "{}", "call_x").to_openai()["id"] == "call_x"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("<tool_call>\n<function=rm_rf>\n</function>\n</tool_call>", "'rm_rf', which is not"),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n"
            "</function>\n</tool_call>",
            "'days' of 'get_weather' is not valid integer JSON",
        ),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\na\n</parameter>\n"
            "<parameter=city>\nb\n</parameter>\n</function>\n</tool_call>",
            "given twice",
        ),
        (
            "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>\nThanks!",
            "text follows a tool call",
        ),
        ("<tool_call>{'name': 'get_weather'}</tool_call>", "expected '<tool_call>' and a new"),
        ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis", "is not closed"),
        # Cut off after a closed value (issue 43): the parameter open is not 'city'.
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=da",
            "stops in the tag of a parameter after 'city' (<parameter=da)",
        ),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
            "the call to 'get_weather' stops after parameter 'city', cut off",
        ),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</func",
            "stops after parameter 'city'",
        ),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
            "<parameter=days>\n3\n</param",
            "parameter 'days' of 'get_weather' is not closed",
        ),
    ],
)
def test_malformed_calls_say_why(text: str, reason: str) -> None:
    parsed = parse(text, WEATHER)
    assert isinstance(parsed, Malformed) and reason in parsed.reason, parsed


def test_text_without_calls_is_text() -> None:
    assert parse("No tools needed: 4.", WEATHER) == Text("No tools needed: 4.")
    assert parse("", []) == Text("")


# --- calls read while the answer streams (CallReader) ------------------------------------------


def read_streamed(text: str, tools: list[dict[str, Any]], bounds: list[int]) -> list[list[str]]:
    """[per call: its name, then its argument pieces] as a CallReader fed `text` (from its
    first "<tool_call>") cut at `bounds` reads it."""
    reader = CallReader(tools)
    start = text.find("<tool_call>")
    region = text[start:] if start >= 0 else ""
    cuts = sorted({0, len(region), *(b for b in bounds if b < len(region))})
    calls: list[list[str]] = []
    for begin, end in itertools.pairwise(cuts):
        for piece in reader.feed(region[begin:end]):
            if isinstance(piece, CallOpened):
                assert piece.index == len(calls)
                calls.append([piece.name])
            else:
                assert isinstance(piece, ArgumentsPiece) and piece.index == len(calls) - 1
                assert piece.text  # nothing empty is sent
                calls[piece.index].append(piece.text)
    return calls


@pytest.mark.slow  # 500 generated calls (~5 s)
@settings(max_examples=500, deadline=None)
@given(
    case=tools_and_calls(),
    content=content_text,
    cut=st.floats(0, 1),
    bounds=st.lists(st.integers(0, 400), max_size=20),
)
def test_streamed_arguments_join_into_the_whole_parse(
    case: tuple[list[dict[str, Any]], list[tuple[str, dict]]],
    content: str,
    cut: float,
    bounds: list[int],
) -> None:
    """However the answer is cut into pieces: each streamed call's argument pieces join into
    exactly the arguments `parse` reads from the whole answer (a prefix of them while the call
    is still arriving), every call of the whole answer was streamed, and an answer cut short
    streams prefixes of the whole answer's calls."""
    tools, calls = case
    full = render_calls(calls, content)
    text = full[: int(len(full) * cut)] if cut < 1 else full
    streamed = read_streamed(text, tools, bounds)
    whole = parse(full, tools)
    assert isinstance(whole, Calls)
    assert len(streamed) <= len(whole.calls)
    for pieces, call in zip(streamed, whole.calls, strict=False):
        assert pieces[0] == call.name
        assert call.arguments.startswith("".join(pieces[1:]))
    parsed = parse(text, tools)
    if isinstance(parsed, Calls):
        assert [pieces[0] for pieces in streamed] == [c.name for c in parsed.calls]
        assert ["".join(pieces[1:]) for pieces in streamed] == [c.arguments for c in parsed.calls]
    if cut == 1:
        assert isinstance(parsed, Calls)


def test_a_string_value_streams_before_it_ends_and_other_values_whole() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "write",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "lines": {"type": "integer"}},
                },
            },
        }
    ]
    reader = CallReader(tools)
    assert reader.feed("<tool_call>\n<function=wr") == []
    assert reader.feed("ite>\n<parameter=path>\na\nb") == [
        CallOpened(0, "write"),
        ArgumentsPiece(0, "{"),
        ArgumentsPiece(0, '"path": "'),
        ArgumentsPiece(0, "a\\nb"),  # a new line followed by "b" does not end the value
    ]
    assert reader.feed('"c\n</param') == [ArgumentsPiece(0, '\\"c')]  # the tail is held
    assert reader.feed("eter>\n<parameter=lines>\n4") == [ArgumentsPiece(0, '"')]
    assert reader.feed("2\n</parameter>\n</function>\n</tool_call>") == [
        ArgumentsPiece(0, ', "lines": 42'),
        ArgumentsPiece(0, "}"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n<function=unknown>\n",  # not offered: never streamed
        "<tool_call>\n<function=f>\n<parameter=n>\nx\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=s>\n1\n</parameter>\n<parameter=s>\n",
    ],
)
def test_the_reader_stops_where_the_call_stops_being_well_formed(text: str) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
                },
            },
        }
    ]
    reader = CallReader(tools)
    pieces = reader.feed(text) + reader.feed("\n</parameter>\n</function>\n</tool_call>")
    assert not any(isinstance(p, ArgumentsPiece) and p.text.endswith("}") for p in pieces)
    assert isinstance(parse(text, tools), Malformed)
