"""A chat's MCP tools, Qt-free: what the model is offered and what its calls did.

- `ToolCatalog`: the enabled servers' tools as OpenAI function tools (the chat template renders
  them, core.engine's `tools_json`), each function name mapped back to its server and tool
  (unique by construction, `function_names`: a name two servers share is prefixed with its
  server's; a rename a collision forced is in `problems`), the grammar that forces a call
  of one of them (core.tools.grammar), for "Use tool" on the next message, and the lazy one
  a call the model opens by itself follows.
- `TracedCall` / `ToolRound`: each call's name, arguments, result, status and time, as the
  answer's stats record keeps them (`trace_record`, `trace_from_record`: a stored record is
  untrusted, so it is read bounded and a damaged entry is dropped, never raised).
- `round_messages`: the rounds as the engine's messages (the assistant's calls, then each
  result), so the model reads them in the next round and in later turns (core.chat.turns).
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from qwen_mtp_desktop.core.decoding.grammar import grammar_problem
from qwen_mtp_desktop.core.decoding.method import MAX_CONSTRAINT_CHARS, Constraint
from qwen_mtp_desktop.core.engine import Message, ToolCallRecord
from qwen_mtp_desktop.core.tools.calls import Calls, Malformed, Parsed, ToolCall, parse
from qwen_mtp_desktop.core.tools.grammar import ToolGrammarError, tool_call_grammar
from qwen_mtp_desktop.core.tools.mcp.client import ToolInfo

#: Rounds of tool calls one answer may make before the chat stops it.
MAX_ROUNDS = 8
#: `Constraint.name` of a call forced from the chat.
FORCED_NAME = "use_tool"
#: `Constraint.name` of the grammar a call the model opens by itself follows.
CALLS_NAME = "tool_calls_auto"
#: Bounds when reading a stored trace (characters, calls per round, rounds).
MAX_STORED_TEXT = 50_000
MAX_STORED_CALLS = 32

CallStatus = Literal["asking", "running", "ok", "error", "denied", "failed", "cancelled"]
STATUSES: tuple[str, ...] = ("asking", "running", "ok", "error", "denied", "failed", "cancelled")
_FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
#: The longest function name offered (OpenAI's limit; remote servers enforce it).
MAX_FUNCTION_NAME = 64


@dataclass(frozen=True)
class ToolCatalog:
    """The tools offered in one chat turn. `functions` maps a function name the model sees to
    (server name, tool name); every listed tool gets a name of its own (`function_names`), and
    `problems` says, one line each, which tools had to be renamed for that (for the UI)."""

    tools: tuple[dict[str, Any], ...] = ()
    functions: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @classmethod
    def of(cls, infos: Iterable[ToolInfo]) -> ToolCatalog:
        infos = list(infos)
        names, problems = function_names(infos)
        tools: list[dict[str, Any]] = []
        functions: dict[str, tuple[str, str]] = {}
        for info, name in zip(infos, names, strict=True):
            functions[name] = (info.server, info.name)
            parameters = dict(info.input_schema) or {"type": "object", "properties": {}}
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": info.description,
                        "parameters": parameters,
                    },
                }
            )
        return cls(tuple(tools), functions, tuple(problems))

    @property
    def tools_json(self) -> str:
        return json.dumps(list(self.tools), ensure_ascii=False) if self.tools else ""

    def forced(self, function: str) -> Constraint:
        """The grammar of one call of `function`; ValueError (plain words) when it cannot be
        written or is too large."""
        if function not in self.functions:
            raise ValueError(f"the tool {function!r} is not offered in this chat")
        try:
            grammar = tool_call_grammar(self.tools, only=function)
        except ToolGrammarError as exc:
            raise ValueError(f"a call of {function!r} cannot be forced: {exc}") from None
        if len(grammar) > MAX_CONSTRAINT_CHARS:
            raise ValueError(f"the tool {function!r} has too large a schema to force a call")
        return Constraint("lark", grammar, FORCED_NAME)

    def lazy(self) -> Constraint | None:
        """The grammar a call the model opens by itself follows (free text until
        "<tool_call>", then well-formed calls of these tools, as the API's tool_choice auto);
        None when the tools cannot be written as one (their calls are then only parsed)."""
        if not self.tools:
            return None
        try:
            grammar = tool_call_grammar(self.tools, lazy=True)
        except ToolGrammarError:
            return None
        if len(grammar) > MAX_CONSTRAINT_CHARS:
            return None
        constraint = Constraint("lark", grammar, CALLS_NAME, lazy=True)
        return constraint if grammar_problem(constraint) is None else None


def _cleaned(name: str) -> str:
    """A name as a function name may hold it (OpenAI's: letters, digits, "_", ".", "-")."""
    return _FUNCTION_NAME.sub("_", name)


def _numbered(name: str, taken: Container[str]) -> str:
    """`name`, or with the first free "_2", "_3", … (within MAX_FUNCTION_NAME)."""
    number = 2
    found = name
    while found in taken:
        suffix = f"_{number}"
        found = name[: MAX_FUNCTION_NAME - len(suffix)] + suffix
        number += 1
    return found


def function_names(infos: Sequence[ToolInfo]) -> tuple[list[str], list[str]]:
    """(each tool's function name, one line per tool renamed to keep names unique).

    A tool keeps its own name (cleaned) unless tools of two servers share it: then each is
    "SERVER__NAME". The "SERVER__" names belong to their server: a tool of another server whose
    own name starts so (a server posing as another's tool, "files__read" offered by "evil") is
    renamed "evil__files__read" and the rename shown. Names still equal after that (a server's
    "get data" and "get_data", servers "a b" and "a_b", names cut at 64 characters) are numbered,
    the rename shown; the names of their servers' own form are given out first, so a name is
    never taken from the server it names, and no tool is ever dropped."""
    servers = [_cleaned(info.server) for info in infos]
    bases = [_cleaned(info.name) for info in infos]
    owners: dict[str, set[str]] = {}
    for info, base in zip(infos, bases, strict=True):
        owners.setdefault(base, set()).add(info.server)
    prefixes = set(servers)
    wanted: list[str] = []
    ranks: list[int] = []  # 0: a server's own form; 1: renamed; 2: the tool's own name
    problems: list[str] = []
    for info, server, base in zip(infos, servers, bases, strict=True):
        posing = next(
            (p for p in sorted(prefixes) if p != server and base.startswith(p + "__")), None
        )
        if len(owners[base]) > 1 or posing is not None:
            wanted.append(f"{server}__{base}"[:MAX_FUNCTION_NAME])
            ranks.append(1 if posing is not None else 0)
            if posing is not None:
                problems.append(
                    f"The tool {info.name!r} of MCP server {info.server!r} is offered as "
                    f"{wanted[-1]!r}: its own name reads as a tool of the server {posing!r}."
                )
        else:
            wanted.append(base[:MAX_FUNCTION_NAME])
            ranks.append(2)
    names = [""] * len(infos)
    taken: dict[str, int] = {}
    for index in sorted(range(len(infos)), key=lambda i: (ranks[i], i)):
        name = _numbered(wanted[index], taken)
        if name != wanted[index]:
            other = infos[taken[wanted[index]]]
            problems.append(
                f"The tool {infos[index].name!r} of MCP server {infos[index].server!r} is "
                f"offered as {name!r}: {wanted[index]!r} is already the name of the tool "
                f"{other.name!r} of {other.server!r}."
            )
        taken[name] = index
        names[index] = name
    return names, problems


@dataclass(frozen=True)
class TracedCall:
    """One tool call of an answer: what the model asked and what came of it."""

    id: str
    function: str
    server: str
    tool: str
    arguments: str
    status: CallStatus = "asking"
    result: str = ""
    #: Seconds since the epoch when it started, and how long it ran.
    started_at: float = 0.0
    duration_s: float = 0.0

    def with_result(self, status: CallStatus, result: str, duration_s: float = 0.0) -> TracedCall:
        return replace(self, status=status, result=result, duration_s=duration_s)

    @property
    def arguments_object(self) -> dict[str, Any]:
        try:
            value = json.loads(self.arguments)
        except (ValueError, RecursionError):  # a stored record may be crafted: nested deep
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def arguments_shown(self) -> str:
        """The arguments as a person reads them: JSON indented (as written when not JSON)."""
        try:
            return json.dumps(json.loads(self.arguments), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):
            return self.arguments

    @property
    def done(self) -> bool:
        return self.status not in ("asking", "running")


_STATUS_WORDS: dict[str, str] = {
    "asking": "waiting for your permission",
    "running": "running…",
    "ok": "done",
    "error": "the tool reported an error",
    "denied": "denied",
    "failed": "failed",
    "cancelled": "cancelled",
}


def call_summary(call: TracedCall) -> str:
    """ "Tool: add (tests) · done in 0.21 s": a call in one line (the transcript's folded row,
    the Markdown export's)."""
    words = _STATUS_WORDS.get(call.status, call.status)
    if call.done and call.status not in ("denied", "cancelled") and call.duration_s:
        # A fast local tool takes well under 5 ms: "in 0.00 s" read as if nothing ran.
        seconds = call.duration_s
        words += f" in {seconds:.2f} s" if seconds >= 0.005 else f" in {seconds * 1000:.1f} ms"
    return f"Tool: {call.tool} ({call.server}) · {words}"


@dataclass(frozen=True)
class ToolRound:
    """One round: the text the model wrote before its calls, and the calls."""

    content: str
    calls: tuple[TracedCall, ...]


def read_calls(
    text: str, remote: Mapping[str, Any] | None, tools: Sequence[Mapping[str, Any]]
) -> Parsed:
    """An answer's calls, however its model's server said them: a remote server's own
    `tool_calls` (core.remote.client hands them over in the answer's stats, `remote`; `text`
    is then the text before them), else the model's text read by core.tools.calls. A call of
    a function the chat did not offer is Malformed either way."""
    raw = remote.get("tool_calls") if remote is not None else None
    if not isinstance(raw, list) or not raw:
        return parse(text, tools)
    offered = {tool["function"]["name"] for tool in tools}
    calls = []
    for entry in raw:
        name, arguments = entry.get("name"), entry.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, str):
            return Malformed(text, "a tool call without a name or arguments")
        if name not in offered:
            return Malformed(text, f"the model called {name!r}, which is not among the tools")
        calls.append(ToolCall(name, arguments, entry.get("id") or ""))
    return Calls(text.rstrip("\n "), tuple(calls))


def round_messages(rounds: Sequence[ToolRound]) -> list[Message]:
    """The rounds as the model reads them: the assistant's calls, then one tool message per
    call with its result (a denied or failed call's result says so)."""
    messages: list[Message] = []
    for done in rounds:
        records = tuple(ToolCallRecord(c.id, c.function, c.arguments) for c in done.calls)
        messages.append(Message("assistant", done.content, tool_calls=records))
        for call in done.calls:
            messages.append(Message("tool", result_for_model(call), tool_call_id=call.id))
    return messages


def result_for_model(call: TracedCall) -> str:
    if call.status == "ok":
        return call.result
    if call.status == "denied":
        return "The user denied this tool call."
    if call.status == "cancelled":
        return "The tool call was cancelled."
    return f"Error: {call.result}"


def trace_record(rounds: Sequence[ToolRound]) -> list[dict[str, Any]]:
    """The rounds as JSON for the answer's stats record."""
    return [
        {
            "content": done.content,
            "calls": [
                {
                    "id": c.id,
                    "function": c.function,
                    "server": c.server,
                    "tool": c.tool,
                    "arguments": c.arguments,
                    "status": c.status,
                    "result": c.result,
                    "started_at": c.started_at,
                    "duration_s": c.duration_s,
                }
                for c in done.calls
            ],
        }
        for done in rounds
    ]


def _stored_text(value: object) -> str | None:
    return value[:MAX_STORED_TEXT] if isinstance(value, str) else None


def _stored_number(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value == value:
        return max(0.0, min(float(value), 1e12))
    return 0.0


def _stored_call(raw: object) -> TracedCall | None:
    if not isinstance(raw, Mapping):
        return None
    texts = {k: _stored_text(raw.get(k)) for k in ("id", "function", "server", "tool")}
    arguments, result = _stored_text(raw.get("arguments")), _stored_text(raw.get("result"))
    status = raw.get("status")
    if None in texts.values() or arguments is None or result is None or status not in STATUSES:
        return None
    # A call stored while it waited (the app quit mid-turn) did not run.
    shown: CallStatus = status if status not in ("asking", "running") else "cancelled"
    return TracedCall(
        str(texts["id"]),
        str(texts["function"]),
        str(texts["server"]),
        str(texts["tool"]),
        arguments,
        shown,
        result,
        _stored_number(raw.get("started_at")),
        _stored_number(raw.get("duration_s")),
    )


def trace_from_record(value: object) -> list[ToolRound]:
    """The rounds a stored record holds; damaged entries are left out."""
    if not isinstance(value, list):
        return []
    rounds: list[ToolRound] = []
    for raw in value[:MAX_ROUNDS]:
        if not isinstance(raw, Mapping):
            continue
        content = _stored_text(raw.get("content"))
        calls_raw = raw.get("calls")
        if content is None or not isinstance(calls_raw, list):
            continue
        calls = [c for c in map(_stored_call, calls_raw[:MAX_STORED_CALLS]) if c is not None]
        if calls:
            rounds.append(ToolRound(content, tuple(calls)))
    return rounds
