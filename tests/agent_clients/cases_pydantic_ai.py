"""pydantic-ai 2.78: `NativeOutput` (the output's JSON schema as `response_format`) with tools in
the same request. (An agent with tools and text output is the README's example.)"""

from __future__ import annotations

from typing import Any, Literal

import shared
from openai import AsyncOpenAI
from pydantic import BaseModel, Field
from pydantic_ai import Agent, NativeOutput, UsageLimits
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


class Weather(BaseModel):
    city: str = Field(max_length=20)
    condition: Literal["sunny", "cloudy", "rainy", "windy", "snowy", "foggy"]
    temperature_c: int = Field(ge=-50, le=60)


def model() -> OpenAIChatModel:
    client = AsyncOpenAI(max_retries=0)
    return OpenAIChatModel(shared.MODEL, provider=OpenAIProvider(openai_client=client))


def native_output_with_tools() -> dict[str, Any]:
    agent = Agent(
        model(), output_type=NativeOutput(Weather), tools=[shared.add, shared.get_weather]
    )
    outcome: dict[str, Any] = {"final_output": None, "stopped": None}
    try:
        result = agent.run_sync(
            "What is the weather in Paris?", usage_limits=UsageLimits(request_limit=3)
        )
        outcome["final_output"] = result.output.model_dump()
    except Exception as error:  # UsageLimitExceeded: the test reads the calls made until then
        outcome["stopped"] = f"{type(error).__name__}: {error}"
    outcome["calls"] = shared.calls()
    return outcome


CASES = {"pydantic_ai_native_output_with_tools": native_output_with_tools}
