"""What decoding did, in plain words: Auto's choice as one sentence a new user reads (the
technical reason, `Decision.reason`, stays for tooltips and reports), and what ran for an
answer, from its stored stats (the status bar)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qwen_mtp_desktop.core.auto.policy import Decision
from qwen_mtp_desktop.core.chat.store.stats import stats_method
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats

#: A prompt-lookup answer with fewer of its drafts accepted than this repeated little earlier
#: text: its sentence says so beside the share the stats line shows.
LOW_LOOKUP_ACCEPTANCE = 0.5
#: MTP at this speed relative to plain decoding or more is a tie, not "slower": turn-to-turn
#: timings differ by a few per cent (and "1.0x" must never read as slower).
TIE_SPEEDUP = 0.95


def auto_sentence(decision: Decision, ran: GenerationStats | None = None) -> str:
    """E.g. "Plain decoding: MTP was slower on this model in the last turns". Read from the
    decision's method and flags, and from the words `core.auto.policy` puts in its reasons;
    `ran`, the turn's stats once it ended, adds what the turn itself found where it belies
    the reason (a prompt-lookup answer that repeated little)."""
    method, reason = decision.method, decision.reason
    if "image turn" in reason:
        return f"{_capital(method.label)}: predicted faster for this turn with an image"
    if method.drafts_vary:
        return _lookup_sentence(decision, ran)
    if method.is_plain:
        if "benchmark found plain" in reason:
            return "Plain decoding: the benchmark found MTP slower on this model"
        if "one plain turn to compare" in reason:
            return "Plain decoding: one turn to compare its speed with MTP"
        if "openvino-genai runs this model" in reason:
            return "Plain decoding: this model's sampled answers cannot use MTP here"
        if "first turn in this band" in reason:
            return "Plain decoding: measuring it at this temperature first"
        if "conversation's length" in reason:
            return "Plain decoding: in a conversation this long, MTP's steps cost too much"
        mtp = decision.mtp_speedup
        if mtp is not None and mtp >= TIE_SPEEDUP:  # within measurement noise: a tie
            return "Plain decoding: MTP was about as fast on this model in the last turns"
        return "Plain decoding: MTP was slower on this model in the last turns"
    label = method.label
    if decision.probe:
        return f"{label}: trying MTP again to see whether it pays now"
    if "not benchmarked" in reason or reason.endswith("measuring"):
        return f"{label}: measuring whether MTP pays on this model"
    if "benchmark:" in reason:
        return f"{label}: the benchmark found it fastest on this model"
    if "trying this depth" in reason:
        return f"{label}: trying this depth to see whether it is faster"
    speedup = decision.predicted_speedup
    if speedup is not None and speedup > 1.0:
        return f"{label}: faster than plain decoding in the last turns"
    return f"{label}: about as fast as plain decoding so far"


def ran_text(stats: Mapping[str, Any]) -> str:
    """What decoded an answer, from its stored stats: "MTP n=2, 85% of drafts accepted",
    "prompt lookup K=4, n-gram 3, 40% of drafts accepted", "plain decoding", "MTP n=1, then
    plain decoding after 8 tokens"; "" when the stats do not say (a server that reports no
    method)."""
    remote = stats.get("remote")
    if isinstance(remote, Mapping) and not isinstance(remote.get("server_stats"), Mapping):
        return ""
    method: DecodingMethod | None = stats_method(stats)
    if method is None:
        return ""
    text = method.label
    if not method.is_plain:
        drafted, accepted = stats.get("drafted_tokens"), stats.get("accepted_tokens")
        if isinstance(drafted, int) and isinstance(accepted, int) and drafted > 0:
            text += f", {accepted / drafted:.0%} of drafts accepted"
        elif isinstance(stats.get("acceptance_rate"), float | int):
            text += f", {stats['acceptance_rate']:.0%} of drafts accepted"
        elif method.drafts_vary:
            text += ", no match found"
    auto = stats.get("auto")
    switched = auto.get("switched_to_plain_after_tokens") if isinstance(auto, Mapping) else None
    if isinstance(switched, int):
        text += f", then plain decoding after {switched} tokens"
    return text


def _lookup_sentence(decision: Decision, ran: GenerationStats | None) -> str:
    """Prompt lookup's choice in words true to what Auto measured: prompt lookup replayed over
    the last answers (what of each repeated text the model had read or already written), not
    the conversation, which a model may not even be sent (the demo reads the last message)."""
    if decision.probe:
        text = "Prompt lookup: trying it, as the last answers repeated earlier text"
    elif decision.predicted_speedup is not None and decision.predicted_speedup > 1.0:
        text = (
            "Prompt lookup: faster than plain decoding, as the last answers repeated earlier text"
        )
    else:
        text = "Prompt lookup: about as fast as plain decoding on the last answers"
    if ran is None or not ran.method.drafts_vary or ran.generated_tokens <= 1:
        return text
    if ran.accepted_tokens < LOW_LOOKUP_ACCEPTANCE * max(ran.drafted_tokens, 1):
        text += "; little of this answer did"
    return text


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["LOW_LOOKUP_ACCEPTANCE", "TIE_SPEEDUP", "auto_sentence", "ran_text"]
