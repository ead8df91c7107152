"""The API surface's parts on generated input (hypothesis): the field audit, completion
prompts, logprobs as JSON, the log-probability computation and the speculative statistics'
shapes. Each bad input is a 400 naming its field, never a traceback; each good one keeps the
invariants the serve tests check on real answers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.logprobs import (
    MAX_TOP_LOGPROBS,
    Candidate,
    TokenLogprob,
    token_logprob,
)
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.sampling import PenaltyHistory, penalised_logits
from qwen_mtp_desktop.core.decoding.stats import StepDrafts, build_stats
from qwen_mtp_desktop.server.generation.logprobs import (
    chat_content,
    completion_logprobs,
    token_text,
)
from qwen_mtp_desktop.server.generation.parsing import parse_body
from qwen_mtp_desktop.server.generation.planning import (
    DEFAULT_TOP_K,
    DEFAULT_TOP_P,
    plan_settings,
    sampling_for,
)
from qwen_mtp_desktop.server.generation.schema import ChatCompletionRequest, CompletionRequest
from qwen_mtp_desktop.server.generation.speculative import llama_timings, vllm_metrics
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.fields import HARMLESS, NEUTRAL, REFUSED

CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(min_size=1, max_size=80)
    | st.sampled_from(sorted({*REFUSED, *HARMLESS, "modalities", "max_token", "top_logprobs"})),
    value=json_values,
)
def test_every_field_is_honoured_or_refused_by_name(name: str, value: Any) -> None:
    body = json.dumps({**CHAT, name: value}).encode()
    try:
        request = parse_body(body, ChatCompletionRequest)
        plan_settings(request, TurnDefaults(), mtp_loaded=True)
    except ApiError as exc:
        assert exc.status == 400 and exc.message and "Traceback" not in exc.message
        assert exc.param is not None
        return
    known = name in ChatCompletionRequest.model_fields or name in HARMLESS
    neutral = name in REFUSED and (value is None or (name, value) in NEUTRAL)
    assert known or neutral or name == "modalities"


prompts = (
    st.text(max_size=20)
    | st.lists(st.text(max_size=5), max_size=3)
    | st.lists(st.integers(-3, 300), max_size=3)
    | st.integers()
    | st.none()
    | st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)
)


@settings(max_examples=300, deadline=None)
@given(
    prompt=prompts,
    logprobs=st.none() | st.integers(-3, 30) | st.booleans(),
    echo=st.booleans(),
    extra=st.dictionaries(
        st.sampled_from(["suffix", "best_of", "n", "logit_bias", "max_tokens"]),
        json_values,
        max_size=2,
    ),
)
def test_completion_bodies_parse_or_are_400(
    prompt: Any, logprobs: Any, echo: bool, extra: dict[str, Any]
) -> None:
    body = {"model": "m", "prompt": prompt, "logprobs": logprobs, "echo": echo, **extra}
    try:
        request = parse_body(json.dumps(body).encode(), CompletionRequest)
        settings_, _ = plan_settings(request, TurnDefaults(), mtp_loaded=True)
    except ApiError as exc:
        assert exc.status == 400 and exc.param is not None
        return
    assert isinstance(request.text(), str)
    assert settings_.logprobs == request.logprobs
    assert 0 <= (settings_.logprobs or 0) <= MAX_TOP_LOGPROBS


candidates = st.builds(
    Candidate,
    st.integers(0, 1000),
    st.floats(max_value=0, allow_nan=False) | st.just(-math.inf),
    st.binary(max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(scores=st.lists(st.builds(TokenLogprob, candidates, st.tuples(candidates)), max_size=6))
def test_logprobs_are_always_valid_json_and_keep_the_bytes(scores: list[TokenLogprob]) -> None:
    content = chat_content(scores)
    json.dumps(content, allow_nan=False)  # -inf must never reach the client
    for entry, score in zip(content, scores, strict=True):
        assert bytes(entry["bytes"]) == score.chosen.token_bytes
        assert entry["logprob"] >= -9999.0
    legacy = completion_logprobs(scores)
    json.dumps(legacy, allow_nan=False)
    assert len(legacy["tokens"]) == len(legacy["text_offset"]) == len(scores)
    for token, top in zip(legacy["tokens"], legacy["top_logprobs"], strict=True):
        assert token in top  # the sampled token is always listed


@given(st.binary(max_size=8))
def test_token_text_is_the_text_or_its_bytes_spelled_out(data: bytes) -> None:
    text = token_text(data)
    try:
        assert text == data.decode("utf-8")
    except UnicodeDecodeError:
        assert text.startswith("bytes:") and text.count("\\x") == len(data)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(-30, 30, allow_nan=False) | st.just(-math.inf), min_size=1, max_size=40
    ),
    top=st.integers(0, MAX_TOP_LOGPROBS),
    data=st.data(),
)
def test_log_probabilities_form_a_distribution(values: list[float], top: int, data: Any) -> None:
    row = np.asarray(values, dtype=np.float32)
    finite = [i for i, v in enumerate(values) if math.isfinite(v)]
    if not finite:
        return
    token = data.draw(st.sampled_from(finite))
    score = token_logprob(row, token, top)
    total = sum(math.exp(token_logprob(row, i, 0).chosen.logprob) for i in finite)
    assert total == pytest.approx(1.0, abs=1e-6)
    assert score.chosen.logprob <= 1e-12
    assert len(score.top) == min(top, len(finite))
    ranked = [c.logprob for c in score.top]
    assert ranked == sorted(ranked, reverse=True)
    assert all(math.isfinite(c.logprob) for c in score.top)  # masked tokens never listed
    if score.top and row[token] == max(row[i] for i in finite):
        assert score.top[0].logprob == pytest.approx(score.chosen.logprob)


@settings(max_examples=200, deadline=None)
@given(
    depth=st.integers(1, 4),
    steps=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=30),
)
def test_vllm_and_llamacpp_shapes_agree_with_the_counters(
    depth: int, steps: list[tuple[int, int]]
) -> None:
    drafts = [StepDrafts(0, 0)]
    sizes = [1]
    for proposed, accepted in steps:
        proposed = min(proposed, depth)
        accepted = min(accepted, proposed)
        drafts.append(StepDrafts(proposed, accepted))
        sizes.append(accepted + 1)
    stats = build_stats(
        method=DecodingMethod.mtp(depth),
        device="CPU",
        prompt_tokens=10,
        chunk_sizes=sizes,
        chunk_times=[0.01 * (i + 1) for i in range(len(sizes))],
        total_s=0.01 * len(sizes),
        reasoning_tokens=0,
        answer_tokens=sum(sizes),
        finish_reason="length",
        drafts=drafts,
    )
    spec = vllm_metrics(stats)["speculative_decoding"]
    histogram = spec["acceptance_histogram"]
    assert spec["num_draft_tokens"] == stats.drafted_tokens
    assert spec["num_accepted_draft_tokens"] == stats.accepted_tokens
    if stats.drafted_tokens:
        assert len(histogram) == depth + 1
        assert sum(j * n for j, n in enumerate(histogram)) == stats.accepted_tokens
        assert spec["num_spec_steps"] == sum(1 for p, _ in steps if min(p, depth) > 0)
    else:
        assert histogram == [] and spec["mean_acceptance_length"] == 1.0
    timings = llama_timings(stats)
    assert timings["predicted_n"] == stats.generated_tokens
    assert timings["draft_n"] == stats.drafted_tokens
    json.dumps({"metrics": spec, "timings": timings}, allow_nan=False)


MODEL_SAMPLING = Sampling(temperature=0.6, top_p=0.95, top_k=20, repetition_penalty=1.05)
sampling_fields = st.fixed_dictionaries(
    {},
    optional={
        "temperature": st.sampled_from([0, 0.3, 1.5]),
        "top_p": st.sampled_from([0.5, 1.0]),
        "top_k": st.sampled_from([0, 4]),
        "repetition_penalty": st.sampled_from([1.0, 1.3]),
        "presence_penalty": st.sampled_from([0.0, 0.5]),
    },
)


@settings(max_examples=200, deadline=None)
@given(fields=sampling_fields, model=st.sampled_from([None, Sampling(), MODEL_SAMPLING]))
def test_given_fields_win_then_the_models_defaults_then_the_servers(
    fields: dict[str, Any], model: Sampling | None
) -> None:
    request = parse_body(json.dumps({**CHAT, **fields}).encode(), ChatCompletionRequest)
    used = sampling_for(request, model)
    base = model or Sampling()
    temperature = fields.get("temperature", base.temperature)
    assert used.temperature == temperature
    assert used.repetition_penalty == fields.get("repetition_penalty", base.repetition_penalty)
    assert used.presence_penalty == fields.get("presence_penalty", base.presence_penalty)
    if temperature:
        samples = model is not None and not model.greedy
        assert used.top_p == fields.get("top_p", base.top_p if samples else DEFAULT_TOP_P)
        assert used.top_k == fields.get("top_k", base.top_k if samples else DEFAULT_TOP_K)
    else:
        assert used.greedy


def test_chat_template_kwargs_other_than_thinking_are_refused() -> None:
    body = {**CHAT, "chat_template_kwargs": {"thinking": True}}
    with pytest.raises(ApiError) as caught:
        parse_body(json.dumps(body).encode(), ChatCompletionRequest)
    assert caught.value.param == "chat_template_kwargs.thinking"


@settings(max_examples=200, deadline=None)
@given(
    bias=st.dictionaries(
        st.text(max_size=4) | st.integers(0, 2000).map(str), json_values, max_size=4
    )
)
def test_logit_bias_becomes_ascending_pairs_or_a_400(bias: dict[str, Any]) -> None:
    body = json.dumps({**CHAT, "logit_bias": bias}).encode()
    try:
        request = parse_body(body, ChatCompletionRequest)
        settings_, _ = plan_settings(request, TurnDefaults(), mtp_loaded=True)
    except ApiError as exc:
        assert exc.status == 400 and exc.param is not None and exc.param.startswith("logit_bias")
        return
    pairs = settings_.method.sampling.logit_bias
    assert [t for t, _ in pairs] == sorted(int(k) for k in bias)
    assert all(-100 <= b <= 100 for _, b in pairs)
    # Stored and read back as records are (untrusted data), the bias survives.
    record = settings_.method.to_record()
    assert DecodingMethod.from_record(json.loads(json.dumps(record))) == settings_.method


def test_a_bias_moves_only_its_tokens_and_keeps_masked_ones_masked() -> None:
    row = np.array([1.0, 2.0, -np.inf, 0.5], dtype=np.float32)
    sampling = Sampling(logit_bias=((0, 5.0), (2, 100.0), (3, -1.0)))
    history = PenaltyHistory(4)
    out = penalised_logits(row, sampling, history)
    assert out.tolist() == [6.0, 2.0, -np.inf, -0.5]
    assert row.tolist() == [1.0, 2.0, -np.inf, 0.5]  # the input is never changed
    # A draft head's row (ids 0, 3 only) gets the same bias on the same tokens.
    part = penalised_logits(
        np.array([1.0, 0.5], dtype=np.float32), sampling, history, ids=np.array([0, 3])
    )
    assert part.tolist() == [6.0, -0.5]
