"""`POST /v1/completions`: the request reduced to its prompt text and settings (no chat
template), then run and answered by server.generation.answer (shapes in
server.completions.output)."""

from __future__ import annotations

from dataclasses import replace

from fastapi import FastAPI, Request
from starlette.responses import Response

from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.server.completions.output import CompletionAnswer, check_completion
from qwen_mtp_desktop.server.generation.answer import Planned, answer, read_body
from qwen_mtp_desktop.server.generation.parsing import parse_body
from qwen_mtp_desktop.server.generation.planning import check_budget_fits, plan_settings
from qwen_mtp_desktop.server.generation.schema import CompletionRequest
from qwen_mtp_desktop.server.generation.state import ServerState
from qwen_mtp_desktop.server.http.request_budget import Reservation, retained_bytes


def add_completion_routes(app: FastAPI, state: ServerState) -> None:
    async def plan(request: Request, reservation: Reservation) -> Planned:
        return await plan_text(state, request, reservation)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await answer(state, request, plan)


async def plan_text(state: ServerState, request: Request, reservation: Reservation) -> Planned:
    """A /v1/completions request reduced to its prompt text and settings."""
    body = parse_body(
        await read_body(request, state.max_body_bytes, reservation), CompletionRequest
    )
    name, model_dir = state.served(body.model)
    limit = state.context_limit(model_dir)
    check_budget_fits(body, limit)
    prompt = check_completion(body, limit)
    loaded = state.service.engine.loaded
    settings, _auto = plan_settings(  # raw text has no conversation for Auto to learn
        body,
        state.defaults,
        mtp_loaded=loaded is not None and loaded.mtp,
        app_decoder=loaded is not None and loaded.decoder == "app",
        model_sampling=state.model_sampling(model_dir),
    )
    settings = replace(settings, raw_text=True)
    reservation.resize(retained_bytes([Message("user", prompt)], settings))
    include_usage = body.stream_options is not None and body.stream_options.include_usage
    shape = CompletionAnswer(
        prompt if body.echo else None, settings.logprobs is not None, include_usage
    )
    return Planned(name, [], settings, False, body.stream, None, shape, raw_prompt=prompt)
