"""langchain-openai 1.8: `bind_tools` (the model decides to call) and `with_structured_output`
(its default json_schema method, and function_calling: a forced call of the schema)."""

from __future__ import annotations

from typing import Any

import shared
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field


class WeatherQuery(BaseModel):
    """A request for the weather in a city."""

    city: str = Field(max_length=20)
    days: int = Field(ge=1, le=7)


def chat() -> ChatOpenAI:
    return ChatOpenAI(model=shared.MODEL, temperature=0, max_retries=0)


def bind_tools() -> dict[str, Any]:
    message = (
        chat().bind_tools([shared.add, shared.get_weather]).invoke("What is the weather in Paris?")
    )
    return {"tool_calls": message.tool_calls, "content": message.content,
            "usage": message.usage_metadata}  # fmt: skip


def structured(method: str) -> dict[str, Any]:
    runnable = chat().with_structured_output(WeatherQuery, method=method, include_raw=True)
    out = runnable.invoke("What is the weather in Paris this week?")
    parsed = out["parsed"]
    return {"parsed": parsed.model_dump() if parsed else None,
            "parsing_error": str(out["parsing_error"]) if out["parsing_error"] else None,
            "usage": out["raw"].usage_metadata}  # fmt: skip


CASES = {
    "langchain_bind_tools": bind_tools,
    "langchain_structured_json_schema": lambda: structured("json_schema"),
    "langchain_structured_function_calling": lambda: structured("function_calling"),
}
