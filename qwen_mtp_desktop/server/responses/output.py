"""The answer of `/v1/responses` in the Responses API's shape, whole or streamed.

Output items, in order: a `reasoning` item (thinking on: its text as `reasoning_text`
content), a `message` with one `output_text` part (left out when the answer is only tool
calls), then one `function_call` item per call (server.generation.tool_output reads them). `status`
is `completed`, or `incomplete` with `incomplete_details.reason: "max_output_tokens"`. `usage`
in the Responses shape; `mtp`, `metrics` and `timings` beside it, as on chat completions.

Streamed, as OpenAI sends it: `response.created`, `response.in_progress`, per item
`response.output_item.added` ... `response.output_item.done` (text: `content_part.added`,
`output_text.delta`s, `output_text.done`, `content_part.done`; reasoning the same with
`reasoning_text`; a call: its item added as soon as its name is read, then
`function_call_arguments.delta`s as the model writes the arguments (server.generation.tool_output:
they join into the non-streamed arguments), `.done`), then
`response.completed` (or `response.incomplete`), every event with its `sequence_number`; a
failure is an `error` event then `response.failed`. No `[DONE]`: the Responses API has none.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import GenerationSettings
from qwen_mtp_desktop.core.tools.calls import CallOpened, CallPiece, ToolCall
from qwen_mtp_desktop.server.generation.logprobs import chat_content
from qwen_mtp_desktop.server.generation.speculative import speculative_fields
from qwen_mtp_desktop.server.generation.sse import sse, stopping
from qwen_mtp_desktop.server.generation.tool_output import (
    ReadAnswer,
    ToolStream,
    error_fields,
    read_answer,
)
from qwen_mtp_desktop.server.generation.tools import ToolPlan
from qwen_mtp_desktop.server.generation.turns import (
    Chunks,
    Event,
    Failed,
    Finished,
    mtp_stats,
    stream_events,
)
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.responses.schema import LOGPROBS_INCLUDE, ResponsesRequest
from qwen_mtp_desktop.server.responses.store import ResponseStore


def item_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def response_usage(stats: GenerationStats) -> dict[str, Any]:
    return {
        "input_tokens": stats.prompt_tokens,
        # cache_write_tokens: OpenAI's prompt-cache writes, which it bills; a local server bills
        # none (what the engine keeps shows as a later request's cached_tokens). The openai
        # SDK's models require the field.
        "input_tokens_details": {"cached_tokens": stats.reused_tokens, "cache_write_tokens": 0},
        "output_tokens": stats.generated_tokens,
        "output_tokens_details": {"reasoning_tokens": stats.reasoning_tokens},
        "total_tokens": stats.prompt_tokens + stats.generated_tokens,
    }


@dataclass(frozen=True)
class ResponsesPlan:
    """What the answer of a Responses request needs besides the engine's events."""

    #: The request's fields a response object echoes (instructions, tools, text, ...).
    echo: dict[str, Any]
    #: The conversation so far (chat messages), stored with the answer when `store`.
    conversation: list[dict[str, Any]]
    store: ResponseStore | None
    tools: ToolPlan | None
    logprobs: bool

    @classmethod
    def of(
        cls,
        body: ResponsesRequest,
        settings: GenerationSettings,
        conversation: list[dict[str, Any]],
        store: ResponseStore,
        tools: ToolPlan | None,
    ) -> ResponsesPlan:
        sampling = settings.method.sampling
        fmt = body.text.format if body.text is not None else None
        echo = {
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "max_tool_calls": body.max_tool_calls,
            "metadata": body.metadata or {},
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": body.previous_response_id,
            "reasoning": {
                "effort": body.reasoning.effort if body.reasoning is not None else None,
                "summary": None,  # never written (server.responses.schema.ReasoningConfig)
            },
            "store": body.store,
            "temperature": sampling.temperature,
            "text": {
                "format": fmt.model_dump(by_alias=True, exclude_none=True)
                if fmt is not None
                else {"type": "text"},
                "verbosity": "medium",
            },
            "tool_choice": body.tool_choice.model_dump()
            if body.tool_choice is not None and not isinstance(body.tool_choice, str)
            else body.tool_choice or "auto",
            "tools": [tool.model_dump(exclude_none=True) for tool in body.tools or ()],
            "top_logprobs": body.top_logprobs,
            "top_p": sampling.top_p,
            "truncation": "disabled",
            "user": None,
        }
        logprobs = LOGPROBS_INCLUDE in (body.include or ())
        return cls(echo, conversation, store if body.store else None, tools, logprobs)

    def response(
        self,
        response_id: str,
        name: str,
        created_at: int,
        status: str,
        output: list[dict[str, Any]],
        **fields: Any,
    ) -> dict[str, Any]:
        """The response object (fields: usage, error, incomplete_details and extensions)."""
        return {
            "id": response_id,
            "object": "response",
            "created_at": created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "model": name,
            "output": output,
            "usage": None,
            **self.echo,
            **fields,
        }

    def finished(
        self,
        response_id: str,
        name: str,
        created_at: int,
        final: Finished,
        queue_wait_s: float,
        output: list[dict[str, Any]],
        read: ReadAnswer | None,
    ) -> dict[str, Any]:
        """The completed (or incomplete) response object; stored when asked."""
        stats = final.stats
        incomplete = stats.finish_reason == "length"
        extra = error_fields(read) if read is not None else {}
        response = self.response(
            response_id,
            name,
            created_at,
            "incomplete" if incomplete else "completed",
            output,
            incomplete_details={"reason": "max_output_tokens"} if incomplete else None,
            usage=response_usage(stats),
            mtp=mtp_stats(stats, final.record, queue_wait_s=queue_wait_s),
            **speculative_fields(stats),
            **extra,
        )
        if self.store is not None:
            history = list(self.conversation)
            begun = ""
            if history and history[-1]["role"] == "assistant" and not history[-1].get("tool_calls"):
                # An answer the client began (a prefill): the stored turn is the whole answer.
                begun = _chat_text(history.pop().get("content"))
            text = begun + _text_of(output)
            answer: dict[str, Any] = {"role": "assistant", "content": text or None}
            calls = [
                _chat_call(item)
                for item in output
                if item["type"] == "function_call" and item["status"] == "completed"
            ]
            if calls:
                answer["tool_calls"] = calls
            self.store.put(response_id, [*history, answer], response)
        return response

    def new_id(self) -> str:
        return item_id("resp")

    def body(
        self, response_id: str, name: str, final: Finished, queue_wait_s: float
    ) -> dict[str, Any]:
        """The non-streamed response."""
        created_at = int(time.time())
        status = "incomplete" if final.stats.finish_reason == "length" else "completed"
        output: list[dict[str, Any]] = []
        if final.reasoning:
            output.append(_reasoning(item_id("rs"), final.reasoning))
        read = read_answer(final.answer, self.tools) if self.tools is not None else None
        content = final.answer if read is None or not read.calls else (read.content or "")
        scores = final.logprobs if self.logprobs else None
        if content or read is None or not read.calls:
            output.append(_message(item_id("msg"), content, status, scores))
        output.extend(_call(item_id("fc"), call) for call in (read.calls if read else ()))
        return self.finished(response_id, name, created_at, final, queue_wait_s, output, read)

    async def stream(
        self,
        events: asyncio.Queue[Event],
        response_id: str,
        name: str,
        queue_wait_s: float,
        done: Callable[[], None],
    ) -> AsyncIterator[bytes]:
        """The streamed response (module docstring)."""
        writer = _Writer(self, response_id, name, sse)
        try:
            yield writer.event("response.created", response=writer.snapshot("in_progress"))
            yield writer.event("response.in_progress", response=writer.snapshot("in_progress"))
            async for event in stream_events(events):
                if isinstance(event, Chunks):
                    for piece in writer.chunks(event):
                        yield piece
                elif isinstance(event, Finished):
                    if event.stats.finish_reason == "cancelled":  # the server is stopping
                        for piece in writer.failed(stopping()):
                            yield piece
                        return
                    for piece in writer.finish(event, queue_wait_s):
                        yield piece
                    return
                elif isinstance(event, Failed):
                    for piece in writer.failed(event.error):
                        yield piece
                    return
        finally:
            done()


class _Writer:
    """The state of one streamed response: the items open and done, the next sequence number."""

    def __init__(
        self,
        plan: ResponsesPlan,
        response_id: str,
        name: str,
        sse: Callable[[dict[str, Any]], bytes],
    ) -> None:
        self.plan = plan
        self.response_id = response_id
        self.name = name
        self.sse = sse
        self.created_at = int(time.time())
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.calls = ToolStream(plan.tools) if plan.tools is not None else None
        self.reasoning: dict[str, Any] | None = None  # the open reasoning item, its text
        self.message: dict[str, Any] | None = None  # the open message item, its text
        self.call: dict[str, Any] | None = None  # the open function_call item, its arguments
        self.scores: list[TokenLogprob] = []

    def event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return self.sse(data)

    def snapshot(self, status: str) -> dict[str, Any]:
        return self.plan.response(
            self.response_id, self.name, self.created_at, status, list(self.output)
        )

    def _where(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"item_id": item["id"], "output_index": len(self.output)}

    def chunks(self, event: Chunks) -> list[bytes]:
        out: list[bytes] = []
        reasoning = "".join(c.reasoning for c in event.chunks)
        answer = "".join(c.answer for c in event.chunks)
        scores = [s for c in event.chunks for s in c.logprobs] if self.plan.logprobs else []
        if reasoning:
            out += self._reason(reasoning)
        pieces: list[CallPiece] = []
        if answer and self.calls is not None:
            answer, pieces = self.calls.feed(answer)  # from "<tool_call>" on, the calls' pieces
        if answer or scores:
            out += self._say(answer, scores)
        out += self._call_pieces(pieces)
        return out

    def _call_pieces(self, pieces: list[CallPiece]) -> list[bytes]:
        """A call's item added when its name is read, its arguments as they come."""
        assert self.calls is not None or not pieces
        out: list[bytes] = []
        for piece in pieces:
            if isinstance(piece, CallOpened):
                out += self._close_reasoning()
                out += self._close_message("completed")
                out += self._close_call("completed")
                assert self.calls is not None
                call = ToolCall(piece.name, "", self.calls.ids[piece.index])
                item = {**_call(item_id("fc"), call), "status": "in_progress"}
                self.call = {"item": item, "arguments": ""}
                out.append(self._added(item))
            elif self.call is not None:
                self.call["arguments"] += piece.text
                where = self._where(self.call["item"])
                out.append(
                    self.event("response.function_call_arguments.delta", **where, delta=piece.text)
                )
        return out

    def _close_call(self, status: str) -> list[bytes]:
        """The open call's end: `status` "completed", or "incomplete" when the answer's calls
        proved malformed (the arguments are those sent)."""
        if self.call is None:
            return []
        item, arguments = self.call["item"], self.call["arguments"]
        whole = {**item, "arguments": arguments, "status": status}
        where = self._where(item)
        out = [
            self.event("response.function_call_arguments.done", **where, arguments=arguments),
            self._done(whole),
        ]
        self.call = None
        return out

    def _reason(self, text: str) -> list[bytes]:
        out: list[bytes] = []
        if self.reasoning is None:
            item = _reasoning(item_id("rs"), "", "in_progress")
            item["content"] = []
            self.reasoning = {"item": item, "text": ""}
            out.append(self._added(item))
            out.append(self._part("added", item, {"type": "reasoning_text", "text": ""}))
        self.reasoning["text"] += text
        where = self._where(self.reasoning["item"])
        out.append(
            self.event("response.reasoning_text.delta", **where, content_index=0, delta=text)
        )
        return out

    def _close_reasoning(self) -> list[bytes]:
        if self.reasoning is None:
            return []
        item, text = self.reasoning["item"], self.reasoning["text"]
        where = self._where(item)
        out = [
            self.event("response.reasoning_text.done", **where, content_index=0, text=text),
            self._part("done", item, {"type": "reasoning_text", "text": text}),
        ]
        out.append(self._done(_reasoning(item["id"], text)))
        self.reasoning = None
        return out

    def _say(self, text: str, scores: list[TokenLogprob]) -> list[bytes]:
        out = self._close_reasoning()
        if self.message is None:
            item = _message(item_id("msg"), "", "in_progress", None)
            item["content"] = []
            self.message = {"item": item, "text": ""}
            out.append(self._added(item))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            out.append(self._part("added", item, part))
        self.message["text"] += text
        self.scores += scores
        out.append(
            self.event(
                "response.output_text.delta",
                **self._where(self.message["item"]),
                content_index=0,
                delta=text,
                logprobs=_entries(scores),
            )
        )
        return out

    def _close_message(self, status: str) -> list[bytes]:
        if self.message is None:
            return []
        item, text = self.message["item"], self.message["text"]
        scores = self.scores if self.plan.logprobs else None
        whole = _message(item["id"], text, status, scores)
        where = self._where(item)
        out = [
            self.event(
                "response.output_text.done",
                **where,
                content_index=0,
                text=text,
                logprobs=_entries(scores),
            ),
            self._part("done", item, whole["content"][0]),
            self._done(whole),
        ]
        self.message = None
        return out

    def _added(self, item: dict[str, Any]) -> bytes:
        return self.event("response.output_item.added", output_index=len(self.output), item=item)

    def _done(self, item: dict[str, Any]) -> bytes:
        data = self.event("response.output_item.done", output_index=len(self.output), item=item)
        self.output.append(item)
        return data

    def _part(self, when: str, item: dict[str, Any], part: dict[str, Any]) -> bytes:
        return self.event(
            f"response.content_part.{when}", **self._where(item), content_index=0, part=part
        )

    def finish(self, final: Finished, queue_wait_s: float) -> list[bytes]:
        status = "incomplete" if final.stats.finish_reason == "length" else "completed"
        out: list[bytes] = []
        read = None
        if self.calls is not None:
            rest, pieces, read = self.calls.finish_read()
            out += self._call_pieces(pieces)
            # Calls sent before they proved malformed end "incomplete"; their text follows.
            out += self._close_call("completed" if read.calls else "incomplete")
            if rest:
                out += self._say(rest, [])
        if self.message is None and (read is None or not read.calls):
            out += self._say("", [])  # an empty answer is still a message
        out += self._close_reasoning()
        out += self._close_message(status)
        response = self.plan.finished(
            self.response_id, self.name, self.created_at, final, queue_wait_s, self.output, read
        )
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        out.append(self.event(kind, response=response))
        return out

    def failed(self, error: ApiError) -> list[bytes]:
        failure = {"code": error.code or "server_error", "message": error.message}
        snapshot = self.snapshot("failed")
        snapshot["error"] = failure
        return [
            self.event("error", code=error.code, message=error.message, param=error.param),
            self.event("response.failed", response=snapshot),
        ]


def _entries(scores: list[TokenLogprob] | None) -> list[dict[str, Any]]:
    return chat_content(scores) if scores else []


def _chat_text(content: Any) -> str:
    """A chat message's text: its string, or its text parts joined as the chat joins them."""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text")


def _reasoning(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "reasoning",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
        "status": status,
    }


def _message(
    item_id: str, text: str, status: str, scores: list[TokenLogprob] | None
) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    part["logprobs"] = _entries(scores)
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [part],
    }


def _call(item_id: str, call: ToolCall) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "status": "completed",
    }


def _text_of(output: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for item in output
        if item["type"] == "message"
        for part in item["content"]
        if part["type"] == "output_text"
    )


def _chat_call(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["call_id"],
        "type": "function",
        "function": {"name": item["name"], "arguments": item["arguments"]},
    }
