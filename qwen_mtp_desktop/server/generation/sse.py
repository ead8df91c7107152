"""Server-Sent Events in OpenAI's framing: `data: {json}` per event, `data: [DONE]` last.

`openai_stream` runs the frame that `/v1/chat/completions` and `/v1/completions` streams share
(an opening, each batch of steps, the finish; a stopping server or a failure as an error event);
each endpoint says only how its chunks look (server.chat.output, server.completions.output).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from qwen_mtp_desktop.core.engine import StepChunk
from qwen_mtp_desktop.server.generation.turns import Chunks, Event, Failed, Finished, stream_events
from qwen_mtp_desktop.server.http.errors import SERVER_ERROR, ApiError

DONE = b"data: [DONE]\n\n"


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


def stopping() -> ApiError:
    """What a client is told when the server stops before its answer is complete."""
    return ApiError(
        503,
        "The server stopped before the answer was complete.",
        type=SERVER_ERROR,
        code="server_stopping",
    )


async def openai_stream(
    events: asyncio.Queue[Event],
    done: Callable[[], None],
    *,
    opening: Iterable[bytes],
    steps: Callable[[list[StepChunk]], Iterable[bytes]],
    finish: Callable[[Finished], Iterable[bytes]],
) -> AsyncIterator[bytes]:
    """A started job's events as SSE: `opening`, `steps(batch)` for each batch ready, then
    `finish(final)` and `[DONE]`. `done()` runs however the stream ends."""
    try:
        for piece in opening:
            yield piece
        async for event in stream_events(events):
            if isinstance(event, Chunks):
                for piece in steps(event.chunks):
                    yield piece
            elif isinstance(event, Finished):
                if event.stats.finish_reason == "cancelled":  # the server is stopping
                    yield sse(stopping().body())
                else:
                    for piece in finish(event):
                        yield piece
                yield DONE
                return
            elif isinstance(event, Failed):
                yield sse(event.error.body())
                yield DONE
                return
    finally:
        done()
