"""Issue 45, item 11: `tool_choice` "required" refuses, with a 400 naming the tool and the
parameter, a schema no finite value matches ("$ref"s that lead back to themselves with no way
out) or one whose "$ref" points at nothing, as response_format does; a schema the grammar
engine refuses is named in plain words, never with the grammar's source or its parser's state.

Hypothesis draws "$defs" graphs; an independent least-fixed-point oracle says which admit a
finite value.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.server.generation.schema import ChatCompletionRequest
from qwen_mtp_desktop.server.generation.tools import plan_tools
from qwen_mtp_desktop.server.http.errors import ApiError


def _request(parameters: dict[str, Any], choice: object = "required") -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}],
            "tool_choice": choice,
        }
    )


def _refusal(parameters: dict[str, Any]) -> str | None:
    try:
        plan_tools(_request(parameters))
    except ApiError as exc:
        assert exc.status == 400
        return str(exc.message)
    return None


_ref = st.integers(0, 3).map(lambda n: {"$ref": f"#/$defs/d{n}"})
_definition = st.one_of(
    st.just({"type": "string"}),
    st.builds(
        lambda ref, needed: {
            "type": "object",
            "properties": {"p": ref},
            **({"required": ["p"]} if needed else {}),
        },
        _ref,
        st.booleans(),
    ),
    st.builds(
        lambda ref, least: {"type": "array", "items": ref, "minItems": least},
        _ref,
        st.integers(0, 2),
    ),
    st.builds(lambda refs: {"anyOf": refs}, st.lists(_ref, min_size=1, max_size=2)),
    _ref,
)


def _finite(defs: dict[str, dict[str, Any]]) -> set[str]:
    """The definitions some finite value matches (least fixed point, written apart from the
    server's check)."""

    def ok(schema: dict[str, Any], known: set[str]) -> bool:
        if "$ref" in schema:
            return schema["$ref"].rsplit("/", 1)[1] in known
        if "anyOf" in schema:
            return any(ok(s, known) for s in schema["anyOf"])
        if schema.get("type") == "object":
            return "p" not in schema.get("required", []) or ok(schema["properties"]["p"], known)
        if schema.get("type") == "array":
            return schema["minItems"] == 0 or ok(schema["items"], known)
        return True

    known: set[str] = set()
    while True:
        more = {name for name, schema in defs.items() if ok(schema, known)}
        if more == known:
            return known
        known = more


@settings(max_examples=300, deadline=None)
@given(definitions=st.lists(_definition, min_size=4, max_size=4))
def test_a_ref_cycle_without_a_way_out_is_refused_by_name(
    definitions: list[dict[str, Any]],
) -> None:
    defs = {f"d{n}": schema for n, schema in enumerate(definitions)}
    parameters = {
        "type": "object",
        "properties": {"o": {"$ref": "#/$defs/d0"}},
        "required": ["o"],
        "$defs": defs,
    }
    refusal = _refusal(parameters)
    if "d0" in _finite(defs):
        assert refusal is None or "no finite value" not in refusal
    else:
        assert refusal is not None and "no finite value" in refusal
        assert "parameter 'o' of 'f'" in refusal


def test_a_ref_to_nothing_is_refused_by_name() -> None:
    refusal = _refusal({"type": "object", "properties": {"o": {"$ref": "#/$defs/gone"}}})
    assert refusal is not None
    assert "parameter 'o' of 'f'" in refusal and "'#/$defs/gone' points at nothing" in refusal


def test_a_ref_parameter_is_enforced_as_json() -> None:
    plan = plan_tools(
        _request(
            {
                "type": "object",
                "properties": {"o": {"$ref": "#/$defs/n"}},
                "$defs": {"n": {"type": "integer"}},
            }
        )
    )
    assert plan is not None and plan.constraint is not None
    # The integer it points at is bounded, as a schema silent on bounds is (issue 43, item 1).
    bounded = (
        '{"n": {"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991}}'
    )
    assert f'%json {{"$ref": "#/$defs/n", "$defs": {bounded}' in plan.constraint.source


def test_a_text_parameter_with_a_broken_pattern_is_named() -> None:
    refusal = _refusal({"type": "object", "properties": {"s": {"type": "string", "pattern": "(("}}})
    assert refusal is not None
    assert "parameter 's' of 'f': its pattern cannot be enforced (unclosed group)" in refusal


def test_a_text_parameter_shorter_than_its_minimum_is_refused() -> None:
    schema = {"type": "string", "minLength": 5, "maxLength": 1}
    refusal = _refusal({"type": "object", "properties": {"s": schema}})
    assert refusal is not None and "its minLength (5) is above its maxLength (1)" in refusal


def test_an_unknown_format_is_not_enforced_rather_than_refused() -> None:
    """pydantic writes "password" and "binary": any string, as OpenAI's own formats aside."""
    for schema in (
        {"type": "string", "format": "password"},
        {"type": "array", "items": {"type": "string", "format": "binary"}},
    ):
        assert _refusal({"type": "object", "properties": {"s": schema}}) is None


_BAD_SCHEMAS = [
    ({"type": "string", "pattern": "(("}, "regex parse error"),
    ({"type": "string", "pattern": "a{2,1}"}, "regex"),
]


@settings(max_examples=40, deadline=None)
@given(
    case=st.sampled_from(_BAD_SCHEMAS),
    others=st.integers(0, 3),
    wrap=st.booleans(),
)
def test_a_refused_schema_is_named_in_plain_words(
    case: tuple[dict[str, Any], str], others: int, wrap: bool
) -> None:
    bad, words = case
    schema = (
        {"type": "object", "properties": {"inner": bad}}
        if wrap
        else {"type": "array", "items": bad}
    )
    properties: dict[str, Any] = {f"ok{n}": {"type": "integer"} for n in range(others)}
    properties["bad"] = schema
    refusal = _refusal({"type": "object", "properties": properties})
    assert refusal is not None
    assert "the schema of parameter 'bad' of 'f' cannot be enforced" in refusal
    assert words in refusal
    assert not re.search(r"\d+\s*\|", refusal) and not re.search(r"at \d+\(\d+\)", refusal)
    assert "%json" not in refusal and "\n" not in refusal
