"""The OpenAI-compatible HTTP API over an `EngineService` (FastAPI on Starlette).

`create_app(service)` builds the ASGI app: its shared state (server.generation.state.ServerState),
its middleware and exception handlers, and its routes, whose handlers live in their own modules;
`runner` serves it with uvicorn. The routes:

- `GET /v1/models`, `GET /v1/models/{id}`, `GET /health` (server.model_routes): the loaded
  model; liveness and the queue, without the API key (it tells nothing private);
- `POST /v1/chat/completions` (server.chat.route): streaming (SSE) and not; the `mtp` object
  beside `usage`;
- `POST /v1/completions` (server.completions.route) and `POST /v1/responses` (a chat request in
  the Responses API's words), with `GET` / `DELETE /v1/responses/{id}` (server.responses.route).

Requests take turns on the engine (`EngineService`'s fair queue); each turn runs on a thread of
its own (`turns.TurnJob`, started by server.generation.answer), so the event loop stays free to
accept, refuse and stream. A client that disconnects cancels its turn, waiting or running.

Protection before a body is read: the API key (constant-time compare), a Host check while bound
to loopback (a web page that rebinds a DNS name to 127.0.0.1 cannot reach the model; the
header is parsed strictly, server.http.hosts), and the body size (Content-Length first, then
counted while reading). A POST must say Content-Type application/json, which a web page cannot
send cross-site without a CORS preflight that this server never grants. Slow or half-sent
requests are timed out before they get here (server.http.connections); the memory requests hold
while they arrive and wait is bounded (server.http.request_budget).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from qwen_mtp_desktop.core.hosting.protocol import ApiRequest
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.server.chat.route import add_chat_routes
from qwen_mtp_desktop.server.completions.route import add_completion_routes
from qwen_mtp_desktop.server.generation.answer import ClientLeftError
from qwen_mtp_desktop.server.generation.parsing import parse_request, validation_message
from qwen_mtp_desktop.server.generation.state import Activity, ServerState
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import NOT_FOUND, SERVER_ERROR, ApiError, error_body
from qwen_mtp_desktop.server.http.guard import Guard
from qwen_mtp_desktop.server.http.request_budget import DEFAULT_BUDGET_BYTES, MemoryBudget
from qwen_mtp_desktop.server.http.request_log import RequestLog
from qwen_mtp_desktop.server.model_routes import add_model_routes
from qwen_mtp_desktop.server.responses.route import add_responses_routes

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_STREAM_INTERVAL_S",
    "LOOPBACK_NAMES",
    "Activity",
    "create_app",
    "parse_request",
]

log = logging.getLogger(__name__)

#: A request body larger than this is refused (413) before it is read; image data URLs are
#: the only large thing a request holds.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: Streamed text batching (seconds; core.hosting.service.coalesced). 0 sends each step as it
#: comes, with any steps that piled up meanwhile in one event: the lowest latency, one event
#: per step as OpenAI clients expect, and fewer events whenever the client falls behind.
DEFAULT_STREAM_INTERVAL_S = 0.0
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def create_app(
    service: EngineService,
    model_id: str | None = None,
    *,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    defaults: TurnDefaults | None = None,
    stream_interval_s: float = DEFAULT_STREAM_INTERVAL_S,
    allowed_hosts: Sequence[str] | None = None,
    memory_budget_bytes: int = DEFAULT_BUDGET_BYTES,
    on_request: Callable[[ApiRequest], None] | None = None,
) -> FastAPI:
    """The API over `service`, whose engine the caller loads (and may reload: the model id
    follows the loaded folder unless `model_id` is given). `allowed_hosts`: the Host names
    accepted (the runner passes the loopback names when bound to loopback; None = any).
    `memory_budget_bytes`: what request bodies and waiting requests may hold together."""
    state = ServerState(
        service,
        model_id,
        defaults or TurnDefaults(),
        max_body_bytes,
        stream_interval_s,
        MemoryBudget(memory_budget_bytes),
    )
    app = FastAPI(
        title="Qwen MTP Desktop local API",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.activity = state.activity
    app.add_middleware(
        Guard, api_key=api_key, max_body_bytes=max_body_bytes, allowed_hosts=allowed_hosts
    )
    if on_request is not None:  # outermost: refused requests are listed too
        app.add_middleware(RequestLog, on_request=on_request)
    _add_error_handlers(app)
    add_model_routes(app, state)
    add_chat_routes(app, state)
    add_completion_routes(app, state)
    add_responses_routes(app, state)
    return app


def _add_error_handlers(app: FastAPI) -> None:
    """Every failure as an OpenAI-style error (server.http.errors), never a framework's page."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(ClientLeftError)
    async def _client_left(request: Request, exc: ClientLeftError) -> Response:
        return Response(status_code=499)  # never sent: the connection is gone

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kind = NOT_FOUND if exc.status_code == 404 else "invalid_request_error"
        message = (
            f"There is no {request.method} {request.url.path} here; this server offers "
            "GET /v1/models, POST /v1/chat/completions, POST /v1/completions and "
            "POST /v1/responses."
            if exc.status_code in (404, 405)
            else str(exc.detail)
        )
        return JSONResponse(
            error_body(message, type=kind, code=str(exc.status_code)),
            status_code=exc.status_code,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        message, param = validation_message(exc)
        return ApiError(400, message, code="invalid_value", param=param).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.error("API request failed", exc_info=exc)
        return JSONResponse(
            error_body(
                f"Internal error ({type(exc).__name__}); details are in the app's log.",
                type=SERVER_ERROR,
                code="internal_error",
            ),
            status_code=500,
        )
