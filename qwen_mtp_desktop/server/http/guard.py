"""What every request passes before any route runs: the Host check while bound to loopback
(server.http.hosts), the API key (constant-time compare) and the Content-Length limit."""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from qwen_mtp_desktop.server.http.errors import AUTHENTICATION, ApiError
from qwen_mtp_desktop.server.http.hosts import host_name


class Guard:
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
                return too_large(self._max)
        return None


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"The request body is larger than {limit // (1024 * 1024)} MiB; send smaller images "
        "or a shorter conversation.",
        code="request_too_large",
    )
