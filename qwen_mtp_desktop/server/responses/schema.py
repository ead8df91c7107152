"""The request body of `POST /v1/responses` (OpenAI's Responses API), as pydantic models.

Every key is honoured or refused: the models are closed (an unknown key in an item, a tool or
`text` is a 400 naming it), server.http.fields refuses top-level fields this server cannot honour,
and server.responses.input turns the rest into a chat request. Item ids and statuses a client
sends back (`input=previous.output`) are accepted: they label items, they change no answer.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from qwen_mtp_desktop.server.generation.reasoning import Effort
from qwen_mtp_desktop.server.generation.schema import (
    FUNCTION_NAME,
    MAX_CALL_ID_CHARS,
    MAX_MESSAGES,
    MAX_MODEL_CHARS,
    MAX_SCHEMA_NAME_CHARS,
    MAX_TOKENS_LIMIT,
    MAX_TOOL_CALLS,
    MAX_TOOLS,
    ChatTemplateKwargs,
    Closed,
    GenerationRequest,
    Text,
    ThinkingBudget,
)

Status = Literal["in_progress", "completed", "incomplete"]
#: A response id as this server makes them ("resp_" and hex); longer is not one of ours.
MAX_RESPONSE_ID_CHARS = 128


class InputText(Closed):
    type: Literal["input_text"]
    text: Text


class InputImage(Closed):
    type: Literal["input_image"]
    #: A base64 data: URL (the server never fetches a remote one).
    image_url: Text | None = None
    detail: Literal["auto", "low", "high"] | None = None
    file_id: None = None


class OutputText(Closed):
    """An earlier answer's text, as a client sends the previous output back."""

    type: Literal["output_text"]
    text: Text
    annotations: list[Any] | None = None
    logprobs: list[Any] | None = None


class Refusal(Closed):
    type: Literal["refusal"]
    refusal: Text


InputPart = Annotated[InputText | InputImage | OutputText | Refusal, Field(discriminator="type")]


class MessageItem(Closed):
    """A message (`type` may be left out, as the SDK's EasyInputMessage does)."""

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: Text | list[InputPart]
    id: Text | None = None
    status: Status | None = None


class FunctionCallItem(Closed):
    """A call the model made earlier (sent back with its result)."""

    type: Literal["function_call"]
    call_id: Annotated[Text, Field(min_length=1, max_length=MAX_CALL_ID_CHARS)]
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]
    arguments: Text
    id: Text | None = None
    status: Status | None = None


class FunctionCallOutputItem(Closed):
    """A tool's result for a call (`call_id`)."""

    type: Literal["function_call_output"]
    call_id: Annotated[Text, Field(min_length=1, max_length=MAX_CALL_ID_CHARS)]
    output: Text | list[InputText]
    id: Text | None = None
    status: Status | None = None


class ReasoningText(Closed):
    type: Literal["reasoning_text", "summary_text"]
    text: Text


class ReasoningItem(Closed):
    """Earlier reasoning sent back: accepted and not rendered (Qwen3.5's template drops the
    reasoning of earlier turns; docs/api-server.md)."""

    type: Literal["reasoning"]
    id: Text | None = None
    summary: list[ReasoningText] | None = None
    content: list[ReasoningText] | None = None
    encrypted_content: None = None
    status: Status | None = None


def _item_type(value: Any) -> str:
    if isinstance(value, dict):
        kind = value.get("type", "message")
        return kind if isinstance(kind, str) else "message"
    return str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")]
    | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")]
    | Annotated[ReasoningItem, Tag("reasoning")],
    Discriminator(_item_type),
]


class FunctionTool(Closed):
    """A function tool in the Responses shape (flat: no `function` object)."""

    type: Literal["function"]
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]
    description: Text | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionChoice(Closed):
    type: Literal["function"]
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]


class TextFormatText(Closed):
    type: Literal["text"]


class TextFormatJsonObject(Closed):
    type: Literal["json_object"]


class TextFormatJsonSchema(Closed):
    """`text.format` json_schema: the chat's `response_format.json_schema`, flattened."""

    type: Literal["json_schema"]
    name: Annotated[Text, Field(min_length=1, max_length=MAX_SCHEMA_NAME_CHARS)]
    schema_: dict[str, Any] = Field(alias="schema")
    description: Text | None = None
    strict: bool | None = None


TextFormat = Annotated[
    TextFormatText | TextFormatJsonObject | TextFormatJsonSchema, Field(discriminator="type")
]


class TextConfig(Closed):
    format: TextFormat | None = None
    #: Only "medium" (OpenAI's default) or null: the model has no verbosity control.
    verbosity: Literal["medium"] | None = None


class ResponsesStreamOptions(Closed):
    #: Only false: this server does not pad stream events.
    include_obfuscation: Literal[False] | None = None


#: `include` values this server honours.
LOGPROBS_INCLUDE = "message.output_text.logprobs"
#: `include` values accepted: LOGPROBS_INCLUDE, and those that have no meaning here, accepted
#: and ignored as OpenAI-compatible servers do: no encrypted reasoning (the reasoning item
#: carries its text), no input image URLs kept, and none of the hosted tools whose results they
#: would add.
Includable = Literal[
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
    "message.input_image.image_url",
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
]
#: Most tool calls one answer may hold (`max_tool_calls`): the chat's limit per message.
MAX_TOOL_CALLS_LIMIT = MAX_TOOL_CALLS


class ReasoningConfig(Closed):
    """`reasoning`: `effort` as Qwen's thinking (server.generation.reasoning); a summary is
    never written (the reasoning item carries the reasoning's own text), so `summary` and the
    older `generate_summary` are accepted and change nothing, as vLLM accepts them."""

    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None


class ResponsesRequest(GenerationRequest):
    """`POST /v1/responses`. The chat's decoding fields and extensions are shared
    (`GenerationRequest`), except the ones with Responses names of their own."""

    model: Annotated[Text, Field(max_length=MAX_MODEL_CHARS)]
    input: Text | Annotated[list[InputItem], Field(max_length=MAX_MESSAGES)]
    instructions: Text | None = None
    max_output_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    tools: Annotated[list[FunctionTool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: Literal["auto", "none", "required"] | FunctionChoice | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    previous_response_id: (
        Annotated[Text, Field(min_length=1, max_length=MAX_RESPONSE_ID_CHARS)] | None
    ) = None
    store: bool = True
    metadata: Annotated[dict[str, Text], Field(max_length=16)] | None = None
    include: Annotated[list[Includable], Field(max_length=16)] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    truncation: Literal["disabled"] | None = None
    stream_options: ResponsesStreamOptions | None = None  # type: ignore[assignment]
    chat_template_kwargs: ChatTemplateKwargs | None = None
    reasoning: ReasoningConfig | None = None
    #: vLLM's extension, as on chat completions.
    thinking_token_budget: ThinkingBudget | None = None
    #: At most this many function calls in the answer (server.generation.tool_output).
    max_tool_calls: Annotated[int, Field(ge=1, le=MAX_TOOL_CALLS_LIMIT)] | None = None

    def token_budget(self) -> int | None:
        return self.max_output_tokens

    @classmethod
    def field_names(cls) -> set[str]:
        """The body's keys this model reads, for server.http.fields: the Responses API has its
        own name for max_tokens (max_output_tokens) and no n."""
        return set(cls.model_fields) - {"max_tokens", "n"}
