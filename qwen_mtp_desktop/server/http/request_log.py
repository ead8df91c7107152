"""One record per answered HTTP request, for the app's "Recent requests" list (issue 28).

A record says when, which endpoint, the status, the answer's tokens (of every generating
endpoint, streamed or not; a stream the client left is logged with the tokens produced until
then) and how long the response took to its last byte: no prompt, answer, key or client
address, so it can be shown and kept without exposing what was asked (docs/user-guide.md,
"Where things are kept": prompts reach no log unless debug logging is on, and this list is not
one of the places they go).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from qwen_mtp_desktop.core.hosting.protocol import ApiRequest

log = logging.getLogger(__name__)

#: Set by a route in the request's scope state: the answer's completion tokens so far.
TOKENS_KEY = "completion_tokens"


def set_tokens(scope_state: dict[str, object], tokens: int) -> None:
    scope_state[TOKENS_KEY] = tokens


class RequestLog:
    """ASGI middleware: calls `on_request` with an ApiRequest once each response has ended
    (streams included), or was cut off (status 499: the client left before it began)."""

    def __init__(self, app: ASGIApp, *, on_request: Callable[[ApiRequest], None]) -> None:
        self.app = app
        self._on_request = on_request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        at = time.time()
        status = [499]
        reported = [False]

        def report() -> None:
            if reported[0]:
                return
            reported[0] = True
            state = scope.get("state")
            tokens = state.get(TOKENS_KEY) if isinstance(state, dict) else None
            record = ApiRequest(
                at=at,
                method=str(scope.get("method", "")),
                path=str(scope.get("path", ""))[:200],
                status=status[0],
                tokens=tokens if isinstance(tokens, int) else None,
                duration_s=time.monotonic() - started,
            )
            try:
                self._on_request(record)
            except Exception:  # a log that cannot be sent must never break a response
                log.exception("the request log could not be passed on")

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                report()

        try:
            await self.app(scope, receive, recording_send)
        finally:
            report()
