"""`POST /v1/completions`: raw text in, raw text out, no chat template (OpenAI's legacy
completions, as vLLM and llama.cpp serve them).

`prompt` is a string or a list of one string; the answer continues it. Fields: max_tokens
(default 16, OpenAI's), temperature, top_p, stop, seed, presence / frequency penalties, the
legacy integer `logprobs` (alternatives per token, 0 to 20), `echo` (the prompt is sent back
before the answer; not with logprobs, which this server computes for answer tokens only),
stream and stream_options, and the chat's extensions (top_k, repetition_penalty, ignore_eos,
num_assistant_tokens, logit_bias). Refused with a 400 naming them: n or best_of > 1, suffix
(server.http.fields, server.generation.planning). The response carries `usage`, `mtp`, `metrics` and
`timings` as chat completions do.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob
from qwen_mtp_desktop.core.engine import Message, StepChunk
from qwen_mtp_desktop.server.generation.logprobs import completion_logprobs
from qwen_mtp_desktop.server.generation.schema import CompletionRequest
from qwen_mtp_desktop.server.generation.speculative import speculative_fields
from qwen_mtp_desktop.server.generation.sse import openai_stream, sse
from qwen_mtp_desktop.server.generation.turns import (
    FINISH_REASONS,
    Event,
    Finished,
    mtp_stats,
    usage,
)
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.request_budget import check_text_fits

OBJECT = "text_completion"


def check_completion(body: CompletionRequest, context_tokens: int | None) -> str:
    """The prompt text, or ApiError 400 for what cannot be answered."""
    if body.echo and body.logprobs is not None:
        raise ApiError(
            400,
            "echo with logprobs is not supported: log-probabilities are computed for the "
            "answer's tokens only. Send one of them.",
            code="unsupported_value",
            param="echo",
        )
    prompt = body.text()
    if not prompt:
        raise ApiError(400, "prompt is empty; send some text to continue.", param="prompt")
    try:
        check_text_fits([Message("user", prompt)], context_tokens)
    except ApiError as exc:
        exc.param = "prompt"
        raise
    return prompt


def _text(chunks: list[StepChunk]) -> str:
    return "".join(c.reasoning + c.answer for c in chunks)


def _choice(text: str, finish: str | None, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    return {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}


def _usage(stats: Any) -> dict[str, Any]:
    result = usage(stats)
    del result["completion_tokens_details"]  # no reasoning split in raw text
    return result


@dataclass(frozen=True)
class CompletionAnswer:
    """How a text completion is answered (server.generation.answer.AnswerShape)."""

    #: The prompt, sent back before the answer (`echo`), or None.
    echo: str | None
    logprobs: bool
    include_usage: bool

    def new_id(self) -> str:
        return f"cmpl-{uuid.uuid4().hex[:24]}"

    def body(
        self,
        request_id: str,
        name: str,
        final: Finished,
        queue_wait_s: float,
    ) -> dict[str, Any]:
        """The non-streamed response."""
        echo, logprobs = self.echo, self.logprobs
        stats = final.stats
        text = final.reasoning + final.answer
        return {
            "id": request_id,
            "object": OBJECT,
            "created": int(time.time()),
            "model": name,
            "choices": [
                _choice(
                    (echo or "") + text,
                    FINISH_REASONS[stats.finish_reason],
                    completion_logprobs(final.logprobs) if logprobs else None,
                )
            ],
            "usage": _usage(stats),
            "mtp": mtp_stats(stats, final.record, queue_wait_s=queue_wait_s),
            **speculative_fields(stats),
        }

    def stream(
        self,
        events: asyncio.Queue[Event],
        request_id: str,
        name: str,
        queue_wait_s: float,
        done: Callable[[], None],
    ) -> AsyncIterator[bytes]:
        """The streamed response: one event per batch of steps ready, then the finish (the frame
        is server.generation.sse's)."""
        echo, logprobs, include_usage = self.echo, self.logprobs, self.include_usage
        created = int(time.time())
        offset = 0

        def chunk(
            text: str, finish: str | None, scores: list[TokenLogprob] | None
        ) -> dict[str, Any]:
            nonlocal offset
            shaped = completion_logprobs(scores, offset) if scores is not None else None
            offset += len(text)
            data: dict[str, Any] = {
                "id": request_id,
                "object": OBJECT,
                "created": created,
                "model": name,
                "choices": [_choice(text, finish, shaped)],
            }
            if include_usage:
                data["usage"] = None
            return data

        def opening() -> Iterator[bytes]:
            if echo:
                yield sse(chunk(echo, None, None))

        def steps(batch: list[StepChunk]) -> Iterator[bytes]:
            text = _text(batch)
            scores = [s for c in batch for s in c.logprobs]
            if text or scores:
                yield sse(chunk(text, None, scores if logprobs else None))

        def finish(final: Finished) -> Iterator[bytes]:
            stats = final.stats
            extras = {
                "mtp": mtp_stats(stats, final.record, queue_wait_s=queue_wait_s),
                **speculative_fields(stats),
            }
            last = chunk("", FINISH_REASONS[stats.finish_reason], None)
            yield sse({**last, **extras})
            if include_usage:
                usage_chunk = chunk("", None, None)
                usage_chunk["choices"] = []
                usage_chunk["usage"] = _usage(stats)
                yield sse({**usage_chunk, **extras})

        return openai_stream(events, done, opening=opening(), steps=steps, finish=finish)
