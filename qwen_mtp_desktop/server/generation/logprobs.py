"""`logprobs` in OpenAI's two shapes, from the engine's `TokenLogprob`s (core.decoding.logprobs
says which distribution they are of).

- Chat completions: `choices[].logprobs.content[]`, each `{"token", "logprob", "bytes",
  "top_logprobs": [{"token", "logprob", "bytes"}]}`; streamed, each chunk carries the entries
  of the tokens it adds.
- Completions (the legacy shape): `choices[].logprobs` = `{"tokens", "token_logprobs",
  "top_logprobs": [{token: logprob}], "text_offset"}`; the sampled token is always among its
  top entries, as OpenAI documents ("up to logprobs + 1 elements").

A token's `token` is its bytes as UTF-8 text, a part of a character written as OpenAI does
(`bytes:\\xe2\\x80`); `bytes` are the token's own bytes, so a client can join them into text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qwen_mtp_desktop.core.decoding.logprobs import MAX_TOP_LOGPROBS, Candidate, TokenLogprob
from qwen_mtp_desktop.server.http.errors import ApiError

#: A log-probability JSON can carry: -inf (a token the model gives no chance) becomes this,
#: OpenAI's own floor.
LOGPROB_FLOOR = -9999.0


def chat_logprob_count(logprobs: bool | None, top_logprobs: int | None) -> int | None:
    """The alternatives per token a chat request asks for (None: no logprobs); ApiError 400
    for a combination OpenAI refuses."""
    if top_logprobs is not None and not logprobs:
        raise ApiError(
            400,
            'top_logprobs needs logprobs: send "logprobs": true with it.',
            code="invalid_value",
            param="top_logprobs",
        )
    _check_count(top_logprobs, "top_logprobs")
    return (top_logprobs or 0) if logprobs else None


def completion_logprob_count(logprobs: int | None) -> int | None:
    """The legacy `logprobs` integer (alternatives per token) checked; None: no logprobs."""
    _check_count(logprobs, "logprobs")
    return logprobs


def _check_count(count: int | None, param: str) -> None:
    if count is not None and not 0 <= count <= MAX_TOP_LOGPROBS:
        raise ApiError(
            400,
            f"{param} must be 0 to {MAX_TOP_LOGPROBS}, not {count}.",
            code="invalid_value",
            param=param,
        )


def token_text(token_bytes: bytes) -> str:
    try:
        return token_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in token_bytes)


def _value(logprob: float) -> float:
    return max(logprob, LOGPROB_FLOOR)


def _entry(candidate: Candidate) -> dict[str, Any]:
    return {
        "token": token_text(candidate.token_bytes),
        "logprob": _value(candidate.logprob),
        "bytes": list(candidate.token_bytes),
    }


def chat_content(scores: Sequence[TokenLogprob]) -> list[dict[str, Any]]:
    """`logprobs.content` of a chat completion (or of one streamed chunk)."""
    return [
        {**_entry(score.chosen), "top_logprobs": [_entry(c) for c in score.top]} for score in scores
    ]


def chat_logprobs(scores: Sequence[TokenLogprob] | None) -> dict[str, Any] | None:
    """A choice's `logprobs`: null when not asked for (OpenAI sends the null)."""
    if scores is None:
        return None
    return {"content": chat_content(scores), "refusal": None}


def completion_logprobs(scores: Sequence[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """The legacy `logprobs` object; `offset`: the text's characters before these tokens."""
    tokens, values, tops, offsets = [], [], [], []
    for score in scores:
        text = token_text(score.chosen.token_bytes)
        tokens.append(text)
        values.append(_value(score.chosen.logprob))
        top = {token_text(c.token_bytes): _value(c.logprob) for c in score.top}
        top.setdefault(text, _value(score.chosen.logprob))
        tops.append(top)
        offsets.append(offset)
        offset += len(score.chosen.token_bytes.decode("utf-8", errors="ignore"))
    return {
        "tokens": tokens,
        "token_logprobs": values,
        "top_logprobs": tops,
        "text_offset": offsets,
    }
