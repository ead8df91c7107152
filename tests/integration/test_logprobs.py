"""Log-probabilities from the app's decoder (core.decoding.logprobs) on the real demo model:
with MTP (depths 1 and 3) and prompt lookup they equal plain decoding's for the same tokens,
greedy, penalised and sampled, and they equal the teacher-forced figures computed from the
model's logits for each prefix (`logits_after`), so a decoder that took a token's row from
the wrong position, or its processing from the wrong state, fails."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.logprobs import TokenLogprob, token_logprob
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.sampling import PenaltyHistory, penalised_logits
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS
from tests.exactness import POEM_PROMPT, prompt_ids

pytestmark = pytest.mark.model

TOKENS = 40
TOP = 5
#: Several positions verified in one call round differently from one at a time (f32).
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def decoder(demo_model: Path) -> Iterator[tuple[AppDecoder, list[int]]]:
    yield AppDecoder(demo_model, "CPU", EXACT_NUMERICS), prompt_ids(demo_model, POEM_PROMPT)


def run(
    decoder: AppDecoder, prompt: list[int], method: DecodingMethod, top: int = TOP
) -> tuple[list[int], list[TokenLogprob], int]:
    """(tokens, their log-probabilities, drafts accepted) of one answer."""
    decoder.drop_states()  # every run from a cold state: no kept logits in between
    tokens: list[int] = []
    scores: list[TokenLogprob] = []
    accepted = 0
    for step in decoder.decode(
        prompt, method=method, max_new_tokens=TOKENS, stop_ids=set(), logprobs=top
    ):
        assert len(step.logprobs) == len(step.tokens)
        tokens += step.tokens
        scores += step.logprobs
        accepted += step.accepted
    return tokens, scores, accepted


def assert_same(a: list[TokenLogprob], b: list[TokenLogprob]) -> None:
    assert len(a) == len(b)
    for index, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x.chosen.token_id == y.chosen.token_id, index
        assert x.chosen.logprob == pytest.approx(y.chosen.logprob, abs=TOLERANCE), index
        assert [c.logprob for c in x.top] == pytest.approx(
            [c.logprob for c in y.top], abs=TOLERANCE
        ), index
        # Ids may swap only where two alternatives are (nearly) tied.
        for cx, cy in zip(x.top, y.top, strict=True):
            if cx.token_id != cy.token_id:
                assert abs(cx.logprob - cy.logprob) < TOLERANCE, index


@pytest.mark.parametrize(
    "sampling",
    [Sampling(), Sampling(repetition_penalty=1.3, presence_penalty=0.5)],
    ids=["greedy", "greedy-penalised"],
)
@pytest.mark.parametrize(
    "method",
    [DecodingMethod.mtp(1), DecodingMethod.mtp(3), DecodingMethod.lookup(3, 2)],
    ids=lambda m: m.short_label,
)
def test_drafting_reports_plain_decodings_logprobs(
    decoder: tuple[AppDecoder, list[int]], method: DecodingMethod, sampling: Sampling
) -> None:
    app, prompt = decoder
    plain_tokens, plain, _ = run(app, prompt, DecodingMethod.plain(sampling))
    tokens, drafted, accepted = run(app, prompt, method.with_sampling(sampling))
    assert tokens == plain_tokens
    if method.kind == "mtp":
        assert accepted > 0  # drafts were verified: rows past the first were read
    assert_same(drafted, plain)
    for score in plain:
        assert len(score.top) == TOP
        ranked = [c.logprob for c in score.top]
        assert ranked == sorted(ranked, reverse=True)
        assert score.chosen.logprob <= 0
        if sampling.greedy and not sampling.penalised:  # greedy: the best is the one chosen
            assert score.top[0].token_id == score.chosen.token_id


@pytest.mark.parametrize("method", [DecodingMethod.plain(), DecodingMethod.mtp(2)])
def test_sampled_logprobs_are_the_teacher_forced_ones(
    decoder: tuple[AppDecoder, list[int]], method: DecodingMethod
) -> None:
    """Sampled answers differ between methods, so each is checked against the model's own
    logits for every prefix, through the documented processing (penalties, temperature)."""
    app, prompt = decoder
    sampling = Sampling(
        temperature=0.8,
        top_k=20,
        top_p=0.9,
        seed=7,
        frequency_penalty=0.4,
        logit_bias=((13, 2.5), (100, -3.0)),
    )
    tokens, scores, _ = run(app, prompt, method.with_sampling(sampling))
    history = PenaltyHistory(app.vocab_size, prompt)
    for index, token in enumerate(tokens):
        row = app.logits_after([*prompt, *tokens[:index]])
        row = penalised_logits(row, sampling, history) / sampling.temperature
        expected = token_logprob(row, token, TOP)
        assert_same([scores[index]], [expected])
        history.extend([token])


@pytest.mark.parametrize(
    "method", [DecodingMethod.mtp(1), DecodingMethod.mtp(3), DecodingMethod.lookup(3, 2)]
)
def test_a_logit_bias_changes_the_answer_and_drafting_keeps_plain_decodings(
    decoder: tuple[AppDecoder, list[int]], method: DecodingMethod
) -> None:
    app, prompt = decoder
    unbiased, _, _ = run(app, prompt, DecodingMethod.plain())
    banned = Sampling(logit_bias=((unbiased[0], -100.0),))
    plain_tokens, plain, _ = run(app, prompt, DecodingMethod.plain(banned))
    assert plain_tokens[0] != unbiased[0]
    tokens, drafted, accepted = run(app, prompt, method.with_sampling(banned))
    assert tokens == plain_tokens
    assert accepted > 0 or method.kind == "lookup"
    assert_same(drafted, plain)
    # The banned token is reported as the biased distribution has it: far down.
    first = plain[0]
    assert all(c.token_id != unbiased[0] for c in first.top)


def test_logprobs_off_costs_nothing_and_reports_nothing(
    decoder: tuple[AppDecoder, list[int]],
) -> None:
    app, prompt = decoder
    steps = list(app.decode(prompt, method=DecodingMethod.mtp(2), max_new_tokens=8, stop_ids=set()))
    assert all(step.logprobs == () for step in steps)


def test_top_zero_gives_the_token_alone(decoder: tuple[AppDecoder, list[int]]) -> None:
    app, prompt = decoder
    tokens, scores, _ = run(app, prompt, DecodingMethod.mtp(1), top=0)
    assert [s.chosen.token_id for s in scores] == tokens
    assert all(s.top == () and np.isfinite(s.chosen.logprob) for s in scores)
