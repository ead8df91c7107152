"""Every top-level field of a request is honoured or refused, never silently ignored.

A field the request model declares is honoured (or refused for a value planning cannot honour);
a few OpenAI fields that change nothing on a local server are accepted by name (`HARMLESS`);
OpenAI fields this server cannot honour get a 400 that names them and says what to do
(`REFUSED`); anything else is an unknown field, refused the same way (a misspelt `max_token`
must not quietly give 512 tokens). Checked on the parsed JSON, before the request model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from qwen_mtp_desktop.server.http.errors import ApiError

#: Accepted and without effect here: labels, storage and routing hints of OpenAI's service.
HARMLESS = frozenset(
    {
        "user",
        "metadata",
        "store",
        "service_tier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
    }
)

#: OpenAI fields this server refuses (unless null), with why and what to do.
REFUSED: dict[str, str] = {
    "audio": "audio output is not supported: this server answers in text",
    "prediction": "predicted outputs are not supported",
    "verbosity": "verbosity is not supported",
    "web_search_options": "web search is not available on a local model",
    "functions": "the deprecated functions API is not supported",
    "function_call": "the deprecated functions API is not supported",
    "best_of": "best_of is not supported: the engine decodes one answer at a time; send "
    "separate requests instead",
    "suffix": "suffix (text after the insertion) is not supported: completions continue the "
    "prompt only",
    # The Responses API's (server.responses.schema):
    "background": "background responses are not supported: the answer comes in the request "
    "(or its stream)",
    "conversation": "conversations are not stored here; chain with previous_response_id, or "
    "send the whole conversation in input",
    "context_management": "context management (compaction) is not supported",
}

#: Values of refused fields that ask for what the server does anyway, accepted as if absent.
NEUTRAL: tuple[tuple[str, Any], ...] = (("best_of", 1), ("suffix", ""))

#: `modalities` other than text alone are refused.
TEXT_ONLY = ["text"]

MAX_SHOWN_NAME = 60


def check_fields(payload: dict[str, Any], model: type[BaseModel]) -> None:
    """ApiError 400 for the first field of `payload` this server would not honour."""
    names = getattr(model, "field_names", None)  # a model whose keys are not its fields
    known = names() if callable(names) else set(model.model_fields)
    for name, value in payload.items():
        if name in REFUSED:
            if value is None or (name, value) in NEUTRAL:
                continue
            raise ApiError(400, f"{REFUSED[name]}.", code="unsupported_parameter", param=name)
        if name == "modalities":
            if value is None or value == TEXT_ONLY:
                continue
            raise ApiError(
                400,
                'modalities: this server answers in text only; send ["text"] or leave it out.',
                code="unsupported_parameter",
                param=name,
            )
        if name in known or name in HARMLESS:
            continue
        shown = name if len(name) <= MAX_SHOWN_NAME else name[: MAX_SHOWN_NAME - 3] + "..."
        raise ApiError(
            400,
            f"Unknown field {shown!r}: this server does not know it, so it cannot honour "
            "it. Remove it, or check its spelling (the README's API section lists the fields).",
            code="unknown_parameter",
            param=shown,
        )
