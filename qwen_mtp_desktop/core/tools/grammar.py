"""A Lark grammar (llguidance's dialect) that admits only well-formed tool calls in Qwen3.5's
format, for `tool_choice: "required"` or a named function: the decoder masks every
distribution with it, drafts included (MTP stays on, as for structured output).

The grammar spells the call exactly as `core.tools.calls.render_calls` writes it (and as Qwen3.5's
chat template renders earlier calls), so every answer it admits parses back
(`core.tools.calls.parse`) into calls of offered functions:

    <tool_call>\\n<function=NAME>\\n(<parameter=KEY>\\nVALUE\\n</parameter>\\n)*</function>\\n</tool_call>

Parameters come in the schema's `properties` order, each required one present, optional ones
optional. A string parameter's value is any text up to the first "\\n</parameter>\\n" (a lazy
match, so the value never swallows its own end); any other is JSON matching the parameter's
schema (llguidance's `%json`, written without free whitespace, as structured output is).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
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
#: Where a schema keeps the definitions its "$ref"s point at.
_DEFINITIONS = ("$defs", "definitions")
#: Subschemas looked at for a value that can never end (far above a real tool's).
_MAX_SCHEMA_NODES = 2_000
_MISSING = object()


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


def _with_definitions(schema: Mapping[str, Any], root: Mapping[str, Any]) -> dict[str, Any]:
    """A parameter's schema as `%json` compiles it: its own document, so the function's
    `$defs` / `definitions` (where "#/$defs/NAME" points in the tool's schema) come along."""
    found = dict(schema)
    for key in _DEFINITIONS:
        if isinstance(root.get(key), Mapping) and key not in found:
            found[key] = root[key]
    return found


def _writes_json(schema: Mapping[str, Any]) -> bool:
    """Whether a parameter's value is JSON the grammar enforces (`%json`): a stated type
    without "string", or no type but a "$ref" (what it points at says the type); otherwise
    text up to the value's end, as the parser reads it back."""
    types = _types(schema)
    return "$ref" in schema if types is None else bool(types) and "string" not in types


def _json_schema(schema: Mapping[str, Any]) -> str:
    """The schema for `%json`, with the layout structured output uses."""
    return json.dumps({**schema, "x-guidance": dict(JSON_LAYOUT)}, ensure_ascii=False)


def _pointer(document: object, ref: object) -> object:
    """What a local "$ref" ("#", "#/a/b") points at in `document`; _MISSING when nothing."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return _MISSING
    found = document
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        step = part.replace("~1", "/").replace("~0", "~")
        if isinstance(found, Mapping) and step in found:
            found = found[step]
        elif isinstance(found, list) and step.isdigit() and int(step) < len(found):
            found = found[int(step)]
        else:
            return _MISSING
    return found


def _no_finite_value(schema: Mapping[str, Any]) -> str | None:
    """Why no finite JSON value can match `schema` (a "$ref" pointing at nothing, or "$ref"s
    that lead back to themselves with no way out, e.g. an object whose required property is
    the object again), None when one can or the schema is too large to tell. The grammar
    engine accepts such a schema and then can never finish a value, so the answer would
    stall or run unconstrained; this is the check it lacks."""
    nodes: dict[int, Mapping[str, Any]] = {}
    refs: dict[int, object] = {}
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if not isinstance(node, Mapping) or id(node) in nodes:
            continue
        if len(nodes) >= _MAX_SCHEMA_NODES:
            return None
        nodes[id(node)] = node
        if "$ref" in node:
            target = _pointer(schema, node["$ref"])
            if target is _MISSING:
                if isinstance(node["$ref"], str) and node["$ref"].startswith("#"):
                    return f"its $ref {str(node['$ref'])[:80]!r} points at nothing in the schema"
                return None  # not ours to resolve: the grammar engine says what it makes of it
            refs[id(node)] = target
            stack.append(target)
        stack.extend(_children(node))
    finite: set[int] = set()
    changed = True
    while changed:  # the least fixed point: a node is finite once a way out is known
        changed = False
        for key, node in nodes.items():
            if key not in finite and _can_end(node, refs.get(key, True), finite):
                finite.add(key)
                changed = True
    if id(schema) in finite:
        return None
    return (
        "no finite value matches its schema: its $refs lead back to themselves with no way "
        "out (each value would have to contain another)"
    )


def _children(node: Mapping[str, Any]) -> list[object]:
    """The subschemas that decide whether `node` can be finite."""
    found: list[object] = []
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            found += node[key]
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        found += list(properties.values())
    found.append(node.get("items"))
    return found


def _can_end(node: Mapping[str, Any], target: object, finite: set[int]) -> bool:
    def ok(sub: object) -> bool:
        return sub is not False and (not isinstance(sub, Mapping) or id(sub) in finite)

    if not ok(target):
        return False
    if isinstance(node.get("allOf"), list) and not all(map(ok, node["allOf"])):
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key] and not any(map(ok, node[key])):
            return False
    kinds = _types(node)
    if kinds is None or kinds - {"object", "array"}:
        return True  # a scalar is a way out (`required` and `items` bind objects and arrays)
    properties = node.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = node.get("required")
    required = required if isinstance(required, list) else []
    if "object" in kinds and all(ok(properties.get(key, True)) for key in required):
        return True
    least = node.get("minItems", 0)
    return "array" in kinds and (not isinstance(least, int) or least <= 0 or ok(node.get("items")))


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
        schema = _with_definitions(schema if isinstance(schema, Mapping) else {}, parameters)
        problem = _no_finite_value(schema) if "$ref" in json.dumps(schema) else None
        if problem is not None:
            raise ToolGrammarError(f"parameter {key!r} of {name!r}: {problem}")
        rule = f"p_{index}_{number}"
        value = f"v_{index}_{number}"
        types = _types(schema)
        opening = _literal(f"<parameter={key}>\n")
        rules.append(f"{rule}: {opening} {value}")
        if types is not None and types <= {"string"}:
            rules.append(_string_rule(value, schema))
        elif not _writes_json(schema):
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


def json_parameters(
    tools: Sequence[Mapping[str, Any]], *, only: str | None = None
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(function, parameter, the schema `%json` compiles) for each parameter the grammar
    writes as JSON: what to compile alone to say which parameter the grammar engine refuses."""
    for tool in tools:
        function = tool["function"]
        if only is not None and function["name"] != only:
            continue
        parameters = function.get("parameters") or {}
        for key, schema in (parameters.get("properties") or {}).items():
            schema = _with_definitions(schema if isinstance(schema, Mapping) else {}, parameters)
            if _writes_json(schema):
                yield str(function["name"]), str(key), schema
