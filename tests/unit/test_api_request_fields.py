"""Hostile values for the decoding fields of a chat request (sampling, penalties, seeds,
`response_format`), generated, through the request parser and the planner as the server runs
them: each is honoured exactly or refused with a 400 naming the field, never a traceback, a
hang or a silently dropped field."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.grammar import bounded_schema
from qwen_mtp_desktop.core.decoding.method import MAX_CONSTRAINT_CHARS
from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.generation.planning import check_format_fits, plan_settings
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.request_budget import retained_bytes

GOOD: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)
#: JSON-schema words, so generated schemas reach the grammar compiler, not only the parser.
SCHEMA_WORDS = [
    "type",
    "properties",
    "items",
    "required",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "$ref",
    "$defs",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "additionalProperties",
    "a",
]
TYPE_NAMES = ["object", "array", "string", "integer", "number", "boolean", "null", "nope"]

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([*TYPE_NAMES, "#/$defs/a", "#", "((", "^[a-z]+$", "email", ""])
    | st.text(max_size=8)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(SCHEMA_WORDS), inner, max_size=4)
    ),
    max_leaves=25,
)
small_int = st.integers(min_value=-2, max_value=50)
#: Schemas shaped like real ones (most compile; some are unsatisfiable or malformed).
schemas = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(TYPE_NAMES)})
    | st.fixed_dictionaries({"enum": st.lists(json_leaf, max_size=4)})
    | st.fixed_dictionaries({"const": json_leaf})
    | st.fixed_dictionaries(
        {"type": st.just("string")},
        optional={
            "maxLength": small_int,
            "minLength": small_int,
            "pattern": st.sampled_from(["^[a-z]+$", "((", "a|b", "[0-9]{2,3}", ""]),
            "format": st.sampled_from(["email", "date", "uri", "nope"]),
        },
    )
    | st.fixed_dictionaries(
        {"type": st.sampled_from(["integer", "number"])},
        optional={"minimum": small_int, "maximum": small_int},
    ),
    lambda inner: (
        st.fixed_dictionaries(
            {
                "type": st.just("object"),
                "properties": st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=4),
            },
            optional={
                "required": st.lists(st.text(max_size=5), max_size=3),
                "additionalProperties": st.booleans() | inner,
            },
        )
        | st.fixed_dictionaries(
            {"type": st.just("array"), "items": inner},
            optional={"minItems": small_int, "maxItems": small_int},
        )
        | st.dictionaries(
            st.sampled_from(["anyOf", "oneOf", "allOf"]), st.lists(inner, max_size=3), min_size=1
        )
        | st.dictionaries(st.sampled_from(SCHEMA_WORDS), inner | json_leaf, max_size=3)
    ),
    max_leaves=12,
)


def _schema_format(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}


def planned(body: dict[str, Any]) -> Any:
    request = parse_request(json.dumps({**GOOD, **body}).encode())
    return plan_settings(request, TurnDefaults(), mtp_loaded=True)[0]


def refused_or_planned(body: dict[str, Any]) -> Any:
    try:
        return planned(body)
    except ApiError as exc:
        assert exc.status == 400 and exc.message and "Traceback" not in exc.message
        return exc


@settings(max_examples=400, deadline=None)
@given(
    fields=st.dictionaries(
        st.sampled_from(SAMPLING_FIELDS),
        st.one_of(  # mostly plausible values, so accepted requests are checked too
            st.floats(min_value=0, max_value=2),
            st.floats(min_value=0, max_value=2),
            st.floats(min_value=0, max_value=2),
            st.integers(min_value=0, max_value=100),
            st.floats(min_value=-3, max_value=12),
            json_leaf,
            st.integers(),
            st.lists(st.integers(), max_size=2),
        ),
        max_size=len(SAMPLING_FIELDS),
    )
)
def test_sampling_fields_are_honoured_or_refused(fields: dict[str, Any]) -> None:
    result = refused_or_planned(fields)
    if isinstance(result, ApiError):
        assert result.param is None or result.param.split(".")[0] in (*SAMPLING_FIELDS, "")
        event("refused")
        return
    event("sampled" if fields.get("temperature") else "greedy")
    method = result.method
    method.check()  # what is planned runs
    assert method.uses_mtp_head  # MTP stays on, sampled or not
    sampling = method.sampling
    temperature = fields.get("temperature") or 0
    assert sampling.temperature == temperature
    assert sampling.presence_penalty == (fields.get("presence_penalty") or 0)
    assert sampling.frequency_penalty == (fields.get("frequency_penalty") or 0)
    assert sampling.repetition_penalty == (fields.get("repetition_penalty") or 1)
    if temperature:
        assert sampling.seed == fields.get("seed")
        if fields.get("top_k") is not None:
            assert sampling.top_k == fields["top_k"]


@settings(max_examples=200, deadline=None)
@given(
    fields=st.fixed_dictionaries(
        {},
        optional={
            "temperature": st.floats(min_value=0, max_value=2),
            "top_p": st.floats(min_value=0.001, max_value=1),
            "top_k": st.integers(min_value=0, max_value=1_000_000),
            "seed": st.integers(min_value=0, max_value=2**63 - 1),
            "presence_penalty": st.floats(min_value=-2, max_value=2),
            "frequency_penalty": st.floats(min_value=-2, max_value=2),
            "repetition_penalty": st.floats(min_value=0.001, max_value=10),
        },
    )
)
def test_every_valid_sampling_request_runs_with_mtp(fields: dict[str, Any]) -> None:
    """In OpenAI's ranges, every combination is honoured: none is refused or changed."""
    settings = planned(fields)
    settings.method.check()
    assert settings.method.uses_mtp_head
    sampling = settings.method.sampling
    assert sampling.presence_penalty == fields.get("presence_penalty", 0)
    assert sampling.frequency_penalty == fields.get("frequency_penalty", 0)
    if fields.get("temperature"):
        assert sampling.temperature == fields["temperature"]
        assert sampling.seed == fields.get("seed")
        assert sampling.top_p == fields.get("top_p", 0.9)
        assert sampling.top_k == fields.get("top_k", 20)
    else:
        assert sampling.greedy


@settings(max_examples=400, deadline=None)
@given(
    fmt=st.one_of(
        json_value,
        st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema"])}),
        st.fixed_dictionaries(
            {"type": st.just("json_schema"), "json_schema": json_value},
        ),
        st.builds(_schema_format, schemas),
        st.builds(_schema_format, schemas),
        st.fixed_dictionaries(
            {
                "type": st.just("json_schema"),
                "json_schema": st.fixed_dictionaries(
                    {},
                    optional={
                        "name": json_leaf,
                        "schema": schemas | json_value,
                        "strict": json_leaf,
                        "description": json_leaf,
                    },
                ),
            }
        ),
    )
)
def test_response_format_is_enforced_or_refused(fmt: Any) -> None:
    started = time.monotonic()
    result = refused_or_planned({"response_format": fmt})
    assert time.monotonic() - started < 5  # compiling is bounded (llguidance's limits)
    if isinstance(result, ApiError):
        assert result.param is not None and result.param.startswith("response_format"), result
        event("refused: " + result.code if result.code else "refused")
        return
    constraint = result.method.constraint
    kind = fmt["type"] if fmt is not None else "text"
    event(f"enforced: {kind}")
    if kind == "text":
        assert constraint is None
    else:  # never silently dropped
        assert constraint is not None and constraint.kind == kind
        assert result.method.uses_mtp_head
    if kind == "json_schema":  # closed and bounded where silent (issue 43, item 1)
        strict = fmt["json_schema"].get("strict") is True
        expected = bounded_schema(fmt["json_schema"]["schema"], strict=strict)
        assert json.loads(constraint.source) == expected


@pytest.mark.parametrize(
    ("fmt", "needle"),
    [
        ("json_object", "valid dictionary"),
        ({"type": "json_schema", "json_schema": []}, "valid dictionary"),
        (_schema_format("string"), "valid dictionary"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}}, "strict"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "name": 5}}, "name"),
        ({"type": "json_schema", "json_schema": {"schema": {}, "name": "n" * 65}}, "name"),
        (_schema_format({"description": "x" * (MAX_CONSTRAINT_CHARS + 1)}), "at most"),
        (_schema_format({"type": "string", "pattern": "(("}), "unclosed group"),
        (_schema_format({"$ref": "#/$defs/none"}), "does not exist"),
        (_schema_format(json.loads("[" * 300 + "]" * 300)), "valid dictionary"),
    ],
)
def test_bad_formats_name_the_problem(fmt: Any, needle: str) -> None:
    result = refused_or_planned({"response_format": fmt})
    assert isinstance(result, ApiError), result
    assert needle in result.message and result.param is not None
    assert result.param.startswith("response_format")


def test_absurd_but_valid_schemas_compile_quickly_or_are_refused() -> None:
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(5_000)},
    }
    deep: dict[str, Any] = {"type": "integer"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
    for schema in (wide, deep):
        started = time.monotonic()
        result = refused_or_planned({"response_format": _schema_format(schema)})
        assert time.monotonic() - started < 10
        if isinstance(result, ApiError):
            assert "response_format" in result.message


def test_a_waiting_request_counts_its_schema() -> None:
    schema = {"type": "object", "description": "d" * 150_000}
    settings = planned({"response_format": _schema_format(schema)})
    messages = [Message("user", "hi")]
    assert retained_bytes(messages, settings) >= retained_bytes(messages) + 150_000


def test_formats_the_engine_cannot_enforce_are_refused_before_waiting(tmp_path: Path) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with_image = parse_request(
        json.dumps(
            {
                **GOOD,
                "messages": [{"role": "user", "content": [image]}],
                "response_format": {"type": "json_object"},
            }
        ).encode()
    )
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ApiError) as caught:
        check_format_fits(with_image, tmp_path)
    assert caught.value.status == 400 and "images" in caught.value.message
    assert caught.value.param == "response_format"
    text_only = parse_request(
        json.dumps({**GOOD, "response_format": {"type": "json_object"}}).encode()
    )
    check_format_fits(text_only, tmp_path)  # fine
    (tmp_path / "tokenizer.json").unlink()
    with pytest.raises(ApiError) as caught:
        check_format_fits(text_only, tmp_path)
    assert "tokenizer.json" in caught.value.message
    check_format_fits(parse_request(json.dumps(GOOD).encode()), tmp_path)  # no format: fine
