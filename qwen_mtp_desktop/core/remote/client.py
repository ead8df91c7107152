"""A streaming chat client for OpenAI-compatible servers, with the iteration surface of a local
`Generation` (`next_chunk`, `next_chunks`, `cancel`, `run_to_end`, `close`, `stats`, `answer`),
so the chat panel and `generate` consume a remote answer exactly like a local one.

HTTP is httpx (already the `openai` client's transport); the stream is read here rather than
through the `openai` client so that cancelling can shut the socket down at once (the client
hides it) and so each failure becomes one plain `RemoteError` that says what to do.
Server-Sent Events are parsed by `core.remote.sse` (tested with generated input), which
bounds every line, event and body while it arrives; the answer's text reaches its consumer
through a bounded `core.remote.inbox.Inbox`, so a server that floods can neither fill memory
nor delay a Stop, and an answer far longer than the `max_tokens` asked for is cut with an
error.

Tools (a chat's MCP tools): `tools_json` goes out as OpenAI `tools` (a forced call as a named
`tool_choice`), earlier calls and their results as assistant `tool_calls` and `tool` messages;
the server's streamed `tool_calls` deltas are joined by index (each call's name and id from its
first delta, its arguments from every one), checked (a JSON object's text each, at most
MAX_TOOL_CALLS) and handed over in the answer's stats as `remote["tool_calls"]`, which the
chat's tool loop reads as it reads a local model's calls (core.chat.tools.read_calls).

Timing is the client's own: time to first token is from sending the request to the first text,
tokens per second counts the tokens after the first (the server's `usage`) over the time
between the first and the last text, so both include the network. Acceptance figures come only
from the server's `mtp` extension object (our `serve` sends it; OVMS, vLLM, llama.cpp do not).
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from qwen_mtp_desktop.core.decoding.method import DEFAULT_NGRAM, PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import FinishReason, GenerationStats
from qwen_mtp_desktop.core.engine import (
    AnswerStream,
    GenerationSettings,
    Message,
    StepChunk,
)
from qwen_mtp_desktop.core.files.safe_files import int_in_range, number_in_range, parse_json_text
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.core.remote.errors import (
    MAX_ERROR_BODY_BYTES,
    RemoteError,
    clean_text,
    http_error,
    malformed,
    server_message,
    transport_error,
)
from qwen_mtp_desktop.core.remote.inbox import CLOSED, Batch, Inbox
from qwen_mtp_desktop.core.remote.progress import StreamProgress
from qwen_mtp_desktop.core.remote.sse import (
    TooLargeError,
    iter_lines,
    iter_sse,
    read_limited,
)

log = logging.getLogger(__name__)

#: Connecting may take this long (a sleeping laptop's Wi-Fi, a VPN).
CONNECT_TIMEOUT_S = 10.0
#: Longest silence within an answer (a big model's prefill of a long chat takes a while).
READ_TIMEOUT_S = 300.0
#: Listing models and testing a connection: a user is waiting for the dialog.
QUICK_TIMEOUT_S = 10.0
#: A model list larger than this is refused (a thousand long ids with metadata fit easily).
MAX_MODEL_LIST_BYTES = 4 * 1024 * 1024
#: JSON values a model list may hold (each costs a Python object while it is parsed).
MAX_MODEL_LIST_VALUES = 200_000
#: An answer may hold this many characters per token asked for (`max_tokens`), plus
#: ANSWER_SLACK_CHARS: no tokenizer comes near it, so more means the server ignores the limit.
MAX_CHARS_PER_TOKEN = 64
ANSWER_SLACK_CHARS = 64 * 1024
USER_AGENT = "qwen-mtp-desktop"
#: Tool calls one answer may make (as the API's `tools`, up to 128).
MAX_TOOL_CALLS = 128


# --- what an event carries ----------------------------------------------------------------------


@dataclass(frozen=True)
class CallDelta:
    """One `delta.tool_calls` entry: the call's index and what this piece adds."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class _Delta:
    answer: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    calls: list[CallDelta] = field(default_factory=list)


class CallDeltas:
    """A streamed answer's tool calls, joined from their deltas by index: the id and name
    from the first delta that has them (OpenAI sends them once; servers that repeat them are
    read the same), the arguments from every delta in order."""

    def __init__(self) -> None:
        self._calls: dict[int, tuple[str, str, list[str]]] = {}

    def add(self, piece: CallDelta) -> None:
        call_id, name, arguments = self._calls.setdefault(piece.index, ("", "", []))
        arguments.append(piece.arguments)
        self._calls[piece.index] = (call_id or piece.id, name or piece.name, arguments)

    def calls(self, started: bool) -> list[dict[str, str]]:
        """The calls in index order as {"id", "name", "arguments"}; RemoteError when one has
        no name or its arguments are not a JSON object's text."""
        out = []
        for index in sorted(self._calls):
            call_id, name, pieces = self._calls[index]
            arguments = "".join(pieces) or "{}"
            if not name:
                raise malformed(f"tool call {index} without a function name", started)
            try:
                value = parse_json_text(arguments)
            except (ValueError, RecursionError):
                value = None
            if not isinstance(value, dict):
                raise malformed(
                    f"arguments of the tool call {clean_text(name, 64)!r} that are not a JSON "
                    "object",
                    started,
                )
            out.append({"id": call_id, "name": name, "arguments": arguments})
        return out


Parsed = tuple[_Delta, dict[str, Any] | None, dict[str, Any] | None]

#: The header `serve` sends on an answer for which the demo model read only the latest message
#: (server.examples); the stream's last event carries the "notice" that says so in words.
SINGLE_TURN_HEADER = "x-single-turn"
MAX_NOTICE_CHARS = 600
#: Said when a server sends the header without a notice of its own.
SINGLE_TURN_FALLBACK = (
    "The server answered the last message on its own: earlier messages of this chat were "
    "left out of the request."
)


def event_notice(data: str) -> str | None:
    """The "notice" a chunk's JSON carries (this app's `serve`: why the answer read less than
    was sent), cleaned and bounded; None when there is none or it is not text."""
    try:
        event = parse_json_text(data)
    except (ValueError, RecursionError):
        return None
    notice = event.get("notice") if isinstance(event, dict) else None
    if not isinstance(notice, str) or not notice.strip():
        return None
    return clean_text(notice, MAX_NOTICE_CHARS)


def parse_event(data: str, started: bool) -> Parsed:
    """(text and finish reason, the `mtp` object, the `usage` object) of one chunk's JSON.
    RemoteError for an error event or anything that is not a chat.completion.chunk."""
    try:
        event = parse_json_text(data)
    except (ValueError, RecursionError) as exc:
        raise malformed(f"an event that is not JSON: {clean_text(str(exc), 80)}", started) from None
    if not isinstance(event, dict):
        raise malformed("an event that is not a JSON object", started)
    if "error" in event:
        message, code = server_message(event)
        kept = "The partial answer is kept; regenerate to try again." if started else ""
        raise RemoteError(
            f"The server stopped the answer: {message or 'an unnamed error'}.",
            kept,
            code="REMOTE_STREAM_ERROR" if not code else f"REMOTE_{code.upper()}"[:60],
        )
    delta = _Delta()
    choices = event.get("choices", [])
    if not isinstance(choices, list):
        raise malformed("'choices' is not a list", started)
    for choice in choices[:1]:
        if not isinstance(choice, dict):
            raise malformed("a choice that is not an object", started)
        part = choice.get("delta") or {}
        if not isinstance(part, dict):
            raise malformed("a delta that is not an object", started)
        content = part.get("content")
        reasoning = part.get("reasoning_content", part.get("reasoning"))
        if content is not None and not isinstance(content, str):
            raise malformed("text that is not a string", started)
        if reasoning is not None and not isinstance(reasoning, str):
            raise malformed("reasoning that is not a string", started)
        delta.answer, delta.reasoning = content or "", reasoning or ""
        delta.calls = _call_deltas(part.get("tool_calls"), started)
        finish = choice.get("finish_reason")
        delta.finish_reason = finish if isinstance(finish, str) else None
    mtp = event.get("mtp")
    usage = event.get("usage")
    return delta, server_stats(mtp), usage if isinstance(usage, dict) else None


def _call_deltas(raw: object, started: bool) -> list[CallDelta]:
    """A delta's `tool_calls` entries (none when absent)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise malformed("'tool_calls' is not a list", started)
    pieces = []
    for entry in raw[:MAX_TOOL_CALLS]:
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(function, dict | None):
            raise malformed("a tool call that is not an object", started)
        function = function or {}
        index = entry.get("index", 0)
        texts = (entry.get("id"), function.get("name"), function.get("arguments"))
        if int_in_range(index, 0, MAX_TOOL_CALLS - 1) is None:
            raise malformed(f"a tool call's index that is not 0 to {MAX_TOOL_CALLS - 1}", started)
        if not all(text is None or isinstance(text, str) for text in texts):
            raise malformed("a tool call's id, name or arguments that is not text", started)
        call_id, name, arguments = (text or "" for text in texts)
        pieces.append(CallDelta(index, call_id, name, arguments))
    return pieces


def server_method(raw: dict[str, Any]) -> DecodingMethod | None:
    """The method a server's `mtp` object says ran: its "method" record (this app's `serve`
    since DecodingMethod), else its "mode" ("plain" | "mtp" | "lookup") with
    "draft_tokens_per_step" (older servers; their prompt lookup's n-gram size is not said:
    the default). None when it names no method this app knows."""
    if "method" in raw:
        return DecodingMethod.from_record(raw["method"])
    mode, drafts = raw.get("mode"), raw.get("draft_tokens_per_step")
    if mode == "plain":
        return PLAIN
    if mode in ("mtp", "lookup"):
        return DecodingMethod.from_record({"kind": mode, "drafts": drafts, "ngram": DEFAULT_NGRAM})
    return None


def server_stats(raw: object) -> dict[str, Any] | None:
    """The server's `mtp` object with each known field checked (a hostile or buggy server's
    values are dropped, not shown); None when absent or without a method this app knows
    (then "method" is its record)."""
    method = server_method(raw) if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or method is None:
        return None
    out: dict[str, Any] = {"mode": method.kind, "method": method.to_record()}
    counts = ("draft_tokens_per_step", "drafted_tokens", "accepted_tokens", "steps")
    for name in counts:
        count = int_in_range(raw.get(name), 0, 10**9)
        if count is not None:
            out[name] = count
    rate = number_in_range(raw.get("acceptance_rate"), 0.0, 1.0)
    if rate is not None:
        out["acceptance_rate"] = rate
    for name in ("mean_accepted_per_step", "ttft_s", "decode_tokens_per_s", "total_s"):
        number = number_in_range(raw.get(name), 0.0, 1e9)
        if number is not None:
            out[name] = number
    by_position = raw.get("acceptance_by_position")
    if isinstance(by_position, list) and len(by_position) <= 64:
        shares = [number_in_range(v, 0.0, 1.0) for v in by_position]
        if None not in shares:
            out["acceptance_by_position"] = shares
    for name in ("decoding", "decoder"):
        value = raw.get(name)
        if isinstance(value, str) and len(value) <= 20:
            out[name] = clean_text(value, 20)
    return out


def _usage_count(usage: dict[str, Any] | None, name: str) -> int | None:
    return int_in_range(usage.get(name), 0, 10**9) if usage else None


def request_body(
    model: str, messages: Sequence[Message], settings: GenerationSettings
) -> dict[str, Any]:
    """The chat completions request for `messages` with the chat's settings (greedy unless
    the settings sample; only standard fields, plus thinking and its budget when they are
    asked for)."""
    if any(message.images for message in messages):
        raise RemoteError(
            "Images are not sent to remote servers.",
            "Remove the image, or chat with a local vision model.",
            code="REMOTE_NO_IMAGES",
        )
    sampling = settings.method.sampling
    body: dict[str, Any] = {
        "model": model,
        "messages": [_message(m) for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": settings.max_new_tokens,
        "temperature": sampling.temperature,
    }
    if not sampling.greedy:
        body["top_p"] = sampling.top_p
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if settings.stop_strings:
        body["stop"] = list(settings.stop_strings)
    if settings.thinking:
        body["chat_template_kwargs"] = {"enable_thinking": True}
        if settings.thinking_budget is not None:  # vLLM's name, which `serve` reads too
            body["thinking_token_budget"] = settings.thinking_budget
    if settings.tools_json:
        body["tools"] = json.loads(settings.tools_json)
        if settings.tool_choice:
            function = {"name": settings.tool_choice}
            body["tool_choice"] = {"type": "function", "function": function}
    return body


def _message(message: Message) -> dict[str, Any]:
    """A message as OpenAI's chat API reads it: an assistant's tool calls, a tool result's
    call id."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


def _headers(api_key: str | None) -> dict[str, str]:
    # identity: a compressed reply could expand a thousandfold in one read (a gzip bomb)
    headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


_tls_lock = threading.Lock()
_tls: ssl.SSLContext | None = None


def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every https request: loading the CA certificates takes
    50-100 ms and holds the interpreter meanwhile (the GUI thread stalled that long while a
    worker made a new client for each request)."""
    global _tls
    with _tls_lock:
        if _tls is None:
            _tls = ssl.create_default_context()
        return _tls


def _http_client(base_url: str, read_timeout_s: float) -> httpx.Client:
    # Plain http needs no certificates at all: skip loading them.
    verify: ssl.SSLContext | bool = (
        _tls_context() if base_url.lower().startswith("https:") else False
    )
    return httpx.Client(
        timeout=httpx.Timeout(read_timeout_s, connect=CONNECT_TIMEOUT_S),
        follow_redirects=False,
        verify=verify,
    )


def _compressed(response: httpx.Response) -> bool:
    encoding: str = response.headers.get("content-encoding", "identity")
    return encoding.strip().lower() != "identity"


def error_text(response: httpx.Response) -> str:
    """The start of an error reply's body (at most MAX_ERROR_BODY_BYTES are read)."""
    if _compressed(response):  # not asked for; its bytes are no message
        return ""
    data, _more = read_limited(response.iter_raw(), MAX_ERROR_BODY_BYTES)
    return data.decode("utf-8", "replace")


def list_models(endpoint: RemoteEndpoint, api_key: str | None) -> list[str]:
    """The model ids the server offers (GET /models): what Test connection shows. Blocking:
    call it off the GUI thread."""
    url = f"{endpoint.base_url}/models"
    try:
        with (
            _http_client(endpoint.base_url, QUICK_TIMEOUT_S) as client,
            client.stream("GET", url, headers=_headers(api_key)) as response,
        ):
            if response.status_code != 200:
                raise http_error(response.status_code, error_text(response), endpoint)
            if _compressed(response):
                raise malformed("a compressed model list that was not asked for", False)
            data, more = read_limited(response.iter_raw(), MAX_MODEL_LIST_BYTES)
    except httpx.HTTPError as exc:
        raise transport_error(
            exc, endpoint, started=False, connect_s=CONNECT_TIMEOUT_S, read_s=QUICK_TIMEOUT_S
        ) from None
    if more:
        raise malformed(f"a model list larger than {MAX_MODEL_LIST_BYTES // 2**20} MiB", False)
    try:
        body = parse_json_text(data.decode("utf-8", "replace"), max_values=MAX_MODEL_LIST_VALUES)
    except (ValueError, RecursionError):
        raise malformed("the model list is not JSON", False) from None
    items = body.get("data") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise malformed("the model list has no 'data' list", False)
    ids = [
        item["id"]
        for item in items[:1000]
        if isinstance(item, dict) and isinstance(item.get("id"), str) and item["id"].strip()
    ]
    return sorted({clean_text(i, 500) for i in ids})


# --- the answer ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _End:
    finish_reason: FinishReason
    error: RemoteError | None = None


def answer_limit(settings: GenerationSettings) -> int:
    """The most characters (answer and reasoning) an answer of `settings` may hold."""
    return settings.max_new_tokens * MAX_CHARS_PER_TOKEN + ANSWER_SLACK_CHARS


class RemoteAnswer(AnswerStream):
    """An answer streaming from a remote server; iterate it for chunks (one per batch of SSE
    events that carry text), `stats` at the end. `cancel()` is thread-safe and takes effect
    at once, whatever the server does: the next chunk is the end (finish_reason "cancelled",
    the text taken so far kept), and the socket is shut down.

    StepChunk.token_ids is empty: a remote server does not send token ids, so token counts
    come from the server's `usage` at the end (and live, in `progress`, when it sends usage
    with its text).
    """

    def __init__(
        self,
        endpoint: RemoteEndpoint,
        api_key: str | None,
        messages: Sequence[Message],
        settings: GenerationSettings,
        *,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        super().__init__()
        self.endpoint = endpoint
        self._body = request_body(endpoint.model, messages, settings)
        self._api_key = api_key
        self._read_timeout_s = read_timeout_s
        self._max_chars = answer_limit(settings)
        self._max_tokens = settings.max_new_tokens
        self._inbox: Inbox[_End] = Inbox()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._started_at = time.monotonic()
        self._first_at: float | None = None
        self._last_at: float | None = None
        self._events = 0
        #: The server's completion tokens as streamed with its text, and when (live figures).
        self._live_tokens: int | None = None
        self._live_tokens_at = 0.0
        self._mtp: dict[str, Any] | None = None
        self._usage: dict[str, Any] | None = None
        #: What the server said about this answer besides its text (`serve`'s single-turn
        #: notice for the demo model), shown with the answer.
        self._notice: str | None = None
        self._single_turn = False
        self._first_text_seen = False
        self._tool_calls: list[dict[str, str]] = []
        self._thread = threading.Thread(target=self._work, name="remote-answer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ AnswerStream

    def cancel(self) -> None:
        if self._cancel.is_set():
            return
        self._cancel.set()
        self._inbox.close()  # the consumer ends now, not after what is still waiting
        self._abort_socket()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def next_chunk(self, timeout: float | None = None) -> StepChunk | None:
        """A chunk; None after `timeout`; StopIteration at the end; RemoteError if it failed
        (the text so far stays in `answer` and `reasoning`)."""
        if self._finished:
            raise StopIteration
        item = self._inbox.take(timeout)
        if item is None:
            return None
        if isinstance(item, Batch):
            if self._first_at is None:
                self._first_at = item.first_at
            self._last_at = item.last_at
            self._events += item.events
            if item.tokens is not None:
                self._live_tokens, self._live_tokens_at = item.tokens, item.tokens_at
            elapsed = item.last_at - self._started_at
            return self._take(StepChunk((), item.reasoning, item.answer, elapsed))
        end = _End("cancelled") if item is CLOSED else item
        assert isinstance(end, _End)
        self._finished = True
        self.stats = self._build_stats(end.finish_reason)
        if end.error is not None:
            raise end.error
        raise StopIteration

    @property
    def progress(self) -> StreamProgress:
        """The stream so far as the consumer has taken it (call it from the consumer's
        thread): what the live figures are made of."""
        first, started = self._first_at, self._started_at
        if first is None:
            return StreamProgress()
        return StreamProgress(
            first_s=first - started,
            last_s=(self._last_at or first) - started,
            chunks=self._events,
            tokens=self._live_tokens,
            tokens_s=self._live_tokens_at - started,
        )

    @property
    def server_stats(self) -> dict[str, Any] | None:
        """The server's `mtp` object (checked), when it sent one."""
        return self._mtp

    # ------------------------------------------------------------------ the stream

    def _abort_socket(self) -> None:
        with self._lock:
            sock = self._socket
        if sock is not None:
            # shutdown wakes a read blocked on this socket at once (close does not)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _work(self) -> None:
        try:
            with _http_client(self.endpoint.base_url, self._read_timeout_s) as client:
                url = f"{self.endpoint.base_url}/chat/completions"
                headers = _headers(self._api_key) | {"Accept": "text/event-stream"}
                with client.stream("POST", url, json=self._body, headers=headers) as response:
                    stream = response.extensions.get("network_stream")
                    sock = stream.get_extra_info("socket") if stream is not None else None
                    with self._lock:
                        self._socket = sock if isinstance(sock, socket.socket) else None
                    if self._cancel.is_set():
                        return
                    if response.status_code != 200:
                        raise http_error(response.status_code, error_text(response), self.endpoint)
                    kind = response.headers.get("content-type", "")
                    if "text/event-stream" not in kind:
                        what = clean_text(kind, 60) or "no"
                        raise malformed(f"'{what}' content, not an event stream", False)
                    if _compressed(response):
                        raise malformed("a compressed stream that was not asked for", False)
                    self._single_turn = response.headers.get(SINGLE_TURN_HEADER, "") == "1"
                    finish = self._read(iter_sse(iter_lines(response.iter_raw())))
                    self._inbox.put_end(_End(finish))
        except RemoteError as exc:
            self._fail(exc)
        except TooLargeError as exc:  # a line or an event past its bound
            self._fail(malformed(str(exc), self._first_text_seen))
        except httpx.HTTPError as exc:
            self._fail(
                transport_error(
                    exc,
                    self.endpoint,
                    started=self._first_text_seen,
                    connect_s=CONNECT_TIMEOUT_S,
                    read_s=self._read_timeout_s,
                )
            )
        except Exception as exc:  # a bug here must still end the answer, not hang it
            log.error("remote answer failed unexpectedly", exc_info=exc)
            self._fail(RemoteError(f"Unexpected error: {type(exc).__name__}.", code="INTERNAL"))
        finally:
            with self._lock:
                self._socket = None

    def _fail(self, error: RemoteError) -> None:
        if not self._cancel.is_set():
            self._inbox.put_end(_End("cancelled", error))

    def _read(self, events: Iterator[str]) -> FinishReason:
        finish: str | None = None
        received = 0
        calls = CallDeltas()
        for data in events:
            if self._cancel.is_set():
                return "cancelled"
            if data.strip() == "[DONE]":
                break
            delta, mtp, usage = parse_event(data, self._first_text_seen)
            if mtp is not None:
                self._mtp = mtp
            if '"notice"' in data:  # parsed again only for the event that carries one
                self._notice = event_notice(data) or self._notice
            if usage is not None:
                self._usage = usage
            if delta.finish_reason is not None:
                finish = delta.finish_reason
            for piece in delta.calls:
                received += len(piece.id) + len(piece.name) + len(piece.arguments)
                if received > self._max_chars:
                    raise self._too_long()
                calls.add(piece)
            if delta.answer or delta.reasoning:
                received += len(delta.answer) + len(delta.reasoning)
                if received > self._max_chars:
                    raise self._too_long()
                self._first_text_seen = True
                # Usage on a text event is a running count (vLLM's continuous usage); the
                # usage most servers send after the last text only ends the answer's stats.
                tokens = _usage_count(usage, "completion_tokens")
                at = time.monotonic()
                if not self._inbox.put_text(delta.answer, delta.reasoning, at, tokens):
                    return "cancelled"
        else:
            if finish is None and not self._cancel.is_set():
                raise RemoteError(
                    "The connection to the server closed before the answer was complete.",
                    ("The partial answer is kept; " if self._first_text_seen else "")
                    + "check the server and regenerate.",
                    code="REMOTE_DISCONNECTED",
                )
        if self._cancel.is_set():
            return "cancelled"
        if finish != "length":  # calls cut short by the token limit are not calls
            self._tool_calls = calls.calls(self._first_text_seen)
        return "length" if finish == "length" else "eos"

    def _too_long(self) -> RemoteError:
        return RemoteError(
            f"The server kept sending past {self._max_chars:,} characters, far more than the "
            f"{self._max_tokens:,} tokens asked for; the answer was stopped there.",
            "The partial answer is kept. The server ignores the token limit (max_tokens): "
            "check its settings.",
            code="REMOTE_TOO_LONG",
        )

    # ------------------------------------------------------------------ statistics

    def _build_stats(self, finish_reason: FinishReason) -> GenerationStats:
        """Client-side timing, the server's token counts and, when sent, its MTP figures."""
        ended = time.monotonic()
        usage, mtp = self._usage, self._mtp
        completion = _usage_count(usage, "completion_tokens")
        details = usage.get("completion_tokens_details") if usage else None
        reasoning = _usage_count(details if isinstance(details, dict) else None, "reasoning_tokens")
        prompt_tokens = _usage_count(usage, "prompt_tokens") or 0
        # The server's reused prompt tokens (OpenAI's `cached_tokens`), when it reports them.
        prompt_details = usage.get("prompt_tokens_details") if usage else None
        cached = _usage_count(
            prompt_details if isinstance(prompt_details, dict) else None, "cached_tokens"
        )
        first, last = self._first_at, self._last_at
        span = (last - first) if first is not None and last is not None else 0.0
        # Tokens after the first text event, over the time between first and last text; the
        # first event's size is unknown, so it counts as one token (exact for one-token steps).
        tps = (completion - 1) / span if completion and completion > 1 and span > 0 else 0.0
        # All text in one event (a server batches the steps that piled up while the client was
        # behind): nothing to time here, so the server's own figure, when it sends one, and
        # the stats say so; else none is shown.
        decode_timing = "client"
        if tps == 0.0 and mtp and mtp.get("decode_tokens_per_s", 0.0) > 0:
            tps, decode_timing = mtp["decode_tokens_per_s"], "server"
        # Without the server's figures the method is not known: the stats line shows none.
        method = DecodingMethod.from_record(mtp["method"]) if mtp else None
        drafted = mtp.get("drafted_tokens", 0) if mtp else 0
        accepted = mtp.get("accepted_tokens", 0) if mtp else 0
        return GenerationStats(
            method=method or PLAIN,
            device="remote",
            prompt_tokens=prompt_tokens,
            generated_tokens=completion or 0,
            reasoning_tokens=reasoning or 0,
            answer_tokens=max((completion or 0) - (reasoning or 0), 0),
            ttft_s=(first - self._started_at) if first is not None else 0.0,
            decode_tokens_per_s=tps,
            total_s=ended - self._started_at,
            steps=mtp.get("steps", self._events) if mtp else self._events,
            drafted_tokens=drafted,
            accepted_tokens=accepted,
            acceptance_rate=mtp.get("acceptance_rate", 0.0) if mtp else 0.0,
            mean_accepted_per_step=mtp.get("mean_accepted_per_step", 0.0) if mtp else 0.0,
            acceptance_by_position=list(mtp.get("acceptance_by_position", [])) if mtp else [],
            finish_reason=finish_reason,
            decoder="remote",
            reused_tokens=min(cached or 0, prompt_tokens),
            remote={
                "endpoint": self.endpoint.name,
                "base_url": self.endpoint.base_url,
                "model": self.endpoint.model,
                "timing": "client",
                "decode_timing": decode_timing,
                "tokens_reported": completion is not None,
                "server_stats": mtp,
                **self._notice_record(),
                **({"tool_calls": self._tool_calls} if self._tool_calls else {}),
            },
        )

    def _notice_record(self) -> dict[str, str]:
        """{"notice": text} when the server said the answer read less than was sent."""
        notice = self._notice or (SINGLE_TURN_FALLBACK if self._single_turn else None)
        return {"notice": notice} if notice else {}
