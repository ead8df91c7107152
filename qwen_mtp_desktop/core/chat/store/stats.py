"""Stored message statistics, validated on the way out of the database.

The stats of every answer are kept as JSON in the chat store and shown under the answer; a
damaged or hand-edited row must not break the chat (a string where a rate was expected made
the stats line raise). Known fields with a wrong type or an absurd value are dropped; unknown
fields stay (they are data from newer versions).

The decoding method that ran is kept as a `DecodingMethod` record ("method"); rows written
before it say "mode" ("baseline" for plain decoding), "num_assistant_tokens" and
"max_ngram_size", which `clean_stats` turns into the record: the one place that reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.files.safe_files import int_in_range, number_in_range

#: The keys that named the method before the "method" record.
_OLD_METHOD_KEYS = ("mode", "num_assistant_tokens", "max_ngram_size")

_BIG = 10**12
_MAX_LIST = 1_000_000


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= 1000 else None


def _count(value: object) -> int | None:
    return int_in_range(value, 0, _BIG)


def _seconds(value: object) -> float | None:
    return number_in_range(value, 0.0, 1e9)


def _timestamp(value: object) -> float | None:
    return number_in_range(value, 0.0, 1e11)  # seconds since 1970, up to year 5138


def _share(value: object) -> float | None:
    return number_in_range(value, 0.0, 1.0)


def _ranges(value: object) -> list[list[int]] | None:
    if not isinstance(value, list) or len(value) > _MAX_LIST:
        return None
    out: list[list[int]] = []
    for item in value:
        if not isinstance(item, list | tuple) or len(item) != 2:
            return None
        low, high = _count(item[0]), _count(item[1])
        if low is None or high is None or high < low:
            return None
        out.append([low, high])
    return out


def _numbers(value: object) -> list[float] | None:
    if not isinstance(value, list) or len(value) > _MAX_LIST:
        return None
    numbers = [number_in_range(v, 0.0, 1e12) for v in value]
    return None if None in numbers else value


def _auto(value: object) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    out = {k: v for k, v in value.items() if isinstance(k, str)}
    for key in ("summary", "sentence"):
        if key in out and _text(out[key]) is None:
            del out[key]
    key = "switched_to_plain_after_tokens"
    if key in out and out[key] is not None and _count(out[key]) is None:
        del out[key]
    return out


def _method(value: object) -> dict[str, Any] | None:
    method = DecodingMethod.from_record(value)
    return method.to_record() if method is not None else None


_FIELDS: dict[str, Callable[[Any], Any]] = {
    "method": _method,
    "device": _text,
    "finish_reason": _text,
    "model": _text,
    "prompt_tokens": _count,
    "reused_tokens": _count,
    "generated_tokens": _count,
    "reasoning_tokens": _count,
    "answer_tokens": _count,
    "steps": _count,
    "drafted_tokens": _count,
    "accepted_tokens": _count,
    "ttft_s": _seconds,
    "decode_tokens_per_s": _seconds,
    "total_s": _seconds,
    "finished_at": _timestamp,
    "acceptance_rate": _share,
    "mean_accepted_per_step": _seconds,
    "drafted_ranges": _ranges,
    "chunk_sizes": _numbers,
    "chunk_times": _numbers,
    "acceptance_by_position": _numbers,
    "auto": _auto,
}


def stats_method(stats: Mapping[str, Any]) -> DecodingMethod | None:
    """The method an answer's stats say ran: their "method" record, else an older row's
    "mode" with its draft count and n-gram size; None when they name none."""
    method = DecodingMethod.from_record(stats.get("method"))
    if method is None and "mode" in stats:
        method = DecodingMethod.from_record({k: stats[k] for k in _OLD_METHOD_KEYS if k in stats})
    return method


def stopped_before_first_token(stats: Mapping[str, Any]) -> bool:
    """Whether an answer's stats say Stop ended it while its prompt was still being read:
    nothing was decoded, so no method, speed or time to first token describes it."""
    return stats.get("finish_reason") == "cancelled" and stats.get("generated_tokens") == 0


def clean_stats(raw: dict[str, Any]) -> dict[str, Any]:
    """`raw` without the known fields whose value is not what the app writes there, and with
    an older row's method keys turned into the "method" record (keys that name no method,
    such as a "mode" without its draft count, stay as they were: nothing is lost). Cleaning
    what it returns changes nothing."""
    if DecodingMethod.from_record(raw.get("method")) is None and "mode" in raw:
        older = stats_method(raw)
        if older is not None:
            raw = {k: v for k, v in raw.items() if k not in _OLD_METHOD_KEYS}
            raw["method"] = older.to_record()
    out: dict[str, Any] = {}
    for key, value in raw.items():
        check = _FIELDS.get(key)
        if check is None or value is None:
            out[key] = value
            continue
        cleaned = check(value)
        if cleaned is not None:
            out[key] = cleaned
    reused, prompt = out.get("reused_tokens"), out.get("prompt_tokens")
    if isinstance(reused, int) and isinstance(prompt, int) and reused > prompt:
        del out["reused_tokens"]  # more reused than read: damage, not a figure
    return out
