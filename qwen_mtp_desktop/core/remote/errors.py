"""What goes wrong talking to a remote server, as one `RemoteError` each that says what happened
and what to do: HTTP statuses (with the server's own message, cleaned), failed connections and
broken streams, replies the app cannot read. The server's words are untrusted: every piece shown
is made one printable line and bounded (`clean_text`)."""

from __future__ import annotations

import socket
import ssl

import httpx

from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.core.files.safe_files import parse_json_text
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint

MAX_ERROR_CHARS = 300
#: An error reply's body is read up to this much (its message is cut to MAX_ERROR_CHARS).
MAX_ERROR_BODY_BYTES = 64 * 1024


class RemoteError(EngineError):
    """A remote server could not answer; the message says why, the fix what to do."""

    code = "REMOTE"


def clean_text(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A server's words made safe to show: one line, printable, bounded."""
    flat = "".join(c if c.isprintable() else " " for c in text).strip()
    return flat[:limit] + ("…" if len(flat) > limit else "")


def server_message(body: object) -> tuple[str, str]:
    """(message, code) of an OpenAI-style error body, empty when it has none."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code")
        return (
            clean_text(message) if isinstance(message, str) else "",
            code if isinstance(code, str) else "",
        )
    if isinstance(error, str):
        return clean_text(error), ""
    return "", ""


def http_error(status: int, text: str, endpoint: RemoteEndpoint) -> RemoteError:
    """The error for an HTTP status, with the server's own message when it sent one."""
    try:
        message, code = server_message(parse_json_text(text[:MAX_ERROR_BODY_BYTES]))
    except (ValueError, RecursionError):
        message, code = clean_text(text) if text.strip() else "", ""
    said = f" The server said: {message}" if message else ""
    if status == 401:
        return RemoteError(
            f"The server refused the API key (HTTP 401).{said}",
            "Check the key: edit the remote server in the model picker (or pass --api-key).",
            code="REMOTE_UNAUTHORIZED",
        )
    if status == 403:
        return RemoteError(
            f"The server refused access (HTTP 403).{said}",
            "Check that the key may use this model, or ask the server's administrator.",
            code="REMOTE_FORBIDDEN",
        )
    if status == 404:
        if code == "model_not_found" or "model" in message.lower():
            return RemoteError(
                f"The server has no model named '{clean_text(endpoint.model, 100)}' "
                f"(HTTP 404).{said}",
                "Choose one of the models the server lists (Test connection shows them).",
                code="REMOTE_MODEL_NOT_FOUND",
            )
        return RemoteError(
            f"No OpenAI-compatible API answers at {endpoint.base_url} (HTTP 404).",
            "Check the address's path: /v1 for most servers, /v3 for OpenVINO Model Server.",
            code="REMOTE_NOT_FOUND",
        )
    if status == 429:
        return RemoteError(
            f"The server is busy (HTTP 429, too many requests).{said}",
            "Wait a moment, then send again or regenerate.",
            code="REMOTE_BUSY",
        )
    if status == 503:
        return RemoteError(
            f"The server is unavailable for now (HTTP 503).{said}",
            "It may be loading or restarting its model; try again in a moment.",
            code="REMOTE_UNAVAILABLE",
        )
    if 400 <= status < 500:
        return RemoteError(
            f"The server refused the request (HTTP {status}).{said}",
            "Check the chat's options (some servers refuse options they do not support).",
            code="REMOTE_REFUSED",
        )
    return RemoteError(
        f"The server failed (HTTP {status}).{said}",
        "Try again; if it keeps failing, check the server's log.",
        code="REMOTE_SERVER_ERROR",
    )


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def transport_error(
    exc: httpx.HTTPError,
    endpoint: RemoteEndpoint,
    started: bool,
    *,
    connect_s: float,
    read_s: float,
) -> RemoteError:
    """The error for a failed connection or a broken stream (`started`: text had arrived);
    `connect_s` and `read_s` are the time limits the request had, which the message names."""
    url = endpoint.base_url
    kept = "The partial answer is kept; regenerate to try again. " if started else ""
    if isinstance(exc, httpx.ConnectTimeout):
        return RemoteError(
            f"The server at {url} did not answer within {connect_s:.0f} s.",
            "Check the address, that the server is running and that this computer can reach "
            "it (network, firewall, VPN).",
            code="REMOTE_TIMEOUT",
        )
    if isinstance(exc, httpx.TimeoutException):
        return RemoteError(
            f"The server at {url} stopped sending for {read_s:.0f} s.",
            kept + "The server may be overloaded or stuck.",
            code="REMOTE_TIMEOUT",
        )
    text = str(exc)
    if _caused_by(exc, ssl.SSLError) or "SSL" in text or "CERTIFICATE" in text.upper():
        return RemoteError(
            f"The secure (TLS) connection to {url} failed: {clean_text(text, 160)}.",
            "Check http:// versus https:// in the address, and that the server's certificate "
            "is valid for this host name.",
            code="REMOTE_TLS",
        )
    if isinstance(exc, httpx.ConnectError):
        if _caused_by(exc, ConnectionRefusedError) or "refused" in text.lower():
            return RemoteError(
                f"Nothing answers at {url} (connection refused).",
                "Start the server, or check the host and port in the address.",
                code="REMOTE_UNREACHABLE",
            )
        if _caused_by(exc, socket.gaierror) or "name" in text.lower():
            return RemoteError(
                f"The host name in {url} could not be found.",
                "Check the spelling of the address and your network connection.",
                code="REMOTE_UNREACHABLE",
            )
        return RemoteError(
            f"Could not connect to {url}: {clean_text(text, 160)}.",
            "Check the address and your network connection.",
            code="REMOTE_UNREACHABLE",
        )
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return RemoteError(
            "The connection to the server closed before the answer was complete.",
            kept + "The server may have stopped; check it.",
            code="REMOTE_DISCONNECTED",
        )
    return RemoteError(
        f"The request to {url} failed: {clean_text(text or type(exc).__name__, 160)}.",
        kept + "Check the server and try again.",
        code="REMOTE_FAILED",
    )


def malformed(what: str, started: bool) -> RemoteError:
    kept = "The partial answer is kept. " if started else ""
    return RemoteError(
        f"The server sent a reply the app cannot read ({what}).",
        kept + "Check that the address is an OpenAI-compatible chat API.",
        code="REMOTE_BAD_REPLY",
    )
