"""`POST /v1/chat/completions`: the request planned (`plan_chat`: the model, its context, the
tools, the settings, the messages with their images, the memory it holds while it waits), then
run and answered by server.generation.answer, whole or streamed (server.chat.output). /v1/responses
plans its translated request here too (server.responses.route)."""

from __future__ import annotations

import shutil
from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import Response

from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.server.chat.output import ChatAnswer
from qwen_mtp_desktop.server.examples import demo_single_turn
from qwen_mtp_desktop.server.generation.answer import Planned, answer, in_thread, read_body
from qwen_mtp_desktop.server.generation.parsing import parse_request
from qwen_mtp_desktop.server.generation.planning import (
    check_budget_fits,
    check_format_fits,
    has_images,
    plan_messages,
    plan_settings,
)
from qwen_mtp_desktop.server.generation.schema import ChatCompletionRequest
from qwen_mtp_desktop.server.generation.state import ServerState
from qwen_mtp_desktop.server.generation.tools import plan_tools
from qwen_mtp_desktop.server.generation.turns import image_folder
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.request_budget import Reservation, check_text_fits, retained_bytes

#: The file whose presence makes an export vision-capable (as the chat panel checks).
VISION_ENCODER = "openvino_vision_embeddings_model.xml"


def add_chat_routes(app: FastAPI, state: ServerState) -> None:
    async def plan(request: Request, reservation: Reservation) -> Planned:
        body = parse_request(await read_body(request, state.max_body_bytes, reservation))
        return await plan_chat(state, body, reservation)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await answer(state, request, plan)


async def plan_chat(
    state: ServerState,
    body: ChatCompletionRequest,
    reservation: Reservation,
    *,
    max_tool_calls: int | None = None,
) -> Planned:
    """The request reduced to what the engine needs; the body is let go here, so a waiting
    request holds its messages' text and settings only (and counts that). `max_tool_calls`:
    the Responses API's, which chat completions do not have."""
    name, model_dir = state.served(body.model)
    limit = state.context_limit(model_dir)
    check_budget_fits(body, limit)
    loaded = state.service.engine.loaded
    check_format_fits(body, model_dir)
    tools = plan_tools(body, max_calls=max_tool_calls)
    settings, use_auto = plan_settings(
        body,
        state.defaults,
        mtp_loaded=loaded is not None and loaded.mtp,
        app_decoder=loaded is not None and loaded.decoder == "app",
        tools=tools,
        model_sampling=state.model_sampling(model_dir),
    )
    folder: list[Path] = []

    def image_dir() -> Path:
        if not folder:
            folder.append(image_folder())
        return folder[0]

    vision = (model_dir / VISION_ENCODER).is_file()

    def plan() -> list[Message]:
        try:
            messages = plan_messages(body, vision=vision, image_dir=image_dir)
            check_text_fits(messages, limit)
            return messages
        except BaseException:
            if folder:
                shutil.rmtree(folder[0], ignore_errors=True)
            raise

    # Decoding and checking images is CPU work: off the event loop.
    messages = await in_thread(plan) if has_images(body) else plan()
    if settings.continue_final:  # the demo model reads the answer begun too
        head, notice = demo_single_turn(model_dir, messages[:-1])
        messages = [*head, messages[-1]]
    else:
        messages, notice = demo_single_turn(model_dir, messages)  # as the app's chat does
    try:
        reservation.resize(retained_bytes(messages, settings))
    except ApiError:
        if folder:
            shutil.rmtree(folder[0], ignore_errors=True)
        raise
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    shape = ChatAnswer(tools, settings.logprobs is not None, include_usage, notice)
    return Planned(
        name,
        messages,
        settings,
        use_auto,
        body.stream,
        folder[0] if folder else None,
        shape,
        notice,
    )
