"""A Lark grammar (llguidance's dialect) that admits only well-formed tool calls in Qwen3.5's
format, for `tool_choice: "required"` or a named function (or, with `response_format`, tool
calls or JSON of the format's schema): the decoder masks every distribution with it, drafts
included (MTP stays on, as for structured output).

With `tool_choice: "auto"` the grammar is lazy, as llama-server's is from its trigger: any text
(`FREE`, which never holds "<tool_call>"), or text up to the first "<tool_call>" (`call_head`,
a lazy lexeme: it ends at the tag) and then only well-formed calls of the offered tools, one
after another, at most `max_calls`, and nothing after them. The grammar engine reads bytes, so
the tag is found however the model's tokens split it.

The grammar spells the call exactly as `core.tools.calls.render_calls` writes it (and as Qwen3.5's
chat template renders earlier calls), so every answer it admits parses back
(`core.tools.calls.parse`) into calls of offered functions:

    <tool_call>\\n<function=NAME>\\n(<parameter=KEY>\\nVALUE\\n</parameter>\\n)*</function>\\n</tool_call>

Parameters come in the schema's `properties` order, each required one present, optional ones
optional. How a value is written follows its schema (`value_kind`, which the parser reads too,
so both sides agree), through `$ref`s and `anyOf` / `oneOf` branches:

- only strings (`type: "string"`, a string `enum` or `const`, branches of those): the text as
  it is, as the template writes strings: one of the `enum` / `const` values, else text within
  `minLength` / `maxLength` (enforced up to MAX_EXACT_TEXT characters) and matching `pattern`.
  The text can never hold the call's markup (`<tool_call>`, `<function=`, `<parameter=` and
  their closing tags), so a value never ends early or opens another parameter.
- strings or null (`Optional[str]`): `null`, or such text other than "null".
- anything else (objects, arrays, numbers, booleans, mixed types, a string with a `format`,
  no type at all): JSON of the parameter's schema (llguidance's `%json`, written without free
  whitespace, as structured output is), with the function's `$defs`; objects closed and values
  bounded where the schema is silent (core.decoding.grammar.bounded_schema; the function's
  `strict: true` closes every object, as OpenAI's strict mode does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qwen_mtp_desktop.core.decoding.grammar import JSON_LAYOUT, bounded_schema

#: The tag that opens a call (and, in a lazy grammar, the trigger).
CALL_TAG = "<tool_call>"
#: A parameter name that can sit inside `<parameter=NAME>` and be read back.
SAFE_PARAMETER = re.compile(r"^[^<>\n]{1,128}$")
_CALL_OPEN = "<tool_call>\n<function="
_CALL_CLOSE = "</function>\n</tool_call>"
_VALUE_END = "\n</parameter>\n"
#: The call's markup: no text value may hold any of these.
MARKUP = ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>")
_NOT_MARKUP = (
    r"~/(?s:.*(<tool_call>|<\/tool_call>|<function=|<\/function>|<parameter=|<\/parameter>).*)/"
)
_ANY_TEXT = r"/(?s:.*)/"
#: The longest `maxLength` of a text value the grammar enforces: counting characters while
#: keeping the markup out costs llguidance a state per character and markup prefix, and much
#: above this its lexer gives up. A larger bound is left to the token budget.
MAX_EXACT_TEXT = 256
#: Where a schema keeps the definitions its "$ref"s point at.
_DEFINITIONS = ("$defs", "definitions")
#: Subschemas looked at for a value that can never end (far above a real tool's).
_MAX_SCHEMA_NODES = 2_000
#: How many "$ref"s and branches deep `value_kind` looks before it says "JSON".
_MAX_BRANCH_DEPTH = 16
_MISSING = object()
#: The keywords a text value's rule reads; a string branch with others (`format`) is JSON.
_TEXT_KEYS = {"minLength", "maxLength", "pattern", "enum", "const"}
#: Keywords that say nothing about a value's shape.
_NOTES = {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"}


class ToolGrammarError(ValueError):
    """A tool whose parameters cannot be written as a grammar; the message names the part."""


@dataclass(frozen=True)
class ValueKind:
    """How a parameter's value is written in a call and read back (core.tools.calls):
    "text" as it is; "nullable_text" as it is, or `null` for None; "quoted_text" a JSON
    string (read as text when it is not one); "json" JSON (`types`: the JSON types it may
    have, None when it may be a string or anything, so text that is not JSON is read as
    text)."""

    kind: Literal["text", "nullable_text", "quoted_text", "json"]
    #: The string branches a text value matches one of.
    strings: tuple[Mapping[str, Any], ...] = ()
    types: frozenset[str] | None = None


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


def value_kind(schema: Mapping[str, Any]) -> ValueKind:
    """How a value of `schema` (a parameter's, its definitions included) is written: see the
    module docstring."""
    branches = _branches(schema, schema, frozenset(), 0)
    if branches is None:
        return _json_kind(schema)
    strings: list[Mapping[str, Any]] = []
    nullable = other = quoted = False
    for branch in branches:
        for piece, found in _pieces(branch):
            if piece == "string":
                quoted = quoted or not set(found) <= _TEXT_KEYS
                strings.append(found)
            elif piece == "null":
                nullable = True
            else:
                other = True
    if other or not strings:
        return _json_kind(schema)
    if quoted:
        return ValueKind("json") if nullable else ValueKind("quoted_text")
    return ValueKind("nullable_text" if nullable else "text", tuple(strings))


def _json_kind(schema: Mapping[str, Any]) -> ValueKind:
    types = _types(schema)
    if types is None or "string" in types or set(schema) & {"$ref", "anyOf", "oneOf", "allOf"}:
        return ValueKind("json")
    return ValueKind("json", types=frozenset(types))


def _branches(
    schema: object, root: Mapping[str, Any], seen: frozenset[str], depth: int
) -> list[Mapping[str, Any]] | None:
    """The alternatives a value of `schema` matches one of, "$ref"s followed and `anyOf` /
    `oneOf` flattened; None when that cannot be told simply (`allOf`, `not`, a cycle)."""
    if not isinstance(schema, Mapping) or depth > _MAX_BRANCH_DEPTH:
        return None
    if "$ref" in schema:
        ref = schema["$ref"]
        target = _pointer(root, ref)
        if not isinstance(ref, str) or ref in seen or not isinstance(target, Mapping):
            return None
        if set(schema) - {"$ref", *_NOTES, *_DEFINITIONS}:
            return None  # "$ref" beside other keywords: both apply
        return _branches(target, root, seen | {ref}, depth + 1)
    if set(schema) & {"allOf", "not", "if", "then", "else"}:
        return None
    alternatives = [schema[key] for key in ("anyOf", "oneOf") if key in schema]
    if not alternatives:
        return [schema]
    if len(alternatives) > 1 or not isinstance(alternatives[0], list) or not alternatives[0]:
        return None
    if set(schema) & {"type", "enum", "const"}:
        return None
    found: list[Mapping[str, Any]] = []
    for alternative in alternatives[0]:
        more = _branches(alternative, root, seen, depth + 1)
        if more is None:
            return None
        found += more
    return found


def _pieces(branch: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """A branch split into ("string", its string keywords), ("null", {}) and ("other", ...)."""
    types = _types(branch)
    values: list[Any] | None = None
    if "const" in branch:
        values = [branch["const"]]
    elif isinstance(branch.get("enum"), list):
        values = list(branch["enum"])
    if values is not None:
        if types is not None:
            values = [v for v in values if _of_types(v, types)]
        pieces: list[tuple[str, Mapping[str, Any]]] = []
        texts = [v for v in values if isinstance(v, str)]
        if texts:
            pieces.append(("string", {"enum": texts}))
        if any(v is None for v in values):
            pieces.append(("null", {}))
        if len(texts) + sum(v is None for v in values) < len(values):
            pieces.append(("other", branch))
        return pieces
    if types is None:
        return [("other", branch)]
    found: list[tuple[str, Mapping[str, Any]]] = []
    for kind in sorted(types):
        if kind == "string":
            keywords = set(branch) - _NOTES - {"type"}
            strings = {k: branch[k] for k in keywords if k in _TEXT_KEYS or k in ("format",)}
            if keywords - _TEXT_KEYS - {"format"} - _STRING_IRRELEVANT:
                strings["x-other"] = True  # keywords a text rule cannot read: JSON
            found.append(("string", strings))
        elif kind == "null":
            found.append(("null", {}))
        else:
            found.append(("other", branch))
    return found


#: Keywords of other types, which say nothing about a string (`"type": ["string", "integer"]`
#: has integer bounds, say).
_STRING_IRRELEVANT = {
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "uniqueItems", "prefixItems", "patternProperties", "minProperties", "maxProperties",
    *_DEFINITIONS,
}  # fmt: skip


def _of_types(value: object, types: set[str]) -> bool:
    names = {
        str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null",
        dict: "object", list: "array",
    }  # fmt: skip
    kind = names.get(type(value))
    return kind in types or (kind == "integer" and "number" in types)


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


def _text_token(branch: Mapping[str, Any], where: str) -> str:
    """A token expression (llguidance's Lark) of one string branch's text, the markup kept out."""
    values = branch.get("enum")
    if isinstance(values, list):
        for value in values:
            if any(tag in value for tag in MARKUP) or _VALUE_END in value:
                raise ToolGrammarError(
                    f"{where}: the value {value[:40]!r} holds the tool-call format's markup, "
                    "which a value cannot be written with"
                )
        return "(" + " | ".join(_literal(v) if v else '""' for v in values) + ")"
    parts = [_ANY_TEXT]
    least = branch.get("minLength")
    least = least if isinstance(least, int) and not isinstance(least, bool) and least > 0 else 0
    most = branch.get("maxLength")
    if isinstance(most, int) and not isinstance(most, bool) and most < least:
        raise ToolGrammarError(f"{where}: its minLength ({least}) is above its maxLength ({most})")
    if isinstance(most, int) and not isinstance(most, bool) and 0 <= most <= MAX_EXACT_TEXT:
        parts.append(f"/(?s:.{{{least},{most}}})/")
    elif 0 < least <= MAX_EXACT_TEXT:
        parts.append(f"/(?s:.{{{least},}})/")
    pattern = branch.get("pattern")
    if isinstance(pattern, str):
        parts.append(_checked(_pattern_regex(pattern), where))
    parts.append(_NOT_MARKUP)
    return "(" + " & ".join(parts) + ")"


def _checked(regex: str, where: str) -> str:
    """A `pattern`'s regex, once llguidance has compiled it (ToolGrammarError with its reason
    when it cannot, naming the parameter rather than the grammar around it)."""
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_lark(f"start: T\nT: {regex}\n")
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except (ValueError, RuntimeError) as exc:
        is_error, messages = True, [str(exc)]
    if is_error:
        # llguidance's reason without the grammar it quotes: "... error: unclosed group".
        words = [line for line in (messages[0] if messages else "").splitlines() if line]
        found = [w.rsplit("error: ", 1)[-1].strip() for w in words if "error: " in w]
        reason = found[-1] if found and found[-1] else "the grammar engine refused it"
        raise ToolGrammarError(f"{where}: its pattern cannot be enforced ({reason[:200]})")
    return regex


#: A "/" not escaped by a backslash (a Lark regex ends at one).
_BARE_SLASH = re.compile(r"(?<!\\)((?:\\\\)*)/")


def _pattern_regex(pattern: str) -> str:
    """A JSON schema `pattern` (found anywhere in the text unless anchored, as JSON Schema
    reads it) as a Lark regex of the whole text."""
    body, lead, trail = pattern, "(?s:.*)", "(?s:.*)"
    if body.startswith("^"):
        body, lead = body[1:], ""
    if body.endswith("$") and not body.endswith("\\$"):
        body, trail = body[:-1], ""
    return "/" + lead + "(?:" + _BARE_SLASH.sub(r"\1\\/", body) + ")" + trail + "/"


def _value_rules(
    value: str, token: str, schema: dict[str, Any], strict: bool, where: str
) -> list[str]:
    """The rules of one parameter's value (rule `value`, text token `token`), then its end."""
    kind = value_kind(schema)
    end = _literal(_VALUE_END)
    if kind.kind in ("text", "nullable_text"):
        text = " | ".join(_text_token(branch, where) for branch in kind.strings)
        if kind.kind == "nullable_text":
            text = f'"null" | (({text}) & ~"null")'
        # One token, the end included: the lexer is greedy, so a text token followed by the
        # end as a token of its own would swallow the end's first new line.
        return [f"{value}: {token}", f"{token}: ({text}) {end}"]
    return [f"{value}: %json {_json_schema(schema, strict)} {end}"]


def _json_schema(schema: Mapping[str, Any], strict: bool) -> str:
    """The schema for `%json`: bounded where silent, with the layout structured output uses."""
    bounded = bounded_schema(dict(schema), strict=strict)
    return json.dumps({**bounded, "x-guidance": dict(JSON_LAYOUT)}, ensure_ascii=False)


def parameter_schema(function: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A parameter's schema as its own document (the function's definitions with it)."""
    parameters = function.get("parameters") or {}
    schema = (parameters.get("properties") or {}).get(key)
    return _with_definitions(schema if isinstance(schema, Mapping) else {}, parameters)


def _function_rules(
    index: int, function: Mapping[str, Any], opening: str = _CALL_OPEN
) -> tuple[str, list[str]]:
    """(the rule name of one call of this function, the rules it needs); `opening`: the text
    the call's rule begins with (without "<tool_call>" when a lazy grammar's trigger read it)."""
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())
    strict = function.get("strict") is True
    call = f"call_{index}"
    rules: list[str] = []
    parts = [_literal(f"{opening}{name}>\n")]
    for number, key in enumerate(properties):
        where = f"parameter {key!r} of {name!r}"
        if not SAFE_PARAMETER.match(key):
            raise ToolGrammarError(
                f"{where}: a name with '<', '>' or a new line (or longer than 128 characters) "
                "cannot be written in the tool-call format"
            )
        schema = parameter_schema(function, key)
        problem = _no_finite_value(schema) if "$ref" in json.dumps(schema) else None
        if problem is not None:
            raise ToolGrammarError(f"{where}: {problem}")
        rule = f"p_{index}_{number}"
        rules.append(f"{rule}: {_literal(f'<parameter={key}>' + chr(10))} v_{index}_{number}")
        rules += _value_rules(f"v_{index}_{number}", f"T_{index}_{number}", schema, strict, where)
        parts.append(rule if key in required else f"{rule}?")
    parts.append(_literal(_CALL_CLOSE))
    rules.insert(0, f"{call}: " + " ".join(parts))
    return call, rules


def tool_call_grammar(
    tools: Sequence[Mapping[str, Any]],
    *,
    only: str | None = None,
    parallel: bool = True,
    answer: Mapping[str, Any] | None = None,
    lazy: bool = False,
    max_calls: int | None = None,
) -> str:
    """The Lark grammar of an answer that is tool calls: of the function `only` (exactly one
    call), else of any offered function (one or more, one when not `parallel`, at most
    `max_calls`); with `answer` (a JSON schema, as `bounded_schema` left it), tool calls or
    else JSON of that schema (`response_format` with tools: either is an answer). `lazy`
    (tool_choice auto): any text, and once it writes "<tool_call>" the rest of the answer is
    calls (`lazy_tool_grammar`). ToolGrammarError when a tool's parameters cannot be written
    as one."""
    opening = _CALL_OPEN.removeprefix(CALL_TAG) if lazy else _CALL_OPEN
    calls: list[str] = []
    rules: list[str] = []
    for index, tool in enumerate(tools):
        function = tool["function"]
        if only is not None and function["name"] != only:
            continue
        call, needed = _function_rules(index, function, opening)
        calls.append(call)
        rules += needed
    if not calls:
        raise ToolGrammarError("no offered function matches tool_choice")
    any_call = "any_call: " + " | ".join(calls)
    most = 1 if only is not None or not parallel else max_calls
    if most is not None and most < 1:
        raise ToolGrammarError("at most 0 tool calls leaves no call to write")
    between = _literal("\n" + CALL_TAG) if lazy else _literal("\n")
    repeat = "*" if most is None else f"{{0,{most - 1}}}"
    calls_rule = f"any_call ({between} any_call){repeat}" if most != 1 else "any_call"
    if lazy:
        start = [
            f"start: FREE | call_head {calls_rule}",
            f"FREE: {_ANY_TEXT} & ~/(?s:.*{CALL_TAG}.*)/",
            f"call_head[lazy]: {_ANY_TEXT} {_literal(CALL_TAG)}",
        ]
    elif answer is None:
        start = [f"start: {calls_rule}"]
    else:
        layout = json.dumps({**answer, "x-guidance": dict(JSON_LAYOUT)}, ensure_ascii=False)
        start = [
            "start: tool_calls | answer_json",
            f"tool_calls: {calls_rule}",
            f"answer_json: %json {layout}",
        ]
    return "\n".join([*start, any_call, *rules]) + "\n"


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
        strict = function.get("strict") is True
        for key in parameters.get("properties") or {}:
            schema = parameter_schema(function, key)
            if value_kind(schema).kind in ("quoted_text", "json"):
                yield str(function["name"]), str(key), bounded_schema(schema, strict=strict)


def parameter_kinds(tools: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, ValueKind]]:
    """{function name: {parameter: how its value is written}} from OpenAI `tools` (what the
    parser reads values with, so it reads what the grammar wrote)."""
    found: dict[str, dict[str, ValueKind]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        kinds: dict[str, ValueKind] = {}
        for key, schema in (properties if isinstance(properties, Mapping) else {}).items():
            if isinstance(schema, Mapping):
                assert isinstance(parameters, Mapping)
                kinds[str(key)] = value_kind(_with_definitions(schema, parameters))
        found[function["name"]] = kinds
    return found
