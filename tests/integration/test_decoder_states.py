"""The app's decoder keeps conversation states between turns (core.decoding.state_cache): what
it keeps stays bounded, a broken snapshot is discarded, and cancellation or a failure leaves a
state that is consistent or empty, never wrong. The conversation-level property tests (reuse
equals a cold prefill, turn after turn) are in test_state_reuse.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from qwen_mtp_desktop.core.decoding import decoder as decoder_module
from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.kv_slots import COMPACT_MIN_HIDDEN
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.state_cache import Snapshot
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS

pytestmark = pytest.mark.model

PROMPTS = [
    "<|im_start|>user\nCount from 1 to 20.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nRepeat 'tea time' three times.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nList the numbers from 40 to 52.<|im_end|>\n<|im_start|>assistant\n",
]


@pytest.fixture(scope="module")
def setup(demo_model: Path) -> Iterator[tuple[AppDecoder, AppDecoder, list[list[int]], set[int]]]:
    """(a decoder that keeps states, one that never does, prompt ids, stop ids)."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(demo_model))
    prompts = [
        [int(i) for i in tokenizer.encode(p, add_special_tokens=False).input_ids.data[0]]
        for p in PROMPTS
    ]
    stops = {tokenizer.get_eos_token_id()}
    yield (
        AppDecoder(demo_model, "CPU", EXACT_NUMERICS),
        AppDecoder(demo_model, "CPU", EXACT_NUMERICS, cache_budget=0),
        prompts,
        stops,
    )


def answer(
    decoder: AppDecoder, ids: list[int], method: DecodingMethod, stops: set[int]
) -> list[int]:
    steps = decoder.decode(ids, method=method, max_new_tokens=24, stop_ids=stops)
    return [t for step in steps for t in step.tokens]


def test_hidden_cache_entries_are_compacted_whatever_the_turns(setup) -> None:  # type: ignore[no-untyped-def]
    """Rejected drafts and regenerated answers hide cache entries; they are copied together
    before they pile up, so attention never pays for many holes."""
    decoder, _, prompts, stops = setup
    for turn in range(40):  # regenerate, again and again (each hides the last answer)
        answer(decoder, prompts[0], DecodingMethod.mtp(1 + turn % 4), stops)
        for kv in (decoder.target.kv, decoder.mtp.kv):
            assert kv.hidden <= max(COMPACT_MIN_HIDDEN, kv.size // 4) + 8, (turn, kv.size)
    assert decoder.target.kv.copies > 0  # compaction did run


def test_a_budget_of_zero_keeps_nothing_and_every_turn_is_cold(setup) -> None:  # type: ignore[no-untyped-def]
    _, cold, prompts, stops = setup
    for ids in prompts + prompts:
        answer(cold, ids, DecodingMethod.mtp(2), stops)
        assert cold.last_prefill is not None and cold.last_prefill.reused == 0
        assert cold.cache.nbytes == 0


def test_the_cache_stays_within_its_budget(demo_model: Path, setup) -> None:  # type: ignore[no-untyped-def]
    _, _, prompts, stops = setup
    small = AppDecoder(demo_model, "CPU", EXACT_NUMERICS, cache_budget=60_000)
    for turn in range(12):
        answer(small, prompts[turn % 3] + [100 + turn] * (turn % 5), DecodingMethod.mtp(2), stops)
        assert small.cache.nbytes <= 60_000


def test_a_snapshot_that_does_not_fit_is_discarded_with_a_log_line(
    setup,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    decoder, cold, prompts, stops = setup
    ids = prompts[0]
    first = answer(decoder, ids, DecodingMethod.mtp(2), stops)
    live = decoder.cache.live
    assert live is not None and live.snapshots
    # Damage every snapshot: wrong shapes (as from another model).
    live.snapshots = [
        Snapshot(s.position, tuple(np.zeros(3, np.uint8) for _ in s.recurrent), s.logits)
        for s in live.snapshots
    ]
    with caplog.at_level(logging.WARNING):
        again = answer(decoder, ids + first[:2], DecodingMethod.mtp(2), stops)
    assert again == answer(cold, ids + first[:2], DecodingMethod.mtp(2), stops)
    assert "does not fit" in caplog.text


@pytest.mark.parametrize(
    "damage",
    [
        lambda a: a[:, :, :, :-1],  # a shorter head (another model)
        lambda a: np.concatenate([a, a], axis=1),  # more heads
        lambda a: a.astype(np.float16),  # another precision
        lambda a: a[:, :, :1],  # fewer tokens than the snapshot needs
    ],
    ids=["head size", "heads", "dtype", "tokens"],
)
def test_kept_caches_that_do_not_fit_are_discarded_with_a_log_line(
    demo_model: Path,
    setup,  # type: ignore[no-untyped-def]
    damage,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A conversation put aside (another one ran since) whose caches no longer fit the
    model's is dropped when it would be resumed, and the turn is answered cold."""
    _, cold, prompts, stops = setup
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    first = answer(decoder, prompts[0], DecodingMethod.mtp(2), stops)
    answer(decoder, prompts[1], DecodingMethod.mtp(2), stops)  # the first goes aside
    (kept,) = decoder.cache.aside
    assert kept.caches is not None
    kept.caches.target[0] = damage(kept.caches.target[0])
    follow = prompts[0] + first[:2]
    with caplog.at_level(logging.WARNING):
        again = answer(decoder, follow, DecodingMethod.mtp(2), stops)
    assert "does not fit" in caplog.text
    assert kept not in decoder.cache.aside
    assert again == answer(cold, follow, DecodingMethod.mtp(2), stops)


def test_a_restore_checks_shapes_without_reading_the_live_cache(setup) -> None:  # type: ignore[no-untyped-def]
    """Reading a state copies the whole cache; restoring a conversation must not read the one
    that was live (its copy for the state cache is made once, when it is put aside)."""
    decoder, _, prompts, stops = setup
    answer(decoder, prompts[2], DecodingMethod.mtp(2), stops)
    kv = decoder.target.kv
    saved = kv.save()
    reads = 0
    real = kv._request

    class Counting:  # the real request; each query of its states is counted
        def query_state(self) -> list[object]:
            nonlocal reads
            reads += 1
            return list(real.query_state())

    kv._request = Counting()
    try:
        kv.restore(saved, kv.live)
    finally:
        kv._request = real
    assert reads == 0
    assert answer(decoder, prompts[2], DecodingMethod.mtp(2), stops)


def test_an_answer_the_next_prompt_renders_otherwise_is_not_kept_as_an_old_branch(
    setup,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follow-up holds the whole last prompt, then other tokens where the answer was (a
    template that re-renders earlier answers, as Qwen3.5's drops their thinking): the answer
    as generated never comes back, so it is not copied aside, however long. A regenerate
    (the same prompt again) keeps the old answer, which a switch between versions may want."""
    decoder, cold, prompts, stops = setup
    monkeypatch.setattr(decoder_module, "MIN_TAIL_WORTH_SAVING", 8)
    monkeypatch.setattr(decoder_module, "MIN_TOKENS_WORTH_SAVING", 1)
    method = DecodingMethod.plain()
    ids = prompts[0]
    decoder.drop_states()
    assert len(answer(decoder, ids, method, stops)) > 8
    copies = decoder.target.kv.copies
    follow = [*ids, *prompts[1]]  # the answer rendered otherwise, then the next question
    assert answer(decoder, follow, method, stops) == answer(cold, follow, method, stops)
    assert decoder.last_prefill is not None and decoder.last_prefill.reused == len(ids)
    assert decoder.cache.aside == [] and decoder.target.kv.copies == copies
    decoder.drop_states()
    old = answer(decoder, ids, method, stops)
    answer(decoder, ids, method, stops)  # regenerate
    # The old answer kept (its last token was never processed).
    assert [len(kept.ids) for kept in decoder.cache.aside] == [len(ids) + len(old) - 1]


def test_cancel_mid_answer_leaves_a_state_the_next_turn_can_use(setup) -> None:  # type: ignore[no-untyped-def]
    decoder, cold, prompts, stops = setup
    ids = prompts[1]
    steps = decoder.decode(ids, method=DecodingMethod.mtp(3), max_new_tokens=24, stop_ids=stops)
    partial = [t for _, step in zip(range(2), steps, strict=False) for t in step.tokens]
    steps.close()  # the consumer stopped between steps
    follow = ids + partial
    assert answer(decoder, follow, DecodingMethod.mtp(3), stops) == answer(
        cold, follow, DecodingMethod.mtp(3), stops
    )
    assert decoder.last_prefill is not None and decoder.last_prefill.reused > len(ids) // 2


def words(seed: int, count: int) -> list[int]:
    """Token ids of ordinary text (ids below 2,000 are word pieces in the demo vocabulary)."""
    return np.random.default_rng(seed).integers(300, 2000, count).tolist()


def stopped_turn(decoder: AppDecoder, ids: list[int], stops: set[int], after_s: float) -> list[int]:
    """The tokens of a plain turn cancelled `after_s` seconds after it began. A prefill call
    stopped part-way yields none; a cancel seen only between steps (the prefill ran through)
    yields the first token."""
    began = time.perf_counter()
    steps = decoder.decode(
        ids,
        method=DecodingMethod.plain(),
        max_new_tokens=24,
        stop_ids=stops,
        cancelled=lambda: time.perf_counter() > began + after_s,
    )
    return [t for step in steps for t in step.tokens]


def test_stop_during_a_long_prefill_stops_the_prefill(setup) -> None:  # type: ignore[no-untyped-def]
    """A cold prefill of many tokens is one model call (about a minute for 7,000 tokens on
    Qwen3.5-0.8B here): it is stopped part-way, and its half-written caches are dropped."""
    decoder, cold, _, stops = setup
    ids = words(1, 12_000)
    began = time.perf_counter()
    expected = answer(cold, ids, DecodingMethod.plain(), stops)
    full = time.perf_counter() - began
    decoder.drop_states()
    assert stopped_turn(decoder, ids, stops, after_s=0.2 * full) == []
    assert decoder.last_prefill is None and decoder.cache.live is None
    assert answer(decoder, ids, DecodingMethod.plain(), stops) == expected


def test_stop_during_a_long_follow_up_keeps_the_conversation(setup) -> None:  # type: ignore[no-untyped-def]
    """A long follow-up after a kept conversation runs on the continuation graph, which writes
    nothing back until it finishes: stopped part-way, the conversation is kept as it was and
    the next try prefills only the new part, answering as a cold prefill does."""
    decoder, cold, _, stops = setup
    decoder.drop_states()
    ids = words(2, 1_000)
    ids += answer(decoder, ids, DecodingMethod.plain(), stops)
    ids += words(3, 100)  # a short follow-up: the continuation graph is compiled by now
    ids += answer(decoder, ids, DecodingMethod.plain(), stops)
    graph = decoder.target.continuation
    assert graph is not None and graph.calls == 1
    kept = decoder.target.kv.live
    ids += words(4, 8_000)
    began = time.perf_counter()
    expected = answer(cold, ids, DecodingMethod.plain(), stops)
    full = time.perf_counter() - began  # the new part alone costs most of it
    assert stopped_turn(decoder, ids, stops, after_s=0.2 * full) == []
    assert graph.calls == 1  # the stopped call wrote nothing back
    assert answer(decoder, ids, DecodingMethod.plain(), stops) == expected
    assert graph.calls == 2
    assert decoder.last_prefill is not None and decoder.last_prefill.reused >= kept > 1_000


def test_stop_while_the_mtp_head_catches_up_ends_the_turn_after_its_first_token(setup) -> None:  # type: ignore[no-untyped-def]
    """After a long prefill the MTP head catches up on every prompt position before its first
    draft (a call as long as a prefill of the head's layer): a cancel then ends the turn
    there, and the next turn continues from a consistent state."""
    decoder, cold, _, stops = setup
    decoder.drop_states()
    ids = words(5, 2_000)
    looks = 0

    def cancelled() -> bool:
        nonlocal looks
        if decoder.last_prefill is None:  # the prefill runs
            return False
        looks += 1
        return looks > 1  # the step loop goes on once; the head's catch-up is then cancelled

    steps = decoder.decode(
        ids, method=DecodingMethod.mtp(2), max_new_tokens=24, stop_ids=stops, cancelled=cancelled
    )
    tokens = [t for step in steps for t in step.tokens]
    assert looks == 2 and decoder.target.timing.draft_calls == 0
    assert tokens == answer(cold, ids, DecodingMethod.mtp(2), stops)[:1]
    follow = ids + tokens
    assert answer(decoder, follow, DecodingMethod.mtp(2), stops) == answer(
        cold, follow, DecodingMethod.mtp(2), stops
    )
    assert decoder.last_prefill is not None and decoder.last_prefill.reused == len(ids)


def test_a_failure_mid_call_drops_the_state(setup, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    decoder, cold, prompts, stops = setup
    ids = prompts[2]
    answer(decoder, ids, DecodingMethod.mtp(2), stops)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("native failure")  # what the runtime raises for everything

    monkeypatch.setattr(decoder.target, "run", broken)
    with pytest.raises(RuntimeError):
        answer(decoder, [*ids, 11, 12], DecodingMethod.mtp(2), stops)
    monkeypatch.undo()
    assert decoder.cache.live is None
    again = answer(decoder, [*ids, 11, 12], DecodingMethod.mtp(2), stops)
    assert again == answer(cold, [*ids, 11, 12], DecodingMethod.mtp(2), stops)


def test_saved_caches_longer_than_a_fresh_requests_mask_restore(demo_model: Path) -> None:
    """A restore into a request whose slot mask is shorter than the saved caches (a fresh
    decoder's holds 1,024 slots) grows the mask first; it once raised, and the kept
    conversation was discarded as not fitting."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(demo_model))
    text = "<|im_start|>user\n" + "count one two three four five six. " * 200
    ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    assert len(ids) > 1500
    source = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    answer(source, ids, DecodingMethod.plain(), set())
    saved = source.target.kv.save()
    fresh = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    fresh.target.kv.restore(saved, len(ids))  # raised ValueError before the fix
    assert fresh.target.kv.size == saved[0].shape[2] and fresh.target.kv.live == len(ids)
    mask = fresh.target.kv.call_mask(0)[0]
    assert mask[: len(ids)].all() and not mask[len(ids) :].any()
