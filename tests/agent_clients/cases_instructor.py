"""instructor 1.17 (with the openai 3.3 client it pins) in TOOLS mode (a forced call of the
response model), JSON_SCHEMA mode (`response_format`) and RESPONSES_TOOLS mode (a forced call
through the Responses API)."""

from __future__ import annotations

from typing import Any

import instructor
import shared
from openai import OpenAI
from pydantic import BaseModel, Field


class WeatherQuery(BaseModel):
    """A request for the weather in a city."""

    city: str = Field(max_length=20)
    days: int = Field(ge=1, le=7)


def extract(mode: instructor.Mode) -> dict[str, Any]:
    client = instructor.from_openai(OpenAI(max_retries=0), mode=mode)
    messages = [{"role": "user", "content": "What is the weather in Paris this week?"}]
    if mode is instructor.Mode.RESPONSES_TOOLS:
        query, raw = client.responses.create_with_completion(
            model=shared.MODEL, input=messages, response_model=WeatherQuery, max_retries=0
        )
    else:
        query, raw = client.chat.completions.create_with_completion(
            model=shared.MODEL, messages=messages, response_model=WeatherQuery, max_retries=0
        )
    return {"parsed": query.model_dump(), "usage": raw.usage.model_dump() if raw.usage else None}


CASES = {
    "instructor_tools": lambda: extract(instructor.Mode.TOOLS),
    "instructor_json_schema": lambda: extract(instructor.Mode.JSON_SCHEMA),
    "instructor_responses_tools": lambda: extract(instructor.Mode.RESPONSES_TOOLS),
}
