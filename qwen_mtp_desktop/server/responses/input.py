"""A `/v1/responses` request as the chat request the rest of the server already honours
(server.generation.planning, server.generation.tools, server.generation.structured), and the chat's
error names back in the Responses API's words.

- `instructions` -> a system message first (not carried to the next turn, as OpenAI chains);
- `previous_response_id` -> the stored conversation before this input (server.responses.store);
- `input`: a string -> a user message; items: messages (`input_text`, `input_image`, and an
  earlier answer's `output_text` / `refusal`), `function_call` -> an assistant message's
  `tool_calls` (calls in a row, and the text just before them, are one assistant turn),
  `function_call_output` -> a `tool` message, `reasoning` -> dropped (docs/api-server.md);
- `tools` (flat function tools) / `tool_choice` / `parallel_tool_calls` -> the chat's;
- `text.format` -> `response_format`; `max_output_tokens` -> `max_completion_tokens`;
  `include: ["message.output_text.logprobs"]` + `top_logprobs` -> `logprobs` (the other
  `include` values mean nothing here and are ignored);
- `reasoning.effort` -> `reasoning_effort`; `max_tool_calls` 1 -> `parallel_tool_calls: false`
  (any other count goes to the tool plan beside the chat request, server.responses.route:
  the grammar lets no call open after that many).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from qwen_mtp_desktop.server.generation.parsing import validation_message
from qwen_mtp_desktop.server.generation.schema import ChatCompletionRequest
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.responses.schema import (
    LOGPROBS_INCLUDE,
    FunctionCallItem,
    FunctionCallOutputItem,
    FunctionChoice,
    InputImage,
    InputText,
    MessageItem,
    OutputText,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    TextFormatJsonSchema,
)
from qwen_mtp_desktop.server.responses.store import ResponseStore

#: Request fields passed to the chat request as they are (the shared decoding fields).
_SHARED = (
    "model",
    "stream",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "top_k",
    "repetition_penalty",
    "ignore_eos",
    "num_assistant_tokens",
    "parallel_tool_calls",
)
#: The chat's field names in an error, as the Responses API names them.
_RENAMED = {
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
    "tool_choice.function.name": "tool_choice.name",
    "reasoning_effort": "reasoning.effort",
}
#: Renamed as a whole `param` only (the words are common in messages).
_RENAMED_PARAMS = {"logprobs": "include", "messages": "input"}


@dataclass
class Translation:
    """The chat request, the conversation to store after the answer (without instructions),
    and where each chat message came from (for errors: `messages[3]` is `input[2]`)."""

    chat: ChatCompletionRequest | None = None
    conversation: list[dict[str, Any]] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)

    def error(self, exc: ApiError) -> ApiError:
        """`exc` with the chat's field names in the Responses API's words."""

        def rename(text: str) -> str:
            def message_at(match: re.Match[str]) -> str:
                index = int(match.group(1))
                return self.origins[index] if index < len(self.origins) else "input"

            text = re.sub(r"messages\[(\d+)\]", message_at, text)
            text = re.sub(r"tools\[(\d+)\]\.function", r"tools[\1]", text)
            for old, new in _RENAMED.items():
                text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)
            return text

        exc.message = rename(exc.message)
        if exc.param is not None:
            exc.param = _RENAMED_PARAMS.get(exc.param, rename(exc.param))
        return exc


def translate(body: ResponsesRequest, store: ResponseStore, into: Translation) -> None:
    """Fill `into` with the chat request for `body`; ApiError 400 for what cannot be."""
    messages: list[dict[str, Any]] = []
    origins: list[str] = []
    if body.instructions:
        messages.append({"role": "system", "content": body.instructions})
        origins.append("instructions")
    if body.previous_response_id is not None:
        stored = store.get(body.previous_response_id)
        if stored is None:
            shown = body.previous_response_id[:80]
            raise ApiError(
                400,
                f"Previous response with id {shown!r} not found. This server keeps the "
                f"latest {store.max_count} stored responses in memory until it stops; send "
                "the whole conversation in input instead.",
                code="previous_response_not_found",
                param="previous_response_id",
            )
        messages.extend(copy.deepcopy(stored.conversation))  # items below may extend them
        origins.extend(["previous_response_id"] * len(stored.conversation))
    if isinstance(body.input, str):
        messages.append({"role": "user", "content": body.input})
        origins.append("input")
    else:
        for index, item in enumerate(body.input):
            _add_item(messages, origins, item, f"input[{index}]")
    into.conversation = messages[1:] if body.instructions else list(messages)
    into.origins = origins
    chat: dict[str, Any] = {name: getattr(body, name) for name in _SHARED}
    chat["messages"] = messages
    chat["max_completion_tokens"] = body.max_output_tokens
    chat["chat_template_kwargs"] = body.chat_template_kwargs
    chat["reasoning_effort"] = body.reasoning.effort if body.reasoning is not None else None
    chat["thinking_token_budget"] = body.thinking_token_budget
    if body.max_tool_calls == 1:
        chat["parallel_tool_calls"] = False  # a forced call: the grammar of one call
    if body.tools is not None:
        chat["tools"] = [
            {"type": "function", "function": tool.model_dump(exclude={"type"}, exclude_none=True)}
            for tool in body.tools
        ]
    choice = body.tool_choice
    chat["tool_choice"] = (
        {"type": "function", "function": {"name": choice.name}}
        if isinstance(choice, FunctionChoice)
        else choice
    )
    chat["response_format"] = _response_format(body)
    if LOGPROBS_INCLUDE in (body.include or ()):  # the others mean nothing here (schema)
        chat["logprobs"] = True
        chat["top_logprobs"] = body.top_logprobs or 0
    elif body.top_logprobs is not None:
        raise ApiError(
            400,
            f'top_logprobs needs include: ["{LOGPROBS_INCLUDE}"] (the log-probabilities are '
            "sent only when included).",
            code="invalid_value",
            param="top_logprobs",
        )
    payload = {key: value for key, value in chat.items() if value is not None}
    try:
        into.chat = ChatCompletionRequest.model_validate(payload)
    except ValidationError as exc:  # the Responses models check the same things first
        message, param = validation_message(exc)
        raise into.error(ApiError(400, message, code="invalid_value", param=param)) from None


def _response_format(body: ResponsesRequest) -> dict[str, Any] | None:
    fmt = body.text.format if body.text is not None else None
    if fmt is None:
        return None
    if isinstance(fmt, TextFormatJsonSchema):
        spec: dict[str, Any] = {
            "name": fmt.name,
            "schema": fmt.schema_,
            "description": fmt.description,
        }
        if fmt.strict is not None:
            spec["strict"] = fmt.strict
        return {
            "type": "json_schema",
            "json_schema": {k: v for k, v in spec.items() if v is not None},
        }
    return {"type": fmt.type}


def _add_item(messages: list[dict[str, Any]], origins: list[str], item: Any, where: str) -> None:
    if isinstance(item, ReasoningItem):
        return  # not rendered (module docstring)
    if isinstance(item, FunctionCallItem):
        call = {
            "id": item.call_id,
            "type": "function",
            "function": {"name": item.name, "arguments": item.arguments},
        }
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)  # one assistant turn
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            origins.append(where)
        return
    if isinstance(item, FunctionCallOutputItem):
        output = item.output
        text = output if isinstance(output, str) else "\n".join(part.text for part in output)
        messages.append({"role": "tool", "tool_call_id": item.call_id, "content": text})
        origins.append(where)
        return
    assert isinstance(item, MessageItem)
    messages.append(_message(item, where))
    origins.append(where)


def _message(item: MessageItem, where: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": item.role}
    if isinstance(item.content, str):
        message["content"] = item.content
        return message
    parts: list[dict[str, Any]] = []
    refusals: list[str] = []
    for index, part in enumerate(item.content):
        param = f"{where}.content[{index}]"
        if isinstance(part, InputText | OutputText):
            if isinstance(part, OutputText) and item.role != "assistant":
                raise ApiError(
                    400,
                    f"{param}: output_text is an assistant's answer; a {item.role} message "
                    "holds input_text.",
                    code="invalid_value",
                    param=param,
                )
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, Refusal):
            if item.role != "assistant":
                raise ApiError(
                    400,
                    f"{param}: a refusal belongs to an assistant message.",
                    code="invalid_value",
                    param=param,
                )
            refusals.append(part.refusal)
        else:
            assert isinstance(part, InputImage)
            if part.image_url is None:
                raise ApiError(
                    400,
                    f"{param}: send the image as image_url, a base64 data: URL (this server "
                    "has no file storage for file_id).",
                    code="invalid_value",
                    param=f"{param}.image_url",
                )
            image: dict[str, Any] = {"url": part.image_url}
            if part.detail is not None:
                image["detail"] = part.detail
            parts.append({"type": "image_url", "image_url": image})
    message["content"] = parts if parts else None
    if refusals:
        message["refusal"] = "\n".join(refusals)
    return message
