"""A Lark grammar (llguidance's dialect) that admits only well-formed tool calls in Qwen3.5's
format, for `tool_choice: "required"` or a named function: the decoder masks every
distribution with it, drafts included (MTP stays on, as for structured output).

The grammar spells the call exactly as `core.tool_calls.render_calls` writes it (and as Qwen3.5's
chat template renders earlier calls), so every answer it admits parses back
(`core.tool_calls.parse`) into calls of offered functions:

    <tool_call>\\n<function=NAME>\\n(<parameter=KEY>\\nVALUE\\n</parameter>\\n)*</function>\\n</tool_call>

Parameters come in the schema's `properties` order, each required one present, optional ones
optional. A string parameter's value is any text up to the first "\\n</parameter>\\n" (a lazy
match, so the value never swallows its own end); any other is JSON matching the parameter's
schema (llguidance's `%json`, written without free whitespace, as structured output is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from qwen_mtp_desktop.core.decoding.grammar import JSON_LAYOUT

#: A parameter name that can sit inside `<parameter=NAME>` and be read back.
SAFE_PARAMETER = re.compile(r"^[^<>\n]{1,128}$")
_CALL_OPEN = "<tool_call>\n<function="
_CALL_CLOSE = "</function>\n</tool_call>"
_VALUE_END = "\n</parameter>\n"
#: A string's maxLength the grammar enforces (a larger bound is left to the token budget:
#: a regex of millions of repetitions would be costly to compile).
MAX_BOUNDED = 10_000


class ToolGrammarError(ValueError):
    """A tool whose parameters cannot be written as a grammar; the message names the part."""


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list) and all(isinstance(k, str) for k in kind):
        return set(kind)
    return None


def _json_schema(schema: Mapping[str, Any]) -> str:
    """The schema for `%json`, with the layout structured output uses."""
    return json.dumps({**schema, "x-guidance": dict(JSON_LAYOUT)}, ensure_ascii=False)


def _string_rule(value: str, schema: Mapping[str, Any]) -> str:
    """A string parameter's value: one of its `enum`, else text of at most `maxLength`
    characters (any length without it), up to the first end of value (a lazy match: the
    value never swallows its own end, so the parser reads back the same text)."""
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(item, str) for item in enum):
        return (
            f"{value}: ("
            + " | ".join(_literal(item) for item in enum)
            + f") {_literal(_VALUE_END)}"
        )
    limit = schema.get("maxLength")
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 <= limit <= MAX_BOUNDED:
        return f"{value}[lazy]: /(?s:.{{0,{limit}}})\\n<\\/parameter>\\n/"
    return f"{value}[lazy]: /(?s:.*)\\n<\\/parameter>\\n/"


def _function_rules(index: int, function: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(the rule name of one call of this function, the rules it needs)."""
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    call = f"call_{index}"
    rules: list[str] = []
    parts = [_literal(f"{_CALL_OPEN}{name}>\n")]
    for number, (key, schema) in enumerate(properties.items()):
        if not SAFE_PARAMETER.match(key):
            raise ToolGrammarError(
                f"parameter {key!r} of {name!r}: a name with '<', '>' or a new line (or longer "
                "than 128 characters) cannot be written in the tool-call format"
            )
        schema = schema if isinstance(schema, Mapping) else {}
        rule = f"p_{index}_{number}"
        value = f"v_{index}_{number}"
        types = _types(schema)
        opening = _literal(f"<parameter={key}>\n")
        rules.append(f"{rule}: {opening} {value}")
        if types is not None and types <= {"string"}:
            rules.append(_string_rule(value, schema))
        elif types is None or "string" in types:
            # Up to the first end of value: the parser reads it back as the same text.
            rules.append(f"{value}[lazy]: /(?s:.*)\\n<\\/parameter>\\n/")
        else:
            rules.append(f"{value}: %json {_json_schema(schema)} {_literal(_VALUE_END)}")
        parts.append(rule if key in required else f"{rule}?")
    parts.append(_literal(_CALL_CLOSE))
    rules.insert(0, f"{call}: " + " ".join(parts))
    return call, rules


def tool_call_grammar(
    tools: Sequence[Mapping[str, Any]], *, only: str | None = None, parallel: bool = True
) -> str:
    """The Lark grammar of an answer that is tool calls: of the function `only` (exactly one
    call), else of any offered function (one or more, one when not `parallel`).
    ToolGrammarError when a tool's parameters cannot be written as one."""
    calls: list[str] = []
    rules: list[str] = []
    for index, tool in enumerate(tools):
        function = tool["function"]
        if only is not None and function["name"] != only:
            continue
        call, needed = _function_rules(index, function)
        calls.append(call)
        rules += needed
    if not calls:
        raise ToolGrammarError("no offered function matches tool_choice")
    any_call = "any_call: " + " | ".join(calls)
    if only is not None or not parallel:
        start = "start: any_call"
    else:
        start = 'start: any_call ("\\n" any_call)*'
    return "\n".join([start, any_call, *rules]) + "\n"
