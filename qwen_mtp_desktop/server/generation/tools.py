"""Tool calling, the request's side: `tools`, `tool_choice`, `parallel_tool_calls`, assistant
messages with `tool_calls` and `role: "tool"` results, checked and turned into what the engine
needs (the tools as JSON text for the chat template, a grammar for a forced call), or a 400
naming the field.

- `auto` (the default with tools): the template shows the tools; the answer is free text until
  the model writes "<tool_call>", and from there the grammar of the offered tools' calls (a
  lazy grammar, core.tools.grammar), at most `max_calls` of them, MTP kept on; the answer is
  parsed for calls. Tools whose schemas the grammar engine cannot enforce (which a forced call
  refuses with a 400) are offered without it, as before: their calls are only parsed.
- `none`: the tools are not shown and the answer is not parsed (earlier calls and results in
  the conversation are still rendered).
- `required` / `{"type": "function", "function": {"name": ...}}`: the answer is constrained to
  tool calls (core.tools.grammar) with MTP kept on, as structured output is.
- `auto` with a `response_format` (JSON object or schema): the answer is constrained to tool
  calls or JSON of the format (one grammar of both, MTP kept on), as OpenAI answers that
  combination; a forced call with a `response_format` is a call (the format is for the
  answer after the results).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qwen_mtp_desktop.core.decoding.method import MAX_CONSTRAINT_CHARS, Constraint
from qwen_mtp_desktop.core.engine import ToolCallRecord
from qwen_mtp_desktop.core.tools.grammar import ToolGrammarError, json_parameters, tool_call_grammar
from qwen_mtp_desktop.server.generation.schema import (
    ChatCompletionRequest,
    ChatMessage,
    NamedToolChoice,
)
from qwen_mtp_desktop.server.generation.structured import constraint_for
from qwen_mtp_desktop.server.http.errors import ApiError

_log = logging.getLogger(__name__)

#: The tools as rendered in the prompt: far below this in practice (each one is a few hundred
#: characters of JSON).
MAX_TOOLS_JSON_CHARS = 200_000
#: `Constraint.name` of a forced tool call (shown in `mtp.method.constraint`).
CONSTRAINT_NAME = "tool_choice"
#: `Constraint.name` of "tool calls, or JSON of the response_format".
CALLS_OR_FORMAT_NAME = "tools_or_response_format"
#: `Constraint.name` of tool_choice auto's lazy grammar (free text, then calls).
AUTO_CALLS_NAME = "tool_calls_auto"


@dataclass(frozen=True)
class ToolPlan:
    """What a request with tools asks: the tools (as sent), how the answer is read, and the
    grammar that forces a call (None for `auto`)."""

    tools: tuple[dict[str, Any], ...]
    choice: Literal["auto", "required", "function"]
    tools_json: str
    constraint: Constraint | None = None
    #: The function `tool_choice` names.
    function: str | None = None
    #: At most this many calls in the answer (the Responses API's `max_tool_calls`; 1 with
    #: `parallel_tool_calls: false`): the grammar lets no further call open, and any the
    #: model wrote without one are dropped (server.generation.tool_output); None: no limit.
    max_calls: int | None = None

    @property
    def forced(self) -> bool:
        """Whether the answer must be tool calls (a constraint may also be "calls or JSON")."""
        return self.choice != "auto"

    @property
    def calls_or_json(self) -> bool:
        """Whether the answer is tool calls or else JSON of a response_format: one that does
        not open with a call is the JSON, all of it content (a string in it may hold
        "<tool_call>")."""
        return self.constraint is not None and self.constraint.name == CALLS_OR_FORMAT_NAME


def plan_tools(request: ChatCompletionRequest, *, max_calls: int | None = None) -> ToolPlan | None:
    """The request's tool plan (None without tools, or with `tool_choice: "none"`); ApiError
    400 naming the field for a shape this server cannot honour. `max_calls`: the Responses
    API's `max_tool_calls`."""
    choice = request.tool_choice
    if not request.tools:
        if choice is not None:
            raise ApiError(
                400,
                "tool_choice needs tools: send the functions the model may call in `tools`, "
                "or leave tool_choice out.",
                code="invalid_value",
                param="tool_choice",
            )
        if request.parallel_tool_calls is not None:
            raise ApiError(
                400,
                "parallel_tool_calls needs tools: send them in `tools`, or leave it out.",
                code="invalid_value",
                param="parallel_tool_calls",
            )
        return None
    tools = tuple(tool.model_dump(exclude_none=True) for tool in request.tools)
    names: set[str] = set()
    for index, tool in enumerate(tools):
        function = tool["function"]
        where = f"tools[{index}].function"
        if function["name"] in names:
            raise ApiError(
                400,
                f"Two tools are named {function['name']!r}; each function needs its own name.",
                code="invalid_value",
                param=f"{where}.name",
            )
        names.add(function["name"])
        _check_parameters(function.get("parameters"), f"{where}.parameters")
    if choice == "none":
        return None
    tools_json = json.dumps(list(tools), ensure_ascii=False)
    if len(tools_json) > MAX_TOOLS_JSON_CHARS:
        raise ApiError(
            400,
            f"The tools are {len(tools_json):,} characters of JSON; at most "
            f"{MAX_TOOLS_JSON_CHARS:,} are accepted.",
            code="invalid_value",
            param="tools",
        )
    parallel = request.parallel_tool_calls is not False
    if not parallel:
        max_calls = 1
    if choice is None or choice == "auto":
        answer = _answer_schema(request)
        if answer is None:
            lazy = _lazy_constraint(tools, max_calls)
            return ToolPlan(tools, "auto", tools_json, lazy, max_calls=max_calls)
        constraint = _calls_constraint(tools, None, max_calls, answer)
        return ToolPlan(tools, "auto", tools_json, constraint, max_calls=max_calls)
    named = choice.function.name if isinstance(choice, NamedToolChoice) else None
    if named is not None and named not in names:
        raise ApiError(
            400,
            f"tool_choice names the function {named!r}, which is not among the tools "
            f"({', '.join(sorted(names))}).",
            code="invalid_value",
            param="tool_choice.function.name",
        )
    constraint = _calls_constraint(tools, named, max_calls, None)
    choice_kind: Literal["required", "function"] = "function" if named else "required"
    return ToolPlan(tools, choice_kind, tools_json, constraint, function=named, max_calls=max_calls)


def _answer_schema(request: ChatCompletionRequest) -> dict[str, Any] | None:
    """The JSON schema a `response_format` asks the answer to match (None for text or none),
    closed and bounded as structured output's (ApiError 400 when it cannot be enforced)."""
    fmt = constraint_for(request.response_format)
    if fmt is None:
        return None
    if fmt.kind == "json_object":
        return {"type": "object"}
    schema = json.loads(fmt.source)
    assert isinstance(schema, dict)
    return schema


def _lazy_constraint(tools: Sequence[dict[str, Any]], max_calls: int | None) -> Constraint | None:
    """tool_choice auto's lazy grammar (free text, then at most `max_calls` calls); None when
    the tools cannot be written as one (a schema the grammar engine refuses, tools too large):
    then the calls are only parsed, as before lazy grammars, rather than refusing a request
    that asks for no grammar."""
    try:
        grammar = tool_call_grammar(tools, lazy=True, max_calls=max_calls)
    except ToolGrammarError as exc:
        _log.info("tool_choice auto without its grammar: %s", exc)
        return None
    if len(grammar) > MAX_CONSTRAINT_CHARS:
        _log.info("tool_choice auto without its grammar: %d characters", len(grammar))
        return None
    constraint = Constraint("lark", grammar, AUTO_CALLS_NAME, lazy=True)
    try:
        _check_grammar(constraint, tools, None)
    except ApiError as exc:
        _log.info("tool_choice auto without its grammar: %s", exc.message)
        return None
    return constraint


def _calls_constraint(
    tools: Sequence[dict[str, Any]],
    named: str | None,
    max_calls: int | None,
    answer: dict[str, Any] | None,
) -> Constraint:
    """The grammar of tool calls (of `named` only, if given; at most `max_calls`), or with
    `answer` of tool calls or JSON of that schema, checked as the engine will compile it."""
    try:
        grammar = tool_call_grammar(tools, only=named, max_calls=max_calls, answer=answer)
    except ToolGrammarError as exc:
        raise ApiError(400, f"tools: {exc}.", code="invalid_value", param="tools") from None
    if len(grammar) > MAX_CONSTRAINT_CHARS:
        raise ApiError(
            400,
            "The tools are too large to enforce a call to them; send fewer tools or smaller "
            "parameter schemas, or tool_choice auto"
            + (" without response_format." if answer is not None else "."),
            code="invalid_value",
            param="tools",
        )
    name = CONSTRAINT_NAME if answer is None else CALLS_OR_FORMAT_NAME
    constraint = Constraint("lark", grammar, name)
    _check_grammar(constraint, tools, named)
    return constraint


def _check_parameters(parameters: dict[str, Any] | None, where: str) -> None:
    """A function's parameters must be an object schema whose properties are schemas."""
    if parameters is None:
        return
    kind = parameters.get("type", "object")
    properties = parameters.get("properties", {})
    required = parameters.get("required", [])
    problem = None
    if kind != "object":
        problem = 'its "type" must be "object"'
    elif not isinstance(properties, dict) or not all(
        isinstance(schema, dict) for schema in properties.values()
    ):
        problem = '"properties" must map each parameter to a JSON schema'
    elif not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problem = '"required" must be a list of parameter names'
    if problem is not None:
        raise ApiError(
            400,
            f"{where}: {problem} (the function's parameters are a JSON schema of an object).",
            code="invalid_value",
            param=where,
        )


def _check_grammar(
    constraint: Constraint, tools: Sequence[dict[str, Any]], only: str | None
) -> None:
    """Compile the forced-call grammar as the engine will; ApiError 400 naming the tool and
    parameter whose schema cannot be enforced, and why in the grammar engine's words (its
    reason for that schema alone, never the grammar's source or its parser's position)."""
    import llguidance

    from qwen_mtp_desktop.core.decoding.grammar import ConstraintError, grammar_text

    try:
        grammar = grammar_text(constraint)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except (ConstraintError, ValueError, RuntimeError, RecursionError) as exc:
        is_error, messages = True, [str(exc)]
    if not is_error:
        return
    where, reason = _refused_parameter(tools, only)
    if reason is None:
        reason = _clean_reason(messages[0] if messages else "")
    raise ApiError(
        400,
        f"tools: {where} cannot be enforced for tool_choice ({reason or 'no reason given'}). "
        "Send schemas the grammar engine (llguidance) supports, or tool_choice auto.",
        code="invalid_schema",
        param="tools",
    )


def _refused_parameter(tools: Sequence[dict[str, Any]], only: str | None) -> tuple[str, str | None]:
    """(which parameter's schema the grammar engine refuses, its reason) found by compiling
    each JSON parameter's schema alone; ("a parameter's schema", None) when none alone is."""
    import llguidance

    from qwen_mtp_desktop.core.decoding.grammar import JSON_LAYOUT

    for function, key, schema in json_parameters(tools, only=only):
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=JSON_LAYOUT)
            is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
        except (ValueError, RuntimeError, RecursionError) as exc:
            is_error, messages = True, [str(exc)]
        if is_error:
            reason = _clean_reason(messages[0] if messages else "")
            return f"the schema of parameter {key!r} of {function!r}", reason
    return "a parameter's schema", None


#: The parts of a grammar engine's message that quote its input or its position in it.
_SOURCE_LINE = re.compile(r"^\s*\d+\s*\|")
_POSITION = re.compile(r"^at \d+\(\d+\):\s*")


def _clean_reason(text: str) -> str:
    """llguidance's message without the grammar source it quotes, its caret lines and its
    "at LINE(COLUMN):" position, on one line and bounded."""
    lines = [line.strip() for line in text.splitlines()]
    kept = [line for line in lines if line.strip("^ ") and not _SOURCE_LINE.match(line)]
    reason = _POSITION.sub("", " ".join(kept))
    reason = reason.replace("failed to compile JSON schema: ", "")
    return reason if len(reason) <= 300 else reason[:297] + "..."


def tool_messages_problem(messages: Sequence[ChatMessage]) -> ApiError | None:
    """The first problem with the conversation's tool calls and results: calls only on
    assistant messages, arguments that are JSON objects, and each tool message answering a
    call of the assistant message just before it (or of the one before other results)."""
    open_calls: set[str] | None = None  # ids the latest assistant message called
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if message.tool_calls and message.role != "assistant":
            return _bad(
                f"{where} is a {message.role} message; only assistant messages make tool calls.",
                f"{where}.tool_calls",
            )
        if message.tool_call_id is not None and message.role != "tool":
            return _bad(
                f"{where} is a {message.role} message; only tool messages answer a "
                "tool call (tool_call_id).",
                f"{where}.tool_call_id",
            )
        if message.role == "assistant":
            open_calls = set()
            for number, call in enumerate(message.tool_calls or ()):
                if not _is_object_text(call.function.arguments):
                    return _bad(
                        f"The arguments of {where}'s tool call {call.function.name!r} are not a "
                        "JSON object's text.",
                        f"{where}.tool_calls[{number}].function.arguments",
                    )
                open_calls.add(call.id)
        elif message.role == "tool":
            if message.tool_call_id is None:
                return _bad(
                    f"{where} is a tool message without tool_call_id (the id of the "
                    "call it answers).",
                    f"{where}.tool_call_id",
                )
            if message.content is None:
                return _bad(f"{where} (a tool result) has no content.", f"{where}.content")
            if not open_calls or message.tool_call_id not in open_calls:
                return _bad(
                    f"{where} answers the tool call {message.tool_call_id!r}, but the assistant "
                    "message before it made no call with that id (a tool message must follow "
                    "the assistant message with tool_calls it answers).",
                    f"{where}.tool_call_id",
                )
        else:
            open_calls = None
    return None


def _is_object_text(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):
        return False


def _bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, code="invalid_value", param=param)


def call_records(message: ChatMessage) -> tuple[ToolCallRecord, ...]:
    return tuple(
        ToolCallRecord(call.id, call.function.name, call.function.arguments)
        for call in message.tool_calls or ()
    )


def check_tools_fit(
    plan: ToolPlan, response_format: Constraint | None, *, thinking: bool, by_default: bool
) -> None:
    """What a tool plan cannot be combined with: nothing now. A `response_format` is part of
    the plan's grammar (tool calls, or JSON of the format: `plan_tools`), and a forced call
    with thinking on thinks first: the engine decodes the reasoning without the grammar and
    the call under it (core.engine.generation)."""
