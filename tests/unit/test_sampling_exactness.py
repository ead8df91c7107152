"""Speculative sampling is exact, measured: a k-step speculative sampler (core.decoding.
sampling's draft processing and acceptance rule, in the decoder's loop) over a synthetic
chain gives the same distribution of the first three tokens as sampling directly from the
target, by chi-squared tests against a direct sample (homogeneity) and against the exact joint
distribution (goodness of fit), at p > 0.01; a deliberately biased sampler (on rejection,
sample from p instead of the residual) fails the same tests.

The chain: 50 tokens; the target's logits depend on the last two tokens (fixed random
tables); the draft head sees the same logits plus noise, over a draft vocabulary of the 40
lowest ids (q = 0 for the other 10, which carry target mass). Settings as Qwen recommends
(temperature 0.7, top-p 0.8, top-k 20) with repetition and presence penalties, and
untruncated temperature 1 with a frequency penalty; drafts at depth 1-3 are chained. 20,000
samples per case; the whole module runs in about 15 s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import cache

import numpy as np
import pytest

from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.decoding.sampling import (
    Distribution,
    PenaltyHistory,
    Verdict,
    accept_probability,
    make_generator,
    process_logits,
    verify_drafts,
)
from tests.statistics import ChiSquared, goodness_of_fit, homogeneity

VOCAB = 50
DRAFT_IDS = np.arange(40, dtype=np.int64)
PROMPT = (3, 17)
TOKENS = 3  # the first three tokens' joint distribution is compared
SAMPLES = 20_000

SETTINGS = {
    "qwen": Sampling(
        temperature=0.7, top_p=0.8, top_k=20, repetition_penalty=1.1, presence_penalty=1.5
    ),
    "untruncated": Sampling(temperature=1.0, frequency_penalty=0.5),
}

Verify = Callable[
    [Sequence[int], Sequence[Distribution], Callable[[int], Distribution], np.random.Generator],
    Verdict,
]


class Chain:
    """A fixed random language model and its draft head, with every distribution cached by
    its prefix (they are deterministic functions of it)."""

    def __init__(self, sampling: Sampling, seed: int = 2026) -> None:
        rng = np.random.default_rng(seed)
        self.sampling = sampling
        self.by_last = rng.normal(0.0, 1.0, (VOCAB, VOCAB)).astype(np.float32)
        self.by_second = rng.normal(0.0, 0.5, (VOCAB, VOCAB)).astype(np.float32)
        self.noise = rng.normal(0.0, 0.7, (VOCAB, DRAFT_IDS.size)).astype(np.float32)
        self.p = cache(self._p)
        self.q = cache(self._q)
        self._history = cache(self._history_of)

    def _logits(self, prefix: tuple[int, ...]) -> np.ndarray:
        return self.by_last[prefix[-1]] + self.by_second[prefix[-2]]

    def _history_of(self, answer: tuple[int, ...]) -> PenaltyHistory:
        history = PenaltyHistory(VOCAB, PROMPT)
        history.extend(answer)
        return history

    def _p(self, answer: tuple[int, ...], drafts: tuple[int, ...] = ()) -> Distribution:
        """The target's distribution after the answer and the drafts before this position
        (the decoder's verify rows)."""
        row = self._logits(PROMPT + answer + drafts)
        return process_logits(row, self.sampling, self._history(answer), drafts)

    def _q(self, answer: tuple[int, ...], drafts: tuple[int, ...]) -> Distribution:
        """The draft head's distribution over the draft vocabulary, same processing."""
        prefix = PROMPT + answer + drafts
        row = self._logits(prefix)[DRAFT_IDS] + self.noise[prefix[-1]]
        return process_logits(row, self.sampling, self._history(answer), drafts, ids=DRAFT_IDS)

    def exact_joint(self) -> dict[tuple[int, ...], float]:
        """P(first three tokens) by enumeration."""
        joint: dict[tuple[int, ...], float] = {(): 1.0}
        for _ in range(TOKENS):
            grown: dict[tuple[int, ...], float] = {}
            for prefix, mass in joint.items():
                p = self.p(prefix)
                for token, prob in zip(p.ids.tolist(), p.probs.tolist(), strict=True):
                    grown[(*prefix, token)] = mass * prob
            joint = grown
        return joint


def speculative(chain: Chain, depth: int, rng: np.random.Generator, verify: Verify) -> tuple:
    """The decoder's loop: chain `depth` drafts from q, verify them against p_1..p_{k+1}
    (asked lazily), keep the accepted drafts and the next token; until three tokens."""
    answer: tuple[int, ...] = ()
    while len(answer) < TOKENS:
        drafts: list[int] = []
        qs: list[Distribution] = []
        for _ in range(depth):
            q = chain.q(answer, tuple(drafts))
            drafts.append(q.sample(rng))
            qs.append(q)
        frozen = tuple(drafts)
        verdict = verify(drafts, qs, lambda i, a=answer, d=frozen: chain.p(a, d[:i]), rng)
        answer += (*frozen[: verdict.accepted], verdict.token)
    return answer[:TOKENS]


def biased_verify(
    drafts: Sequence[int],
    qs: Sequence[Distribution],
    target: Callable[[int], Distribution],
    rng: np.random.Generator,
) -> Verdict:
    """The acceptance rule with the residual skipped: on rejection, sample from p."""
    for index, (token, q) in enumerate(zip(drafts, qs, strict=True)):
        p = target(index)
        chance = accept_probability(p, q, token)
        if chance >= 1.0 or rng.random() < chance:
            continue
        return Verdict(index, p.sample(rng))
    return Verdict(len(drafts), target(len(drafts)).sample(rng))


@pytest.fixture(scope="module")
def chains() -> dict[str, Chain]:
    return {name: Chain(sampling) for name, sampling in SETTINGS.items()}


def plain(chain: Chain, seed: int) -> Counter:
    """SAMPLES answers sampled token by token from p (plain sampling)."""
    rng = make_generator(seed)
    counts: Counter = Counter()
    for _ in range(SAMPLES):
        answer: tuple[int, ...] = ()
        for _ in range(TOKENS):
            answer += (chain.p(answer).sample(rng),)
        counts[answer] += 1
    return counts


def run(chain: Chain, depth: int, seed: int, verify: Verify) -> Counter:
    rng = make_generator(seed)
    return Counter(speculative(chain, depth, rng, verify) for _ in range(SAMPLES))


def compare(chain: Chain, depth: int, seed: int, verify: Verify) -> tuple[ChiSquared, ...]:
    """Homogeneity with an independent plain sample, and goodness of fit to the exact
    joint distribution, of SAMPLES speculative answers."""
    counts = run(chain, depth, seed, verify)
    return homogeneity(counts, plain(chain, seed + 1)), goodness_of_fit(counts, chain.exact_joint())


@pytest.mark.parametrize(
    ("setting", "depth"), [("qwen", 1), ("qwen", 2), ("qwen", 3), ("untruncated", 2)]
)
def test_speculative_sampling_matches_plain_sampling(
    chains: dict[str, Chain], setting: str, depth: int
) -> None:
    same, fit = compare(chains[setting], depth, seed=1000 + depth, verify=verify_drafts)
    assert same.p_value > 0.01, f"homogeneity with plain sampling: {same}"
    assert fit.p_value > 0.01, f"goodness of fit to the exact joint: {fit}"
    assert same.categories > 100  # the test compared many outcomes, not a pooled few


@pytest.mark.parametrize(("setting", "depth"), [("qwen", 1), ("qwen", 3)])
def test_a_sampler_that_skips_the_residual_fails(
    chains: dict[str, Chain], setting: str, depth: int
) -> None:
    same, fit = compare(chains[setting], depth, seed=2000 + depth, verify=biased_verify)
    assert same.p_value < 0.01, f"homogeneity did not see the bias: {same}"
    assert fit.p_value < 0.01, f"goodness of fit did not see the bias: {fit}"


def test_the_chain_is_a_fair_test(chains: dict[str, Chain]) -> None:
    """The drafts are neither always nor never accepted, and the target puts mass outside
    the draft vocabulary (reached only through the residual and bonus tokens)."""
    for chain in chains.values():
        contexts = [(a,) for a in range(20)]
        acceptance = [
            np.minimum(chain.p(c).to_dense(VOCAB), chain.q(c, ()).to_dense(VOCAB)).sum()
            for c in contexts
        ]
        assert 0.4 < np.mean(acceptance) < 0.8, acceptance
        outside = [chain.p(c).to_dense(VOCAB)[DRAFT_IDS.size :].sum() for c in contexts]
        assert np.mean(outside) > 0.1, outside


def test_the_harness_is_calibrated() -> None:
    """Under the null (both samples from one distribution, many rare categories) about 5 %
    of p-values fall below 0.05; a small shift of mass is found. Multinomial samples, so
    this checks tests/statistics.py (pooling included), not the sampler."""
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.full(400, 0.3))
    shifted = probs.copy()
    first, second = np.argsort(probs)[-2:]
    shifted[first] -= 0.02  # 2 % of the mass moves to another likely category
    shifted[second] += 0.02

    def sample(weights: np.ndarray) -> Counter:
        return Counter(dict(enumerate(rng.multinomial(SAMPLES, weights).tolist())))

    exact = dict(enumerate(probs.tolist()))
    null_same = [homogeneity(sample(probs), sample(probs)).p_value for _ in range(100)]
    null_fit = [goodness_of_fit(sample(probs), exact).p_value for _ in range(100)]
    for p_values in (null_same, null_fit):
        low = sum(p < 0.05 for p in p_values)
        assert 1 <= low <= 12, sorted(p_values)[:15]  # binomial(100, 0.05): 99.9 % inside
    assert homogeneity(sample(shifted), sample(probs)).p_value < 1e-4
    assert goodness_of_fit(sample(shifted), exact).p_value < 1e-4
    assert goodness_of_fit(Counter({0: 3, 9999: 1}), exact).p_value == 0.0  # impossible


def test_drafts_processed_like_the_target_are_accepted_most() -> None:
    """Why sample_draft gives q the target's whole processing: with a good draft head
    (noise sd 0.2 here), the expected acceptance sum_x min(p(x), q(x)) over contexts with
    a history is highest when q is penalised, tempered and truncated like p (measured
    0.73; no penalties 0.71, no truncation 0.67, temperature 1 only 0.54)."""
    sampling = SETTINGS["qwen"]
    chain = Chain(sampling)
    chain.noise *= 0.3
    variants = {
        "same": sampling,
        "no penalties": replace(
            sampling, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0
        ),
        "no truncation": replace(sampling, top_k=0, top_p=1.0),
        "temperature 1 only": Sampling(temperature=1.0),
    }
    rng = make_generator(3)
    answers = []
    for _ in range(300):
        answer: tuple[int, ...] = ()
        for _ in range(int(rng.integers(0, 6))):
            answer += (chain.p(answer).sample(rng),)
        answers.append(answer)
    acceptance = {}
    for name, variant in variants.items():
        found = []
        for answer in answers:
            prefix = PROMPT + answer
            row = chain._logits(prefix)[DRAFT_IDS] + chain.noise[prefix[-1]]
            history = PenaltyHistory(VOCAB, PROMPT)
            history.extend(answer)
            q = process_logits(row, variant, history, ids=DRAFT_IDS)
            found.append(np.minimum(chain.p(answer).to_dense(VOCAB), q.to_dense(VOCAB)).sum())
        acceptance[name] = float(np.mean(found))
    best = acceptance.pop("same")
    assert all(best > other for other in acceptance.values()), (best, acceptance)
