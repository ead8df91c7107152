"""`POST /v1/responses`: a request in the Responses API's words, translated into a chat request
(server.responses.input), planned as one (server.chat.route.plan_chat), run by
server.generation.answer and answered as a Response (server.responses.output); its errors in the
Responses API's words.

`GET /v1/responses/{id}` and `DELETE /v1/responses/{id}`: a stored response
(server.responses.store) as it was answered, and forgetting it, as OpenAI's retrieve and
delete do. An id the store does not hold (never stored, `store: false`, let go as the store
filled, or the server restarted) is a 404 `not_found_error`."""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from qwen_mtp_desktop.server.chat.output import ChatAnswer
from qwen_mtp_desktop.server.chat.route import plan_chat
from qwen_mtp_desktop.server.generation.answer import Planned, answer, read_body
from qwen_mtp_desktop.server.generation.parsing import parse_body
from qwen_mtp_desktop.server.generation.state import ServerState
from qwen_mtp_desktop.server.http.errors import NOT_FOUND, ApiError
from qwen_mtp_desktop.server.http.request_budget import Reservation
from qwen_mtp_desktop.server.responses.input import Translation, translate
from qwen_mtp_desktop.server.responses.output import ResponsesPlan
from qwen_mtp_desktop.server.responses.schema import ResponsesRequest
from qwen_mtp_desktop.server.responses.store import ResponseStore


def add_responses_routes(app: FastAPI, state: ServerState) -> None:
    stored = ResponseStore()  # this app's responses, for previous_response_id and GET

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        into = Translation()  # its errors in the Responses API's words
        try:
            planner = functools.partial(plan_responses, state, stored, into=into)
            return await answer(state, request, planner)
        except ApiError as exc:
            raise into.error(exc) from None

    add_stored_routes(app, stored)


async def plan_responses(
    state: ServerState,
    stored: ResponseStore,
    request: Request,
    reservation: Reservation,
    into: Translation,
) -> Planned:
    """A /v1/responses request as a chat request (server.responses.input)."""
    body = parse_body(await read_body(request, state.max_body_bytes, reservation), ResponsesRequest)
    state.served(body.model)
    translate(body, stored, into)
    assert into.chat is not None
    planned = await plan_chat(state, into.chat, reservation, max_tool_calls=body.max_tool_calls)
    chat = planned.shape
    assert isinstance(chat, ChatAnswer)  # plan_chat's shape: its tools are the request's
    shaped = ResponsesPlan.of(body, planned.settings, into.conversation, stored, chat.tools)
    return replace(planned, shape=shaped)


def add_stored_routes(app: FastAPI, store: ResponseStore) -> None:
    @app.get("/v1/responses/{response_id}")
    async def get_response(response_id: str) -> dict[str, Any]:
        stored = store.get(response_id)
        if stored is None:
            raise _missing(response_id)
        return stored.response

    @app.delete("/v1/responses/{response_id}")
    async def delete_response(response_id: str) -> dict[str, Any]:
        if not store.delete(response_id):
            raise _missing(response_id)
        return {"id": response_id, "object": "response.deleted", "deleted": True}


def _missing(response_id: str) -> ApiError:
    shown = response_id if len(response_id) <= 80 else response_id[:77] + "..."
    return ApiError(
        404,
        f"No response with id {shown!r} is stored here (responses are kept in memory, the "
        "latest few hundred, until the server stops; one sent with store: false is not).",
        type=NOT_FOUND,
        code="response_not_found",
        param="response_id",
    )
