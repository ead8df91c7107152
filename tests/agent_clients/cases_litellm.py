"""litellm 1.110 through its OpenAI-compatible route (`openai/<model>`): a chat and a tool call."""

from __future__ import annotations

from typing import Any

import litellm
import shared

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}},
]  # fmt: skip


def ask(**fields: Any) -> Any:
    return litellm.completion(
        model=f"openai/{shared.MODEL}", api_base=shared.URL, api_key=shared.KEY,
        num_retries=0, **fields,
    )  # fmt: skip


def chat() -> dict[str, Any]:
    reply = ask(messages=[{"role": "user", "content": "Hello!"}], max_tokens=60)
    return {"content": reply.choices[0].message.content, "usage": reply.usage.model_dump()}


def tool_call() -> dict[str, Any]:
    reply = ask(
        messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=TOOLS
    )
    message = reply.choices[0].message
    return {"finish_reason": reply.choices[0].finish_reason,
            "tool_calls": [{"name": call.function.name, "arguments": call.function.arguments}
                           for call in message.tool_calls or []],
            "usage": reply.usage.model_dump()}  # fmt: skip


CASES = {"litellm_chat": chat, "litellm_tool_call": tool_call}
