"""One POST request's way from body to answer, shared by the generating routes
(server.chat.route, completions_route, responses_routes): the JSON check, the body read against
its size limit and the memory budget, the route's planner (the request reduced to `Planned`,
what the engine needs, with its endpoint's `AnswerShape`), then the turn run on its own thread
(`turns.TurnJob`) and answered whole or streamed in that shape. A client that disconnects cancels
its turn, waiting or running. This module knows no endpoint: each route brings its shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from fastapi import Request
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response, StreamingResponse

from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.server.examples import SINGLE_TURN_HEADER
from qwen_mtp_desktop.server.generation.sse import stopping
from qwen_mtp_desktop.server.generation.state import ServerState
from qwen_mtp_desktop.server.generation.turns import (
    Chunks,
    Event,
    Failed,
    Finished,
    Gone,
    Started,
    TurnJob,
)
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.guard import too_large
from qwen_mtp_desktop.server.http.request_budget import Reservation
from qwen_mtp_desktop.server.http.request_log import set_tokens

T = TypeVar("T")


class AnswerShape(Protocol):
    """How an endpoint answers (chat completions, completions, responses): its ids, its whole
    body and its stream, from the turn's events."""

    def new_id(self) -> str: ...

    def body(
        self, request_id: str, name: str, final: Finished, queue_wait_s: float
    ) -> dict[str, Any]: ...

    def stream(
        self,
        events: asyncio.Queue[Event],
        request_id: str,
        name: str,
        queue_wait_s: float,
        done: Callable[[], None],
    ) -> AsyncIterator[bytes]: ...


@dataclass(frozen=True)
class Planned:
    """A request as it waits for the engine: what the engine needs, and how to answer."""

    name: str
    messages: list[Message]
    settings: GenerationSettings
    use_auto: bool
    stream: bool
    image_dir: Path | None
    shape: AnswerShape
    #: Set when the demo model read only the latest message (a response header says so).
    notice: str | None = None
    #: /v1/completions: the prompt as it is (no chat template).
    raw_prompt: str | None = None


#: A route's planner: the request (its body read with `read_body`) reduced to `Planned`.
Planner = Callable[[Request, Reservation], Awaitable[Planned]]


class ClientLeftError(Exception):
    """The client went away (or was timed out) while its body arrived: nobody to answer."""


async def read_body(request: Request, limit: int, reservation: Reservation) -> bytes:
    """The body, counted while it arrives (a chunked upload has no Content-Length) against
    `limit` and against the server's memory budget."""
    chunks = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            reservation.grow(len(chunk))
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientLeftError from None
    return b"".join(chunks)


async def answer(state: ServerState, request: Request, planner: Planner) -> Response:
    """The response to a generating POST: planned by `planner`, then run (`_run`)."""
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ApiError(
            415,
            "Send the body as JSON with the header 'Content-Type: application/json'.",
            code="unsupported_media_type",
        )
    reservation = state.budget.reservation()
    try:
        planned = await planner(request, reservation)
        return await _run(state, request, planned, reservation)
    except BaseException:
        reservation.release()
        raise


async def _run(
    state: ServerState, request: Request, planned: Planned, reservation: Reservation
) -> Response:
    loop = asyncio.get_running_loop()
    service = state.service
    activity = state.activity
    name = planned.name
    events: asyncio.Queue[Event] = asyncio.Queue()
    scope_state = request.scope.setdefault("state", {})
    produced = [0]

    def emit(event: Event) -> None:
        # Counted here, on the job's thread: a client that went away reads no events. The
        # request log's tokens grow with each step, so a stream the client leaves before its
        # end is logged with what it was sent; the finished answer's count replaces them.
        if isinstance(event, Chunks):
            produced[0] += sum(len(chunk.token_ids) for chunk in event.chunks)
            set_tokens(scope_state, produced[0])
        elif isinstance(event, Finished):
            stats = event.stats
            activity.finished(request_id, stats.finish_reason, stats.generated_tokens)
            set_tokens(scope_state, stats.generated_tokens)
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

    request_id = planned.shape.new_id()
    ahead = service.waiting + (1 if service.busy else 0)
    job = TurnJob(
        service,
        planned.messages,
        planned.settings,
        emit,
        auto=state.auto if planned.use_auto else None,
        stream=planned.stream,
        stream_interval_s=state.stream_interval_s,
        image_dir=planned.image_dir,
        raw_prompt=planned.raw_prompt,
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
            raise stopping()
        body = planned.shape.body(request_id, name, final, first.queue_wait_s)
        return JSONResponse(body, headers=headers)
    stream = planned.shape.stream(events, request_id, name, first.queue_wait_s, done)
    headers |= {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream, media_type="text/event-stream", headers=headers)


async def _watch_disconnect(request: Request, job: TurnJob) -> None:
    """Cancel the job when the client goes away (uvicorn reports it as http.disconnect)."""
    with contextlib.suppress(Exception):
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                job.cancel()
                return


async def in_thread(work: Callable[[], T]) -> T:
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
