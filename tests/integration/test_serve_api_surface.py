"""The rest of the OpenAI surface through a real `serve` process and its engine process, with
raw HTTP and the `openai` SDK: `logprobs` / `top_logprobs` (streamed too, and equal with MTP on
and off), the `logprobs` and `refusal` nulls, vLLM's `metrics.speculative_decoding` and
llama.cpp's `timings` from the same counters as `mtp`, `/v1/completions`, and every field
honoured or refused with a 400 naming it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.exactness import prompt_ids
from tests.remote_server import raw_http, serving_client
from tests.serve_fixtures import CHAT_MODEL, copy_model

pytestmark = pytest.mark.subprocess

MODEL = CHAT_MODEL
QUESTION = [{"role": "user", "content": "Count from 1 to 12."}]
JSON = {"Content-Type": "application/json"}
#: The demo model's chat template around QUESTION, for /v1/completions (raw text).
RAW_QUESTION = (
    "<|im_start|>user\nCount from 1 to 12.<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
#: `serve` computes in the device's default precision (bf16 on this CPU: 8 bits of mantissa, so
#: a logit near 16 is rounded to 0.125), where MTP's verification (several positions in one
#: call) and plain decoding (one position) round differently by an ulp or two; under exact
#: numerics they agree to 1e-7 (tests/integration/test_logprobs.py).
TOLERANCE = {"abs": 5e-2, "rel": 2e-2}


@pytest.fixture(scope="module")
def client(chat_client: openai.OpenAI) -> openai.OpenAI:
    return chat_client


@pytest.fixture(scope="module")
def http(client: openai.OpenAI) -> Iterator[httpx.Client]:
    with raw_http(client) as http:
        yield http


def post(http: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(path, json={"model": MODEL, **body})


def events(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed answer's events (every one a JSON object; [DONE] last)."""
    with http.stream("POST", path, json={"model": MODEL, "stream": True, **body}) as response:
        assert response.status_code == 200, response.read()
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def logprob_entries(response: Any) -> list[Any]:
    logprobs = response.choices[0].logprobs
    assert logprobs is not None
    return list(logprobs.content)


# --- logprobs ---------------------------------------------------------------------------------


def test_chat_logprobs_have_openais_shape_and_spell_the_answer(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL, messages=QUESTION, logprobs=True, top_logprobs=3, max_tokens=40
    )
    content = response.choices[0].message.content
    entries = logprob_entries(response)
    assert content and entries
    # The tokens' bytes make the answer (the end-of-turn token is not part of it).
    assert b"".join(bytes(e.bytes) for e in entries).decode() == content
    for entry in entries:
        assert entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[-1].logprob
        assert entry.top_logprobs[0].token == entry.token  # greedy: the best is chosen
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)


def test_streamed_logprobs_equal_the_whole_answers(http: httpx.Client) -> None:
    body = {"messages": QUESTION, "logprobs": True, "top_logprobs": 2, "max_tokens": 40}
    whole = post(http, "/v1/chat/completions", body).json()["choices"][0]["logprobs"]["content"]
    streamed = []
    for event in events(http, "/v1/chat/completions", body):
        for choice in event["choices"]:
            assert "logprobs" in choice
            if choice["logprobs"] is not None:
                streamed += choice["logprobs"]["content"]
    assert [e["token"] for e in streamed] == [e["token"] for e in whole]
    # The second request resumes the state the first one kept (the same prompt), so its logits
    # come from calls of other shapes than a cold prefill's: equal to rounding (TOLERANCE).
    assert [e["logprob"] for e in streamed] == pytest.approx(
        [e["logprob"] for e in whole], **TOLERANCE
    )


def test_logprobs_with_mtp_equal_plain_decodings(
    client: openai.OpenAI, plain_chat_client: openai.OpenAI
) -> None:
    def ask(target: openai.OpenAI, **extra: Any) -> tuple[str | None, list[Any], dict[str, Any]]:
        response = target.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            logprobs=True,
            top_logprobs=4,
            max_tokens=48,
            extra_body=extra,
        )
        mtp = (response.model_extra or {})["mtp"]
        return response.choices[0].message.content, logprob_entries(response), mtp

    plain_text, plain, plain_mtp = ask(plain_chat_client)
    assert plain_mtp["mode"] == "plain"
    for depth in (1, 3):
        text, drafted, mtp = ask(client, num_assistant_tokens=depth)
        assert mtp["mode"] == "mtp" and mtp["accepted_tokens"] > 0
        assert text == plain_text
        assert [e.token for e in drafted] == [e.token for e in plain]
        assert [e.logprob for e in drafted] == pytest.approx(
            [e.logprob for e in plain], **TOLERANCE
        )
        for ours, theirs in zip(drafted, plain, strict=True):
            assert [t.logprob for t in ours.top_logprobs] == pytest.approx(
                [t.logprob for t in theirs.top_logprobs], **TOLERANCE
            )


def test_sampled_logprobs_follow_the_temperature(client: openai.OpenAI) -> None:
    """Logprobs are of the distribution after temperature: a hotter one is flatter."""

    def first(temperature: float) -> Any:
        response = client.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            logprobs=True,
            top_logprobs=5,
            max_tokens=1,
            temperature=temperature,
            seed=3,
        )
        return logprob_entries(response)[0]

    cool, hot = first(0.3), first(1.8)
    assert cool.top_logprobs[0].logprob > hot.top_logprobs[0].logprob
    spread = [t.logprob for t in hot.top_logprobs]
    assert spread == sorted(spread, reverse=True)


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
        ({"logprobs": 2}, "logprobs"),
        ({"logit_bias": {"15": 300}}, "logit_bias"),
        ({"logit_bias": {"99999999": 3}}, "logit_bias"),  # beyond the vocabulary
    ],
)
def test_logprob_fields_that_cannot_be_honoured_are_400(
    http: httpx.Client, fields: dict[str, Any], param: str
) -> None:
    response = post(http, "/v1/chat/completions", {"messages": QUESTION, **fields})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


# --- the nulls, and the statistics in three shapes ----------------------------------------------


def test_logit_bias_is_honoured_with_mtp_on(
    client: openai.OpenAI, plain_chat_client: openai.OpenAI, chat_model: Path
) -> None:
    """Banning the greedy answer's first token changes the answer; MTP stays on, and its
    answer and logprobs are those of a --no-mtp server with the same bias."""

    def ask(target: openai.OpenAI, bias: dict[str, int]) -> tuple[list[Any], dict[str, Any]]:
        response = target.chat.completions.create(
            model=MODEL,
            messages=QUESTION,
            logprobs=True,
            top_logprobs=2,
            max_tokens=24,
            logit_bias=bias,
        )
        return logprob_entries(response), (response.model_extra or {})["mtp"]

    plain_first = ask(client, {})[0][0]
    (first_id,) = prompt_ids(chat_model, plain_first.token)
    banned = {str(first_id): -100}
    biased, mtp = ask(client, banned)
    assert biased[0].token != plain_first.token
    assert mtp["mode"] == "mtp" and mtp["accepted_tokens"] > 0
    assert mtp["method"]["sampling"]["logit_bias"] == [[first_id, -100.0]]
    reference, _ = ask(plain_chat_client, banned)
    assert [e.token for e in biased] == [e.token for e in reference]
    assert [e.logprob for e in biased] == pytest.approx([e.logprob for e in reference], **TOLERANCE)


def test_nulls_are_sent_where_openai_sends_them(http: httpx.Client) -> None:
    body = post(http, "/v1/chat/completions", {"messages": QUESTION, "max_tokens": 8}).json()
    choice = body["choices"][0]
    assert "logprobs" in choice and choice["logprobs"] is None
    assert "refusal" in choice["message"] and choice["message"]["refusal"] is None
    streamed = events(http, "/v1/chat/completions", {"messages": QUESTION, "max_tokens": 8})
    assert streamed[0]["choices"][0]["delta"]["refusal"] is None
    for event in streamed:
        for choice in event["choices"]:
            assert "logprobs" in choice and choice["logprobs"] is None


def check_statistics(response: dict[str, Any]) -> None:
    mtp, usage = response["mtp"], response["usage"]
    spec = response["metrics"]["speculative_decoding"]
    timings = response["timings"]
    assert spec["num_draft_tokens"] == mtp["drafted_tokens"] == timings["draft_n"]
    assert spec["num_accepted_draft_tokens"] == mtp["accepted_tokens"]
    assert timings["draft_n_accepted"] == mtp["accepted_tokens"]
    histogram = spec["acceptance_histogram"]
    assert spec["num_spec_tokens"] == mtp["draft_tokens_per_step"] == len(histogram) - 1
    assert sum(histogram) == spec["num_spec_steps"] > 0
    assert sum(j * count for j, count in enumerate(histogram)) == mtp["accepted_tokens"]
    assert spec["mean_acceptance_length"] == pytest.approx(
        1 + mtp["accepted_tokens"] / spec["num_spec_steps"]
    )
    assert spec["draft_acceptance_rate"] == pytest.approx(mtp["acceptance_rate"], abs=1e-4)
    assert spec["num_accepted_tokens_per_pos"][0] == sum(histogram[1:])
    assert timings["predicted_n"] == usage["completion_tokens"]
    assert timings["prompt_n"] + timings["cache_n"] == usage["prompt_tokens"]
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] >= 0


def test_speculative_statistics_in_vllms_and_llamacpps_shapes(http: httpx.Client) -> None:
    body = {"messages": QUESTION, "max_tokens": 60, "num_assistant_tokens": 3}
    check_statistics(post(http, "/v1/chat/completions", body).json())
    streamed = events(
        http, "/v1/chat/completions", {**body, "stream_options": {"include_usage": True}}
    )
    check_statistics(streamed[-1])  # the usage chunk carries all three


# --- /v1/completions ----------------------------------------------------------------------------


def test_completion_continues_raw_text_as_the_chat_answers(client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=30)
    completion = client.completions.create(model=MODEL, prompt=RAW_QUESTION, max_tokens=30)
    assert completion.object == "text_completion"
    assert completion.choices[0].text == chat.choices[0].message.content
    assert completion.choices[0].finish_reason == chat.choices[0].finish_reason
    assert completion.usage is not None and chat.usage is not None
    assert completion.usage.completion_tokens == chat.usage.completion_tokens
    assert (completion.model_extra or {})["mtp"]["mode"] == "mtp"
    # A list of one prompt is the same request.
    listed = client.completions.create(model=MODEL, prompt=[RAW_QUESTION], max_tokens=30)
    assert listed.choices[0].text == completion.choices[0].text


def test_completion_text_is_kept_exactly_as_decoded(client: openai.OpenAI) -> None:
    """No blank lines trimmed from the start (the chat trims the ones after </think>)."""
    cut = RAW_QUESTION.removesuffix("\n\n")
    completion = client.completions.create(model=MODEL, prompt=cut, max_tokens=8)
    text = completion.choices[0].text
    assert text.startswith("\n"), repr(text)
    whole = client.completions.create(model=MODEL, prompt=RAW_QUESTION, max_tokens=6)
    assert text.lstrip("\n").startswith(whole.choices[0].text[:3])


def test_completion_default_budget_is_openais_16(client: openai.OpenAI) -> None:
    completion = client.completions.create(model=MODEL, prompt=RAW_QUESTION)
    assert completion.usage is not None and completion.usage.completion_tokens == 16
    assert completion.choices[0].finish_reason == "length"


def test_streamed_completion_equals_the_whole_one(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    whole = client.completions.create(model=MODEL, prompt=RAW_QUESTION, max_tokens=40, stop=["7"])
    text = "".join(
        choice.text
        for chunk in client.completions.create(
            model=MODEL, prompt=RAW_QUESTION, max_tokens=40, stop=["7"], stream=True
        )
        for choice in chunk.choices
    )
    assert text == whole.choices[0].text and "7" not in text
    streamed = events(
        http,
        "/v1/completions",
        {"prompt": RAW_QUESTION, "max_tokens": 20, "stream_options": {"include_usage": True}},
    )
    assert streamed[-1]["choices"] == [] and streamed[-1]["usage"]["completion_tokens"] == 20
    check_statistics(streamed[-1])


def test_completion_legacy_logprobs_and_echo(http: httpx.Client) -> None:
    body = {"prompt": RAW_QUESTION, "max_tokens": 12, "logprobs": 2}
    choice = post(http, "/v1/completions", body).json()["choices"][0]
    logprobs = choice["logprobs"]
    assert "".join(logprobs["tokens"]) == choice["text"]
    assert len(logprobs["token_logprobs"]) == len(logprobs["tokens"]) == 12
    for token, value, top in zip(
        logprobs["tokens"], logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True
    ):
        assert top[token] == pytest.approx(value) and 2 <= len(top) <= 3
    offsets = logprobs["text_offset"]
    assert offsets[0] == 0 and offsets == sorted(offsets)
    streamed = events(http, "/v1/completions", body)
    assert [
        token
        for event in streamed
        for c in event["choices"]
        if c["logprobs"]
        for token in c["logprobs"]["tokens"]
    ] == logprobs["tokens"]
    echoed = post(http, "/v1/completions", {"prompt": "One, two,", "max_tokens": 5, "echo": True})
    assert echoed.json()["choices"][0]["text"].startswith("One, two,")


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"prompt": ["a", "b"]}, "prompt"),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": "a", "suffix": "b"}, "suffix"),
        ({"prompt": "a", "n": 2}, "n"),
        ({"prompt": "a", "best_of": 2}, "best_of"),
        ({"prompt": "a", "echo": True, "logprobs": 1}, "echo"),
        ({"prompt": "a", "logprobs": 21}, "logprobs"),
        ({"prompt": "a", "messages": QUESTION}, "messages"),
    ],
)
def test_completion_requests_that_cannot_be_honoured_are_400(
    http: httpx.Client, fields: dict[str, Any], param: str
) -> None:
    response = post(http, "/v1/completions", fields)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] is not None and error["param"].startswith(param), error


# --- every field honoured or refused ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"max_token": 5}, "max_token"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"prediction": {"type": "content", "content": "x"}}, "prediction"),
        ({"web_search_options": {}}, "web_search_options"),
    ],
)
def test_unknown_and_unsupported_fields_are_400_naming_them(
    http: httpx.Client, fields: dict[str, Any], param: str
) -> None:
    response = post(http, "/v1/chat/completions", {"messages": QUESTION, **fields})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_harmless_fields_are_accepted(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        max_tokens=4,
        user="someone",
        metadata={"run": "1"},
        store=False,
        modalities=["text"],
        logit_bias={},
    )
    assert response.choices[0].message.content


# --- the model's generation_config.json as defaults ---------------------------------------------

MODEL_DEFAULTS = {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 7}


def test_the_models_generation_config_fills_what_a_request_leaves_out(
    demo_model: Path, tmp_path: Path
) -> None:
    model = copy_model(demo_model, tmp_path, MODEL)
    config = json.loads((model / "generation_config.json").read_text())
    (model / "generation_config.json").write_text(
        json.dumps({**config, **MODEL_DEFAULTS, "repetition_penalty": 1.1})
    )

    def sampling(target: openai.OpenAI, **fields: Any) -> dict[str, Any]:
        response = target.chat.completions.create(
            model=MODEL, messages=QUESTION, max_tokens=4, **fields
        )
        found: dict[str, Any] = (response.model_extra or {})["mtp"]["method"]["sampling"]
        return found

    with serving_client(model) as client:
        used = sampling(client)
        assert {k: used[k] for k in ("temperature", "top_p", "top_k")} == {
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 7,
        }
        assert used["repetition_penalty"] == pytest.approx(1.1)
        assert used["seed"] is not None  # sampled: a fresh seed, reported
        mixed = sampling(client, temperature=1.2, extra_body={"top_k": 3})  # given fields win
        assert (mixed["temperature"], mixed["top_p"], mixed["top_k"]) == (1.2, 0.8, 3)
        assert sampling(client, temperature=0)["temperature"] == 0  # greedy when asked
        text = client.completions.create(model=MODEL, prompt=RAW_QUESTION, max_tokens=4)
        assert (text.model_extra or {})["mtp"]["method"]["sampling"]["temperature"] == 0.7
    with serving_client(model, "--generation-config", "none") as client:
        own = sampling(client)
        assert own["temperature"] == 0 and own["repetition_penalty"] == 1.0


# --- hostile completion bodies ------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_completion_fields = {
    "prompt": st.text(max_size=20) | st.lists(st.text(max_size=5), max_size=2) | _json,
    "max_tokens": st.integers(-1, 6),
    "temperature": st.floats(0, 2.5),
    "logprobs": st.integers(-1, 25) | st.booleans(),
    "echo": st.booleans() | _json,
    "stream": st.booleans(),
    "stop": st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=2),
    "suffix": st.none() | st.text(max_size=3),
    "best_of": st.integers(0, 3),
    "seed": st.integers(-1, 2**64),
}
_completion_body = st.builds(
    lambda fields, junk: {"model": MODEL, "prompt": "Count: 1, 2,", **fields, **junk},
    st.fixed_dictionaries({}, optional=_completion_fields),
    st.dictionaries(
        st.sampled_from([*_completion_fields, "messages", "n", "x"]), _json, max_size=1
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_completion_body)
def test_hostile_completion_bodies_get_an_answer_or_a_400(
    http: httpx.Client, body: dict[str, Any]
) -> None:
    response = http.post("/v1/completions", content=json.dumps(body).encode(), headers=JSON)
    hypothesis.event(f"status {response.status_code}")
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text
    if response.status_code != 200:
        error = response.json()["error"]
        assert error["message"] and response.status_code == 400, error
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert response.text.rstrip().endswith("data: [DONE]")
        assert '"error"' not in response.text
    else:
        assert response.json()["object"] == "text_completion"
