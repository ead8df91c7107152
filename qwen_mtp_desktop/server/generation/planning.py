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
from typing import Any

from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.text import TOKENIZER_JSON
from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, Message
from qwen_mtp_desktop.server.generation.images import decode_data_url, low_detail, write_image
from qwen_mtp_desktop.server.generation.reasoning import Thinking, plan_thinking
from qwen_mtp_desktop.server.generation.schema import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    ImagePart,
    TextPart,
)
from qwen_mtp_desktop.server.generation.structured import PARAM as FORMAT_PARAM
from qwen_mtp_desktop.server.generation.structured import constraint_for
from qwen_mtp_desktop.server.generation.tools import (
    ToolPlan,
    call_records,
    check_tools_fit,
    tool_messages_problem,
)
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import ApiError

#: What a sampling request without top_p / top_k gets (docs/api-server.md, "Chat completions").
DEFAULT_TOP_P = 0.9
DEFAULT_TOP_K = 20


def plan_messages(
    request: ChatCompletionRequest, *, vision: bool, image_dir: Callable[[], Path]
) -> list[Message]:
    """The request's messages as the engine's, images written to files under `image_dir()`.
    ApiError 400 for what the engine cannot take."""
    messages: list[Message] = []
    images = 0
    problem = tool_messages_problem(request.messages)
    if problem is not None:
        raise problem
    called: dict[str, str] = {}  # call id -> function, of the assistant messages so far
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        check_message_fields(message, where, called)
        called |= {call.id: call.function.name for call in message.tool_calls or ()}
        role = "system" if message.role == "developer" else message.role
        content = message.content
        paths: list[Path] = []  # the message's images, in order
        if content is None and message.refusal is not None:
            text = ""
        elif content is None:
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
                data, suffix = decode_data_url(part.image_url.url, f"{param}.image_url.url")
                if part.image_url.detail == "low":
                    data, suffix = low_detail(data)
                paths.append(write_image(image_dir(), images, data, suffix))
                images += 1
            text = "\n".join(texts)
        if message.refusal is not None:  # what the assistant said, as its text
            text = f"{text}\n{message.refusal}" if text else message.refusal
        messages.append(
            Message(
                role,
                text,
                paths[0] if paths else None,
                tool_calls=call_records(message),
                tool_call_id=message.tool_call_id,
                more_images=tuple(paths[1:]),
            )
        )
    return messages


def check_message_fields(message: ChatMessage, where: str, called: dict[str, str]) -> None:
    """ApiError 400 for a message field this server cannot honour: `audio` and the deprecated
    `function_call`, a `name` other than a tool message's function (Qwen3.5's template renders
    no participant names), `refusal` or `reasoning_content` on another role than assistant.
    `called`: the functions of the calls made so far, by call id."""
    if message.audio is not None:
        raise _message_error(
            "an assistant's earlier audio answer cannot be read: this server answers in "
            "text; send that answer's transcript as content instead",
            f"{where}.audio",
        )
    if message.function_call is not None:
        raise _message_error(
            "the deprecated function_call is not supported; send the call in tool_calls "
            '([{"id", "type": "function", "function": {"name", "arguments"}}])',
            f"{where}.function_call",
        )
    if message.role != "assistant":
        for name in ("refusal", "reasoning_content"):
            if getattr(message, name) is not None:
                raise _message_error(
                    f"{name} belongs to assistant messages only", f"{where}.{name}"
                )
    if message.name is None:
        return
    if message.role != "tool":
        raise _message_error(
            "name is not supported: the model's chat template renders no participant "
            "names, so it would change nothing; put the name in the content if it matters",
            f"{where}.name",
        )
    function = called.get(message.tool_call_id or "")
    if function is not None and message.name != function:
        raise _message_error(
            f"name is {message.name!r}, but the call this tool message answers is to {function!r}",
            f"{where}.name",
        )


def _message_error(text: str, param: str) -> ApiError:
    where = param.rsplit(".", 1)[0]
    return ApiError(400, f"{where}: {text}.", code="unsupported_parameter", param=param)


def check_stream_options(request: ChatCompletionRequest | CompletionRequest) -> None:
    """stream_options only with stream (as OpenAI and vLLM answer), and no obfuscation."""
    options = request.stream_options
    if options is None:
        return
    if not request.stream:
        raise ApiError(
            400,
            "stream_options is only allowed with stream: true; leave it out, or stream.",
            code="invalid_value",
            param="stream_options",
        )
    if options.include_obfuscation:
        raise ApiError(
            400,
            "stream_options.include_obfuscation: this server does not pad stream events (it "
            "answers on this computer or behind your own TLS proxy); send false or leave it "
            "out.",
            code="unsupported_value",
            param="stream_options.include_obfuscation",
        )


def plan_settings(
    request: ChatCompletionRequest | CompletionRequest,
    defaults: TurnDefaults,
    *,
    mtp_loaded: bool,
    app_decoder: bool = True,
    tools: ToolPlan | None = None,
    model_sampling: Sampling | None = None,
) -> tuple[GenerationSettings, bool]:
    """(the engine's settings, whether Auto may choose the method): the one place the API's
    fields become a `DecodingMethod`. MTP runs at the request's or the server's depth, greedy
    (temperature 0 or absent) or sampled; Auto chooses only for greedy, unconstrained
    requests (it learns from greedy turns). `app_decoder`: whether the app's decoder runs
    the model's text turns; without it (openvino-genai's MTP decodes greedily) a sampled
    request samples with plain decoding. `model_sampling`: the model's own defaults
    (generation_config.json), for the sampling fields the request leaves out."""
    check_stream_options(request)
    if request.n is not None and request.n > 1:
        raise ApiError(
            400,
            f"n is {request.n}, but this server answers with one choice per request (n at most "
            "1): the engine decodes one answer at a time. Send n separate requests instead "
            "(with a temperature above 0 and no seed, each samples its own answer).",
            code="unsupported_value",
            param="n",
        )
    chat = request if isinstance(request, ChatCompletionRequest) else None
    logprobs = request.logprob_count()
    if logprobs is not None and not app_decoder:
        raise ApiError(
            400,
            "logprobs are not available for this model: they come from the app's decoder, "
            "which cannot run it. Ask without logprobs.",
            code="logprobs_unsupported",
            param="logprobs",
        )
    if request.logit_bias and not app_decoder:
        raise ApiError(
            400,
            "logit_bias is not available for this model: the app's decoder applies it, and "
            "it cannot run this model. Send the request without logit_bias.",
            code="unsupported_parameter",
            param="logit_bias",
        )
    constraint = constraint_for(chat.response_format) if chat is not None else None
    depth = request.num_assistant_tokens or defaults.depth
    thinking = Thinking(on=False)
    kwargs = chat.chat_template_kwargs if chat is not None else None
    prefill = chat is not None and continues_answer(chat)
    if chat is not None:
        thinking = plan_thinking(
            defaults.thinking and not prefill,
            enable=kwargs.enable_thinking if kwargs is not None else None,
            effort=chat.reasoning_effort,
            budget=chat.thinking_token_budget,
        )
    if prefill and thinking.on:
        raise ApiError(
            400,
            "The conversation ends with an assistant message, which is continued (a prefill): "
            "the model goes on writing its answer, so it does not think first. Leave out the "
            "request to think, or end with a user message.",
            code="unsupported_value",
            param="reasoning_effort" if chat and chat.reasoning_effort else "chat_template_kwargs",
        )
    if tools is not None:
        # With thinking on, a constraint (a forced call, a schema) holds from the answer's
        # first token, after the thinking (core.engine.generation).
        check_tools_fit(tools, constraint, thinking=thinking.on, by_default=kwargs is None)
        constraint = tools.constraint
        if prefill and constraint is not None and constraint.lazy:
            # The answer begun was written outside the grammar, which reads an answer from
            # its start: the continuation's calls are parsed, not constrained.
            constraint = None
    if prefill and constraint is not None:
        raise ApiError(
            400,
            "The conversation ends with an assistant message, which is continued (a prefill); "
            "a grammar (response_format, a forced tool call) holds from an answer's first "
            "token, so it cannot take over in the middle of one. Send one or the other.",
            code="unsupported_value",
            param="tool_choice" if tools is not None and tools.forced else "response_format",
        )
    sampling = sampling_for(request, model_sampling)
    method = DecodingMethod.mtp(1 if depth == "auto" else depth, sampling)
    if not sampling.greedy and not app_decoder:
        method = DecodingMethod.plain(sampling)
    settings = GenerationSettings(
        max_new_tokens=request.token_budget() or defaults.max_tokens,
        method=method.with_constraint(constraint),
        stop_strings=request.stop_strings(),
        thinking=thinking.on,
        thinking_budget=thinking.budget,
        ignore_eos=request.ignore_eos,
        tools_json=tools.tools_json if tools is not None else "",
        logprobs=logprobs,
        continue_final=prefill,
    )
    try:
        settings.check()
    except EngineError as exc:
        raise ApiError(400, str(exc), code="invalid_value") from exc
    # Auto decides sampled requests too, by their temperature band's own measurements.
    # tool_choice auto's lazy grammar leaves the answer free until a call opens: Auto decides
    # as without it (core.auto.turns keeps the grammar on the method it picks).
    auto = depth == "auto" and mtp_loaded and (constraint is None or constraint.lazy)
    return settings, auto


def continues_answer(request: ChatCompletionRequest) -> bool:
    """Whether the answer continues the conversation's last message (an assistant prefill,
    vLLM's `continue_final_message`, which is what a conversation ending with an assistant
    message asks for); ApiError 400 when the request says otherwise or the message is not text
    the model can go on writing."""
    where = f"messages[{len(request.messages) - 1}]"
    last = request.messages[-1]
    ends_with_answer = last.role == "assistant"
    asked = request.continue_final_message
    if ends_with_answer and last.tool_calls:
        if asked:
            raise ApiError(
                400,
                f"{where} is continued (a prefill), so it must be text: an answer with tool "
                "calls is complete; send the tools' results after it.",
                code="invalid_value",
                param=f"{where}.tool_calls",
            )
        return False  # not an answer begun: the conversation is refused where it ends
    if asked and not ends_with_answer:
        raise ApiError(
            400,
            "continue_final_message continues the last message, which must be an assistant's "
            f"(the answer begun); {where} is a {last.role} message.",
            code="invalid_value",
            param="continue_final_message",
        )
    if asked is False and ends_with_answer:
        raise ApiError(
            400,
            f"The conversation ends with an assistant message ({where}), which this server "
            "continues; send continue_final_message true (or leave it out), or end with a "
            "user message for a new answer.",
            code="invalid_value",
            param="continue_final_message",
        )
    return ends_with_answer


def sampling_for(
    request: ChatCompletionRequest | CompletionRequest, model: Sampling | None
) -> Sampling:
    """The request's sampling: each field it gives, else the model's default (`model`), else
    the server's (greedy; a sampling request gets top-p 0.9 and top-k 20)."""
    base = model or Sampling()

    def pick(given: float | None, default: float) -> float:
        return given if given is not None else default

    sampling = Sampling(
        repetition_penalty=pick(request.repetition_penalty, base.repetition_penalty),
        presence_penalty=pick(request.presence_penalty, base.presence_penalty),
        frequency_penalty=pick(request.frequency_penalty, base.frequency_penalty),
        logit_bias=logit_bias(request.logit_bias),
    )
    temperature = pick(request.temperature, base.temperature)
    if not temperature:
        return sampling
    samples = not base.greedy  # the model's top-p / top-k go with its own sampling
    return replace(
        sampling,
        temperature=temperature,
        top_p=pick(request.top_p, base.top_p if samples else DEFAULT_TOP_P),
        top_k=int(pick(request.top_k, base.top_k if samples else DEFAULT_TOP_K)),
        seed=request.seed,
    )


def logit_bias(raw: dict[str, Any] | None) -> tuple[tuple[int, float], ...]:
    """OpenAI's {"token id": bias} as Sampling's ascending pairs; ApiError 400 naming what is
    wrong (ids beyond the model's vocabulary are refused by the engine)."""
    pairs = []
    for key, value in (raw or {}).items():
        shown = key if len(key) <= 20 else key[:17] + "..."
        if not (key.isascii() and key.isdigit() and len(key) <= 9):
            raise ApiError(
                400,
                f"logit_bias: {shown!r} is not a token id (a whole number as a string).",
                code="invalid_value",
                param="logit_bias",
            )
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ApiError(
                400,
                f"logit_bias: the bias of token {key} must be a number from -100 to 100.",
                code="invalid_value",
                param="logit_bias",
            )
        pairs.append((int(key), float(value)))
    bias = tuple(sorted(pairs))
    problems = Sampling(logit_bias=bias).problems()
    if problems:
        raise ApiError(400, f"logit_bias: {problems[0]}", code="invalid_value", param="logit_bias")
    return bias


def check_budget_fits(
    request: ChatCompletionRequest | CompletionRequest, context_tokens: int | None
) -> None:
    """ApiError 400 when the token budget alone reaches the model's context length."""
    budget = request.token_budget()
    if context_tokens is None or budget is None or budget < context_tokens:
        return
    chat = isinstance(request, ChatCompletionRequest) and request.max_completion_tokens
    field = "max_completion_tokens" if chat else "max_tokens"
    raise ApiError(
        400,
        f"{field} is {budget:,}, but this model reads at most {context_tokens:,} tokens "
        "(its context length), prompt included; ask for fewer.",
        code="context_length_exceeded",
        param=field,
    )


def check_format_fits(request: ChatCompletionRequest, model_dir: Path) -> None:
    """Refuse, before the request waits, a response_format or a forced tool call (tool_choice
    "required" or a named function) the engine cannot enforce for it: on a turn with images
    (openvino-genai's pipeline reads images and enforces no grammar) or for a model folder
    without the tokenizer.json the grammar engine reads; and logprobs or a logit bias on a
    turn with images (the app's decoder, which applies them, reads none)."""
    if request.logit_bias and has_images(request):
        raise ApiError(
            400,
            "logit_bias is not available for requests with images: the app's decoder applies "
            "it, and it reads text only. Send the request without the image, or without "
            "logit_bias.",
            code="unsupported_parameter",
            param="logit_bias",
        )
    if request.logprob_count() is not None and has_images(request):
        raise ApiError(
            400,
            "logprobs are not available for requests with images: they come from the app's "
            "decoder, which reads text only. Send the request without the image, or without "
            "logprobs.",
            code="logprobs_unsupported",
            param="logprobs",
        )
    if constraint_for_kind(request):
        what, param = "response_format (structured output)", FORMAT_PARAM
    elif request.tools and forces_tool_call(request):
        what, param = "tool_choice (a forced tool call)", "tool_choice"
    else:
        return
    if has_images(request):
        raise ApiError(
            400,
            f"{what} is not available for requests with images: the engine enforces a "
            "grammar only on text turns. Send the request without the image, or without "
            f"{param}.",
            code="unsupported_value",
            param=param,
        )
    if not (model_dir / TOKENIZER_JSON.what).is_file():
        raise ApiError(
            400,
            f"{what} needs the model's {TOKENIZER_JSON.what}, which this model folder lacks; "
            f"re-export the model, or send the request without {param}.",
            code="unsupported_value",
            param=param,
        )


def forces_tool_call(request: ChatCompletionRequest) -> bool:
    choice = request.tool_choice
    return choice is not None and choice not in ("auto", "none")


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
