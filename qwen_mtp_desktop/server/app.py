"""The OpenAI-compatible HTTP API over an `EngineService` (FastAPI on Starlette).

`create_app(service)` builds the ASGI app; `runner` serves it with uvicorn. The routes:

- `GET /v1/models`, `GET /v1/models/{id}`: the loaded model;
- `POST /v1/chat/completions`: streaming (SSE) and not; the `mtp` object beside `usage`;
- `GET /health`: liveness and the queue, without the API key (it tells nothing private).

Requests take turns on the engine (`EngineService`'s fair queue); each turn runs on a thread of
its own (`turns.TurnJob`), so the event loop stays free to accept, refuse and stream. A client
that disconnects cancels its turn, waiting or running.

Protection before a body is read: the API key (constant-time compare), a Host check while bound
to loopback (a web page that rebinds a DNS name to 127.0.0.1 cannot reach the model; the
header is parsed strictly, server.hosts), and the body size (Content-Length first, then
counted while reading). A POST must say Content-Type application/json, which a web page cannot
send cross-site without a CORS preflight that this server never grants. Slow or half-sent
requests are timed out before they get here (server.connections); the memory requests hold
while they arrive and wait is bounded (server.request_budget).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import shutil
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from qwen_mtp_desktop.core.context_limit import context_length
from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.core.hosting.protocol import ApiRequest
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.core.model_library import is_demo_model
from qwen_mtp_desktop.core.safe_files import json_value_count
from qwen_mtp_desktop.server.errors import (
    AUTHENTICATION,
    NOT_FOUND,
    SERVER_ERROR,
    ApiError,
    error_body,
)
from qwen_mtp_desktop.server.examples import SINGLE_TURN_HEADER, demo_single_turn, model_id_for
from qwen_mtp_desktop.server.hosts import host_name
from qwen_mtp_desktop.server.planning import (
    check_format_fits,
    has_images,
    plan_messages,
    plan_settings,
)
from qwen_mtp_desktop.server.request_budget import (
    DEFAULT_BUDGET_BYTES,
    MAX_JSON_VALUES,
    MemoryBudget,
    Reservation,
    check_text_fits,
    retained_bytes,
)
from qwen_mtp_desktop.server.request_log import RequestLog, set_tokens
from qwen_mtp_desktop.server.schema import ChatCompletionRequest
from qwen_mtp_desktop.server.turns import (
    FINISH_REASONS,
    AutoState,
    Chunks,
    Event,
    Failed,
    Finished,
    Gone,
    Started,
    TurnDefaults,
    TurnJob,
    image_folder,
    mtp_stats,
    usage,
)

log = logging.getLogger(__name__)

#: A request body larger than this is refused (413) before it is read; image data URLs are
#: the only large thing a request holds.
DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
#: Streamed text batching (seconds; core.hosting.service.coalesced). 0 sends each step as it
#: comes, with any steps that piled up meanwhile in one event: the lowest latency, one event
#: per step as OpenAI clients expect, and fewer events whenever the client falls behind.
DEFAULT_STREAM_INTERVAL_S = 0.0
#: The file whose presence makes an export vision-capable (as the chat panel checks).
VISION_ENCODER = "openvino_vision_embeddings_model.xml"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

T = TypeVar("T")


@dataclass
class Activity:
    """What the server has done, for `/health` and for tests (thread-safe)."""

    completed: int = 0
    cancelled: int = 0
    failed: int = 0
    rejected: int = 0
    #: (request id, finish reason, completion tokens) of the latest requests.
    recent: deque[tuple[str, str, int]] = field(default_factory=lambda: deque(maxlen=64))
    jobs: set[TurnJob] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self, request_id: str, reason: str, tokens: int) -> None:
        with self.lock:
            if reason == "cancelled":
                self.cancelled += 1
            else:
                self.completed += 1
            self.recent.append((request_id, reason, tokens))

    def count(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {
                "completed": self.completed,
                "cancelled": self.cancelled,
                "failed": self.failed,
                "rejected": self.rejected,
            }

    def cancel_all(self) -> None:
        """Stop every running and waiting turn (the server is stopping)."""
        with self.lock:
            jobs = list(self.jobs)
        for job in jobs:
            job.cancel()


class _Guard:
    """Host check, API key and the Content-Length limit, before any route runs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None,
        max_body_bytes: int,
        allowed_hosts: Sequence[str] | None,
    ) -> None:
        self.app = app
        self._key = api_key.encode() if api_key else None
        self._max = max_body_bytes
        self._hosts = {h.lower() for h in allowed_hosts} if allowed_hosts else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> ApiError | None:
        headers = Headers(scope=scope)
        hosts = headers.getlist("host")
        if self._hosts is not None and (len(hosts) != 1 or host_name(hosts[0]) not in self._hosts):
            return ApiError(
                403,
                "This server answers only requests addressed to localhost or 127.0.0.1 "
                "(the Host header names another host).",
                type="permission_error",
                code="invalid_host",
            )
        if self._key is not None and scope["path"] != "/health":
            scheme, _, token = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), self._key
            ):
                what = "wrong" if token.strip() else "missing"
                return ApiError(
                    401,
                    f"The API key is {what}: send it as the header "
                    "'Authorization: Bearer YOUR_KEY'.",
                    type=AUTHENTICATION,
                    code="invalid_api_key",
                    headers={"WWW-Authenticate": "Bearer"},
                )
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit() or len(length) > 18:
                return ApiError(400, "The Content-Length header is not a number.")
            if int(length) > self._max:
                return _too_large(self._max)
        return None


def _too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is larger than {limit // (1024 * 1024)} MiB; send smaller images "
        "or a shorter conversation.",
        code="request_too_large",
    )


def _validation_message(exc: ValidationError | RequestValidationError) -> tuple[str, str | None]:
    """The first few validation problems in one line, and the first one's field."""
    errors = exc.errors()
    parts = []
    for error in errors[:3]:
        where = _dotted(error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg", ""))
    more = f" (and {len(errors) - 3} more problems)" if len(errors) > 3 else ""
    param = _dotted(errors[0].get("loc", ())) if errors else None
    return "Invalid request: " + "; ".join(parts) + more, param or None


def _dotted(loc: Sequence[Any]) -> str:
    text = ""
    for item in loc:
        if item == "body":
            continue
        if isinstance(item, int):
            text += f"[{item}]"
        elif str(item) in ("str", "list[...]", "function-after[_encodable(), str]"):
            continue  # pydantic's union branch names, not fields
        else:
            text += f".{item}" if text else str(item)
    return text


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_request(raw: bytes) -> ChatCompletionRequest:
    """The body as a request; ApiError 400 for anything that is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not UTF-8 text.", code="invalid_json") from None
    values = json_value_count(text)
    if values > MAX_JSON_VALUES:  # before the parser makes a Python object of each
        raise ApiError(
            400,
            f"The request body's JSON holds about {values:,} values; a chat request needs far "
            f"fewer (at most {MAX_JSON_VALUES:,} are accepted).",
            code="invalid_json",
        )
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ApiError(
            400, "The request body's JSON is nested too deeply.", code="invalid_json"
        ) from None
    except ValueError as exc:  # JSONDecodeError, huge integers, NaN
        raise ApiError(
            400, f"The request body is not valid JSON: {exc}.", code="invalid_json"
        ) from None
    if not isinstance(payload, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    try:
        return ChatCompletionRequest.model_validate(payload)
    except ValidationError as exc:
        message, param = _validation_message(exc)
        raise ApiError(400, message, code="invalid_value", param=param) from None
    except RecursionError:
        raise ApiError(
            400, "The request body's JSON is nested too deeply.", code="invalid_json"
        ) from None


class _ClientLeftError(Exception):
    """The client went away (or was timed out) while its body arrived: nobody to answer."""


async def _read_body(request: Request, limit: int, reservation: Reservation) -> bytes:
    """The body, counted while it arrives (a chunked upload has no Content-Length) against
    `limit` and against the server's memory budget."""
    chunks = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            reservation.grow(len(chunk))
            chunks.append(chunk)
    except ClientDisconnect:
        raise _ClientLeftError from None
    return b"".join(chunks)


def _sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


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
    defaults = defaults or TurnDefaults()
    activity = Activity()
    budget = MemoryBudget(memory_budget_bytes)
    auto = AutoState()
    created = int(time.time())
    app = FastAPI(
        title="Qwen MTP Desktop local API",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.activity = activity
    app.add_middleware(
        _Guard, api_key=api_key, max_body_bytes=max_body_bytes, allowed_hosts=allowed_hosts
    )
    if on_request is not None:  # outermost: refused requests are listed too
        app.add_middleware(RequestLog, on_request=on_request)

    @functools.cache
    def context_limit(model_dir: Path) -> int | None:
        return context_length(model_dir)

    def current_model() -> tuple[str, Path] | None:
        loaded = service.engine.loaded
        if loaded is None:
            return None
        return (model_id or model_id_for(loaded.model_dir)), loaded.model_dir

    def model_object(name: str) -> dict[str, Any]:
        loaded = service.engine.loaded
        return {
            "id": name,
            "object": "model",
            "created": created,
            "owned_by": "local",
            "mtp": loaded.mtp if loaded is not None else False,
            "device": loaded.device if loaded is not None else None,
            # The demo model reads only the latest message (examples.demo_single_turn).
            "single_turn": loaded is not None and is_demo_model(loaded.model_dir),
        }

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(_ClientLeftError)
    async def _client_left(request: Request, exc: _ClientLeftError) -> Response:
        return Response(status_code=499)  # never sent: the connection is gone

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        kind = NOT_FOUND if exc.status_code == 404 else "invalid_request_error"
        message = (
            f"There is no {request.method} {request.url.path} here; this server offers "
            "GET /v1/models and POST /v1/chat/completions."
            if exc.status_code in (404, 405)
            else str(exc.detail)
        )
        return JSONResponse(
            error_body(message, type=kind, code=str(exc.status_code)),
            status_code=exc.status_code,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
        message, param = _validation_message(exc)
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

    @app.get("/health")
    async def health() -> dict[str, Any]:
        current = current_model()
        return {
            "status": "ok",
            "model": current[0] if current else None,
            "busy": service.busy,
            "waiting": service.waiting,
            **activity.snapshot(),
        }

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        current = current_model()
        return {"object": "list", "data": [model_object(current[0])] if current else []}

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str) -> dict[str, Any]:
        current = current_model()
        if current is None or name != current[0]:
            raise _unknown_model(name, current)
        return model_object(name)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        content_type = request.headers.get("content-type", "")
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise ApiError(
                415,
                "Send the body as JSON with the header 'Content-Type: application/json'.",
                code="unsupported_media_type",
            )
        reservation = budget.reservation()
        try:
            planned = await _plan(request, reservation)
            return await _run(request, planned, reservation)
        except BaseException:
            reservation.release()
            raise

    async def _plan(request: Request, reservation: Reservation) -> _Planned:
        """The request reduced to what the engine needs; the body is let go here, so a waiting
        request holds its messages' text and settings only (and counts that)."""
        body = parse_request(await _read_body(request, max_body_bytes, reservation))
        current = current_model()
        if current is None:
            raise ApiError(503, "No model is loaded.", type=SERVER_ERROR, code="model_not_loaded")
        name, model_dir = current
        if body.model != name:
            raise _unknown_model(body.model, current)
        limit = context_limit(model_dir)
        budget_tokens = body.token_budget()
        if limit is not None and budget_tokens is not None and budget_tokens >= limit:
            field = "max_completion_tokens" if body.max_completion_tokens else "max_tokens"
            raise ApiError(
                400,
                f"{field} is {budget_tokens:,}, but this model reads at most {limit:,} tokens "
                "(its context length), prompt included; ask for fewer.",
                code="context_length_exceeded",
                param=field,
            )
        loaded = service.engine.loaded
        check_format_fits(body, model_dir)
        settings, use_auto = plan_settings(
            body,
            defaults,
            mtp_loaded=loaded is not None and loaded.mtp,
            app_decoder=loaded is not None and loaded.decoder == "fast",
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
        messages = await _in_thread(plan) if has_images(body) else plan()
        messages, notice = demo_single_turn(model_dir, messages)  # as the app's chat does
        try:
            reservation.resize(retained_bytes(messages, settings))
        except ApiError:
            if folder:
                shutil.rmtree(folder[0], ignore_errors=True)
            raise
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return _Planned(
            name,
            messages,
            settings,
            use_auto,
            body.stream,
            include_usage,
            folder[0] if folder else None,
            notice,
        )

    async def _run(request: Request, planned: _Planned, reservation: Reservation) -> Response:
        loop = asyncio.get_running_loop()
        name = planned.name
        events: asyncio.Queue[Event] = asyncio.Queue()

        def emit(event: Event) -> None:
            # Counted here, on the job's thread: a client that went away reads no events.
            if isinstance(event, Finished):
                stats = event.stats
                activity.finished(request_id, stats.finish_reason, stats.generated_tokens)
                set_tokens(request.scope.setdefault("state", {}), stats.generated_tokens)
            elif isinstance(event, Gone):
                activity.finished(request_id, "cancelled", 0)
            elif isinstance(event, Failed):
                activity.count("rejected" if event.error.status == 429 else "failed")
            if isinstance(event, Finished | Failed | Gone):
                reservation.release()  # its messages are let go with the job
                with activity.lock:  # even when no response ever ran to its end
                    activity.jobs.discard(job)
            try:
                loop.call_soon_threadsafe(events.put_nowait, event)
            except RuntimeError:  # the loop is gone: the server stopped
                job.cancel()

        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        ahead = service.waiting + (1 if service.busy else 0)
        job = TurnJob(
            service,
            planned.messages,
            planned.settings,
            emit,
            auto=auto if planned.use_auto else None,
            stream=planned.stream,
            stream_interval_s=stream_interval_s,
            image_dir=planned.image_dir,
        )
        with activity.lock:
            activity.jobs.add(job)
        job.start()
        watcher = asyncio.create_task(_watch_disconnect(request, job))

        def done() -> None:
            reservation.release()
            watcher.cancel()
            job.cancel()  # no-op when it finished
            with activity.lock:
                activity.jobs.discard(job)

        try:
            first = await events.get()
        except BaseException:
            done()
            raise
        if isinstance(first, Failed | Gone):
            done()
            if isinstance(first, Gone):
                return Response(status_code=499)
            raise first.error
        assert isinstance(first, Started)
        headers = {
            "X-Request-Id": request_id,
            "X-Queue-Position": str(ahead),
            "X-Queue-Wait-Ms": str(round(first.queue_wait_s * 1000)),
        }
        if planned.notice is not None:
            headers[SINGLE_TURN_HEADER] = "1"
        if not planned.stream:
            try:
                final = await events.get()
            finally:
                done()
            if isinstance(final, Failed):
                raise final.error
            assert isinstance(final, Finished)
            if final.stats.finish_reason == "cancelled":  # the server is stopping
                raise _stopping()
            completion = _completion(request_id, name, final, first.queue_wait_s)
            if planned.notice is not None:
                completion["notice"] = planned.notice
            return JSONResponse(completion, headers=headers)
        stream = _stream(events, planned, request_id, name, first.queue_wait_s, done)
        headers |= {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    async def _stream(
        events: asyncio.Queue[Event],
        planned: _Planned,
        request_id: str,
        name: str,
        queue_wait_s: float,
        done: Callable[[], None],
    ) -> AsyncIterator[bytes]:
        include_usage = planned.include_usage
        created_at = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            data: dict[str, Any] = {
                "id": request_id,
                "object": "chat.completion.chunk",
                "created": created_at,
                "model": name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if include_usage:
                data["usage"] = None
            return data

        try:
            yield _sse(chunk({"role": "assistant", "content": ""}))
            pending: Event | None = None
            while True:
                event = pending or await events.get()
                pending = None
                if isinstance(event, Chunks):
                    steps = list(event.chunks)
                    while not events.empty():  # the client was slower: send them as one
                        queued = events.get_nowait()
                        if not isinstance(queued, Chunks):
                            pending = queued
                            break
                        steps += queued.chunks
                    delta: dict[str, Any] = {}
                    reasoning = "".join(c.reasoning for c in steps)
                    answer = "".join(c.answer for c in steps)
                    if reasoning:
                        delta["reasoning_content"] = reasoning
                    if answer:
                        delta["content"] = answer
                    if delta:
                        yield _sse(chunk(delta))
                elif isinstance(event, Finished):
                    stats = event.stats
                    if stats.finish_reason == "cancelled":  # the server is stopping
                        yield _sse(_stopping().body())
                        yield b"data: [DONE]\n\n"
                        return
                    mtp = mtp_stats(stats, event.record, queue_wait_s=queue_wait_s)
                    last = chunk({}, FINISH_REASONS[stats.finish_reason])
                    last["mtp"] = mtp
                    if planned.notice is not None:
                        last["notice"] = planned.notice
                    yield _sse(last)
                    if include_usage:
                        final = chunk({})
                        final["choices"] = []
                        final["usage"] = usage(stats)
                        final["mtp"] = mtp
                        yield _sse(final)
                    yield b"data: [DONE]\n\n"
                    return
                elif isinstance(event, Failed):
                    yield _sse(event.error.body())
                    yield b"data: [DONE]\n\n"
                    return
        finally:
            done()

    return app


@dataclass(frozen=True)
class _Planned:
    """A request as it waits for the engine: what the engine needs, and no more."""

    name: str
    messages: list[Message]
    settings: GenerationSettings
    use_auto: bool
    stream: bool
    include_usage: bool
    image_dir: Path | None
    #: Said with the answer when the demo model read only the latest message.
    notice: str | None = None


async def _watch_disconnect(request: Request, job: TurnJob) -> None:
    """Cancel the job when the client goes away (uvicorn reports it as http.disconnect)."""
    with contextlib.suppress(Exception):
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                job.cancel()
                return


def _stopping() -> ApiError:
    return ApiError(
        503,
        "The server stopped before the answer was complete.",
        type=SERVER_ERROR,
        code="server_stopping",
    )


def _unknown_model(name: str, current: tuple[str, Path] | None) -> ApiError:
    shown = name if len(name) <= 80 else name[:77] + "..."
    served = f"this server serves {current[0]!r}" if current else "no model is loaded"
    return ApiError(
        404,
        f"The model {shown!r} does not exist here; {served} (see GET /v1/models).",
        type=NOT_FOUND,
        code="model_not_found",
        param="model",
    )


def _completion(request_id: str, name: str, final: Finished, queue_wait_s: float) -> dict[str, Any]:
    stats = final.stats
    message: dict[str, Any] = {"role": "assistant", "content": final.answer}
    if final.reasoning:
        message["reasoning_content"] = final.reasoning
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": name,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": FINISH_REASONS[stats.finish_reason],
            }
        ],
        "usage": usage(stats),
        "mtp": mtp_stats(stats, final.record, queue_wait_s=queue_wait_s),
    }


async def _in_thread(work: Callable[[], T]) -> T:
    """`work()` on a daemon thread of its own (a pool's threads would outlive the server
    and keep a stopping process waiting)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result = work()
        except BaseException as exc:
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=run, name="api-prepare", daemon=True).start()
    return await future
