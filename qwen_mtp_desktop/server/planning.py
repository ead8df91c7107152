"""What the engine is asked: the one place an API request's fields become the engine's messages
and `GenerationSettings` (its `DecodingMethod`: plain or MTP at a depth, greedy or sampled,
penalised, constrained to a JSON schema), or a 400 that names the field that cannot be honoured
and says why. MTP stays on for every kind of request: the app's decoder samples exactly with
it (speculative sampling) and masks drafts with the grammar.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.text import TOKENIZER_JSON
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, Message
from qwen_mtp_desktop.server.errors import ApiError
from qwen_mtp_desktop.server.images import decode_data_url, write_image
from qwen_mtp_desktop.server.schema import ChatCompletionRequest, ImagePart, TextPart
from qwen_mtp_desktop.server.structured import PARAM as FORMAT_PARAM
from qwen_mtp_desktop.server.structured import constraint_for
from qwen_mtp_desktop.server.turns import TurnDefaults

#: What a sampling request without top_p / top_k gets (README, "Local API server").
DEFAULT_TOP_P = 0.9
DEFAULT_TOP_K = 20


def plan_messages(
    request: ChatCompletionRequest, *, vision: bool, image_dir: Callable[[], Path]
) -> list[Message]:
    """The request's messages as the engine's, images written to files under `image_dir()`.
    ApiError 400 for what the engine cannot take."""
    messages: list[Message] = []
    images = 0
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        if message.tool_calls:
            raise ApiError(400, "Tool calls are not supported.", code="unsupported", param=where)
        role = "system" if message.role == "developer" else message.role
        content = message.content
        image: Path | None = None
        if content is None:
            if role != "assistant":
                raise ApiError(400, f"{where} has no content.", param=f"{where}.content")
            text = ""
        elif isinstance(content, str):
            text = content
        else:
            texts = []
            for part_index, part in enumerate(content):
                param = f"{where}.content[{part_index}]"
                if isinstance(part, TextPart):
                    texts.append(part.text)
                    continue
                assert isinstance(part, ImagePart)
                if not vision:
                    raise ApiError(
                        400,
                        "This model has no vision encoder, so it cannot read images; send text "
                        "only, or serve a vision-capable export.",
                        code="images_not_supported",
                        param=param,
                    )
                if role != "user":
                    raise ApiError(400, "Only user messages may hold images.", param=param)
                if image is not None:
                    raise ApiError(
                        400,
                        "At most one image per message is supported; send the others in "
                        "messages of their own.",
                        code="too_many_images",
                        param=param,
                    )
                data, suffix = decode_data_url(part.image_url.url, f"{param}.image_url.url")
                image = write_image(image_dir(), images, data, suffix)
                images += 1
            text = "\n".join(texts)
        messages.append(Message(role, text, image))
    return messages


def plan_settings(
    request: ChatCompletionRequest,
    defaults: TurnDefaults,
    *,
    mtp_loaded: bool,
    app_decoder: bool = True,
) -> tuple[GenerationSettings, bool]:
    """(the engine's settings, whether Auto may choose the method): the one place the API's
    fields become a `DecodingMethod`. MTP runs at the request's or the server's depth, greedy
    (temperature 0 or absent) or sampled; Auto chooses only for greedy, unconstrained
    requests (it learns from greedy turns). `app_decoder`: whether the app's decoder runs
    the model's text turns; without it (openvino-genai's MTP decodes greedily) a sampled
    request samples with plain decoding."""
    if request.n is not None and request.n > 1:
        raise ApiError(
            400,
            "n > 1 is not supported: the engine decodes one answer at a time. Send n separate "
            "requests instead.",
            code="unsupported_value",
            param="n",
        )
    if request.tools:
        raise ApiError(400, "Tools (function calling) are not supported.", param="tools")
    if request.logprobs:
        raise ApiError(400, "logprobs are not supported.", param="logprobs")
    if request.top_logprobs:
        raise ApiError(
            400, "top_logprobs is not supported (logprobs are not).", param="top_logprobs"
        )
    if request.logit_bias:
        raise ApiError(400, "logit_bias is not supported.", param="logit_bias")
    constraint = constraint_for(request.response_format)
    depth = request.num_assistant_tokens or defaults.depth
    thinking = defaults.thinking
    kwargs = request.chat_template_kwargs
    if kwargs is not None and kwargs.enable_thinking is not None:
        thinking = kwargs.enable_thinking
    if constraint is not None and thinking:
        # The grammar holds from the answer's first token: the reasoning would be forced into
        # JSON and the answer left empty.
        by_default = kwargs is None or kwargs.enable_thinking is None
        why = " (this server thinks by default)" if by_default else ""
        raise ApiError(
            400,
            "response_format (structured output) cannot be combined with thinking: the schema "
            "would constrain the reasoning too. Send chat_template_kwargs "
            f'{{"enable_thinking": false}} with it{why}.',
            code="unsupported_value",
            param=FORMAT_PARAM,
        )
    sampling = Sampling(
        repetition_penalty=request.repetition_penalty or 1.0,
        presence_penalty=request.presence_penalty or 0.0,
        frequency_penalty=request.frequency_penalty or 0.0,
    )
    if request.temperature:
        sampling = replace(
            sampling,
            temperature=request.temperature,
            top_p=request.top_p if request.top_p is not None else DEFAULT_TOP_P,
            top_k=request.top_k if request.top_k is not None else DEFAULT_TOP_K,
            seed=request.seed,
        )
    method = DecodingMethod.mtp(1 if depth == "auto" else depth, sampling)
    if not sampling.greedy and not app_decoder:
        method = DecodingMethod.plain(sampling)
    settings = GenerationSettings(
        max_new_tokens=request.token_budget() or defaults.max_tokens,
        method=method.with_constraint(constraint),
        stop_strings=request.stop_strings(),
        thinking=thinking,
        ignore_eos=request.ignore_eos,
    )
    try:
        settings.validate()
    except EngineError as exc:
        raise ApiError(400, str(exc), code="invalid_value") from exc
    # Auto decides sampled requests too, by their temperature band's own measurements.
    auto = depth == "auto" and mtp_loaded and constraint is None
    return settings, auto


def check_format_fits(request: ChatCompletionRequest, model_dir: Path) -> None:
    """Refuse, before the request waits, a response_format the engine cannot enforce for
    it: on a turn with images (openvino-genai's pipeline reads images and enforces no
    grammar) or for a model folder without the tokenizer.json the grammar engine reads."""
    if not constraint_for_kind(request):
        return
    if has_images(request):
        raise ApiError(
            400,
            "response_format (structured output) is not available for requests with images: "
            "the engine enforces a schema only on text turns. Send the request without the "
            "image, or without response_format.",
            code="unsupported_value",
            param=FORMAT_PARAM,
        )
    if not (model_dir / TOKENIZER_JSON.what).is_file():
        raise ApiError(
            400,
            f"response_format (structured output) needs the model's {TOKENIZER_JSON.what}, which "
            "this model folder lacks; re-export the model, or send the request without "
            "response_format.",
            code="unsupported_value",
            param=FORMAT_PARAM,
        )


def constraint_for_kind(request: ChatCompletionRequest) -> bool:
    fmt = request.response_format
    return fmt is not None and fmt.type != "text"


def has_images(request: ChatCompletionRequest) -> bool:
    return any(
        isinstance(part, ImagePart)
        for message in request.messages
        if isinstance(message.content, list)
        for part in message.content
    )
