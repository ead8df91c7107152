"""The answer of `/v1/chat/completions` in OpenAI's shape (`ChatAnswer`, the endpoint's
server.generation.answer.AnswerShape), whole (`body`) or streamed as Server-Sent Events
(`stream`): text, reasoning and tool calls as they are decoded (server.generation.tool_output),
then the finish, `usage`, `mtp`, `metrics`, `timings`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob
from qwen_mtp_desktop.core.engine import StepChunk
from qwen_mtp_desktop.server.generation.logprobs import chat_logprobs
from qwen_mtp_desktop.server.generation.speculative import speculative_fields
from qwen_mtp_desktop.server.generation.sse import openai_stream, sse
from qwen_mtp_desktop.server.generation.tool_output import ToolStream, read_for_completion
from qwen_mtp_desktop.server.generation.tools import ToolPlan
from qwen_mtp_desktop.server.generation.turns import (
    FINISH_REASONS,
    Event,
    Finished,
    mtp_stats,
    usage,
)


@dataclass(frozen=True)
class ChatAnswer:
    """How a chat completion is answered: what its body and stream need besides the events."""

    #: The request's tools, when the answer is read for tool calls (server.generation.tools).
    tools: ToolPlan | None
    #: Whether the answer reports its tokens' log-probabilities.
    logprobs: bool
    include_usage: bool
    #: Said with the answer when the demo model read only the latest message.
    notice: str | None

    def new_id(self) -> str:
        return f"chatcmpl-{uuid.uuid4().hex[:24]}"

    def body(
        self,
        request_id: str,
        name: str,
        final: Finished,
        queue_wait_s: float,
    ) -> dict[str, Any]:
        """The non-streamed chat completion."""
        tools, logprobs = self.tools, self.logprobs
        stats = final.stats
        message: dict[str, Any] = {"role": "assistant", "content": final.answer, "refusal": None}
        finish = FINISH_REASONS[stats.finish_reason]
        extra: dict[str, Any] = {}
        if tools is not None:  # the answer read for tool calls (server.generation.tool_output)
            fields, finish, extra = read_for_completion(final.answer, tools, finish)
            message |= fields
        if final.reasoning:
            message["reasoning_content"] = final.reasoning
        completion: dict[str, Any] = {
            "id": request_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": chat_logprobs(final.logprobs if logprobs else None),
                    "finish_reason": finish,
                }
            ],
            "usage": usage(stats),
            "mtp": mtp_stats(stats, final.record, queue_wait_s=queue_wait_s),
            **speculative_fields(stats),
            **extra,
        }
        if self.notice is not None:
            completion["notice"] = self.notice
        return completion

    def stream(
        self,
        events: asyncio.Queue[Event],
        request_id: str,
        name: str,
        queue_wait_s: float,
        done: Callable[[], None],
    ) -> AsyncIterator[bytes]:
        """The streamed chat completion (docs/api-server.md, "Streaming"; the frame is
        server.generation.sse's)."""
        tools, logprobs, include_usage, notice = (
            self.tools,
            self.logprobs,
            self.include_usage,
            self.notice,
        )
        created_at = int(time.time())
        calls = ToolStream(tools) if tools is not None else None

        def chunk(
            delta: dict[str, Any],
            finish: str | None = None,
            scores: list[TokenLogprob] | None = None,
        ) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": chat_logprobs(scores)}
            data: dict[str, Any] = {
                "id": request_id,
                "object": "chat.completion.chunk",
                "created": created_at,
                "model": name,
                "choices": [{**choice, "finish_reason": finish}],
            }
            if include_usage:
                data["usage"] = None
            return data

        def opening() -> Iterator[bytes]:
            yield sse(chunk({"role": "assistant", "content": "", "refusal": None}))

        def steps(batch: list[StepChunk]) -> Iterator[bytes]:
            delta: dict[str, Any] = {}
            reasoning = "".join(c.reasoning for c in batch)
            answer = "".join(c.answer for c in batch)
            if reasoning:
                delta["reasoning_content"] = reasoning
            call_deltas: list[dict[str, Any]] = []
            if answer and calls is not None:
                answer, pieces = calls.feed(answer)  # from "<tool_call>" on, the calls' pieces
                call_deltas = calls.call_deltas(pieces)
            if answer:
                delta["content"] = answer
            scores = [s for c in batch for s in c.logprobs] if logprobs else None
            if delta or scores:
                yield sse(chunk(delta, scores=scores))
                scores = None
            for index, call_delta in enumerate(call_deltas):
                yield sse(chunk(call_delta, scores=scores if index == 0 else None))

        def finish(final: Finished) -> Iterator[bytes]:
            stats = final.stats
            mtp = mtp_stats(stats, final.record, queue_wait_s=queue_wait_s)
            reason = FINISH_REASONS[stats.finish_reason]
            extra: dict[str, Any] = {}
            # Held-back text, the calls' last pieces (server.generation.tool_output).
            if calls is not None:
                deltas, reason, extra = calls.finish(reason)
                for delta in deltas:
                    yield sse(chunk(delta))
            last = chunk({}, reason) | extra
            last["mtp"] = mtp
            last |= speculative_fields(stats)
            if notice is not None:
                last["notice"] = notice
            yield sse(last)
            if include_usage:
                usage_chunk = chunk({})
                usage_chunk["choices"] = []
                usage_chunk["usage"] = usage(stats)
                usage_chunk["mtp"] = mtp
                usage_chunk |= speculative_fields(stats)
                yield sse(usage_chunk)

        return openai_stream(events, done, opening=opening(), steps=steps, finish=finish)
