"""Pure helpers for streamed decoding: incremental detokenization, thinking/answer split and
the statistics of speculative decoding derived from per-step chunk sizes.

No OpenVINO here, so all of it is testable with recorded data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Mode = Literal["mtp", "baseline"]
FinishReason = Literal["eos", "length", "stop_string", "cancelled"]


class IncrementalDecoder:
    """Turns a stream of token ids into text deltas.

    Byte-level BPE can split one character over several tokens; until its bytes are complete the
    decoded text ends in U+FFFD, so that tail is held back. Once the text ends cleanly the window
    restarts, keeping each step's cost independent of the answer's length.
    """

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self._decode = decode
        self._window: list[int] = []
        self._printed = 0  # characters of decode(window) already returned

    def push(self, token_ids: Sequence[int]) -> str:
        if not token_ids:
            return ""
        self._window.extend(token_ids)
        text = self._decode(self._window)
        clean = text.rstrip("\ufffd")
        delta = clean[self._printed :]
        if len(clean) == len(text):
            self._window = []
            self._printed = 0
        else:
            self._printed = len(clean)
        return delta

    def flush(self) -> str:
        """Whatever is held back (a character that never completed shows as U+FFFD)."""
        text = self._decode(self._window)[self._printed :] if self._window else ""
        self._window = []
        self._printed = 0
        return text


class ThinkingSplitter:
    """Routes token ids to the reasoning or the answer section.

    Qwen3.5 thinks between `<think>` and `</think>`; when thinking is on, the prompt already ends
    with `<think>`, so generation starts inside the reasoning section. The markers themselves are
    dropped from both sections.
    """

    def __init__(
        self, think_start_id: int | None, think_end_id: int | None, thinking: bool
    ) -> None:
        self._start = think_start_id
        self._end = think_end_id
        self.in_reasoning = thinking and think_end_id is not None
        self.reasoning_tokens = 0
        self.answer_tokens = 0

    def split(self, token_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        reasoning: list[int] = []
        answer: list[int] = []
        for token in token_ids:
            if token == self._start and self._start is not None:
                self.in_reasoning = True
                self.reasoning_tokens += 1
            elif token == self._end and self._end is not None and self.in_reasoning:
                self.in_reasoning = False
                self.reasoning_tokens += 1
            elif self.in_reasoning:
                reasoning.append(token)
                self.reasoning_tokens += 1
            else:
                answer.append(token)
                self.answer_tokens += 1
        return reasoning, answer


@dataclass
class GenerationStats:
    """Everything measured about one generation. Times are in seconds."""

    mode: Mode
    num_assistant_tokens: int
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

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


def speculative_stats(
    chunk_sizes: Sequence[int],
    num_assistant_tokens: int,
    mode: Mode,
    max_new_tokens: int | None = None,
) -> tuple[int, int, list[float]]:
    """(drafted, accepted, acceptance by position) from per-step chunk sizes.

    A decode step that proposes d drafts writes 1 + a tokens, a = drafts accepted (the target
    always adds one token of its own). The first write comes from the prefill, which drafts
    nothing. Near the token budget the runtime drafts only what can still be used:
    d = min(n, max_new_tokens - generated - 1), so a final step cut short by the budget is not
    counted as rejected drafts (this matches ContinuousBatchingPipeline's acceptance rate).
    """
    if mode != "mtp" or num_assistant_tokens <= 0 or not chunk_sizes:
        return 0, 0, []
    n = num_assistant_tokens
    generated = chunk_sizes[0]
    proposed_per_step: list[int] = []
    accepted_per_step: list[int] = []
    for size in chunk_sizes[1:]:
        proposed = n if max_new_tokens is None else max(min(n, max_new_tokens - generated - 1), 0)
        proposed_per_step.append(proposed)
        accepted_per_step.append(min(max(size - 1, 0), proposed))
        generated += size
    drafted = sum(proposed_per_step)
    accepted = sum(accepted_per_step)
    by_position = []
    for i in range(1, n + 1):
        steps = [a for a, d in zip(accepted_per_step, proposed_per_step, strict=True) if d >= i]
        by_position.append(sum(1 for a in steps if a >= i) / len(steps) if steps else 0.0)
    return drafted, accepted, by_position


def build_stats(
    *,
    mode: Mode,
    num_assistant_tokens: int,
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
) -> GenerationStats:
    """Stats from the per-step record. `chunk_times` are seconds since generate() was called."""
    generated = sum(chunk_sizes)
    ttft = chunk_times[0] if chunk_times else 0.0
    decode_time = chunk_times[-1] - chunk_times[0] if len(chunk_times) > 1 else 0.0
    decode_tokens = generated - chunk_sizes[0] if chunk_sizes else 0
    drafted, accepted, by_position = speculative_stats(
        chunk_sizes, num_assistant_tokens, mode, max_new_tokens
    )
    decode_steps = max(len(chunk_sizes) - 1, 0)
    return GenerationStats(
        mode=mode,
        num_assistant_tokens=num_assistant_tokens if mode == "mtp" else 0,
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
    )
