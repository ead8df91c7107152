"""Issue 43, item 1: a forced call's arguments follow the whole JSON Schema subset agent
frameworks send: `$ref` / `$defs` (recursive too), `anyOf` / `oneOf` (nullable too), `enum`,
`const`, nested objects and arrays, string bounds and formats, silent numbers. Hypothesis draws
such schemas; a random walk through the grammar (a 'model' picking any token the grammar
allows, over the tool model's real vocabulary) ends in calls whose arguments validate against
the schema (jsonschema), and text values never hold the call's markup. The same schemas go
through the real decoder in tests/integration/test_tool_schemas.py."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.tools.calls import Calls, parse, render_calls
from qwen_mtp_desktop.core.tools.grammar import MARKUP, tool_call_grammar, value_kind
from tests.models import TOOL_MODEL

pytestmark = pytest.mark.slow
END = "\n</parameter>\n</function>"

_names = st.sampled_from(["a", "b", "city", "loc", "n", "tags", "note", "kind"])
#: The leaves: each kind of value a schema may ask for, bounded or silent.
_leaf: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({"type": "string", "maxLength": 8}),
    st.builds(
        lambda least, more: {"type": "string", "minLength": least, "maxLength": least + more},
        st.integers(0, 3),
        st.integers(0, 6),
    ),
    st.just({"type": "string", "enum": ["red", "green", "blue"]}),
    st.just({"enum": ["a", "b", None]}),
    st.just({"const": "fixed"}),
    st.just({"const": 3}),
    st.just({"type": "integer"}),
    st.builds(
        lambda least, span: {"type": "integer", "minimum": least, "maximum": least + span},
        st.integers(-50, 50),
        st.integers(0, 100),
    ),
    st.just({"type": "number"}),
    st.just({"type": "boolean"}),
    st.just({"type": ["string", "null"], "maxLength": 6}),
    st.just({"type": "string", "format": "date"}),
    st.just({"type": "string", "pattern": "^[a-z]{1,4}$"}),
)


def _object(properties: dict[str, Any], required: list[str], closed: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    schema["required"] = [key for key in required if key in properties]
    if closed:
        schema["additionalProperties"] = False
    return schema


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.builds(
            _object,
            st.dictionaries(_names, children, min_size=1, max_size=3),
            st.lists(_names, max_size=3),
            st.booleans(),
        ),
        st.builds(
            lambda items, most: {"type": "array", "items": items, "maxItems": most},
            children,
            st.integers(0, 3),
        ),
        children.map(lambda child: {"anyOf": [child, {"type": "null"}]}),  # Optional[...]
        st.lists(children, min_size=2, max_size=3).map(lambda branches: {"anyOf": branches}),
        # oneOf with branches no value matches twice (read as anyOf: oneOf must stay true)
        children.map(
            lambda child: {
                "oneOf": [{"type": "boolean"}, {"type": "array", "items": child, "maxItems": 2}]
            }
        ),
    )


_schemas = st.recursive(_leaf, _extend, max_leaves=6)
#: A definition that points at itself: a tree, as pydantic writes a recursive model.
_TREE = {
    "type": "object",
    "properties": {
        "v": {"type": "integer", "minimum": 0, "maximum": 9},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/Tree"}, "maxItems": 2},
    },
    "required": ["v"],
}


@st.composite
def tool_parameters(draw: st.DrawFn) -> dict[str, Any]:
    """A function's parameters: `$defs` (some of them recursive) and properties that use them
    through `$ref`, directly or inside other shapes, as openai-agents and pydantic write."""
    definitions: dict[str, Any] = {
        f"D{n}": schema for n, schema in enumerate(draw(st.lists(_schemas, max_size=3)))
    }
    if draw(st.booleans()):
        definitions["Tree"] = _TREE
    refs = [{"$ref": f"#/$defs/{name}"} for name in definitions]
    values = st.one_of(_schemas, *(st.just(ref) for ref in refs)) if refs else _schemas
    parameter = st.recursive(values, _extend, max_leaves=4)
    properties = draw(st.dictionaries(_names, parameter, min_size=1, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    if definitions:
        schema["$defs"] = definitions
    return schema


def function_tool(parameters: dict[str, Any], *, strict: bool = False) -> dict[str, Any]:
    function = {"name": "f", "parameters": parameters, **({"strict": True} if strict else {})}
    return {"type": "function", "function": function}


def validate_arguments(arguments: dict[str, Any], parameters: dict[str, Any]) -> None:
    """jsonschema's verdict on a call's arguments (formats checked too); raises when invalid."""
    import jsonschema

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    jsonschema.Draft202012Validator(parameters, format_checker=checker).validate(arguments)


def markup_free(arguments: dict[str, Any], parameters: dict[str, Any]) -> bool:
    """No text value (a parameter written as text) holds the call's markup."""
    for key, value in arguments.items():
        schema = {**parameters["properties"][key], "$defs": parameters.get("$defs", {})}
        text = value_kind(schema).kind in ("text", "nullable_text") and isinstance(value, str)
        if text and any(tag in value for tag in MARKUP):
            return False
    return True


@pytest.fixture(scope="module")
def vocabulary() -> Any:
    from llguidance import LLTokenizer

    return LLTokenizer((TOOL_MODEL / "tokenizer.json").read_text(encoding="utf-8"))


#: Text that may end a value: tried now and then, so most walks end in a call whatever the
#: schema (a random walk alone would almost never write a text value's end tag).
_ENDINGS = ("\n</parameter>\n", '"', "}", "]")


def _walk(vocabulary: Any, grammar: str, rng: random.Random, steps: int) -> str | None:
    """Text a 'model' picking any allowed token writes, and now and then a value's end when
    the grammar allows it there; None when it runs out of steps."""
    import numpy as np
    from llguidance import LLMatcher

    matcher = LLMatcher(vocabulary, LLMatcher.grammar_from_lark(grammar))
    assert not matcher.is_error(), matcher.get_error()
    ids: list[int] = []
    for _ in range(steps):
        if matcher.is_stopped() or (matcher.is_accepting() and rng.random() < 0.5):
            break
        if rng.random() < 0.25:
            ending = vocabulary.tokenize_str(rng.choice(_ENDINGS))
            if matcher.validate_tokens(ending) == len(ending):
                assert matcher.consume_tokens(ending)
                ids += ending
                continue
        bits = np.unpackbits(
            np.frombuffer(matcher.compute_bitmask(), dtype=np.uint8), bitorder="little"
        )
        allowed = [int(i) for i in np.flatnonzero(bits[: vocabulary.vocab_size])]
        allowed = [i for i in allowed if i != vocabulary.eos_token]
        if not allowed:
            break
        token = rng.choice(allowed)
        assert matcher.consume_tokens([token])
        ids.append(token)
    return vocabulary.decode_str(ids) if matcher.is_accepting() else None


@settings(max_examples=120, deadline=None)
@given(parameters=tool_parameters(), strict=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_every_call_the_grammar_admits_validates_against_its_schema(
    vocabulary: Any, parameters: dict[str, Any], strict: bool, seed: int
) -> None:
    tools = [function_tool(parameters, strict=strict)]
    grammar = tool_call_grammar(tools, only="f")
    text = _walk(vocabulary, grammar, random.Random(seed), steps=300)
    event("walk ended in a call" if text is not None else "walk ran out of steps")
    if text is None:
        return
    parsed = parse(text, tools)
    assert isinstance(parsed, Calls), (text, parsed)
    (call,) = parsed.calls
    arguments = json.loads(call.arguments)
    validate_arguments(arguments, parameters)
    assert markup_free(arguments, parameters), arguments
    # What the template renders for these arguments is read back the same (the history side).
    again = parse(render_calls([("f", arguments)]), tools)
    assert isinstance(again, Calls) and json.loads(again.calls[0].arguments) == arguments


def test_the_issue_reproduction_is_an_object_never_markup(vocabulary: Any) -> None:
    """The issue's request: a `$ref` parameter with no top-level type got a free-text rule, and
    the model wrote `{"loc": "</parameter>\\n<parameter=b>\\n3"}`. Now that text is refused and
    the value is JSON of the definition."""
    from llguidance import LLMatcher

    parameters = {
        "$defs": {
            "Loc": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
                "required": ["city"],
            }
        },
        "properties": {"loc": {"$ref": "#/$defs/Loc"}, "b": {"type": "integer"}},
    }
    grammar = tool_call_grammar([function_tool(parameters)], only="f")

    def admitted(arguments: dict[str, Any]) -> bool:
        matcher = LLMatcher(vocabulary, LLMatcher.grammar_from_lark(grammar))
        ids = vocabulary.tokenize_str(render_calls([("f", arguments)]))
        whole = matcher.validate_tokens(ids) == len(ids)
        return bool(whole and matcher.consume_tokens(ids) and matcher.is_accepting())

    assert not admitted({"loc": "</parameter>\n<parameter=b>\n3"})
    assert not admitted({"loc": {"city": "Paris", "country": "FR"}})  # closed: lists properties
    assert not admitted({"loc": {"city": "Paris"}, "b": 2**60})  # silent integer: bounded
    assert admitted({"loc": {"city": "Paris", "zip": 75001}, "b": 3})
    assert admitted({"loc": {"city": "</parameter> in JSON is harmless"}})


@pytest.mark.parametrize(
    ("schema", "kind"),
    [
        ({"type": "string"}, "text"),
        ({"$ref": "#/$defs/C", "$defs": {"C": {"enum": ["x", "y"]}}}, "text"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "nullable_text"),
        ({"type": ["string", "null"]}, "nullable_text"),
        ({"enum": ["a", None]}, "nullable_text"),
        ({"type": "string", "format": "date-time"}, "quoted_text"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "json"),
        ({"type": "integer"}, "json"),
        ({}, "json"),
        ({"allOf": [{"type": "string"}]}, "json"),
    ],
)
def test_how_each_schema_is_written(schema: dict[str, Any], kind: str) -> None:
    assert value_kind(schema).kind == kind


@pytest.mark.parametrize(
    ("schema", "written", "value"),
    [
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "null", None),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "12", "12"),
        ({"type": "string", "format": "date"}, '"2026-12-07"', "2026-12-07"),
        ({"type": "string", "format": "date"}, "2026-12-07", "2026-12-07"),  # as a model may
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "12", 12),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "twelve", "twelve"),
        ({"$ref": "#/$defs/C", "$defs": {"C": {"enum": ["1", "2"]}}}, "1", "1"),
    ],
)
def test_values_are_read_by_the_rule_they_are_written_with(
    schema: dict[str, Any], written: str, value: Any
) -> None:
    parameters = {"type": "object", "properties": {"p": schema}}
    text = render_calls([("f", {})]).replace("</function>", f"<parameter=p>\n{written}{END}")
    parsed = parse(text, [function_tool(parameters)])
    assert isinstance(parsed, Calls)
    assert json.loads(parsed.calls[0].arguments) == {"p": value}


def test_a_pydantic_models_calls_validate_as_that_model(vocabulary: Any) -> None:
    """The schema pydantic writes for a nested model (what openai-agents, pydantic-ai and
    instructor send), strict: every call the grammar admits is valid for the model itself."""
    import datetime
    import enum
    from typing import Literal

    from pydantic import BaseModel, Field

    class Color(enum.StrEnum):
        red = "red"
        green = "green"

    class Loc(BaseModel):
        city: str = Field(max_length=10)
        zip: int | None = None

    class Node(BaseModel):
        v: int = Field(ge=0, le=9)
        kids: list[Node] = Field(default_factory=list, max_length=2)

    class Args(BaseModel):
        loc: Loc
        other: Loc | None = None
        color: Color = Color.red
        mode: Literal["fast", "slow"] = "fast"
        when: datetime.date | None = None
        note: str | None = Field(default=None, max_length=12)
        tags: list[str] = Field(default_factory=list, max_length=3)
        counts: dict[str, int] = Field(default_factory=dict)
        tree: Node | None = None
        choice: Literal["", "x"] = ""

    Node.model_rebuild()
    schema = Args.model_json_schema()
    tools = [function_tool(schema, strict=True)]
    grammar = tool_call_grammar(tools, only="f")
    ended = 0
    for seed in range(40):
        text = _walk(vocabulary, grammar, random.Random(seed), steps=400)
        if text is None:
            continue
        parsed = parse(text, tools)
        assert isinstance(parsed, Calls), (text, parsed)
        arguments = json.loads(parsed.calls[0].arguments)
        validate_arguments(arguments, schema)
        Args.model_validate(arguments)
        ended += 1
    assert ended >= 30
