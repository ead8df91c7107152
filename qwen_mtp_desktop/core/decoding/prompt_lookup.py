"""Prompt lookup (n-gram) speculative decoding: what its drafts were, step by step.

openvino-genai's prompt lookup (`VLMPipeline(..., prompt_lookup=True)`) drafts by finding the
last n tokens (n = max_ngram_size down to 1) earlier in prompt + answer and proposing the
tokens that followed there. Unlike MTP it proposes nothing when no n-gram matches, so a
streamer chunk of one token means "nothing proposed" or "all rejected", and chunk sizes alone
cannot give an honest acceptance. The candidate search is deterministic, though, so
`step_drafts()` replays it on the streamed ids and recovers how many drafts each step
proposed and accepted (checked against the runtime in tests: the accepted tokens are always a
prefix of the replayed candidates, and the next token differs from the next candidate unless
the step ended on an accepted end-of-text draft).

The replay follows `ContinuousBatchingForPromptLookupImpl::generate_candidates` (openvino-genai
2026.4): the first (leftmost) earlier occurrence of the longest matching n-gram wins; n is capped
at half the sequence length; up to min(K, max_new_tokens - generated - 1) tokens are proposed.
No OpenVINO here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from qwen_mtp_desktop.core.decoding.method import DEFAULT_LOOKUP_DRAFTS, DEFAULT_NGRAM
from qwen_mtp_desktop.core.decoding.stats import StepDrafts
from qwen_mtp_desktop.core.decoding.text import StopStringFilter


class NgramIndex:
    """The token sequence seen so far, indexed so the runtime's candidate search is O(n) per
    appended token instead of a scan of the whole sequence per step."""

    def __init__(self, max_ngram_size: int) -> None:
        if max_ngram_size < 1:
            raise ValueError("max_ngram_size must be at least 1")
        self._max_n = max_ngram_size
        self.ids: list[int] = []
        #: n -> n-gram -> start of its first occurrence.
        self._first: list[dict[tuple[int, ...], int]] = [{} for _ in range(max_ngram_size + 1)]

    def extend(self, ids: Sequence[int]) -> None:
        for token in ids:
            self.ids.append(int(token))
            end = len(self.ids)
            for n in range(1, min(self._max_n, end) + 1):
                self._first[n].setdefault(tuple(self.ids[end - n :]), end - n)

    def candidates(self, count: int) -> list[int]:
        """The drafts the runtime proposes now for up to `count` tokens."""
        length = len(self.ids)
        if count <= 0:
            return []
        max_n = self._max_n if self._max_n < length else length // 2
        for n in range(max_n, 0, -1):
            start = self._first[n].get(tuple(self.ids[length - n :]))
            # The trailing n-gram itself starts at length - n; only an earlier one counts.
            if start is not None and start < length - n:
                begin = start + n
                return self.ids[begin : begin + min(length - begin, count)]
        return []


def step_drafts(
    prompt_ids: Sequence[int],
    steps: Sequence[Sequence[int]],
    num_assistant_tokens: int,
    max_ngram_size: int,
    max_new_tokens: int,
) -> list[StepDrafts]:
    """Drafts proposed and accepted at each streamed step (the first, the prefill's token,
    proposes none).

    A step's accepted drafts are the leading tokens it shares with the candidates: all of its
    tokens but the target's own last one, or all of them when it ended on an accepted
    end-of-text draft (the runtime adds nothing after it). Should the replay ever disagree with
    the runtime (it should not; see the module docstring), the step's tokens but its last count
    as accepted and proposed, so nothing exceeds what was proposed.
    """
    index = NgramIndex(max_ngram_size)
    index.extend(prompt_ids)
    drafts: list[StepDrafts] = []
    generated = 0
    for step in steps:
        candidates: list[int] = []
        if generated > 0:
            candidates = index.candidates(min(num_assistant_tokens, max_new_tokens - generated - 1))
        shared = 0
        while shared < min(len(step), len(candidates)) and step[shared] == candidates[shared]:
            shared += 1
        accepted = max(shared, len(step) - 1) if generated > 0 else 0
        drafts.append(StepDrafts(max(len(candidates), accepted), accepted))
        index.extend(step)
        generated += len(step)
    return drafts


@dataclass(frozen=True)
class LookupReplay:
    """What prompt lookup would have done on a finished greedy answer: its steps, drafts
    proposed and accepted. Exact, because greedy output does not depend on the method: the
    answer is the same, so replaying the candidate search over it reproduces every step."""

    num_assistant_tokens: int
    max_ngram_size: int
    #: Decode steps (the prefill's token excluded) and the tokens they produced.
    steps: int
    tokens: int
    drafted: int
    accepted: int

    @property
    def tokens_per_step(self) -> float:
        return self.tokens / self.steps if self.steps else 1.0

    def to_json_dict(self) -> dict[str, int]:
        return {
            "num_assistant_tokens": self.num_assistant_tokens,
            "max_ngram_size": self.max_ngram_size,
            "steps": self.steps,
            "tokens": self.tokens,
            "drafted": self.drafted,
            "accepted": self.accepted,
        }


def replay_lookup(
    prompt_ids: Sequence[int],
    answer_ids: Sequence[int],
    num_assistant_tokens: int = DEFAULT_LOOKUP_DRAFTS,
    max_ngram_size: int = DEFAULT_NGRAM,
) -> LookupReplay:
    """Prompt lookup's steps over `answer_ids` (a greedy answer to `prompt_ids`): each step
    accepts the longest prefix of its candidates that the answer continues with, plus the
    target's own token. Auto (core.auto.policy) learns from it on every turn, whatever decoded it.
    """
    index = NgramIndex(max_ngram_size)
    index.extend(prompt_ids)
    answer = [int(i) for i in answer_ids]
    if answer:
        index.extend(answer[:1])  # the prefill's token: no drafts
    at, steps, drafted, accepted = 1, 0, 0, 0
    while at < len(answer):
        left = len(answer) - at
        candidates = index.candidates(min(num_assistant_tokens, left - 1))
        taken = 0
        while taken < len(candidates) and candidates[taken] == answer[at + taken]:
            taken += 1
        size = min(taken + 1, left)
        index.extend(answer[at : at + size])
        at += size
        steps += 1
        drafted += len(candidates)
        accepted += taken
    return LookupReplay(
        num_assistant_tokens,
        max_ngram_size,
        steps,
        max(len(answer) - 1, 0),
        drafted,
        accepted,
    )


@dataclass
class LookupRecorder:
    """One prompt-lookup turn as the streamer sees it: the runtime's steps as they came (for
    the draft replay and the step statistics) and the ids safe to show after stop strings.

    Stop strings are applied here, not by the runtime: openvino-genai's continuous-batching
    pipeline trims a stop string at a different token than its plain pipeline does (measured:
    "3 4" in "1 2 3 4" kept "1 2" against plain decoding's "1 2 "), and output must equal
    plain decoding's. The app's `StopStringFilter` is the one tested equal to it."""

    prompt_ids: Sequence[int]
    num_assistant_tokens: int
    max_ngram_size: int
    max_new_tokens: int
    stops: StopStringFilter
    steps: list[list[int]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    emitted: int = 0
    stopped: bool = False

    def step(self, ids: Sequence[int], elapsed_s: float) -> list[int]:
        """Record one runtime step; returns the ids to show now (`stopped` says when a stop
        string ended the text: the generation should stop)."""
        self.steps.append([int(i) for i in ids])
        self.times.append(elapsed_s)
        ready, self.stopped = self.stops.push(ids)
        self.emitted += len(ready)
        return ready

    def flush(self) -> list[int]:
        """Held-back ids at the end of a turn no stop string ended."""
        rest = [] if self.stopped else self.stops.flush()
        self.emitted += len(rest)
        return rest

    def step_record(self) -> tuple[list[int], list[float], list[StepDrafts]]:
        """(chunk sizes, chunk times, drafts per chunk) of the tokens shown: the runtime's
        steps, cut where the shown text ended (a stop string drops its tokens)."""
        drafts = step_drafts(
            self.prompt_ids,
            self.steps,
            self.num_assistant_tokens,
            self.max_ngram_size,
            self.max_new_tokens,
        )
        sizes: list[int] = []
        left = self.emitted
        for step in self.steps:
            if left <= 0:
                break
            sizes.append(min(len(step), left))
            left -= sizes[-1]
        count = len(sizes)
        return sizes, self.times[:count], drafts[:count]


__all__ = [
    "LookupRecorder",
    "LookupReplay",
    "NgramIndex",
    "replay_lookup",
    "step_drafts",
]
