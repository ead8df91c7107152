"""What a client of `qwen-mtp-desktop serve` gets from the decoder, through the real server
process and its engine process, with real HTTP clients: conversation state kept between
requests (`usage.prompt_tokens_details.cached_tokens`), sampling with MTP on (fresh seeds,
reproducible seeds, penalties) and structured output (`response_format`) with MTP on.

The model is a copy of the demo model in a folder of its own: the server treats it as a
full-size model and sends it the whole conversation (the demo reads one request at a time)."""

from __future__ import annotations

import base64
import io
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from tests.remote_server import KEY, raw_http, serving_client
from tests.serve_fixtures import CHAT_MODEL

pytestmark = pytest.mark.subprocess

MODEL = CHAT_MODEL
SYSTEM = {"role": "system", "content": "You are a tiny helper."}
QUESTIONS = [
    "Count from 1 to 5.",
    "Repeat 'tea time' three times.",
    "List the numbers from 40 to 45.",
]
#: A schema whose every answer fits the token budget (bounded strings and numbers), so a
#: complete answer always parses.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "count": {"type": "integer", "minimum": 0, "maximum": 99},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "count", "ok", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(chat_model: Path) -> Iterator[openai.OpenAI]:
    """A server of this module's own (not the shared `chat_client`): its tests count what the
    server's conversation states hold, which another module's requests would change."""
    with serving_client(chat_model) as client:
        yield client


def mtp_of(response: Any) -> dict[str, Any]:
    mtp: dict[str, Any] = (response.model_extra or {})["mtp"]
    return mtp


def cached(usage: Any) -> int:
    details = usage.prompt_tokens_details
    assert details is not None, usage
    return int(details.cached_tokens)


def ask(client: openai.OpenAI, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


# --- conversation state kept between requests ---------------------------------------------------


def test_follow_ups_report_cached_tokens_and_answer_as_a_cold_server(
    client: openai.OpenAI, chat_model: Path
) -> None:
    """A client resends the whole history every turn; the engine keeps the conversation's
    state, so turns 2 and 3 prefill only their new tokens, say so in `cached_tokens`, and
    answer exactly what a server that never saw the conversation answers (greedy)."""
    messages: list[dict[str, Any]] = [SYSTEM]
    histories: list[list[dict[str, Any]]] = []
    answers: list[str] = []
    for turn, question in enumerate(QUESTIONS):
        messages.append({"role": "user", "content": question})
        histories.append(list(messages))
        if turn < 2:
            response = ask(client, messages, max_tokens=40)
            answer = response.choices[0].message.content
            usage = response.usage
        else:  # the last turn streamed: the usage chunk carries cached_tokens too
            stream = ask(
                client, messages, max_tokens=40, stream=True, stream_options={"include_usage": True}
            )
            answer, usage = "", None
            for event in stream:
                if event.choices and event.choices[0].delta.content:
                    answer += event.choices[0].delta.content
                if event.usage is not None:
                    usage = event.usage
            assert usage is not None
        reused = cached(usage)
        if turn == 0:
            assert reused == 0  # nothing of this conversation was seen before
        else:
            # At least everything up to the previous question was kept.
            assert reused > 0, (turn, usage)
            assert reused < usage.prompt_tokens
        answers.append(answer)
        messages.append({"role": "assistant", "content": answer})
    assert answers[0].split() == ["1", "2", "3", "4", "5"]  # the model really answered
    assert answers[2].split() == [str(n) for n in range(40, 46)]
    # Each later turn's history, on a server that never saw it: the same answer.
    for turn in (1, 2):
        with serving_client(chat_model) as cold:
            response = ask(cold, histories[turn], max_tokens=40)
        assert cached(response.usage) == 0
        assert response.choices[0].message.content == answers[turn], turn


#: An agent's preamble: a long system prompt and tool definitions (about 2,350 demo-model tokens),
#: resent at the start of every new task.
PREAMBLE = "You are a careful agent. " + " ".join(
    f"Rule {n}: check the facts, then answer in plain words." for n in range(40)
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"lookup_{name}",
            "description": f"Look up a {name} by its exact title.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["title"],
            },
        },
    }
    for name in ("book", "film", "song")
]


def test_a_new_task_resumes_after_the_preamble_it_shares_with_an_earlier_one(
    client: openai.OpenAI, chat_model: Path
) -> None:
    """Two new conversations, then a Responses request, each opening with the same system
    prompt and tools: the later ones prefill only their own question (`cached_tokens` covers
    the preamble) and answer what a server that never saw the preamble answers."""
    answers, new_tokens, requests = [], [], []
    for question in QUESTIONS:
        messages = [{"role": "system", "content": PREAMBLE}, {"role": "user", "content": question}]
        response = ask(client, messages, tools=TOOLS, max_tokens=24)
        requests.append(messages)
        answers.append(response.choices[0].message.content)
        new_tokens.append(response.usage.prompt_tokens - cached(response.usage))
        assert response.usage.prompt_tokens > 600, response.usage  # the preamble is long
    # The first task read everything; the others only their question and its headers.
    assert new_tokens[0] > 600 and all(n < 48 for n in new_tokens[1:]), new_tokens
    responses_turn = client.responses.create(
        model=MODEL,
        instructions=PREAMBLE,
        tools=[{"type": "function", **tool["function"]} for tool in TOOLS],  # type: ignore[misc]
        input=QUESTIONS[1],
        max_output_tokens=24,
    )
    usage = responses_turn.usage
    assert usage is not None
    assert usage.input_tokens - usage.input_tokens_details.cached_tokens < 48, usage
    with serving_client(chat_model) as cold:
        for messages, answer in zip(requests, answers, strict=True):
            response = ask(cold, messages, tools=TOOLS, max_tokens=24)
            assert response.choices[0].message.content == answer, messages[-1]


def essay(seed: int, words: int) -> str:
    """Filler text: about three demo-model tokens per word."""
    return " ".join(f"word{(i * seed) % 89}" for i in range(words))


def test_a_client_that_leaves_during_a_long_prompt_stops_its_prefill(
    client: openai.OpenAI,
) -> None:
    """A long follow-up is one model call in the engine process (seconds here, a minute for
    7,000 tokens on Qwen3.5-0.8B): a client that gives up on it stops that call, and the
    conversation kept before it stays kept. (Were the call left to run through, the resent
    request would find the whole follow-up cached.)"""

    def conversation(seed: int) -> list[dict[str, Any]]:
        opening = [SYSTEM, {"role": "user", "content": essay(seed, 300)}]
        answer = ask(client, opening, max_tokens=8).choices[0].message.content
        return [*opening, {"role": "assistant", "content": answer}]

    # How long such a follow-up takes to read here: the same shape in another conversation.
    probe = [*conversation(3), {"role": "user", "content": essay(4, 3000)}]
    reading_s = mtp_of(ask(client, probe, max_tokens=1))["ttft_s"]
    history = conversation(5)
    kept = ask(client, history[:-1], max_tokens=8).usage.prompt_tokens  # its opening, again
    follow_up = [*history, {"role": "user", "content": essay(6, 3000)}]
    body = {"model": MODEL, "messages": follow_up, "max_tokens": 8}
    with raw_http(client) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/v1/chat/completions", json=body, timeout=0.25 * reading_s)
    with raw_http(client) as http:
        deadline = time.monotonic() + 60
        while http.get("/health").json()["busy"]:
            assert time.monotonic() < deadline, "the engine never came back"
            time.sleep(0.05)
    again = ask(client, follow_up, max_tokens=8)
    reused = cached(again.usage)
    assert abs(reused - kept) < 64  # the opening, kept
    assert reused < again.usage.prompt_tokens - 5000  # none of the follow-up


# --- sampling with MTP on -----------------------------------------------------------------------

#: A question the tiny model answers in many ways when sampling (20 different answers in
#: 30 at temperature 1.5): six fresh seeds all giving one answer would be a fixed seed.
OPEN_PROMPT = [{"role": "user", "content": "What is your favourite colour?"}]


def test_sampling_without_a_seed_varies_and_a_seed_reproduces(client: openai.OpenAI) -> None:
    answers = []
    seeds = []
    for _ in range(6):
        response = ask(client, OPEN_PROMPT, max_tokens=24, temperature=1.5)
        mtp = mtp_of(response)
        assert mtp["mode"] == "mtp" and mtp["decoder"] == "app"  # MTP kept on
        # Acceptance reported for sampled answers as for greedy ones.
        assert mtp["drafted_tokens"] > 0 and 0 <= mtp["accepted_tokens"] <= mtp["drafted_tokens"]
        assert 0 <= mtp["acceptance_rate"] <= 1 and len(mtp["acceptance_by_position"]) == 1
        answers.append(response.choices[0].message.content)
        seeds.append(mtp["method"]["sampling"]["seed"])
    assert len(set(answers)) > 1, answers  # a fresh seed per request
    assert len(set(seeds)) == 6 and all(isinstance(s, int) for s in seeds)
    # The seed each answer reports reproduces it, and a given seed reproduces itself.
    again = ask(client, OPEN_PROMPT, max_tokens=24, temperature=1.5, seed=seeds[0])
    assert again.choices[0].message.content == answers[0]
    assert mtp_of(again)["method"]["sampling"]["seed"] == seeds[0]
    twice = [
        ask(
            client,
            OPEN_PROMPT,
            max_tokens=24,
            temperature=1.5,
            seed=11,
            top_p=0.95,
            extra_body={"top_k": 40},
        )
        for _ in range(2)
    ]
    assert twice[0].choices[0].message.content == twice[1].choices[0].message.content
    sampling = mtp_of(twice[0])["method"]["sampling"]
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (1.5, 0.95, 40)


def test_presence_and_frequency_penalties_are_honoured_with_mtp(client: openai.OpenAI) -> None:
    changed = 0
    for seed in range(6):
        plain = ask(client, OPEN_PROMPT, max_tokens=24, temperature=1.0, seed=seed)
        penalised = ask(
            client,
            OPEN_PROMPT,
            max_tokens=24,
            temperature=1.0,
            seed=seed,
            presence_penalty=2.0,
            frequency_penalty=1.0,
        )
        mtp = mtp_of(penalised)
        assert mtp["mode"] == "mtp" and mtp["drafted_tokens"] > 0
        sampling = mtp["method"]["sampling"]
        assert (sampling["presence_penalty"], sampling["frequency_penalty"]) == (2.0, 1.0)
        changed += plain.choices[0].message.content != penalised.choices[0].message.content
    assert changed > 0  # the penalties change what is drawn: they are not ignored


# --- structured output with MTP on --------------------------------------------------------------


def test_json_schema_output_validates_with_mtp_on(
    client: openai.OpenAI, plain_chat_client: openai.OpenAI
) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "card", "schema": SCHEMA, "strict": True}}

    def answers(server: openai.OpenAI, depth: int | None) -> list[str]:
        texts = []
        for prompt in QUESTIONS:
            response = ask(
                server,
                [{"role": "user", "content": prompt}],
                max_tokens=80,
                response_format=fmt,
                extra_body={"num_assistant_tokens": depth} if depth else None,
            )
            assert response.choices[0].finish_reason == "stop"
            text = response.choices[0].message.content
            jsonschema.validate(json.loads(text), SCHEMA)
            mtp = mtp_of(response)
            assert mtp["method"]["constraint"] == {"kind": "json_schema", "name": "card"}
            assert mtp["decoder"] == "app"
            if depth is None:  # the server without MTP
                assert mtp["mode"] == "plain" and mtp["drafted_tokens"] == 0
            else:
                assert mtp["mode"] == "mtp" and mtp["draft_tokens_per_step"] == depth
                assert mtp["drafted_tokens"] > 0
            texts.append(text)
        return texts

    by_depth = {depth: answers(client, depth) for depth in (1, 3)}
    plain = answers(plain_chat_client, None)
    # Drafts never change a greedy constrained answer: MTP at any depth gives plain
    # constrained decoding's text.
    assert by_depth[1] == by_depth[3] == plain


def test_json_object_output_parses_streamed(client: openai.OpenAI) -> None:
    stream = ask(
        client,
        [{"role": "user", "content": "Count from 1 to 5."}],
        max_tokens=120,
        response_format={"type": "json_object"},
        stream=True,
    )
    text, finish, mtp = "", None, None
    for event in stream:
        if event.choices and event.choices[0].delta.content:
            text += event.choices[0].delta.content
        if event.choices and event.choices[0].finish_reason:
            finish = event.choices[0].finish_reason
            mtp = (event.model_extra or {}).get("mtp")
    assert mtp is not None and mtp["mode"] == "mtp" and mtp["drafted_tokens"] > 0
    if finish == "stop":  # any JSON object: the tiny model may fill the budget
        assert isinstance(json.loads(text), dict)
    else:
        assert finish == "length" and text.startswith("{")


def _png() -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (20, 120, 200)).save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("body", "code", "needles"),
    [
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}},
            "invalid_schema",
            ["response_format", "llguidance"],
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": {"type": "string", "pattern": "(("}},
                },
                "stream": True,
            },
            "invalid_schema",
            ["unclosed group"],
        ),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"shema": {}}}},
            "invalid_value",
            ["schema: Field required", "shema"],
        ),
        (
            {
                "response_format": {"type": "json_object"},
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image_url", "image_url": {"url": "IMAGE"}},
                            {"type": "text", "text": "Count from 1 to 3."},
                        ],
                    }
                ],
            },
            "unsupported_value",
            ["images", "response_format"],
        ),
        ({"presence_penalty": -3}, "invalid_value", ["presence_penalty"]),
        ({"logit_bias": {"12": 400}}, "invalid_value", ["logit_bias", "-100 to 100"]),
    ],
)
def test_what_cannot_be_enforced_is_a_clear_400(
    client: openai.OpenAI, body: dict[str, Any], code: str | None, needles: list[str]
) -> None:
    payload = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], **body}
    text = json.dumps(payload).replace("IMAGE", _png())
    response = httpx.post(
        f"{client.base_url}chat/completions",
        content=text,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "Traceback" not in response.text and (code is None or error["code"] == code), error
    for needle in needles:
        assert needle in error["message"], error
    assert ask(client, OPEN_PROMPT, max_tokens=4).choices  # the server is still fine


def test_a_grammar_the_engine_cannot_build_is_a_400_not_a_500(
    chat_model: Path, tmp_path: Path
) -> None:
    """The engine process compiles the grammar against the model's vocabulary; when it
    cannot (here a tokenizer.json llguidance cannot read), the request's answer is a 400
    that says why, and the server goes on answering."""
    broken = tmp_path / MODEL
    shutil.copytree(chat_model, broken)
    (broken / "tokenizer.json").write_text('{"model": {"type": "nonsense"}}')
    with serving_client(broken) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            ask(client, OPEN_PROMPT, max_tokens=8, response_format={"type": "json_object"})
        assert "tokenizer.json" in str(refused.value) and "llguidance" in str(refused.value)
        assert ask(client, [{"role": "user", "content": "Count from 1 to 3."}]).choices[
            0
        ].message.content.split() == ["1", "2", "3"]


def test_auto_decides_sampled_requests_from_their_own_band(chat_model: Path) -> None:
    """`--num-assistant-tokens auto` through `serve`: a sampled request is Auto's too, and its
    reason names the temperature band it learns in (greedy turns learn apart)."""
    with serving_client(chat_model, "--num-assistant-tokens", "auto") as server:
        reasons = []
        for _ in range(2):
            response = ask(server, OPEN_PROMPT, max_tokens=16, temperature=0.7)
            mtp = mtp_of(response)
            assert mtp["decoding"] == "auto", mtp
            reasons.append(mtp["auto"]["reason"])
        greedy = mtp_of(ask(server, OPEN_PROMPT, max_tokens=16))
    assert all("band 0.5-0.9" in reason for reason in reasons), reasons
    assert greedy["decoding"] == "auto" and "band" not in greedy["auto"]["reason"], greedy
