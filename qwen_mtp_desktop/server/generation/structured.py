"""Structured output: a request's `response_format` as the decoder's `Constraint`.

`json_object` and `json_schema` become a constraint the app's decoder enforces token by token
with MTP kept on (core.decoding.grammar, llguidance: every distribution is masked, drafts
included, so the answer equals plain constrained decoding). A schema is compiled here, in the
server, before the request waits for the engine, so one llguidance cannot enforce is a 400
naming llguidance's reason, never a failed or silently unconstrained answer. The schema is
always enforced, closed and bounded where it is silent (core.decoding.grammar.bounded_schema:
an object that lists properties takes no others, numbers and strings have a length); `strict:
true` closes every object, as OpenAI's strict mode does.
"""

from __future__ import annotations

import json

from qwen_mtp_desktop.core.decoding.grammar import ConstraintError, bounded_schema, grammar_text
from qwen_mtp_desktop.core.decoding.method import MAX_CONSTRAINT_CHARS, Constraint, MethodError
from qwen_mtp_desktop.server.generation.schema import (
    JsonObjectFormat,
    JsonSchemaFormat,
    ResponseFormat,
)
from qwen_mtp_desktop.server.http.errors import ApiError

PARAM = "response_format"
#: Longest grammar-engine message passed on (llguidance's are short; a schema may be quoted).
MAX_REASON_CHARS = 500


def constraint_for(fmt: ResponseFormat | None) -> Constraint | None:
    """The constraint a response_format asks for (None for text or no format); ApiError 400
    when the schema cannot be enforced, with the reason."""
    if fmt is None or not isinstance(fmt, JsonObjectFormat | JsonSchemaFormat):
        return None
    if isinstance(fmt, JsonObjectFormat):
        constraint = Constraint("json_object")
    else:
        spec = fmt.json_schema
        try:
            source = json.dumps(spec.schema_, ensure_ascii=False)
        except (ValueError, RecursionError):
            raise _refused("the schema is nested too deeply") from None
        if len(source) > MAX_CONSTRAINT_CHARS:
            raise _refused(
                f"the schema is {len(source):,} characters of JSON; at most "
                f"{MAX_CONSTRAINT_CHARS:,} are accepted"
            )
        bounded = bounded_schema(spec.schema_, strict=spec.strict is True)
        source = json.dumps(bounded, ensure_ascii=False)
        constraint = Constraint("json_schema", source, spec.name or "")
    check_constraint(constraint)
    return constraint


def check_constraint(constraint: Constraint) -> None:
    """Compile the constraint as the engine will (without the vocabulary, which only the
    engine process holds); ApiError 400 with the grammar engine's reason."""
    import llguidance

    try:
        constraint.check()
        grammar = grammar_text(constraint)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except ConstraintError as exc:
        raise _refused(_short(str(exc))) from None
    except MethodError as exc:
        raise _refused(_short(str(exc))) from None
    except (ValueError, RuntimeError, RecursionError) as exc:  # the native side's refusals
        raise _refused(f"the grammar engine refused it: {_short(str(exc))}") from None
    if is_error:
        reason = messages[0] if messages else "no reason given"
        raise _refused(f"it cannot be enforced: {_short(reason)}")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def _refused(reason: str) -> ApiError:
    return ApiError(
        400,
        f"response_format: {reason.rstrip('.')}. Send a JSON schema the grammar engine "
        '(llguidance) supports, or {"type": "json_object"} for any JSON object.',
        code="invalid_schema",
        param=PARAM,
    )
