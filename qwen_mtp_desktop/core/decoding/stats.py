"""What an answer measured (`GenerationStats`) and the statistics of speculative decoding
derived from per-step chunk sizes.

No OpenVINO here, so all of it is testable with recorded data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from qwen_mtp_desktop.core.decoding.method import DecodingMethod

FinishReason = Literal["eos", "length", "stop_string", "cancelled"]


@dataclass(frozen=True)
class StepDrafts:
    """One decode step of a method that proposes a varying number of drafts (prompt lookup):
    how many it proposed and how many of the step's tokens were accepted drafts."""

    proposed: int
    accepted: int


@dataclass
class GenerationStats:
    """Everything measured about one generation. Times are in seconds."""

    #: The method that ran (an MTP request on a model without its head ran plain decoding).
    method: DecodingMethod
    device: str
    prompt_tokens: int
    generated_tokens: int
    reasoning_tokens: int
    answer_tokens: int
    ttft_s: float
    decode_tokens_per_s: float
    total_s: float
    #: Decoding steps: one per streamer write (the first is the prefill's token).
    steps: int
    drafted_tokens: int
    accepted_tokens: int
    acceptance_rate: float
    #: Mean number of draft tokens accepted per decode step.
    mean_accepted_per_step: float
    #: Fraction of decode steps whose draft at position i (1-based) was accepted.
    acceptance_by_position: list[float]
    finish_reason: FinishReason
    chunk_sizes: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: When each chunk arrived, seconds since generate() was called (same length as
    #: chunk_sizes): what Auto (core.auto.policy) learns step costs from.
    chunk_times: list[float] = field(default_factory=list)
    #: Index of the first chunk decoded without MTP when an MTP turn continued with plain
    #: decoding midway (Auto's within-turn fall back); None when it did not.
    switched_to_plain_at: int | None = None
    #: What decoded the turn: "app" (the app's own decoder, core.decoding.decoder) or "genai"
    #: (openvino-genai's pipeline); empty in records from before the fast decoder.
    decoder: str = ""
    #: What prompt lookup would have done on this greedy text answer, whatever decoded it
    #: (core.decoding.prompt_lookup.LookupReplay as a dict; None for sampled or image turns): Auto
    #: learns from it how well the conversation copies.
    lookup_replay: dict[str, int] | None = None
    #: Prompt tokens whose state was kept from an earlier turn (core.decoding.state_cache),
    #: so only prompt_tokens - reused_tokens were prefilled; the API's `cached_tokens`.
    reused_tokens: int = 0
    #: Earlier messages of the conversation left out so its prompt fits the model's context
    #: (GenerationSettings.context_overflow); 0 when it was read whole.
    left_out_messages: int = 0
    #: Index j: drafting steps that accepted exactly j drafts (the API's vLLM-shaped
    #: `acceptance_histogram`); empty without drafts.
    acceptance_histogram: list[int] = field(default_factory=list)
    #: An answer from a remote server (core.remote.client): the endpoint, and the server's own
    #: `mtp` statistics when it reported them; None for local answers (and left out of JSON).
    remote: dict[str, Any] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["method"] = self.method.to_record()
        if data["remote"] is None:
            del data["remote"]
        return data


def speculative_stats(
    chunk_sizes: Sequence[int],
    method: DecodingMethod,
    max_new_tokens: int | None = None,
    drafts: Sequence[StepDrafts] | None = None,
) -> tuple[int, int, list[float]]:
    """(drafted, accepted, acceptance by position) from per-step chunk sizes of `method`.

    `drafts` (one per chunk, same length as `chunk_sizes`) gives what each step proposed and
    accepted exactly: the app's decoder reports it for every method, and openvino-genai's
    prompt lookup is replayed (core.decoding.prompt_lookup). Without it (openvino-genai's MTP)
    a step is taken to propose `method.drafts`.

    A decode step that proposes d drafts writes 1 + a tokens, a = drafts accepted (the target
    always adds one token of its own). The first write comes from the prefill, which drafts
    nothing. Near the token budget the runtime drafts only what can still be used:
    d = min(n, max_new_tokens - generated - 1), so a final step cut short by the budget is not
    counted as rejected drafts (this matches ContinuousBatchingPipeline's acceptance rate).
    A step that accepts an end-of-text draft ends there, with no token of the target's: the
    lookup replay sees that; for MTP, whose drafts are not visible, such a final step counts
    one accepted draft too few.
    """
    steps = drafting_steps(chunk_sizes, method, max_new_tokens, drafts)
    if steps is None:
        return 0, 0, []
    proposed_per_step, accepted_per_step = steps
    drafted = sum(proposed_per_step)
    accepted = sum(accepted_per_step)
    by_position = []
    for i in range(1, method.drafts + 1):
        steps_i = [a for a, d in zip(accepted_per_step, proposed_per_step, strict=True) if d >= i]
        by_position.append(sum(1 for a in steps_i if a >= i) / len(steps_i) if steps_i else 0.0)
    return drafted, accepted, by_position


def drafting_steps(
    chunk_sizes: Sequence[int],
    method: DecodingMethod,
    max_new_tokens: int | None = None,
    drafts: Sequence[StepDrafts] | None = None,
) -> tuple[list[int], list[int]] | None:
    """(drafts proposed, drafts accepted) of each decode step, as `speculative_stats` counts
    them; None when the method drafts nothing or the counts cannot be known."""
    if method.is_plain or method.drafts <= 0 or not chunk_sizes:
        return None
    exact = drafts is not None and len(drafts) >= len(chunk_sizes)
    if method.drafts_vary and not exact:
        return None
    n = method.drafts
    generated = chunk_sizes[0]
    proposed_per_step: list[int] = []
    accepted_per_step: list[int] = []
    for i, size in enumerate(chunk_sizes[1:], start=1):
        if drafts is not None and exact:
            count = drafts[i].proposed
            accepted_per_step.append(min(drafts[i].accepted, count, size))
        else:
            count, accepted = _unreported_step(n, max_new_tokens, generated, size)
            accepted_per_step.append(accepted)
        proposed_per_step.append(count)
        generated += size
    return proposed_per_step, accepted_per_step


def _unreported_step(
    n: int, max_new_tokens: int | None, generated: int, size: int
) -> tuple[int, int]:
    """(drafts proposed, drafts accepted) of a decode step of `size` tokens at depth `n` whose
    drafts are not reported, after `generated` tokens (see `speculative_stats`)."""
    count = n if max_new_tokens is None else max(min(n, max_new_tokens - generated - 1), 0)
    return count, min(max(size - 1, 0), count)


class DraftTally:
    """`speculative_stats`' drafted and accepted counts for steps whose drafts are not reported
    (the chat's live figures), kept as the steps arrive: each step is counted once, so the
    live count over a long answer costs per batch, not per answer so far (issue 45, item 10)."""

    def __init__(self, method: DecodingMethod, max_new_tokens: int | None = None) -> None:
        self.method, self.max_new_tokens = method, max_new_tokens
        self.steps = 0  # chunk sizes taken; the first is the prefill's, which drafts nothing
        self.generated = 0
        self.drafted = self.accepted = 0

    def add(self, sizes: Sequence[int]) -> None:
        method = self.method
        counts = not method.is_plain and method.drafts > 0 and not method.drafts_vary
        for size in sizes:
            if self.steps and counts:
                count, accepted = _unreported_step(
                    method.drafts, self.max_new_tokens, self.generated, size
                )
                self.drafted += count
                self.accepted += accepted
            self.generated += size
            self.steps += 1


def build_stats(
    *,
    method: DecodingMethod,
    device: str,
    prompt_tokens: int,
    chunk_sizes: Sequence[int],
    chunk_times: Sequence[float],
    total_s: float,
    reasoning_tokens: int,
    answer_tokens: int,
    finish_reason: FinishReason,
    warnings: Sequence[str] = (),
    max_new_tokens: int | None = None,
    switched_to_plain_at: int | None = None,
    decoder: str = "",
    drafts: Sequence[StepDrafts] | None = None,
) -> GenerationStats:
    """Stats from the per-step record. `chunk_times` are seconds since generate() was called.
    With `switched_to_plain_at`, only the chunks before it count for draft acceptance."""
    generated = sum(chunk_sizes)
    ttft = chunk_times[0] if chunk_times else 0.0
    decode_time = chunk_times[-1] - chunk_times[0] if len(chunk_times) > 1 else 0.0
    decode_tokens = generated - chunk_sizes[0] if chunk_sizes else 0
    mtp_sizes = chunk_sizes if switched_to_plain_at is None else chunk_sizes[:switched_to_plain_at]
    drafted, accepted, by_position = speculative_stats(mtp_sizes, method, max_new_tokens, drafts)
    histogram: list[int] = []
    steps = drafting_steps(mtp_sizes, method, max_new_tokens, drafts) if drafted else None
    if steps is not None:
        histogram = [0] * (method.drafts + 1)
        for proposed, taken in zip(*steps, strict=True):
            if proposed:  # a step cut to no drafts by the token budget verified nothing
                histogram[min(taken, method.drafts)] += 1
    decode_steps = max(len(mtp_sizes) - 1, 0)
    return GenerationStats(
        method=method,
        device=device,
        prompt_tokens=prompt_tokens,
        generated_tokens=generated,
        reasoning_tokens=reasoning_tokens,
        answer_tokens=answer_tokens,
        ttft_s=ttft,
        decode_tokens_per_s=decode_tokens / decode_time if decode_time > 0 else 0.0,
        total_s=total_s,
        steps=len(chunk_sizes),
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted else 0.0,
        mean_accepted_per_step=accepted / decode_steps if decode_steps and drafted else 0.0,
        acceptance_by_position=by_position,
        finish_reason=finish_reason,
        chunk_sizes=list(chunk_sizes),
        warnings=list(warnings),
        chunk_times=[round(t, 6) for t in chunk_times],
        switched_to_plain_at=switched_to_plain_at,
        decoder=decoder,
        acceptance_histogram=histogram,
    )
