"""Issue 45, items 1 and 2: a model's tool-call text of any shape is read in linear time and
ends in a typed result, never an exception.

Hypothesis writes answers from the pieces of Qwen3.5's call format (tags cut anywhere, names
without their ">", values nested deep) and feeds them to `CallReader` in pieces of 1-7
characters, as an answer streams; `parse` reads the whole answer. The scaling tests compare
the cost of one shape at n and 10n characters (linear is 10x, quadratic 100x), so they hold on
a loaded machine.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.tools.calls import (
    MAX_VALUE_DEPTH,
    ArgumentsPiece,
    CallOpened,
    CallPiece,
    CallReader,
    Calls,
    Malformed,
    Text,
    parse,
)
from tests.reliability import figures

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {
                "type": "object",
                "properties": {"o": {"type": "object"}, "s": {"type": "string"}, "n": {}},
            },
        },
    }
]
_FRAGMENTS = [
    "<tool_call>\n",
    "</tool_call>",
    "<function=",
    "<function=f>\n",
    "</function>\n",
    "<parameter=",
    "<parameter=o>\n",
    "<parameter=s>\n",
    "<parameter=n>\n",
    "\n</parameter>\n",
    "f",
    "o",
    "s",
    ">",
    "\n",
    "[",
    "{",
    "]",
    '"',
    "a" * 50,
    "x",
    " ",
]
_fragment = st.sampled_from(_FRAGMENTS)
answers = st.lists(_fragment, max_size=80).map(lambda parts: "<tool_call>\n" + "".join(parts))


def _feed(reader: CallReader, text: str, rng: random.Random) -> list[CallPiece]:
    pieces: list[CallPiece] = []
    at = 0
    while at < len(text):
        size = rng.randint(1, 7)
        pieces += reader.feed(text[at : at + size])
        at += size
    return pieces


def _arguments(pieces: list[CallPiece]) -> list[str]:
    joined: list[str] = []
    for piece in pieces:
        if isinstance(piece, CallOpened):
            joined.append("")
        elif isinstance(piece, ArgumentsPiece):
            joined[piece.index] += piece.text
    return joined


@settings(max_examples=600, deadline=None)
@given(text=answers, seed=st.integers(0, 2**32 - 1))
def test_any_answer_streamed_in_pieces_agrees_with_the_whole_parse(text: str, seed: int) -> None:
    """However the answer is cut, the reader sends the same pieces (joined) as when fed whole,
    and each call's arguments are a prefix of what `parse` reads (all of them for a call
    `parse` accepts whole)."""
    streamed = _arguments(_feed(CallReader(TOOLS), text, random.Random(seed)))
    whole = _arguments(CallReader(TOOLS).feed(text))
    assert streamed == whole
    parsed = parse(text, TOOLS)
    assert isinstance(parsed, Calls | Malformed | Text)
    if isinstance(parsed, Calls):
        assert len(streamed) == len(parsed.calls)
        assert [call.arguments for call in parsed.calls] == streamed


@settings(max_examples=200, deadline=None)
@given(
    depth=st.integers(MAX_VALUE_DEPTH + 1, 20_000),
    opening=st.sampled_from(["[", "{", '{"a":', "[1,"]),
    parameter=st.sampled_from(["o", "n"]),
)
def test_deep_values_are_malformed_not_recursion_errors(
    depth: int, opening: str, parameter: str
) -> None:
    """A value nested past MAX_VALUE_DEPTH (the parser recurses) is a malformed call saying
    how deep, typed parameter or not, whole or streamed."""
    text = (
        f"<tool_call>\n<function=f>\n<parameter={parameter}>\n"
        + opening * depth
        + "\n</parameter>\n</function>\n</tool_call>"
    )
    parsed = parse(text, TOOLS)
    assert isinstance(parsed, Malformed)
    assert "levels deep" in parsed.reason and f"{parameter!r}" in parsed.reason
    pieces = _feed(CallReader(TOOLS), text, random.Random(depth))
    assert _arguments(pieces) == ["{"]  # opened, then stopped at the value


def test_a_value_at_the_depth_limit_is_read() -> None:
    value = "[" * MAX_VALUE_DEPTH + "]" * MAX_VALUE_DEPTH
    text = f"<tool_call>\n<function=f>\n<parameter=o>\n{value}\n</parameter>\n</function>\n"
    text += "</tool_call>"
    parsed = parse(text, TOOLS)
    assert isinstance(parsed, Calls)


_SHAPES: dict[str, Callable[[int], str]] = {
    "unterminated function tag": lambda n: "<tool_call>\n<function=" + "a" * n,
    "unterminated parameter tag": lambda n: "<tool_call>\n<function=f>\n<parameter=" + "a" * n,
    "a value's possible end then a long name": lambda n: (
        "<tool_call>\n<function=f>\n<parameter=s>\nx\n</parameter>\n<parameter=" + "a" * n
    ),
    "an object value of many lines": lambda n: (
        "<tool_call>\n<function=f>\n<parameter=o>\n" + "[\n" * (n // 2)
    ),
    "a string value of many lines": lambda n: (
        "<tool_call>\n<function=f>\n<parameter=s>\n" + "ab\n" * (n // 3)
    ),
    "new lines after a call": lambda n: (
        "<tool_call>\n<function=f>\n</function>\n</tool_call>" + "\n" * n
    ),
    "value ends that are not ends": lambda n: (
        "<tool_call>\n<function=f>\n<parameter=s>\n" + "\n</parameter>\n<parameter=a\n" * (n // 27)
    ),
}


def _stream_cost(text: str) -> float:
    reader = CallReader(TOOLS)
    rng = random.Random(0)
    began = time.perf_counter()
    _feed(reader, text, rng)
    return time.perf_counter() - began


def _ratio(cost: Callable[[int], float], small: int) -> float:
    """min of 3 runs at 10n over min of 3 at n (min: the run least disturbed by the machine)."""
    return min(cost(small * 10) for _ in range(3)) / min(cost(small) for _ in range(3))


@pytest.mark.parametrize("shape", list(_SHAPES))
def test_streamed_reading_is_linear(shape: str) -> None:
    make = _SHAPES[shape]
    ratio = _ratio(lambda n: _stream_cost(make(n)), 20_000)
    figures.record("hostile", **{f"tool_call_stream_10x_cost[{shape}]": round(ratio, 1)})
    # Linear is 10x, quadratic 100x; the margin is for a loaded machine's noise.
    assert ratio < 30, f"{shape}: 10x the text cost {ratio:.1f}x"


def test_whole_answer_parse_is_linear_in_calls() -> None:
    call = "<tool_call>\n<function=f>\n<parameter=s>\nx\n</parameter>\n</function>\n</tool_call>\n"

    def cost(calls: int) -> float:
        text = call * calls
        began = time.perf_counter()
        parsed = parse(text, TOOLS)
        elapsed = time.perf_counter() - began
        assert isinstance(parsed, Calls) and len(parsed.calls) == calls
        return elapsed

    ratio = _ratio(cost, 3_000)
    figures.record("hostile", tool_call_parse_10x_calls_cost=round(ratio, 1))
    assert ratio < 30, f"10x the calls cost {ratio:.1f}x"
