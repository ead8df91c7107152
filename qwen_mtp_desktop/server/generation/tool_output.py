"""Tool calling, the answer's side: the model's text read as OpenAI `tool_calls`
(core.tools.calls parses Qwen3.5's format), whole or streamed.

- Calls: `message.tool_calls` (each with a fresh `call_...` id), the text before them as
  `content` (null when there is none, as OpenAI sends it), `finish_reason: "tool_calls"`; at
  most `ToolPlan.max_calls` of them (the Responses API's `max_tool_calls`: later ones are
  dropped, whole and streamed).
- Tools with a response_format (`ToolPlan.calls_or_json`): an answer that does not open with
  a call is JSON of the format, all of it content, whole and streamed as it comes (a string in
  it may hold "<tool_call>").
- A malformed call (not the format, an unknown function, a value that is not valid for its
  parameter's type, cut off by max_tokens): the whole text as `content` with the engine's own
  finish reason, as vLLM's Qwen3 XML parsers answer it (never an error or a 500), plus a
  `tool_call_error` object (`type`, `message`) beside `usage` so a client can tell.
- Streamed: text is sent as it comes until it may be the start of a call ("<tool_call>" or a
  prefix of it at the end of what came, with the blank lines before it); from there calls are
  read as they arrive (core.tools.calls.CallReader): per call, a `delta.tool_calls` entry with
  index, id, type, the function's name and empty arguments as soon as the name is read, then
  entries with pieces of `function.arguments` as the model writes them (a string value as it
  arrives, any other value whole when it ends). The pieces of a call join into exactly the
  arguments of the non-streamed answer. Whether the calls were well formed is known at the
  end: `finish_reason: "tool_calls"` says they were; a malformed call ends with the engine's
  finish reason, `tool_call_error`, and the call's text as `delta.content` (the calls' pieces
  already sent stay sent, as in vLLM's streams).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qwen_mtp_desktop.core.tools.calls import (
    CALL_OPEN,
    ArgumentsPiece,
    CallOpened,
    CallPiece,
    CallReader,
    Calls,
    Malformed,
    ToolCall,
    new_call_id,
    parse,
)
from qwen_mtp_desktop.server.generation.tools import ToolPlan

_log = logging.getLogger(__name__)

#: `tool_call_error.type` of an answer whose tool call could not be read.
MALFORMED = "malformed_tool_call"


@dataclass(frozen=True)
class ReadAnswer:
    """An answer as the API sends it with tools: content (None: null), calls, the finish reason
    to report (None: the engine's), and the error object of a malformed call."""

    content: str | None
    calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    error: dict[str, str] | None = None


def read_answer(answer: str, plan: ToolPlan, ids: Sequence[str] = ()) -> ReadAnswer:
    """The answer read for calls; `ids`: the ids of its first calls (those a stream sent)."""
    if plan.calls_or_json and not answer.lstrip().startswith(CALL_OPEN):
        return ReadAnswer(answer)  # JSON of the response_format, whatever its strings hold
    parsed = parse(answer, plan.tools)
    if isinstance(parsed, Calls):
        calls = tuple(
            ToolCall(c.name, c.arguments, ids[n] if n < len(ids) else new_call_id())
            for n, c in enumerate(parsed.calls[: plan.max_calls])
        )
        return ReadAnswer(parsed.content or None, calls, "tool_calls")
    if isinstance(parsed, Malformed):
        return ReadAnswer(answer, error=malformed_error(parsed.reason))
    return ReadAnswer(answer)


def malformed_error(reason: str) -> dict[str, str]:
    return {
        "type": MALFORMED,
        "message": f"The model's tool call could not be read ({reason}); its text is returned "
        "as content.",
    }


def read_for_completion(
    answer: str, plan: ToolPlan, finish: str
) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(the message's `content` and `tool_calls`, the finish reason, the fields to add to the
    completion: `tool_call_error` for a malformed call) of a non-streamed answer; `finish`:
    the engine's finish reason."""
    read = read_answer(answer, plan)
    fields: dict[str, Any] = {"content": read.content}
    if read.calls:
        fields["tool_calls"] = [call.to_openai() for call in read.calls]
    return fields, read.finish_reason or finish, error_fields(read)


def error_fields(read: ReadAnswer) -> dict[str, Any]:
    return {"tool_call_error": read.error} if read.error is not None else {}


class ToolStream:
    """A streamed answer split into text that is safe to send now and its tool calls, read as
    they arrive (module docstring)."""

    def __init__(self, plan: ToolPlan) -> None:
        self._plan = plan
        self._text: list[str] = []
        self._sent = 0  # characters of the answer already sent as content
        self._reader: CallReader | None = None  # from the first "<tool_call>" on
        self.ids: list[str] = []  # of the calls streamed, in order
        self._arguments: list[str] = []  # each call's arguments sent so far

    def feed(self, piece: str) -> tuple[str, list[CallPiece]]:
        """(the content to send now, the calls' pieces read) after `piece` of the answer
        arrived."""
        if not piece:
            return "", []
        self._text.append(piece)
        if self._reader is not None:
            return "", self._read(piece)
        text = "".join(self._text)
        self._text = [text]
        head = text.lstrip()
        if self._plan.calls_or_json and head and not CALL_OPEN.startswith(head[: len(CALL_OPEN)]):
            out = text[self._sent :]  # JSON of the response_format: all of it is content
            self._sent = len(text)
            return out, []
        start = text.find(CALL_OPEN, self._sent)
        pieces: list[CallPiece] = []
        if start >= 0:
            self._reader = CallReader(self._plan.tools)
            pieces = self._read(text[start:])
            safe = start
        else:
            safe = len(text) - _partial_open(text)
        # Blank lines before a call are not content (the parser drops them).
        safe = len(text[:safe].rstrip("\n ")) if safe > self._sent else self._sent
        if safe <= self._sent:
            return "", pieces
        out = text[self._sent : safe]
        self._sent = safe
        return out, pieces

    def _read(self, text: str) -> list[CallPiece]:
        assert self._reader is not None
        pieces = self._reader.feed(text)
        limit = self._plan.max_calls
        if limit is not None:  # calls past `max_tool_calls` are never sent
            pieces = [piece for piece in pieces if piece.index < limit]
        for piece in pieces:
            if isinstance(piece, CallOpened):
                self.ids.append(new_call_id())
                self._arguments.append("")
            else:
                self._arguments[piece.index] += piece.text
        return pieces

    def finish_read(self) -> tuple[str, list[CallPiece], ReadAnswer]:
        """At the end of the answer: (the content not sent yet, the calls' pieces not sent yet,
        the answer read for calls, with the ids the stream sent)."""
        text = "".join(self._text)
        read = read_answer(text, self._plan, self.ids)
        if not read.calls:
            return text[self._sent :], [], read
        pieces: list[CallPiece] = []
        for index, call in enumerate(read.calls):
            if index >= len(self.ids):
                self.ids.append(call.id)
                self._arguments.append("")
                pieces.append(CallOpened(index, call.name))
            sent = self._arguments[index]
            if not call.arguments.startswith(sent):  # CallReader's promise broken: a bug
                _log.error("call %d streamed %r, not a prefix of %r", index, sent, call.arguments)
            rest = call.arguments[len(sent) :]
            if rest:
                pieces.append(ArgumentsPiece(index, rest))
                self._arguments[index] = call.arguments
        return (read.content or "")[self._sent :], pieces, read

    def call_deltas(self, pieces: Sequence[CallPiece]) -> list[dict[str, Any]]:
        """The `delta`s that stream the calls' pieces: a call's head (index, id, type, name,
        empty arguments), then its arguments (the pieces of one call in a row as one delta)."""
        deltas: list[dict[str, Any]] = []
        for piece in pieces:
            if isinstance(piece, CallOpened):
                head = ToolCall(piece.name, "", self.ids[piece.index]).to_openai(piece.index)
                deltas.append({"tool_calls": [head]})
                continue
            last = deltas[-1]["tool_calls"][0] if deltas else None
            if last is not None and last["index"] == piece.index and "id" not in last:
                last["function"]["arguments"] += piece.text
            else:
                entry = {"index": piece.index, "function": {"arguments": piece.text}}
                deltas.append({"tool_calls": [entry]})
        return deltas

    def finish(self, finish: str) -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
        """At the end of the answer: (the deltas still to send: held-back content, then the
        calls' last pieces), the finish reason, the fields to add to the last chunk
        (`tool_call_error`); `finish`: the engine's finish reason."""
        rest, pieces, read = self.finish_read()
        deltas = ([{"content": rest}] if rest else []) + self.call_deltas(pieces)
        return deltas, read.finish_reason or finish, error_fields(read)


def _partial_open(text: str) -> int:
    """How many characters at the end of `text` may be the start of "<tool_call>"."""
    for size in range(min(len(CALL_OPEN) - 1, len(text)), 0, -1):
        if CALL_OPEN.startswith(text[-size:]):
            return size
    return 0
