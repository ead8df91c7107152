"""A conversation as the model's chat template reads it: messages (tool calls and tool results
included) and the tools on offer, with every piece of text escaped so it never spells a control
token.

Qwen3.5's template reads an assistant message's `tool_calls` as `{"function": {"name",
"arguments"}}` with `arguments` a mapping (it writes each argument as a `<parameter=...>`
block), a `role: "tool"` message's `content` as the result, and `tools` as OpenAI's list of
function objects (it writes each one as JSON in the system prompt). Text from a client (results,
argument values, tool descriptions) is untrusted like any typed text: escaped the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from qwen_mtp_desktop.core.engine.types import EngineError, Message

#: The vision placeholder Qwen3.5's template writes for an image part.
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def _escaped(value: Any, escape: Callable[[str], str]) -> Any:
    """`value` (parsed JSON) with every string in it, keys included, escaped."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, list):
        return [_escaped(item, escape) for item in value]
    if isinstance(value, dict):
        return {escape(str(key)): _escaped(item, escape) for key, item in value.items()}
    return value


def _arguments(text: str, name: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise EngineError(
            f"The arguments of the earlier tool call {name!r} are not a JSON object.",
            "Send each call's function.arguments as a JSON object's text.",
            code="BAD_CONVERSATION",
        )
    return value


def template_history(
    messages: Sequence[Message], escape: Callable[[str], str]
) -> list[dict[str, Any]]:
    """The messages as the chat template's `messages` (escaped)."""
    history: list[dict[str, Any]] = []
    for message in messages:
        content = escape(message.content)
        content = IMAGE_PLACEHOLDER * len(message.images) + content
        item: dict[str, Any] = {"role": message.role, "content": content}
        if message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": escape(call.name),
                        "arguments": _escaped(_arguments(call.arguments, call.name), escape),
                    },
                }
                for call in message.tool_calls
            ]
        if message.tool_call_id is not None:
            item["tool_call_id"] = message.tool_call_id
        history.append(item)
    return history


def template_tools(tools_json: str, escape: Callable[[str], str]) -> list[dict[str, Any]] | None:
    """The tools (OpenAI's list, as JSON text) as the chat template's `tools`; None for none."""
    if not tools_json:
        return None
    try:
        tools = json.loads(tools_json)
    except (ValueError, RecursionError):
        tools = None
    if not isinstance(tools, list) or not all(isinstance(tool, dict) for tool in tools):
        raise EngineError("The tools are not a JSON list of objects.", code="BAD_SETTINGS")
    return [_escaped(tool, escape) for tool in tools] or None


def ends_with_prompt(messages: Sequence[Message]) -> bool:
    """Whether the conversation ends where the model answers: a user message, or tool results
    (the model continues after its calls)."""
    return bool(messages) and messages[-1].role in ("user", "tool")
