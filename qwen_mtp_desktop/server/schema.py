"""The request bodies the API accepts, as pydantic models (OpenAI's chat-completions shape).

Fields OpenAI clients commonly send but that change nothing here (`user`, `metadata`,
`store`, ...) are ignored; fields whose meaning this server cannot honour (n > 1, tools,
logprobs) are refused with a message rather than silently dropped, so a client
never gets an answer to a question it did not ask.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from qwen_mtp_desktop.core.decoding.method import MAX_MTP_DEPTH

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


class TextPart(_Strict):
    type: Literal["text"]
    text: Text


class ImageUrl(_Strict):
    url: Text
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ChatMessage(_Strict):
    #: "developer" is OpenAI's newer name for the system role.
    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[ContentPart] | None = None
    name: Annotated[Text, Field(max_length=MAX_NAME_CHARS)] | None = None
    tool_calls: list[Any] | None = None


class StreamOptions(_Strict):
    include_usage: bool = False


class ChatTemplateKwargs(_Strict):
    """vLLM's convention for Qwen's thinking switch: {"enable_thinking": true}."""

    enable_thinking: bool | None = None


#: A JSON schema's name (OpenAI: letters, digits, '_' and '-', at most 64 characters).
MAX_SCHEMA_NAME_CHARS = 64


class _Closed(_Strict):
    """Every key means something: an unknown one is refused, not ignored (a misspelt
    `schema` must not turn structured output off)."""

    model_config = ConfigDict(
        strict=True, allow_inf_nan=False, extra="forbid", frozen=True, populate_by_name=False
    )


class JsonSchemaSpec(_Closed):
    """`response_format.json_schema`: the schema the answer must match (always enforced,
    whatever `strict` says: `strict: false` asks for less than this server does)."""

    name: Annotated[Text, Field(min_length=1, max_length=MAX_SCHEMA_NAME_CHARS)] | None = None
    description: Text | None = None
    schema_: dict[str, Any] = Field(alias="schema")
    strict: bool | None = None


class TextFormat(_Closed):
    type: Literal["text"]


class JsonObjectFormat(_Closed):
    type: Literal["json_object"]


class JsonSchemaFormat(_Closed):
    type: Literal["json_schema"]
    json_schema: JsonSchemaSpec


ResponseFormat = Annotated[
    TextFormat | JsonObjectFormat | JsonSchemaFormat, Field(discriminator="type")
]


class ChatCompletionRequest(_Strict):
    model: Annotated[Text, Field(max_length=MAX_MODEL_CHARS)]
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_MESSAGES)]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1, le=MAX_TOKENS_LIMIT)] | None = None
    #: 0 (or absent) decodes greedily, the path MTP speeds up; above 0 samples.
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    stop: Text | Annotated[list[Text], Field(max_length=MAX_STOP_STRINGS)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    n: Annotated[int, Field(ge=1, le=128)] | None = None
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logit_bias: dict[str, Any] | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    response_format: ResponseFormat | None = None
    # Extensions (vLLM names where vLLM has one).
    top_k: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    repetition_penalty: Annotated[float, Field(gt=0, le=10)] | None = None
    ignore_eos: bool = False
    chat_template_kwargs: ChatTemplateKwargs | None = None
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
        """max_completion_tokens (OpenAI's newer name) wins over max_tokens."""
        return self.max_completion_tokens or self.max_tokens
