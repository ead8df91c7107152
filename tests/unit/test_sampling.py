"""core.decoding.sampling: logits processing checked against a straightforward reference (full
sort, dense float64) and against Hugging Face's logits processors on generated logits and
settings; the penalty history; the speculative acceptance rule on hand-built p and q; seeds;
bad input. The statistical exactness test of the whole speculative sampler is in
test_sampling_exactness.py."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import MAX_SEED, MethodError, Sampling
from qwen_mtp_desktop.core.decoding.sampling import (
    Distribution,
    LogitsError,
    PenaltyHistory,
    Verdict,
    accept_probability,
    fresh_seed,
    make_generator,
    penalised_logits,
    process_logits,
    residual,
    sample_draft,
    verify_drafts,
)
from tests.statistics import goodness_of_fit

F32 = np.float32


# --- a straightforward reference -------------------------------------------------------------


def reference_penalised(
    logits: np.ndarray, sampling: Sampling, prompt: Sequence[int], answer: Sequence[int]
) -> np.ndarray:
    """Penalties token by token, as the rules read (float64, rounded to float32 once)."""
    values = logits.astype(np.float64)
    counts = Counter(answer)
    for token in set(prompt) | set(answer):
        value = values[token]
        if sampling.repetition_penalty != 1.0:
            rep = sampling.repetition_penalty
            value = value * rep if value < 0 else value / rep
        count = counts.get(token, 0)
        value -= sampling.frequency_penalty * count + sampling.presence_penalty * (count > 0)
        values[token] = value
    return values.astype(logits.dtype)


def reference_probs(
    logits: np.ndarray,
    sampling: Sampling,
    prompt: Sequence[int] = (),
    answer: Sequence[int] = (),
) -> tuple[np.ndarray, float]:
    """Dense probabilities by full sort, and the smallest distance of a top-p or min-p
    decision from its threshold (decisions that close are rounding's to make)."""
    values = reference_penalised(logits, sampling, prompt, answer).astype(np.float64)
    size = values.size
    probs = np.zeros(size)
    order = sorted(range(size), key=lambda i: (-values[i], i))
    if sampling.greedy:
        probs[order[0]] = 1.0
        return probs, math.inf
    if sampling.top_k:
        order = order[: sampling.top_k]
    top = values[order[0]]
    weights = np.exp((values[order] - top) / sampling.temperature)
    margin = math.inf
    if sampling.top_p < 1:
        shares = np.cumsum(weights) / weights.sum()
        margin = float(np.min(np.abs(shares - sampling.top_p)))
        cut = int(np.searchsorted(shares, sampling.top_p, side="left"))
        order, weights = order[: cut + 1], weights[: cut + 1]
    if sampling.min_p > 0:
        margin = min(margin, float(np.min(np.abs(weights - sampling.min_p))))
        keep = weights >= sampling.min_p
        order, weights = [o for o, k in zip(order, keep, strict=True) if k], weights[keep]
    probs[order] = weights / weights.sum()
    return probs, margin


def assert_matches(got: Distribution, expected: np.ndarray, rtol: float) -> None:
    """Same support and values. Without top-k the weights are float32 over the row, so a
    token below float32's range (under 1e-38 of the top token's weight) may be dropped."""
    assert np.all(np.diff(got.ids) > 0) and np.all(got.probs > 0)
    assert got.probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert set(got.ids.tolist()) <= set(np.flatnonzero(expected).tolist())
    significant = got.ids[got.probs > 1e-38].tolist()
    assert significant == np.flatnonzero(expected > 1e-38).tolist()
    np.testing.assert_allclose(got.to_dense(expected.size), expected, rtol=rtol, atol=1e-9)


def distinct_logits(draw: st.DrawFn, size: int) -> np.ndarray:
    """Distinct values 0.01 apart at least (no ties, so tie rules do not matter)."""
    values = draw(st.lists(st.integers(-1500, 1500), min_size=size, max_size=size, unique=True))
    return np.asarray(values, dtype=F32) / F32(100)


@st.composite
def cases(draw: st.DrawFn, distinct: bool = False) -> tuple[np.ndarray, Sampling, list, list]:
    size = draw(st.integers(2, 48))
    if distinct:
        logits = distinct_logits(draw, size)
    else:
        # Ties (integers) and masked tokens (-inf) included.
        raw = draw(st.lists(st.integers(-6, 6) | st.just(-99), min_size=size, max_size=size))
        logits = np.asarray([-np.inf if v == -99 else v for v in raw], dtype=F32)
        assume(np.isfinite(logits).any())
    sampling = Sampling(
        temperature=draw(st.sampled_from([0.0, 0.05, 0.3, 0.7, 1.0, 1.5, 4.0])),
        top_p=draw(st.sampled_from([1.0, 0.95, 0.8, 0.5, 0.1])),
        top_k=draw(st.integers(0, size + 2)),
        min_p=draw(st.sampled_from([0.0, 0.05, 0.2])),
        repetition_penalty=draw(st.sampled_from([1.0, 1.1, 1.5, 0.8])),
        presence_penalty=draw(st.sampled_from([0.0, 1.5, -0.5])),
        frequency_penalty=draw(st.sampled_from([0.0, 0.3, -1.0])),
    )
    tokens = st.integers(0, size - 1)
    prompt = draw(st.lists(tokens, max_size=12))
    answer = draw(st.lists(tokens, max_size=12))
    return logits, sampling, prompt, answer


def history_of(size: int, prompt: Sequence[int], answer: Sequence[int]) -> PenaltyHistory:
    history = PenaltyHistory(size, prompt)
    history.extend(answer)
    return history


# --- processing --------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(cases())
@example((np.asarray([1, 1, 1, 0], dtype=F32), Sampling(temperature=1.0, top_k=2), [], []))
@example((np.asarray([2, 2, 2], dtype=F32), Sampling(temperature=0.0), [], []))
@example((np.asarray([0, 0], dtype=F32), Sampling(temperature=1.0, top_p=0.5), [], []))
def test_processing_matches_the_reference(
    case: tuple[np.ndarray, Sampling, list[int], list[int]],
) -> None:
    """Values to 1e-9, kept sets exactly (ties: lower ids first, in top-k, top-p, argmax)."""
    logits, sampling, prompt, answer = case
    expected, margin = reference_probs(logits, sampling, prompt, answer)
    assume(margin > 1e-5)  # a decision that close to its threshold is rounding's
    got = process_logits(logits, sampling, history_of(logits.size, prompt, answer))
    assert_matches(got, expected, rtol=1e-5)


def test_greedy_is_numpy_argmax_lowest_id_on_ties() -> None:
    logits = np.asarray([0.5, 3.0, -1.0, 3.0], dtype=F32)
    assert process_logits(logits, Sampling()).ids.tolist() == [int(np.argmax(logits))] == [1]
    # Top-k 1 at any temperature is the same point mass.
    assert process_logits(logits, Sampling(temperature=2.0, top_k=1)).ids.tolist() == [1]


def test_top_k_keeps_exactly_k_with_lower_ids_on_ties() -> None:
    """Hugging Face keeps every token tied with the k-th; this keeps k, lower ids first."""
    logits = np.asarray([1, 5, 3, 3, 3, 0], dtype=F32)
    got = process_logits(logits, Sampling(temperature=1.0, top_k=3))
    assert got.ids.tolist() == [1, 2, 3]
    assert got.prob(2) == pytest.approx(got.prob(3))


def test_top_p_keeps_the_smallest_set_reaching_the_mass() -> None:
    probs = np.asarray([0.1, 0.4, 0.3, 0.2])
    logits = np.log(probs).astype(F32)
    # 0.4 + 0.3 = 0.7 < 0.75 <= 0.9: three tokens.
    got = process_logits(logits, Sampling(temperature=1.0, top_p=0.75))
    assert got.ids.tolist() == [1, 2, 3]
    np.testing.assert_allclose(got.probs, [0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9], rtol=1e-6)
    assert process_logits(logits, Sampling(temperature=1.0, top_p=0.4)).ids.tolist() == [1]


@pytest.mark.parametrize("top_k", [0, 4])
def test_top_p_reached_exactly_keeps_no_more(top_k: int) -> None:
    """Four equal tokens, top-p 0.5: two reach exactly half the mass (weights are exact
    here), so two are kept, the lower ids; with and without top-k (two code paths)."""
    logits = np.asarray([1, 1, 1, 1, -np.inf], dtype=F32)
    got = process_logits(logits, Sampling(temperature=1.0, top_p=0.5, top_k=top_k))
    assert got.ids.tolist() == [0, 1]
    assert got.probs.tolist() == [0.5, 0.5]


def test_min_p_is_relative_to_the_most_likely_token() -> None:
    probs = np.asarray([0.5, 0.3, 0.15, 0.05])
    logits = np.log(probs).astype(F32)
    got = process_logits(logits, Sampling(temperature=1.0, min_p=0.25))  # keep p >= 0.125
    assert got.ids.tolist() == [0, 1, 2]


def test_masked_tokens_are_never_kept() -> None:
    logits = np.asarray([-np.inf, 1.0, -np.inf, 0.0], dtype=F32)
    for sampling in (Sampling(temperature=1.0), Sampling(temperature=1.0, top_k=3)):
        assert process_logits(logits, sampling).ids.tolist() == [1, 3]


def test_a_sub_vocabulary_row_maps_to_its_token_ids() -> None:
    """The draft head's row covers the draft vocabulary only (ids given); penalties reach
    the tokens inside it."""
    ids = np.asarray([0, 1, 2, 7, 9], dtype=np.int64)
    logits = np.asarray([0.0, 2.0, 1.0, 3.0, -1.0], dtype=F32)
    history = PenaltyHistory(12, [7])
    sampling = Sampling(temperature=1.0, top_k=2, repetition_penalty=3.0)
    got = process_logits(logits, sampling, history, ids=ids)
    assert got.ids.tolist() == [1, 2]  # 7's logit 3.0 became 1.0: ties with 2 lose on id
    assert process_logits(logits, Sampling(), ids=ids).ids.tolist() == [7]


# --- bigger rows: the fast paths (pre-filtered top-k, binned nucleus) ----------------------


def _row(kind: str, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return (rng.standard_normal(size) * 3).astype(F32)
    if kind == "ascending":
        return np.sort(rng.standard_normal(size)).astype(F32)
    if kind == "descending":
        return np.sort(rng.standard_normal(size))[::-1].astype(F32)
    if kind == "ties":
        return rng.integers(-3, 4, size).astype(F32)
    if kind == "flat":
        return np.zeros(size, dtype=F32)
    masked = (rng.standard_normal(size) * 3).astype(F32)
    masked[rng.random(size) < 0.999] = -np.inf  # a grammar mask leaving a few tokens
    masked[rng.integers(size)] = 0.0
    return masked


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(["random", "ascending", "descending", "ties", "flat", "masked"]),
    seed=st.integers(0, 2**32 - 1),
    top_k=st.sampled_from([0, 1, 5, 20, 64]),
    top_p=st.sampled_from([1.0, 0.95, 0.8, 0.3]),
    min_p=st.sampled_from([0.0, 0.05]),
    temperature=st.sampled_from([0.4, 1.0, 2.5]),
)
def test_large_rows_match_the_reference(
    kind: str, seed: int, top_k: int, top_p: float, min_p: float, temperature: float
) -> None:
    logits = _row(kind, 20_000, seed)
    sampling = Sampling(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p)
    expected, margin = reference_probs(logits, sampling)
    assume(margin > 1e-5)
    assert_matches(process_logits(logits, sampling), expected, rtol=2e-5)


# --- against Hugging Face's processors ---------------------------------------------------------


def _hf_probs(logits: np.ndarray, sampling: Sampling, input_ids: list[int]) -> np.ndarray:
    import torch
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    processors = LogitsProcessorList()
    if sampling.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(float(sampling.repetition_penalty)))
    processors.append(TemperatureLogitsWarper(float(sampling.temperature)))
    if sampling.top_k:
        processors.append(TopKLogitsWarper(sampling.top_k))
    if sampling.top_p < 1:
        processors.append(TopPLogitsWarper(sampling.top_p))
    if sampling.min_p:
        processors.append(MinPLogitsWarper(sampling.min_p))
    ids = torch.tensor([input_ids or [0]], dtype=torch.long)
    scores = torch.tensor(logits[None].copy())
    if not input_ids:
        ids = ids[:, :0]
    processed = processors(ids, scores)
    return torch.softmax(processed.double(), dim=-1)[0].numpy()


@st.composite
def hf_cases(draw: st.DrawFn) -> tuple[np.ndarray, Sampling, list[int]]:
    size = draw(st.integers(2, 40))
    logits = distinct_logits(draw, size)
    sampling = Sampling(
        temperature=draw(st.floats(0.1, 3.0)),
        top_p=draw(st.floats(0.05, 1.0)),
        top_k=draw(st.integers(0, size + 2)),
        min_p=draw(st.floats(0.0, 0.5)),
        repetition_penalty=draw(st.floats(0.5, 3.0)),
    )
    input_ids = draw(st.lists(st.integers(0, size - 1), max_size=10))
    return logits, sampling, input_ids


@settings(max_examples=300, deadline=None)
@given(hf_cases())
def test_processing_matches_hugging_face(case: tuple[np.ndarray, Sampling, list[int]]) -> None:
    """Repetition penalty, temperature, top-k, top-p and min-p in Hugging Face's order, on
    logits without ties (Hugging Face breaks them differently). Input ids are the prompt
    and answer: the repetition penalty reads both."""
    logits, sampling, input_ids = case
    _, margin = reference_probs(logits, sampling, input_ids, ())
    assume(margin > 1e-4)  # Hugging Face decides in float32
    penalised = reference_penalised(logits, sampling, input_ids, ())
    assume(len(np.unique(penalised)) == penalised.size)  # no ties after the penalty
    expected = _hf_probs(logits, sampling, input_ids)
    got = process_logits(logits, sampling, history_of(logits.size, input_ids, ()))
    assert_matches(got, expected, rtol=1e-4)


@settings(max_examples=100, deadline=None)
@given(hf_cases())
def test_repetition_penalty_matches_hugging_face(
    case: tuple[np.ndarray, Sampling, list[int]],
) -> None:
    import torch
    from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

    logits, sampling, input_ids = case
    assume(input_ids and sampling.repetition_penalty != 1.0)
    processor = RepetitionPenaltyLogitsProcessor(float(sampling.repetition_penalty))
    expected = processor(torch.tensor([input_ids]), torch.tensor(logits[None].copy()))[0]
    got = penalised_logits(logits, sampling, history_of(logits.size, input_ids[:3], input_ids[3:]))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-6)


# --- the penalty history ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(cases(), st.lists(st.integers(0, 47), max_size=6), st.integers(0, 6))
def test_draft_positions_equal_the_history_after_accepting_them(
    case: tuple[np.ndarray, Sampling, list[int], list[int]], drafts: list[int], split: int
) -> None:
    """Penalised logits with drafts=... are bit-identical to those after extend(drafts), so
    p_i at a draft position is exactly plain sampling's distribution after those tokens."""
    logits, sampling, prompt, answer = case
    drafts = [d % logits.size for d in drafts]
    history = history_of(logits.size, prompt, answer)
    with_drafts = penalised_logits(logits, sampling, history, drafts)
    history.extend(drafts[:split])
    partly = penalised_logits(logits, sampling, history, drafts[split:])
    history.extend(drafts[split:])
    accepted = penalised_logits(logits, sampling, history)
    assert with_drafts.tobytes() == partly.tobytes() == accepted.tobytes()
    expected = reference_penalised(logits, sampling, prompt, [*answer, *drafts])
    np.testing.assert_allclose(accepted, expected, rtol=1e-6)


def test_penalties_by_hand() -> None:
    logits = np.asarray([2.0, -2.0, 1.0, 4.0, 0.5], dtype=F32)
    history = PenaltyHistory(5, prompt_ids=[0, 1])
    history.extend([2, 2, 3])
    sampling = Sampling(
        temperature=1.0, repetition_penalty=2.0, presence_penalty=0.5, frequency_penalty=0.25
    )
    got = penalised_logits(logits, sampling, history)
    # 0, 1: prompt only (repetition); 2: twice in the answer; 3: once; 4: untouched.
    expected = [1.0, -4.0, 0.5 - 0.5 - 0.5, 2.0 - 0.5 - 0.25, 0.5]
    np.testing.assert_allclose(got, expected)
    assert logits.tolist() == [2.0, -2.0, 1.0, 4.0, 0.5]  # the input is not changed
    assert penalised_logits(logits, Sampling(temperature=1.0), history) is logits
    assert history.answer_length == 3 and history.answer_count(2) == 2
    assert history.seen(0) and not history.seen(4)


def test_penalties_keep_masks_and_finite_values() -> None:
    logits = np.asarray([-np.inf, 3e38, -3e38, 1.0], dtype=F32)
    history = PenaltyHistory(4, prompt_ids=[0, 1, 2])
    got = penalised_logits(logits, Sampling(temperature=1.0, repetition_penalty=0.01), history)
    assert got[0] == -np.inf and np.isfinite(got[1:]).all()


def test_history_refuses_tokens_outside_the_vocabulary() -> None:
    with pytest.raises(ValueError, match="token id 9 is outside the vocabulary"):
        PenaltyHistory(5, [1, 9])
    history = PenaltyHistory(5)
    with pytest.raises(ValueError, match="token id -1"):
        history.extend([-1])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        penalised_logits(np.zeros(5, F32), Sampling(repetition_penalty=1.5), history, [5])
    with pytest.raises(LogitsError, match="4 entries but the vocabulary has 5"):
        process_logits(np.zeros(4, F32), Sampling(repetition_penalty=1.5), history)


def test_penalties_need_the_history_and_ids_must_ascend() -> None:
    with pytest.raises(ValueError, match="penalties need the token history"):
        process_logits(np.zeros(3, F32), Sampling(temperature=1.0, presence_penalty=1.0))
    with pytest.raises(LogitsError, match="strictly ascending"):
        process_logits(np.zeros(3, F32), Sampling(), ids=np.asarray([0, 2, 1]))
    history = PenaltyHistory(4)
    with pytest.raises(ValueError, match="token id 4 is outside"):
        history.seen(4)
    with pytest.raises(ValueError, match="token id -1 is outside"):
        history.answer_count(-1)


def test_half_precision_rows_stay_finite_under_penalties() -> None:
    logits = np.asarray([60000.0, -60000.0, 1.0], dtype=np.float16)
    history = PenaltyHistory(3, [0, 1])
    sampling = Sampling(temperature=1.0, repetition_penalty=0.01)
    got = penalised_logits(logits, sampling, history)
    assert got.dtype == np.float16 and np.isfinite(got).all()
    assert process_logits(logits, sampling, history).ids.tolist() == [0]


def test_history_grows_past_its_first_buffer() -> None:
    history = PenaltyHistory(10_000, range(50))
    for start in range(0, 3000, 7):
        history.extend(range(start, start + 7))
    tokens, counts = history.entries()
    assert sorted(tokens.tolist()) == list(range(3003))
    assert counts.sum() == history.answer_length == 3003


# --- the acceptance rule, hand-built p and q -------------------------------------------------


def rng_state(rng: np.random.Generator) -> object:
    return rng.bit_generator.state


def test_p_equal_to_q_accepts_every_draft_without_drawing() -> None:
    p = Distribution([0, 3, 5], [0.5, 0.25, 0.25])
    rng = make_generator(7)
    for drafts in ([0], [3, 5], [5, 0, 3]):
        before = rng_state(rng)
        targets = [*[p] * len(drafts), Distribution.point(9)]
        verdict = verify_drafts(drafts, [p] * len(drafts), targets, rng)
        assert verdict == Verdict(len(drafts), 9)
        assert rng_state(rng) == before


def test_disjoint_supports_reject_and_sample_from_p() -> None:
    p = Distribution([0, 1, 2], [0.5, 0.3, 0.2])
    q = Distribution([3, 4], [0.6, 0.4])
    assert residual(p, q) is p or residual(p, q).probs.tolist() == p.probs.tolist()
    rng = make_generator(1)
    tokens = Counter()
    for _ in range(5000):
        verdict = verify_drafts([3], [q], [p, Distribution.point(9)], rng)
        assert verdict.accepted == 0
        tokens[verdict.token] += 1
    fit = goodness_of_fit(tokens, {0: 0.5, 1: 0.3, 2: 0.2})
    assert fit.p_value > 0.01, fit


def test_q_zero_outside_the_draft_vocabulary() -> None:
    """Target mass on token 45 (outside the draft vocabulary 0..39) is reached only through
    the residual; a draft outside q's support is a caller's bug, refused."""
    p = Distribution([2, 7, 45], [0.5, 0.2, 0.3])
    q = Distribution([2, 7, 11], [0.6, 0.3, 0.1])
    assert accept_probability(p, q, 2) == pytest.approx(0.5 / 0.6)
    assert accept_probability(p, q, 7) == pytest.approx(0.2 / 0.3)
    assert accept_probability(p, q, 11) == 0.0
    # max(0, p - q) = {45: 0.3} only.
    assert residual(p, q).ids.tolist() == [45] and residual(p, q).probs.tolist() == [1.0]
    with pytest.raises(ValueError, match="draft token 45 has probability 0"):
        accept_probability(p, q, 45)
    with pytest.raises(ValueError, match="probability 0"):
        verify_drafts([45], [q], [p, p], make_generator(0))


def test_acceptance_rate_and_residual_by_hand() -> None:
    p = Distribution([0, 1, 2], [0.5, 0.3, 0.2])
    q = Distribution([0, 1, 2], [0.2, 0.6, 0.2])
    # Draft 1: accepted with 0.3 / 0.6; the residual max(0, p - q) is all on token 0.
    rng = make_generator(3)
    outcomes = Counter(
        verify_drafts([1], [q], [p, Distribution.point(2)], rng) for _ in range(8000)
    )
    assert set(outcomes) == {Verdict(1, 2), Verdict(0, 0)}
    fit = goodness_of_fit(outcomes, {Verdict(1, 2): 0.5, Verdict(0, 0): 0.5})
    assert fit.p_value > 0.01, fit
    # Draft 0 (p >= q) is always accepted, without a draw.
    before = rng_state(rng)
    assert verify_drafts([0], [q], [p, Distribution.point(1)], rng) == Verdict(1, 1)
    assert rng_state(rng) == before


@pytest.mark.parametrize("ratio", [0.05, 0.5, 0.95])
def test_a_draft_is_accepted_with_probability_p_over_q(ratio: float) -> None:
    from scipy.stats import binomtest

    q = Distribution([0, 1], [0.8, 0.2])
    p = Distribution([0, 1], [0.8 * ratio, 1 - 0.8 * ratio])
    rng = make_generator(17)
    trials = 20_000
    accepted = sum(verify_drafts([0], [q], [p, p], rng).accepted for _ in range(trials))
    assert binomtest(accepted, trials, ratio).pvalue > 0.01, accepted / trials


def test_truncation_on_both_sides() -> None:
    """p cut by top-k 2, q by top-k 3 over another row: q's third token is never accepted
    and the residual stays inside p's support."""
    target = np.asarray([3.0, 2.5, 2.0, 0.0, -1.0], dtype=F32)
    draft = np.asarray([2.0, 1.0, 2.5, 0.5, -1.0], dtype=F32)
    p = process_logits(target, Sampling(temperature=1.0, top_k=2))
    q = process_logits(draft, Sampling(temperature=1.0, top_k=3))
    assert p.ids.tolist() == [0, 1] and q.ids.tolist() == [0, 1, 2]
    rng = make_generator(11)
    for _ in range(300):
        verdict = verify_drafts([2], [q], [p, p], rng)
        assert verdict.accepted == 0 and verdict.token in (0, 1)
    assert set(residual(p, q).ids.tolist()) <= {0, 1}


def test_residual_of_equal_distributions_is_p() -> None:
    p = Distribution([1, 2], [0.25, 0.75])
    assert residual(p, p) is p
    # p <= q on p's support only through rounding: still p.
    q = Distribution([1, 2], [0.25 + 1e-17, 0.75])
    assert residual(p, q).ids.tolist() in ([1, 2], [2])


def test_greedy_limit_accepts_iff_the_draft_is_the_argmax() -> None:
    target = [np.asarray([0.0, 2.0, 1.0], F32), np.asarray([3.0, 0.0, 1.0], F32)]
    bonus = np.asarray([0.0, 0.0, 5.0], F32)
    greedy = Sampling()
    ps = [process_logits(row, greedy) for row in [*target, bonus]]
    rng = make_generator(5)
    before = rng_state(rng)
    draft_q = [process_logits(np.asarray(row, F32), greedy) for row in ([0, 9, 0], [9, 0, 0])]
    assert verify_drafts([1, 0], draft_q, ps, rng) == Verdict(2, 2)
    wrong = process_logits(np.asarray([0, 0, 9], F32), greedy)
    assert verify_drafts([2, 0], [wrong, draft_q[1]], ps, rng) == Verdict(0, 1)
    assert verify_drafts([1, 2], [draft_q[0], wrong], ps, rng) == Verdict(1, 0)
    assert rng_state(rng) == before  # greedy decoding draws nothing


def test_targets_are_asked_only_for_positions_reached() -> None:
    asked: list[int] = []
    p = Distribution([0, 1], [0.5, 0.5])
    q = Distribution([2], [1.0])  # never accepted: p(2) = 0

    def target(index: int) -> Distribution:
        asked.append(index)
        return p

    verify_drafts([2, 2, 2], [q, q, q], target, make_generator(0))
    assert asked == [0]


def test_no_drafts_is_a_plain_sampling_step() -> None:
    p = Distribution([4, 8], [0.5, 0.5])
    first = verify_drafts([], [], [p], make_generator(42))
    assert first.accepted == 0 and first.token == p.sample(make_generator(42))
    with pytest.raises(ValueError, match="2 drafts but 1 draft distributions"):
        verify_drafts([1, 2], [p], [p, p, p], make_generator(0))
    with pytest.raises(ValueError, match="2 drafts need 3 target distributions, not 2"):
        verify_drafts([4, 8], [p, p], [p, p], make_generator(0))


def test_sample_draft_returns_the_q_it_sampled_from() -> None:
    logits = np.asarray([1.0, 0.5, 0.2, -3.0], dtype=F32)
    ids = np.asarray([0, 1, 2, 3], dtype=np.int64)
    sampling = Sampling(temperature=0.7, top_k=3, presence_penalty=1.0)
    history = PenaltyHistory(4)
    history.extend([0])
    token, q = sample_draft(logits, sampling, make_generator(9), history, [1], ids=ids)
    assert q.prob(token) > 0
    assert q.ids.tolist() == process_logits(logits, sampling, history, [1]).ids.tolist()


# --- seeds -------------------------------------------------------------------------------------


def test_seeds_reproduce_and_differ() -> None:
    logits = np.random.default_rng(0).standard_normal(1000).astype(F32)
    p = process_logits(logits, Sampling(temperature=1.0, top_k=50))

    def run(seed: int) -> list[int]:
        rng = make_generator(seed)
        return [p.sample(rng) for _ in range(50)]

    assert run(123) == run(123)
    assert run(123) != run(124)
    seeds = {fresh_seed() for _ in range(20)}
    assert len(seeds) == 20 and all(0 <= s <= MAX_SEED for s in seeds)
    assert run(MAX_SEED) == run(MAX_SEED)


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 1.5, True, None])
def test_bad_seeds_are_refused(seed: object) -> None:
    with pytest.raises(MethodError, match="seed is"):
        make_generator(seed)  # type: ignore[arg-type]


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([0.0, float("nan"), 1.0], r"hold 1 NaN of 3 values \(first at entry 1\)"),
        ([0.0, float("inf"), float("nan")], "hold 1 NaN, 1 \\+inf of 3 values"),
        ([-np.inf, -np.inf], "every one of the 2 logits is -inf"),
    ],
)
@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=1.0, top_k=1),
                                      Sampling(temperature=0.8, top_p=0.9)])  # fmt: skip
def test_broken_rows_raise_a_clear_error(
    values: list[float], message: str, sampling: Sampling
) -> None:
    with pytest.raises(LogitsError, match=message):
        process_logits(np.asarray(values, dtype=F32), sampling)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=1, max_size=30),
    st.sampled_from([Sampling(), Sampling(temperature=1.0), Sampling(temperature=0.5, top_k=3,
                     top_p=0.7, min_p=0.1, repetition_penalty=1.3)]),
)  # fmt: skip
def test_any_row_gives_a_distribution_or_a_clear_error(
    values: list[float], sampling: Sampling
) -> None:
    """Never a NaN distribution: either valid probabilities or LogitsError."""
    logits = np.asarray(values, dtype=F32)
    history = PenaltyHistory(logits.size, [0])
    try:
        got = process_logits(logits, sampling, history)
    except LogitsError as error:
        assert "NaN" in str(error) or "inf" in str(error)
        assert np.isnan(logits).any() or np.isposinf(logits).any() or np.isneginf(logits).all()
        return
    assert np.isfinite(got.probs).all() and (got.probs > 0).all()
    assert got.probs.sum() == pytest.approx(1.0)
    assert np.isfinite(logits[got.ids]).all()


@pytest.mark.parametrize(
    ("logits", "message"),
    [
        (np.zeros((2, 3), F32), "one non-empty row"),
        (np.zeros(0, F32), "one non-empty row"),
        (np.arange(3), "floating point"),
        ([0.0, 1.0], "one non-empty row"),
    ],
)
def test_malformed_rows_are_refused(logits: object, message: str) -> None:
    with pytest.raises(LogitsError, match=message):
        process_logits(logits, Sampling())  # type: ignore[arg-type]
    with pytest.raises(LogitsError, match="one per logit"):
        process_logits(np.zeros(3, F32), Sampling(), ids=np.arange(4))


@pytest.mark.parametrize(
    ("sampling", "message"),
    [
        (Sampling(temperature=-0.5), "temperature is -0.5"),
        (Sampling(temperature=float("nan")), "temperature is nan"),
        (Sampling(top_p=0.0), "top-p is 0.0"),
        (Sampling(top_p=1.5), "top-p is 1.5"),
        (Sampling(top_k=-1), "top-k is -1"),
        (Sampling(min_p=1.0), "min-p is 1.0"),
        (Sampling(repetition_penalty=0.0), "repetition penalty is 0.0"),
        (Sampling(presence_penalty=float("inf")), "presence penalty is inf"),
    ],
)
def test_bad_settings_never_reach_the_math(sampling: Sampling, message: str) -> None:
    with pytest.raises(MethodError, match=message):
        process_logits(np.zeros(4, F32), sampling)


@pytest.mark.parametrize(
    ("ids", "probs", "message"),
    [
        ([0, 1], [0.5, 0.6], "sum to"),
        ([0, 0], [0.5, 0.5], "distinct"),
        ([0, -1], [0.5, 0.5], "whole numbers >= 0"),
        ([0, 1], [1.5, -0.5], "finite and >= 0"),
        ([0, 1], [float("nan"), 1.0], "finite and >= 0"),
        ([], [], "as many probabilities"),
        ([0, 1], [1.0], "as many probabilities"),
    ],
)
def test_bad_distributions_are_refused(ids: list[int], probs: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Distribution(ids, probs)


def test_distribution_basics() -> None:
    d = Distribution([5, 1, 3], [0.2, 0.5, 0.3])
    assert d.ids.tolist() == [1, 3, 5] and d.probs.tolist() == [0.5, 0.3, 0.2]
    assert d.prob(3) == 0.3 and d.prob(4) == 0.0 and d.prob(99) == 0.0
    assert d.probs_at(np.asarray([0, 1, 5, 6])).tolist() == [0.0, 0.5, 0.2, 0.0]
    assert Distribution.from_dense([0.0, 0.25, 0.0, 0.75]).ids.tolist() == [1, 3]
    with pytest.raises(AttributeError):
        d.ids = np.zeros(1, np.int64)
    with pytest.raises(ValueError):
        d.probs[0] = 1.0
    assert "1: 0.5" in repr(d)
