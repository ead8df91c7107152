"""Exact speculative sampling on the real model (issue 26): with MTP at depths 1-3 and with
prompt lookup, the first three sampled tokens are distributed as plain sampling's, checked
against the exact joint distribution that plain sampling defines (enumerated from the model's
own logits through the same processing). A sampler that skips the residual distribution fails
the same test, so the test can fail.

`benchmarks/sampling_exactness.py` runs the large version (>= 20,000 samples per case)."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS
from tests.exactness import (
    POEM_PROMPT,
    POEM_SETTINGS,
    TOKENS,
    exact_joint,
    prompt_ids,
    sample_counts,
    skipping_residual,
)
from tests.statistics import goodness_of_fit

pytestmark = pytest.mark.model

#: tests.exactness says why this prompt and these settings.
SETTINGS = POEM_SETTINGS
SAMPLES = 1500


@pytest.fixture(scope="module")
def decoder(demo_model: Path) -> Iterator[tuple[AppDecoder, list[int]]]:
    yield AppDecoder(demo_model, "CPU", EXACT_NUMERICS), prompt_ids(demo_model, POEM_PROMPT)


def sample(decoder: AppDecoder, prompt: list[int], method: DecodingMethod) -> Counter[tuple]:
    run = sample_counts(decoder, prompt, method, SAMPLES, SETTINGS, TOKENS)
    assert run.drafted > 0 if method.kind == "mtp" else True
    assert 0 < run.accepted < run.drafted or method.kind != "mtp", (run.drafted, run.accepted)
    return run.counts


@pytest.fixture(scope="module")
def joint(decoder: tuple[AppDecoder, list[int]]) -> dict[tuple[int, ...], float]:
    table = exact_joint(*decoder, SETTINGS, TOKENS)
    assert abs(sum(table.values()) - 1) < 1e-9
    assert len(table) > 20  # a real spread: the test has something to detect
    return table


@pytest.mark.parametrize(
    "method",
    [DecodingMethod.plain(), DecodingMethod.mtp(1), DecodingMethod.mtp(2), DecodingMethod.mtp(3)],
    ids=lambda m: m.short_label,
)
def test_sampled_tokens_follow_plain_samplings_distribution(
    decoder: tuple[AppDecoder, list[int]],
    joint: dict[tuple[int, ...], float],
    method: DecodingMethod,
) -> None:
    counts = sample(*decoder, method)
    result = goodness_of_fit(counts, joint)
    assert result.p_value > 0.01, (method.label, result)


def test_prompt_lookup_drafts_keep_the_distribution(
    decoder: tuple[AppDecoder, list[int]], joint: dict[tuple[int, ...], float]
) -> None:
    """Lookup's drafts are deterministic (q is a point mass): accepted with probability p(x),
    otherwise the token comes from p without x."""
    counts = sample(*decoder, DecodingMethod.lookup(3, 1))
    assert goodness_of_fit(counts, joint).p_value > 0.01


def test_a_sampler_that_skips_the_residual_fails(
    decoder: tuple[AppDecoder, list[int]],
    joint: dict[tuple[int, ...], float],
) -> None:
    """The classic mistake: on rejection, draw from p instead of normalise(max(0, p - q))."""
    with skipping_residual():
        counts = sample(*decoder, DecodingMethod.mtp(1))
    assert goodness_of_fit(counts, joint).p_value < 1e-4


def test_seeds_reproduce_and_fresh_seeds_differ(decoder: tuple[AppDecoder, list[int]]) -> None:
    model, prompt = decoder
    method = DecodingMethod.mtp(2, Sampling(temperature=1.5, top_k=20, seed=7))
    runs = [
        [t for step in model.decode(prompt, method=method, max_new_tokens=12, stop_ids=set())
         for t in step.tokens]
        for _ in range(2)
    ]  # fmt: skip
    assert runs[0] == runs[1]
    assert model.last_prefill is not None and model.last_prefill.seed == 7
    unseeded = method.with_sampling(Sampling(temperature=1.5, top_k=20))
    answers, seeds = set(), set()
    for _ in range(6):
        tokens = model.decode(prompt, method=unseeded, max_new_tokens=12, stop_ids=set())
        answers.add(tuple(itertools.chain.from_iterable(s.tokens for s in tokens)))
        assert model.last_prefill is not None and model.last_prefill.seed is not None
        seeds.add(model.last_prefill.seed)
    assert len(seeds) == 6 and len(answers) >= 2
