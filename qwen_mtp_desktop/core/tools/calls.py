"""Tool calls in Qwen3.5's format, read from a model's answer as OpenAI's `tool_calls`.

Shared by the API server (server.generation.tools, server.generation.tool_output) and the chat
window's MCP tools (core.chat.tools), so both read a model's calls the same way.

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
(`render_calls` writes exactly that). So how a value is read comes from the tool's schema, by
the rule the forced-call grammar writes it with (`core.tools.grammar.value_kind`): a parameter
that only takes strings keeps the text as written (`null` is None when it may be null); any
other is read as JSON (text that is not JSON stays text when the parameter may be a string).

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
from typing import Any, Literal

from qwen_mtp_desktop.core.files.safe_files import MAX_JSON_DEPTH, json_nesting_depth
from qwen_mtp_desktop.core.tools.grammar import ValueKind, parameter_kinds

CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]+)>\n")
_PARAMETER = re.compile(r"<parameter=([^>\n]+)>\n")
_VALUE_END = "\n</parameter>\n"
_FUNCTION_END = "</function>\n" + CALL_CLOSE
_PARAMETER_HEAD = "<parameter="
_FUNCTION_HEAD = "<function="
#: Where a tag's name ends (or stops being a name).
_NAME_END = re.compile(r"[>\n]")
_NEWLINES = re.compile(r"\n*")
_BLANKS = re.compile(r"\s*")
#: How deep a value's JSON may nest: the parser is recursive (and the chat parses on the GUI
#: thread), so a deeper value is malformed, never a RecursionError.
MAX_VALUE_DEPTH = MAX_JSON_DEPTH


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


def parse(text: str, tools: Sequence[Mapping[str, Any]]) -> Parsed:
    """The model's answer as text, tool calls, or a malformed call (with the reason)."""
    start = text.find(CALL_OPEN)
    if start < 0:
        return Text(text)
    offered = parameter_kinds(tools)
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
        # Positions, never slices of the rest: a slice per call would make many calls quadratic.
        if _skip(_BLANKS, text, at) == len(text):
            break
        at = _skip(_NEWLINES, text, at)
        if not text.startswith(CALL_OPEN, at):
            return Malformed(text, "text follows a tool call (the format allows none)")
    return Calls(text[:start].rstrip("\n "), tuple(calls))


def _read_call(
    text: str, at: int, offered: Mapping[str, Mapping[str, ValueKind]]
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
            return _cut_reason(text, value_at, key, name)
        value = _typed(text[value_at:end], types.get(key))
        if isinstance(value, _Unreadable):
            return f"parameter {key!r} of {name!r} {value.problem}"
        arguments[key] = value
        at = end + len(_VALUE_END)
    at += len(_FUNCTION_END)
    return ToolCall(name, json.dumps(arguments, ensure_ascii=False)), at


def _cut_reason(text: str, at: int, key: str, name: str) -> str:
    """Why the value of `key` starting at `at` has no end: it is not closed, or it is and the
    text stops after it (a call cut off by max_tokens), in the next parameter's tag (named
    when its name was written) or before the function's end."""
    search = at
    while (close := text.find(_VALUE_END, search)) >= 0:
        if _ends_here(text, close) == "maybe":
            after = close + len(_VALUE_END)
            tag = text[after:]
            if tag.startswith(_PARAMETER_HEAD) and len(tag) > len(_PARAMETER_HEAD):
                shown = tag[len(_PARAMETER_HEAD) :].removesuffix(">")
                return (
                    f"the call to {name!r} stops in the tag of a parameter after {key!r} "
                    f"(<parameter={shown[:40]}), cut off"
                )
            return f"the call to {name!r} stops after parameter {key!r}, cut off"
        search = close + 1
    return f"parameter {key!r} of {name!r} is not closed with '</parameter>'"


def _value_end(text: str, at: int) -> int:
    """Where the value starting at `at` ends: the first "\\n</parameter>\\n" followed by a
    parameter or the function's end; -1 when there is none."""
    search = at
    while True:
        end = text.find(_VALUE_END, search)
        if end < 0:
            return -1
        if _ends_here(text, end) == "yes":
            return end
        search = end + 1


def _ends_here(text: str, at: int) -> Literal["yes", "no", "maybe"]:
    """Whether a value ends at `at` (the one rule, for whole answers and streamed ones): "yes"
    when "\\n</parameter>\\n" and the next parameter's tag or the function's end follow;
    "maybe" when `text` stops before that can be told (more of a streamed answer decides);
    "no" when no continuation of `text` makes it an end."""
    after = at + len(_VALUE_END)
    if len(text) < after:
        return "maybe" if _VALUE_END.startswith(text[at:]) else "no"
    if not text.startswith(_VALUE_END, at):
        return "no"
    if text.startswith(_FUNCTION_END, after):
        return "yes"
    if len(text) - after < len(_FUNCTION_END) and _FUNCTION_END.startswith(text[after:]):
        return "maybe"
    return _tag_at(text, after, _PARAMETER_HEAD)[0]


def _tag_at(text: str, at: int, head: str) -> tuple[Literal["yes", "no", "maybe"], int]:
    """Whether the tag `head` + "NAME>\\n" is at `at` ("maybe": `text` stops inside it), and
    where its name ends (its ">"; where `text` stops for "maybe"). Reads only up to the name's
    first ">" or new line, never the rest of `text`, so a long unterminated name costs its
    length once."""
    name_at = at + len(head)
    if len(text) < name_at:
        return ("maybe" if head.startswith(text[at:]) else "no"), len(text)
    if not text.startswith(head, at):
        return "no", at
    stop = _NAME_END.search(text, name_at)
    if stop is None:
        return "maybe", len(text)
    close = stop.start()
    if text[close] == "\n" or close == name_at:
        return "no", close
    if close + 1 == len(text):
        return "maybe", close
    return ("yes" if text[close + 1] == "\n" else "no"), close


def _skip(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where the run of `pattern` (one that matches the empty text) starting at `at` ends."""
    found = pattern.match(text, at)
    return found.end() if found is not None else at


@dataclass(frozen=True)
class _Unreadable:
    #: What is wrong, after "parameter 'KEY' of 'NAME' ".
    problem: str


#: How a parameter the tool does not declare is read: JSON, else text.
_ANY = ValueKind("json")


def _typed(raw: str, kind: ValueKind | None) -> Any:
    """A value as the call wrote it (`kind`: how its parameter's values are written; module
    docstring): text as it is, `null` as None when the parameter may be null, else JSON (text
    that is not JSON stays text when the parameter may be a string or anything). JSON nested
    deeper than MAX_VALUE_DEPTH is unreadable whatever the type (json.loads would recurse)."""
    kind = kind or _ANY
    if kind.kind == "text":
        return raw
    if kind.kind == "nullable_text":
        return None if raw == "null" else raw
    depth = json_nesting_depth(raw)
    if depth > MAX_VALUE_DEPTH:
        return _Unreadable(f"is nested {depth} levels deep (at most {MAX_VALUE_DEPTH})")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        if kind.types is None:
            return raw
        return _Unreadable("is not valid " + " or ".join(sorted(kind.types)) + " JSON")
    if kind.kind == "quoted_text" and not isinstance(value, str):
        return raw
    return value


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


# --- calls read while the answer streams -------------------------------------------------------


@dataclass(frozen=True)
class CallOpened:
    """A call's start, streamed: its place among the answer's calls and the function's name."""

    index: int
    name: str


@dataclass(frozen=True)
class ArgumentsPiece:
    """The next piece of a streamed call's arguments (JSON text)."""

    index: int
    text: str


CallPiece = CallOpened | ArgumentsPiece


class CallReader:
    """Reads the calls of an answer while it streams (fed the text from its first
    "<tool_call>" on), as vLLM's Qwen3 XML parsers stream them: a call as soon as its function's
    name is read (a name the request did not offer is never sent), then its arguments as JSON
    pieces: "{", a string value character by character as it arrives (all but a tail that may
    be the start of the value's end), any other value whole when it ends (its JSON is only known
    then), "}" at the function's end.

    The rules are `parse`'s (`_ends_here` decides where a value ends, `_typed` what it is), so
    each call's pieces joined are a prefix of the arguments `parse` reads from the whole
    answer, and all of them once the call's "</function>" arrived. Where the text stops being
    a well-formed call (a repeated parameter, a value not valid for its type, text between
    calls), the reader stops: nothing more is sent, and `parse` of the whole answer decides
    what it was.

    Linear in the answer, however it is cut into pieces: the text held is only what is not
    decided yet (`_text`; a non-string value's decided part waits in `_value_parts`), a piece
    that cannot decide anything (no character in `_wait`) is only put aside (`_pending`), and
    a tag's name or a value's possible end is never read again from its start."""

    def __init__(self, tools: Sequence[Mapping[str, Any]]) -> None:
        self._offered = parameter_kinds(tools)
        self._text = ""  # the undecided text; positions below are in it
        self._pending: list[str] = []  # text fed while nothing could be decided
        self._wait = ""  # the characters that can decide something ("": any)
        self._at = 0  # where reading continues
        self._state: Literal["call", "function", "parameters", "value", "between", "stopped"]
        self._state = "call"
        self._index = -1  # of the open call
        self._types: Mapping[str, ValueKind] = {}  # how its parameters' values are written
        self._keys: set[str] = set()  # its parameters so far
        self._key = ""  # the open value's parameter
        self._value_parts: list[str] = []  # the open non-string value's text before `_text`
        self._head = ""  # the open value's '"key": ', with ", " before all but the first
        self._string = False  # whether it is sent as it arrives
        self._scan = 0  # where the search for the open value's end (or a tag's) continues

    def feed(self, text: str) -> list[CallPiece]:
        """The calls' pieces that `text` (the answer's next characters) decided."""
        if self._state == "stopped":
            return []  # nothing more is read, so nothing is kept
        if self._wait and not any(char in text for char in self._wait):
            self._pending.append(text)
            return []
        self._text = "".join([self._text, *self._pending, text])
        self._pending.clear()
        self._wait = ""
        pieces: list[CallPiece] = []
        while self._step(pieces):
            pass
        self._trim()
        return pieces

    def _trim(self) -> None:
        """Drop the decided text (a non-string value's moves to `_value_parts`)."""
        keep = self._scan if self._state == "value" else self._at
        if self._state == "stopped":
            keep = len(self._text)
        if keep <= 0:
            return
        if self._state == "value" and not self._string:
            self._value_parts.append(self._text[self._at : keep])
            self._at = keep
        self._text = self._text[keep:]
        self._at -= keep
        self._scan -= keep

    def _stop(self) -> bool:
        self._state = "stopped"
        self._value_parts.clear()
        return False

    def _step(self, pieces: list[CallPiece]) -> bool:
        """Reads what comes next, if it can be told yet; whether reading went on."""
        text, at = self._text, self._at
        if self._state == "call":
            opening = CALL_OPEN + "\n"
            if text.startswith(opening, at):
                self._at, self._scan, self._state = at + len(opening), 0, "function"
                return True
            if len(text) - at >= len(opening) or not opening.startswith(text[at:]):
                self._stop()
            return False
        if self._state == "function":
            verdict, close = self._tag(_FUNCTION_HEAD)
            if verdict == "no":
                self._stop()
            if verdict != "yes":
                return False
            name = text[at + len(_FUNCTION_HEAD) : close]
            if name not in self._offered:
                return self._stop()
            self._index += 1
            self._types, self._keys = self._offered[name], set()
            pieces += [CallOpened(self._index, name), ArgumentsPiece(self._index, "{")]
            self._at, self._scan, self._state = close + 2, 0, "parameters"
            return True
        if self._state == "parameters":
            return self._parameter(pieces)
        if self._state == "value":
            return self._value(pieces)
        if self._state == "between":
            at = self._at = _skip(_NEWLINES, text, at)
            if text.startswith(CALL_OPEN, at):
                self._state = "call"
                return True
            if len(text) - at >= len(CALL_OPEN) or not CALL_OPEN.startswith(text[at:]):
                self._stop()  # trailing blanks, or text after a call: `parse` tells which
            return False
        return False

    def _tag(self, head: str) -> tuple[Literal["yes", "no", "maybe"], int]:
        """`_tag_at` at the reading position, resumed where the name was read up to; when the
        text stops inside the name, only a ">" or a new line can decide it."""
        verdict, close = _tag_at(self._text, self._at, head)
        if verdict == "maybe":
            self._wait = ">\n" if close > self._at + len(head) and close == len(self._text) else ""
        return verdict, close

    def _parameter(self, pieces: list[CallPiece]) -> bool:
        text, at = self._text, self._at
        if text.startswith(_FUNCTION_END, at):
            pieces.append(ArgumentsPiece(self._index, "}"))
            self._at, self._state = at + len(_FUNCTION_END), "between"
            return True
        if len(text) - at < len(_FUNCTION_END) and _FUNCTION_END.startswith(text[at:]):
            return False
        verdict, close = self._tag(_PARAMETER_HEAD)
        if verdict == "no":
            self._stop()
        if verdict != "yes":
            return False
        key = text[at + len(_PARAMETER_HEAD) : close]
        if key in self._keys:
            return self._stop()
        self._head = (", " if self._keys else "") + json.dumps(key, ensure_ascii=False) + ": "
        self._keys.add(key)
        self._key = key
        kind = self._types.get(key)
        self._string = kind is not None and kind.kind == "text"
        self._at = self._scan = close + 2
        self._value_parts = []
        if self._string:
            pieces.append(ArgumentsPiece(self._index, self._head + '"'))
        self._state = "value"
        return True

    def _value(self, pieces: list[CallPiece]) -> bool:
        """The open value from `_at` (a string's text before it is sent; a non-string's after
        `_value_parts`): sends what is decided, and the value's end when it comes."""
        text = self._text
        end = -1
        while True:  # the first place the value may end, or its end
            newline = text.find("\n", self._scan)
            if newline < 0:
                self._scan = len(text)
                break
            verdict = _ends_here(text, newline)
            if verdict == "no":
                self._scan = newline + 1
                continue
            self._scan = newline
            if verdict == "yes":
                end = newline
            elif text[-1] != ">" and text.startswith(_PARAMETER_HEAD, newline + len(_VALUE_END)):
                self._wait = ">\n"  # inside the next parameter's name: only its end decides
            break
        if self._string and self._scan > self._at:
            pieces.append(
                ArgumentsPiece(self._index, _json_string_body(text[self._at : self._scan]))
            )
            self._at = self._scan
        if end < 0:
            return False
        if self._string:
            pieces.append(ArgumentsPiece(self._index, '"'))
        else:
            raw = "".join([*self._value_parts, text[self._at : end]])
            self._value_parts = []
            value = _typed(raw, self._types.get(self._key))
            if isinstance(value, _Unreadable):
                return self._stop()
            whole = json.dumps(value, ensure_ascii=False)
            pieces.append(ArgumentsPiece(self._index, self._head + whole))
        self._at, self._scan, self._state = end + len(_VALUE_END), 0, "parameters"
        return True


def _json_string_body(text: str) -> str:
    """`text` as it appears inside a JSON string (json.dumps escapes character by character,
    so the bodies of a value's pieces join into the body of the whole value)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]
