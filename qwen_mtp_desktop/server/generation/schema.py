"""The request bodies the API accepts, as pydantic models (OpenAI's chat-completions and
completions shapes).

Every top-level field is honoured or refused: server.http.fields refuses unknown ones and the
OpenAI fields this server cannot honour with a 400 naming them, and accepts by name the few
that change nothing here (`user`, `metadata`, `store`, ...); planning refuses values it cannot
honour (n > 1, a logit_bias that is not {"token id": -100 to 100}), so a client never gets an
answer to a question it did not ask.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from qwen_mtp_desktop.core.decoding.method import MAX_MTP_DEPTH
from qwen_mtp_desktop.server.generation.logprobs import chat_logprob_count, completion_logprob_count
from qwen_mtp_desktop.server.generation.reasoning import Effort

#: Stop strings per request and characters per stop string (OpenAI allows 4; more is cheap).
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 256
#: Far above any context length: a larger value is a client bug, not a wish.
MAX_TOKENS_LIMIT = 1_000_000
#: Messages per request (each one is rendered by the model's chat template).
MAX_MESSAGES = 10_000
#: Draft tokens per step a request may ask for (the benchmark tries up to 8).
MAX_DRAFT_TOKENS = MAX_MTP_DEPTH
#: A model id (a folder name) and a message's `name` are short; longer is not a name.
MAX_MODEL_CHARS = 1024
MAX_NAME_CHARS = 256


def _encodable(text: str) -> str:
    """A lone surrogate (valid JSON escape, invalid UTF-8) would fail inside the native
    tokenizer; refuse it here with a message instead."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text holds an unpaired UTF-16 surrogate at character {exc.start}"
        ) from None
    return text


Text = Annotated[str, AfterValidator(_encodable)]


class _Strict(BaseModel):
    """Types are not coerced ("1" is not a number) and NaN/Infinity are refused."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore", frozen=True)


class Closed(_Strict):
    """Every key means something: an unknown one is refused, not ignored (a misspelt
    `schema` must not turn structured output off)."""

    model_config = ConfigDict(
        strict=True, allow_inf_nan=False, extra="forbid", frozen=True, populate_by_name=False
    )


class TextPart(Closed):
    type: Literal["text"]
    text: Text


class ImageUrl(Closed):
    url: Text
    #: "low" reads the image at most 512 pixels on its longer side (OpenAI's low detail);
    #: "auto" and "high" at the model's own resolution (server.generation.images).
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(Closed):
    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


#: A function's name as OpenAI allows it (letters, digits, '_' and '-', at most 64), which also
#: keeps it safe inside Qwen3.5's `<function=NAME>` tag.
FUNCTION_NAME = r"^[A-Za-z0-9_-]{1,64}$"
#: Tools per request, tool calls per message, and characters of a call id.
MAX_TOOLS = 128
MAX_TOOL_CALLS = 128
MAX_CALL_ID_CHARS = 256


class CalledFunction(Closed):
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]
    #: A JSON object's text, as OpenAI sends it (checked in server.generation.tools).
    arguments: Text


class MessageToolCall(Closed):
    """An earlier assistant message's call, as a client sends it back."""

    id: Annotated[Text, Field(min_length=1, max_length=MAX_CALL_ID_CHARS)]
    type: Literal["function"]
    function: CalledFunction


class ChatMessage(Closed):
    """A message; every key is honoured or refused
    (server.generation.planning.check_message_fields): `refusal` is the assistant's words, `name`
    only on a tool message (its function), and
    `audio` / `function_call` are refused; `reasoning_content` is accepted and not rendered
    (docs/api-server.md: the engine's messages carry no earlier reasoning, as Qwen3.5's
    template drops it before the latest user message)."""

    #: "developer" is OpenAI's newer name for the system role; "tool" carries a tool's result.
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[ContentPart] | None = None
    name: Annotated[Text, Field(max_length=MAX_NAME_CHARS)] | None = None
    tool_calls: Annotated[list[MessageToolCall], Field(max_length=MAX_TOOL_CALLS)] | None = None
    tool_call_id: Annotated[Text, Field(min_length=1, max_length=MAX_CALL_ID_CHARS)] | None = None
    #: An earlier assistant answer that was a refusal: rendered as that answer's text.
    refusal: Text | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None
    reasoning_content: Text | None = None


class FunctionSpec(Closed):
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]
    description: Text | None = None
    #: A JSON schema of an object (server.generation.tools checks it and compiles it for
    #: tool_choice).
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolSpec(Closed):
    type: Literal["function"]
    function: FunctionSpec


class ChosenFunction(Closed):
    name: Annotated[Text, Field(pattern=FUNCTION_NAME)]


class NamedToolChoice(Closed):
    type: Literal["function"]
    function: ChosenFunction


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class StreamOptions(Closed):
    include_usage: bool = False
    #: OpenAI's padding of stream events against length side channels: not sent here, so
    #: only false (or absent) is accepted (server.generation.planning).
    include_obfuscation: bool | None = None


#: A JSON schema's name (OpenAI: letters, digits, '_' and '-', at most 64 characters).
MAX_SCHEMA_NAME_CHARS = 64


class ChatTemplateKwargs(Closed):
    """vLLM's convention for Qwen's thinking switch: {"enable_thinking": true}; another key
    is refused (the template reads no other, so it would change nothing)."""

    enable_thinking: bool | None = None


class JsonSchemaSpec(Closed):
    """`response_format.json_schema`: the schema the answer must match (always enforced,
    whatever `strict` says: `strict: false` asks for less than this server does)."""

    name: Annotated[Text, Field(min_length=1, max_length=MAX_SCHEMA_NAME_CHARS)] | None = None
    description: Text | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class TextFormat(Closed):
    type: Literal["text"]


class JsonObjectFormat(Closed):
    type: Literal["json_object"]


class JsonSchemaFormat(Closed):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")
]


#: A thinking budget in tokens (0: close the thinking block at once).
ThinkingBudget = Annotated[int, Field(ge=0, le=MAX_TOKENS_LIMIT)]


class GenerationRequest(_Strict):
    """The fields chat completions and completions share: how to decode and how to answer."""

    model: Annotated[Text, Field(max_length=MAX_MODEL_CHARS)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    #: 0 (or absent) decodes greedily, the path MTP speeds up; above 0 samples.
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    stop: Text | Annotated[list[Text], Field(max_length=MAX_STOP_STRINGS)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    n: Annotated[int, Field(ge=1, le=128)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    logit_bias: dict[str, Any] | None = None
    # Extensions (vLLM names where vLLM has one).
    top_k: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    ignore_eos: bool = False
    #: Draft tokens per MTP step for this request (the server's setting otherwise).
    num_assistant_tokens: Annotated[int, Field(ge=1, le=MAX_DRAFT_TOKENS)] | None = None

    @field_validator("stop")
    @classmethod
    def _stop_strings(cls, value: str | list[str] | None) -> str | list[str] | None:
        for stop in [value] if isinstance(value, str) else value or []:
            if not stop:
                raise ValueError("a stop string must not be empty")
            if len(stop) > MAX_STOP_CHARS:
                raise ValueError(f"a stop string may be at most {MAX_STOP_CHARS} characters")
        return value

    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def token_budget(self) -> int | None:
        return self.max_tokens

    def logprob_count(self) -> int | None:
        """Alternatives per token the request asks log-probabilities for; None: none."""
        return None


class ChatCompletionRequest(GenerationRequest):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    max_completion_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: Annotated[list[ToolSpec], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    chat_template_kwargs: ChatTemplateKwargs | None = None
    #: OpenAI's reasoning effort, as Qwen's thinking (server.generation.reasoning).
    reasoning_effort: Effort | None = None
    #: vLLM's: reasoning tokens before the engine closes the thinking block.
    thinking_token_budget: ThinkingBudget | None = None
    #: vLLM's: the last message, an assistant's, is continued (a prefill); a conversation that
    #: ends with one is continued anyway (server.generation.planning.continues_answer).
    continue_final_message: bool | None = None

    def token_budget(self) -> int | None:
        """max_completion_tokens (OpenAI's newer name) wins over max_tokens."""
        return self.max_completion_tokens or self.max_tokens

    def logprob_count(self) -> int | None:
        return chat_logprob_count(self.logprobs, self.top_logprobs)


#: OpenAI's default for a completion's max_tokens (vLLM's too).
COMPLETION_MAX_TOKENS = 16


class CompletionRequest(GenerationRequest):
    """`/v1/completions`: raw text in, raw text out (no chat template)."""

    #: A string, or a list of one string (OpenAI's batch form, one prompt at a time here).
    prompt: Text | Annotated[list[Text], Field(min_length=1, max_length=1)]
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = COMPLETION_MAX_TOKENS
    #: The legacy integer form: alternatives per token (0 to 20).
    logprobs: int | None = None
    echo: bool = False
    suffix: Text | None = None
    best_of: Annotated[int, Field(ge=1, le=128)] | None = None

    def text(self) -> str:
        return self.prompt if isinstance(self.prompt, str) else self.prompt[0]

    def logprob_count(self) -> int | None:
        return completion_logprob_count(self.logprobs)
