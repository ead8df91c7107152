"""A request body read as JSON and validated into a request model, or a 400 that says what is
wrong: not UTF-8, too many values, nested too deeply, NaN, not an object, a field this server
would not honour (server.http.fields), a value of the wrong type or out of range (pydantic)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from qwen_mtp_desktop.core.files.safe_files import json_value_count
from qwen_mtp_desktop.server.generation.schema import ChatCompletionRequest
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.fields import check_fields
from qwen_mtp_desktop.server.http.request_budget import MAX_JSON_VALUES

Model = TypeVar("Model", bound=BaseModel)


def validation_message(exc: ValidationError | RequestValidationError) -> tuple[str, str | None]:
    """The first few validation problems in one line, and the first one's field."""
    # The deepest problem first: of a union's branches (`Text | list[...]`), the one that got
    # furthest into the value is the one the client meant.
    errors = sorted(exc.errors(), key=lambda e: -len(_dotted(e.get("loc", ()))))
    parts = []
    for error in errors[:3]:
        where = _dotted(error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg", ""))
    more = f" (and {len(errors) - 3} more problems)" if len(errors) > 3 else ""
    param = _dotted(errors[0].get("loc", ())) if errors else None
    return "Invalid request: " + "; ".join(parts) + more, param or None


def _dotted(loc: Sequence[Any]) -> str:
    text = ""
    tagged = False  # the item after a tagged union's index is the tag, not a field
    for index, item in enumerate(loc):
        if item == "body":
            continue
        if isinstance(item, str) and "[" in item:
            tagged = item.startswith(("tagged-union[", "list[tagged-union["))
            continue  # a union branch's name (list[...], tagged-union[...]), not a field
        if tagged and isinstance(item, str) and index and isinstance(loc[index - 1], int):
            tagged = False
            continue
        if isinstance(item, int):
            text += f"[{item}]"
        elif str(item) in ("str", "list[...]", "function-after[_encodable(), str]"):
            continue  # pydantic's union branch names, not fields
        else:
            text += f".{item}" if text else str(item)
    return text


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_request(raw: bytes) -> ChatCompletionRequest:
    """The body as a chat completion request; ApiError 400 for anything that is not one."""
    return parse_body(raw, ChatCompletionRequest)


def parse_body(raw: bytes, model: type[Model]) -> Model:
    """The body as a `model` request; ApiError 400 for anything that is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not UTF-8 text.", code="invalid_json") from None
    values = json_value_count(text)
    if values > MAX_JSON_VALUES:  # before the parser makes a Python object of each
        raise ApiError(
            400,
            f"The request body's JSON holds about {values:,} values; a chat request needs far "
            f"fewer (at most {MAX_JSON_VALUES:,} are accepted).",
            code="invalid_json",
        )
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ApiError(
            400, "The request body's JSON is nested too deeply.", code="invalid_json"
        ) from None
    except ValueError as exc:  # JSONDecodeError, huge integers, NaN
        raise ApiError(
            400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(payload, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    check_fields(payload, model)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        message, param = validation_message(exc)
        raise ApiError(400, message, code="invalid_value", param=param) from None
    except RecursionError:
        raise ApiError(
            400, "The request body's JSON is nested too deeply.", code="invalid_json"
        ) from None
