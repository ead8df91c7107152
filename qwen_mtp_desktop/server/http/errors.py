"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`, with the HTTP
status that says what kind of failure it was. Every failure the server answers goes through
here, so a client never sees a traceback or a framework's own error format."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from qwen_mtp_desktop.core.engine import EngineError

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
NOT_FOUND = "not_found_error"
RATE_LIMIT = "rate_limit_error"
SERVER_ERROR = "server_error"

#: Seconds a client should wait before retrying when the queue is full.
RETRY_AFTER_S = 1


class ApiError(Exception):
    """A failure the server answers with `status` and an OpenAI-style error object."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, code=self.code, param=self.param)

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def error_body(
    message: str, *, type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


#: Engine error codes that describe the request (400), by the code the client sees.
_REQUEST_CODES = {
    "CONTEXT_TOO_LONG": "context_length_exceeded",
    #: A prompt whose prefill would not fit in the memory free now: clients that shorten the
    #: conversation on context_length_exceeded (agent frameworks) do the right thing.
    "NOT_ENOUGH_MEMORY": "context_length_exceeded",
    "BAD_CONVERSATION": "invalid_messages",
    "BAD_SETTINGS": "invalid_value",
    "CHAT_TEMPLATE": "invalid_messages",
    "IMAGE": "invalid_image",
    "MTP_NEEDS_GREEDY": "invalid_value",
    "LOOKUP_NEEDS_GREEDY": "invalid_value",
    #: Structured output on a turn the app's decoder does not run (images, some models).
    "CONSTRAINT_UNSUPPORTED": "unsupported_value",
    #: Log-probabilities on a turn the app's decoder does not run.
    "LOGPROBS_UNSUPPORTED": "logprobs_unsupported",
    "LOGIT_BIAS_UNSUPPORTED": "logit_bias_unsupported",
    "BAD_LOGIT_BIAS": "invalid_value",
}
#: The request field an engine error code is about, where the client code does not say it.
_PARAMS = {"BAD_LOGIT_BIAS": "logit_bias"}


def from_engine_error(exc: EngineError) -> ApiError:
    """The HTTP answer for an engine failure: the request's fault (400), a full queue (429),
    no model or an engine process that died and is being restarted (503), or the engine's own
    failure (500); the message is the engine's, which is written for users."""
    message = str(exc)
    if exc.code == "BUSY":
        return ApiError(
            429,
            message,
            type=RATE_LIMIT,
            code="queue_full",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    if exc.code in _REQUEST_CODES:
        param = {
            "invalid_value": None,
            "unsupported_value": "response_format",
            "logprobs_unsupported": "logprobs",
            "logit_bias_unsupported": "logit_bias",
        }.get(_REQUEST_CODES[exc.code], "messages")
        param = _PARAMS.get(exc.code, param)
        return ApiError(400, message, code=_REQUEST_CODES[exc.code], param=param)
    if exc.code == "NOT_LOADED":
        return ApiError(503, message, type=SERVER_ERROR, code="model_not_loaded")
    if exc.code == "ENGINE_STOPPED":  # the engine process died; it is restarted (engine_client)
        return ApiError(
            503,
            message,
            type=SERVER_ERROR,
            code="engine_stopped",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return ApiError(500, message, type=SERVER_ERROR, code=exc.code.lower())
