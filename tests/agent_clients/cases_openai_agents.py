"""openai-agents 0.24: an Agent with tools and an `output_type`, on the chat-completions model
and on the Responses model (both send the tools and the output's JSON schema in one request)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import shared
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

set_tracing_disabled(True)  # no traces sent anywhere


class Weather(BaseModel):
    city: str = Field(max_length=20)
    condition: Literal["sunny", "cloudy", "rainy", "windy", "snowy", "foggy"]
    temperature_c: int = Field(ge=-50, le=60)


def run(kind: str) -> dict[str, Any]:
    client = AsyncOpenAI(max_retries=0)
    model_class = OpenAIChatCompletionsModel if kind == "chat" else OpenAIResponsesModel
    agent = Agent(
        name="weather",
        model=model_class(model=shared.MODEL, openai_client=client),
        tools=[function_tool(shared.add), function_tool(shared.get_weather)],
        output_type=Weather,
    )
    outcome: dict[str, Any] = {"final_output": None, "stopped": None}
    try:
        result = asyncio.run(Runner.run(agent, "What is the weather in Paris?", max_turns=3))
        outcome["final_output"] = result.final_output.model_dump()
        usage = result.context_wrapper.usage
        outcome["usage"] = {"requests": usage.requests, "input_tokens": usage.input_tokens,
                            "output_tokens": usage.output_tokens}  # fmt: skip
    except Exception as error:  # MaxTurnsExceeded: the test reads the calls made until then
        outcome["stopped"] = f"{type(error).__name__}: {error}"
    outcome["calls"] = shared.calls()
    return outcome


CASES = {
    "openai_agents_chat_tools_output_type": lambda: run("chat"),
    "openai_agents_responses_tools_output_type": lambda: run("responses"),
}
