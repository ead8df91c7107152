"""core.decoding.prompt_lookup: the replay of openvino-genai's candidate search, against a direct
transcription of the runtime's scan (generated sequences), and the step record of a turn."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.prompt_lookup import LookupRecorder, NgramIndex, step_drafts
from qwen_mtp_desktop.core.decoding.stats import StepDrafts, speculative_stats
from qwen_mtp_desktop.core.decoding.text import StopStringFilter


def scan(ids: Sequence[int], count: int, max_ngram: int) -> list[int]:
    """The runtime's search as written there: a scan from the left for each n-gram size."""
    if count == 0:
        return []
    length = len(ids)
    if max_ngram >= length:
        max_ngram = length // 2
    for n in range(max_ngram, 0, -1):
        ngram = list(ids[length - n :])
        for i in range(length - n):
            if list(ids[i : i + n]) == ngram:
                start = i + n
                return list(ids[start : start + min(length - start, count)])
    return []


@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=60),
    st.integers(0, 8),
    st.integers(1, 5),
)
def test_index_finds_what_the_runtime_scan_finds(ids: list[int], count: int, ngram: int) -> None:
    index = NgramIndex(ngram)
    for end in range(1, len(ids) + 1):
        index.extend(ids[end - 1 : end])
        assert index.candidates(count) == scan(ids[:end], count, ngram)


def test_proposed_drafts_counts_per_step_and_respects_the_budget() -> None:
    prompt = [1, 2, 3, 4, 1, 2]
    # The prefill's token proposes nothing; then "1 2" -> "3 4 1" (k=3) and so on.
    steps = [[3], [4, 1, 2, 9], [5]]
    drafts = step_drafts(prompt, steps, 3, 2, 100)
    assert drafts == [StepDrafts(0, 0), StepDrafts(3, 3), StepDrafts(0, 0)]
    # Two tokens left after the first step: at most one draft can still be used.
    assert step_drafts(prompt, [[3], [4, 1]], 3, 2, 3)[1] == StepDrafts(1, 1)


def test_a_step_ending_on_an_accepted_end_of_text_draft_counts_it() -> None:
    """The runtime adds no token after an accepted end-of-text draft, so such a step is all
    drafts (measured on the demo model: "0a", K=1, n=1 ends with a one-token step that was the
    candidate)."""
    eos = 742
    prompt = [64, eos, 198]
    drafts = step_drafts(prompt, [[64], [eos]], 1, 1, 7)
    assert drafts[1] == StepDrafts(1, 1)
    sizes = [1, 1]
    assert speculative_stats(sizes, 1, "lookup", 7, drafts)[:2] == (1, 1)
    # A rejected draft: the target's own token differs from the candidate.
    assert step_drafts(prompt, [[64], [5]], 1, 1, 7)[1] == StepDrafts(1, 0)


def test_recorder_cuts_the_record_where_a_stop_string_ended_the_text() -> None:
    words = {1: "a", 2: " b", 3: " STOP", 4: " c"}
    stops = StopStringFilter(lambda ids: "".join(words[i] for i in ids), ["STOP"])
    recorder = LookupRecorder([1, 2, 3, 4], 3, 2, 50, stops)
    shown = recorder.step([1], 0.01)
    shown += recorder.step([2, 3, 4], 0.02)
    assert recorder.stopped and shown == [1, 2]
    sizes, times, drafts = recorder.step_record()
    assert sizes == [1, 1] and times == [0.01, 0.02] and [d.proposed for d in drafts] == [0, 3]
    drafted, accepted, _ = speculative_stats(sizes, 3, "lookup", 50, drafts)
    # " b" was the first of three accepted drafts; the two after it are cut with the text.
    assert (drafted, accepted) == (3, 1)


def test_lookup_stats_count_only_proposed_drafts() -> None:
    # Steps that proposed nothing are not rejections.
    sizes = [1, 1, 4, 1, 3]
    drafts = [StepDrafts(p, a) for p, a in [(0, 0), (0, 0), (3, 3), (0, 0), (3, 2)]]
    drafted, accepted, by_position = speculative_stats(sizes, 3, "lookup", None, drafts)
    assert (drafted, accepted) == (6, 5)
    assert by_position == [1.0, 1.0, 0.5]
    assert speculative_stats(sizes, 3, "lookup", None, None) == (0, 0, [])


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=30),
    st.lists(st.integers(0, 4), min_size=0, max_size=40),
    st.integers(1, 5),
    st.integers(1, 3),
)
def test_replay_matches_a_step_by_step_simulation(
    prompt: list[int], answer: list[int], k: int, ngram: int
) -> None:
    """The replay equals running the runtime's search step by step against the answer."""
    from qwen_mtp_desktop.core.decoding.prompt_lookup import replay_lookup

    replay = replay_lookup(prompt, answer, k, ngram)
    sizes, drafted, accepted = [], 0, 0
    at = 1 if answer else 0
    while at < len(answer):
        candidates = scan(prompt + answer[:at], min(k, len(answer) - at - 1), ngram)
        taken = 0
        while taken < len(candidates) and candidates[taken] == answer[at + taken]:
            taken += 1
        sizes.append(taken + 1)
        drafted += len(candidates)
        accepted += taken
        at += taken + 1
    assert (replay.steps, replay.drafted, replay.accepted) == (len(sizes), drafted, accepted)
    assert replay.tokens == max(len(answer) - 1, 0) == sum(sizes)


def test_replay_of_a_copied_text_needs_few_steps() -> None:
    from qwen_mtp_desktop.core.decoding.prompt_lookup import replay_lookup

    text = list(range(10, 40))
    copied = replay_lookup([1, 2, *text, 3], text, 4, 3)
    fresh = replay_lookup([1, 2, 3], list(range(50, 80)), 4, 3)
    assert copied.tokens_per_step > 3.5 and copied.accepted > 20
    assert fresh.tokens_per_step == 1.0 and fresh.drafted == 0
