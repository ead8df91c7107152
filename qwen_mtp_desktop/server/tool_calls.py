"""Tool calls in Qwen3.5's format, read from a model's answer as OpenAI's `tool_calls`.

Groundwork for issue 27 item 1: the server still refuses `tools` with a 400 until the engine
renders tools and tool messages through the model's chat template; this module is the part
that reads what the model writes back, complete and tested on its own.

Qwen3.5's chat template (Qwen3.5-0.8B's chat_template.jinja, as llama.cpp-style runtimes and
vLLM's `qwen3_xml` parser read it) asks the model to answer a call as

    <tool_call>
    <function=NAME>
    <parameter=ARGUMENT>
    VALUE
    </parameter>
    </function>
    </tool_call>

optionally after some text, several calls one after another, and nothing after them. It
renders earlier calls the same way, a string value as it is and any other value as JSON
(`render_calls` writes exactly that). So a value's type comes from the tool's schema: a
string parameter keeps the text as written; any other is read as JSON.

Where a value ends is decided while it is read: at the first "\\n</parameter>\\n" followed by
the next parameter or the end of the function, never by searching ahead for </function> (a
value may contain that text). A value that itself holds "\\n</parameter>\\n" followed by such a
tag cannot be told from its end; the format has no escape for it.

Output that is not a well-formed call of a tool the request offered is `Malformed`, with the
reason and the text: a typed result the caller answers with, never an exception.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]+)>\n")
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n")
_VALUE_END = "\n</parameter>\n"
_FUNCTION_END = "</function>\n" + CALL_CLOSE


@dataclass(frozen=True)
class ToolCall:
    """One call: the function's name and its arguments as a JSON object's text (OpenAI's
    `function.arguments` is a string)."""

    name: str
    arguments: str
    id: str = ""

    def to_openai(self, index: int | None = None) -> dict[str, Any]:
        call: dict[str, Any] = {
            "id": self.id or new_call_id(),
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }
        if index is not None:  # a streamed delta names its position
            call["index"] = index
        return call


@dataclass(frozen=True)
class Calls:
    """An answer with tool calls: the text before them and the calls, in order."""

    content: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Malformed:
    """An answer that starts a tool call but is not a well-formed call of an offered tool."""

    text: str
    reason: str


@dataclass(frozen=True)
class Text:
    """An answer without a tool call."""

    content: str


Parsed = Calls | Malformed | Text


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def parameter_types(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, set[str]]]:
    """{function name: {parameter: its JSON-schema types}} from OpenAI `tools` (a parameter
    without a stated type gets no entry: its value is read as JSON when it can be)."""
    found: dict[str, dict[str, set[str]]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        types: dict[str, set[str]] = {}
        for name, schema in (properties or {}).items():
            kind = schema.get("type") if isinstance(schema, Mapping) else None
            if isinstance(kind, str):
                types[name] = {kind}
            elif isinstance(kind, list) and all(isinstance(k, str) for k in kind):
                types[name] = set(kind)
        found[function["name"]] = types
    return found


def parse(text: str, tools: Sequence[Mapping[str, Any]]) -> Parsed:
    """The model's answer as text, tool calls, or a malformed call (with the reason)."""
    start = text.find(CALL_OPEN)
    if start < 0:
        return Text(text)
    offered = parameter_types(tools)
    calls: list[ToolCall] = []
    at = start
    while True:
        if not text.startswith(CALL_OPEN + "\n", at):
            return Malformed(text, f"expected {CALL_OPEN!r} and a new line at character {at}")
        at += len(CALL_OPEN) + 1
        read = _read_call(text, at, offered)
        if isinstance(read, str):
            return Malformed(text, read)
        call, at = read
        calls.append(call)
        rest = text[at:]
        if not rest.strip():
            break
        stripped = rest.lstrip("\n")
        if not stripped.startswith(CALL_OPEN):
            return Malformed(text, "text follows a tool call (the format allows none)")
        at = len(text) - len(stripped)
    return Calls(text[:start].rstrip("\n "), tuple(calls))


def _read_call(
    text: str, at: int, offered: Mapping[str, Mapping[str, set[str]]]
) -> tuple[ToolCall, int] | str:
    """(the call, where it ends) read from `at` (just after "<tool_call>\\n"), or the
    reason it is not a call."""
    function = _FUNCTION.match(text, at)
    if function is None:
        return f"expected '<function=NAME>' and a new line at character {at}"
    name = function.group(1)
    if name not in offered:
        return f"the model called {name!r}, which is not among the offered tools"
    types = offered[name]
    at = function.end()
    arguments: dict[str, Any] = {}
    while not text.startswith(_FUNCTION_END, at):
        parameter = _PARAMETER.match(text, at)
        if parameter is None:
            return f"expected '<parameter=NAME>' or '</function>' at character {at}"
        key = parameter.group(1)
        if key in arguments:
            return f"parameter {key!r} of {name!r} is given twice"
        value_at = parameter.end()
        end = _value_end(text, value_at)
        if end < 0:
            return f"parameter {key!r} of {name!r} is not closed with '</parameter>'"
        value = _typed(text[value_at:end], types.get(key))
        if isinstance(value, _Unreadable):
            return f"parameter {key!r} of {name!r} is not valid {value.expected}"
        arguments[key] = value
        at = end + len(_VALUE_END)
    at += len(_FUNCTION_END)
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False)), at


def _value_end(text: str, at: int) -> int:
    """Where the value starting at `at` ends: the first "\\n</parameter>\\n" followed by a
    parameter or the function's end; -1 when there is none."""
    search = at
    while True:
        end = text.find(_VALUE_END, search)
        if end < 0:
            return -1
        after = end + len(_VALUE_END)
        if text.startswith(_FUNCTION_END, after) or _PARAMETER.match(text, after):
            return end
        search = end + 1


@dataclass(frozen=True)
class _Unreadable:
    expected: str


def _typed(raw: str, types: set[str] | None) -> Any:
    """A value as the template wrote it: text for a string parameter, JSON otherwise (a
    parameter without a stated type: JSON when it reads as JSON, else the text)."""
    if types is not None and "string" in types:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        if types is None:
            return raw
        return _Unreadable(" or ".join(sorted(types)) + " JSON")


def render_calls(calls: Sequence[tuple[str, Mapping[str, Any]]], content: str = "") -> str:
    """An assistant turn's calls as Qwen3.5's chat template renders them (what the model
    learnt to write): string values as they are, others as JSON."""
    parts = []
    for index, (name, arguments) in enumerate(calls):
        if index == 0:
            parts.append(("\n\n" if content.strip() else "") + f"{CALL_OPEN}\n<function={name}>\n")
        else:
            parts.append(f"\n{CALL_OPEN}\n<function={name}>\n")
        for key, value in arguments.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(f"<parameter={key}>\n{shown}{_VALUE_END}")
        parts.append(_FUNCTION_END)
    return content + "".join(parts)
