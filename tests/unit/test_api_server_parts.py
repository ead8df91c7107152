"""The API server's pure parts, without a model: request parsing, settings, image data URLs,
the bind rules, the `mtp` object and the printed curl example."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine.generation import thinking_limit
from qwen_mtp_desktop.server import ServerConfig, ServerConfigError, check_config, is_loopback
from qwen_mtp_desktop.server.app import parse_request
from qwen_mtp_desktop.server.examples import curl_example
from qwen_mtp_desktop.server.generation.images import decode_data_url
from qwen_mtp_desktop.server.generation.planning import plan_messages, plan_settings
from qwen_mtp_desktop.server.generation.turns import TurnDefaults, mtp_stats
from qwen_mtp_desktop.server.http.errors import ApiError
from qwen_mtp_desktop.server.http.hosts import host_name

GOOD: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def parsed(**fields: Any) -> Any:
    return parse_request(json.dumps({**GOOD, **fields}).encode())


def refusal(raw: bytes) -> ApiError:
    with pytest.raises(ApiError) as caught:
        parse_request(raw)
    assert caught.value.status == 400
    return caught.value


def test_parse_accepts_openai_shapes() -> None:
    request = parsed(
        temperature=0,
        top_p=1,
        stop="x",
        max_completion_tokens=5,
        max_tokens=9,
        user="ignored",
        stream_options={"include_usage": True},
    )
    assert request.temperature == 0 and request.stop_strings() == ("x",)
    assert request.token_budget() == 5  # the newer name wins
    parts = parsed(messages=[{"role": "user", "content": [{"type": "text", "text": "a"}]}])
    assert parts.messages[0].content[0].text == "a"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"max_tokens": "5"}, "max_tokens"),  # strict: no coercion from strings
        ({"max_tokens": 5.5}, "max_tokens"),
        ({"temperature": 2.5}, "temperature"),
        ({"stream": "yes"}, "stream"),
        ({"stop": ["a"] * 17}, "stop"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ],
)
def test_parse_names_the_bad_field(fields: dict[str, Any], param: str) -> None:
    error = refusal(json.dumps({**GOOD, **fields}).encode())
    assert error.param is not None and error.param.startswith(param), error.message
    assert error.message.startswith("Invalid request: ")


def test_parse_refuses_what_is_not_json() -> None:
    assert "not valid JSON" in refusal(b'{"a": Infinity}').message
    assert "nested too deeply" in refusal(b"[" * 50_000).message
    assert "JSON object" in refusal(b'"text"').message
    assert "not valid JSON" in refusal(b'{"n": ' + b"9" * 5000 + b"}").message


@settings(max_examples=300, deadline=None)
@given(
    raw=st.binary(max_size=200)
    | st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(["model", "messages", "role", "content", "stop", "n", "x"]),
                inner,
                max_size=3,
            )
        ),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode())
)
def test_parse_raises_only_api_errors(raw: bytes) -> None:
    try:
        parse_request(raw)
    except ApiError as exc:
        assert exc.status == 400 and exc.message
        assert "Traceback" not in exc.message


def test_settings_greedy_by_default_sampling_keeps_mtp() -> None:
    defaults = TurnDefaults(max_tokens=77, depth=2)
    greedy, auto = plan_settings(parsed(seed=3), defaults, mtp_loaded=True)
    assert greedy.method == DecodingMethod.mtp(2) and not auto  # greedy: the seed is moot
    assert greedy.max_new_tokens == 77
    sampled, auto = plan_settings(parsed(temperature=0.5, seed=3), defaults, mtp_loaded=True)
    # Sampling keeps MTP (exact speculative sampling), with the documented top-p and top-k.
    assert sampled.method == DecodingMethod.mtp(
        2, Sampling(temperature=0.5, top_p=0.9, top_k=20, seed=3)
    )
    assert not auto
    # openvino-genai's MTP decodes greedily: without the app's decoder, sampling runs plain.
    genai, _ = plan_settings(parsed(temperature=0.5), defaults, mtp_loaded=True, app_decoder=False)
    assert genai.method.is_plain and genai.method.sampling.temperature == 0.5
    own, _ = plan_settings(
        parsed(
            temperature=0.5,
            top_p=0.5,
            top_k=0,
            repetition_penalty=1.2,
            presence_penalty=0.5,
            frequency_penalty=-0.25,
        ),
        defaults,
        mtp_loaded=False,
    )
    assert own.method.sampling == Sampling(
        temperature=0.5,
        top_p=0.5,
        repetition_penalty=1.2,
        presence_penalty=0.5,
        frequency_penalty=-0.25,
    )
    # Penalties apply to greedy decoding too (the argmax of the penalised logits).
    penalised, auto = plan_settings(
        parsed(presence_penalty=1.5), TurnDefaults(depth="auto"), mtp_loaded=True
    )
    assert penalised.method == DecodingMethod.mtp(1, Sampling(presence_penalty=1.5)) and auto
    own, _ = plan_settings(parsed(num_assistant_tokens=4), defaults, mtp_loaded=True)
    assert own.method == DecodingMethod.mtp(4)
    _, auto = plan_settings(parsed(), TurnDefaults(depth="auto"), mtp_loaded=True)
    assert auto
    _, auto = plan_settings(parsed(temperature=1.0), TurnDefaults(depth="auto"), mtp_loaded=True)
    assert auto  # sampled requests too, by their temperature band's own measurements
    _, auto = plan_settings(
        parsed(temperature=1.0, response_format={"type": "json_object"}),
        TurnDefaults(depth="auto"),
        mtp_loaded=True,
    )
    assert not auto  # a grammar changes acceptance; Auto has no measurements for it
    thinking, _ = plan_settings(
        parsed(chat_template_kwargs={"enable_thinking": True}), defaults, mtp_loaded=True
    )
    assert thinking.thinking


def test_settings_map_response_format_to_a_constraint() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "count", "schema": schema, "strict": True},
    }
    constrained, auto = plan_settings(
        parsed(response_format=fmt), TurnDefaults(depth="auto"), mtp_loaded=True
    )
    constraint = constrained.method.constraint
    assert constraint is not None and constraint.kind == "json_schema"
    # strict: closed, and the integer bounded where the schema is silent (issue 43, item 1).
    bound = {"minimum": -(2**53 - 1), "maximum": 2**53 - 1}
    closed = {**schema, "properties": {"n": {"type": "integer", **bound}}}
    assert json.loads(constraint.source) == {**closed, "additionalProperties": False}
    assert constraint.name == "count"
    assert constrained.method.uses_mtp_head and not auto  # MTP stays on; Auto stays out
    anything, _ = plan_settings(
        parsed(response_format={"type": "json_object"}), TurnDefaults(), mtp_loaded=True
    )
    assert anything.method.constraint is not None
    assert anything.method.constraint.kind == "json_object"
    text, _ = plan_settings(
        parsed(response_format={"type": "text"}), TurnDefaults(), mtp_loaded=True
    )
    assert text.method.constraint is None
    # With thinking on (asked for or the server's default) the engine thinks first, then
    # writes the constrained answer, with room kept for it (issue 43, item 4).
    for fields, defaults in (
        ({"chat_template_kwargs": {"enable_thinking": True}}, TurnDefaults()),
        ({}, TurnDefaults(thinking=True)),
    ):
        thinks, _ = plan_settings(
            parsed(response_format=fmt, max_tokens=400, **fields), defaults, mtp_loaded=True
        )
        assert thinks.thinking and thinks.method.constraint is not None
        assert thinking_limit(thinks) == 300
    off, _ = plan_settings(
        parsed(response_format=fmt, chat_template_kwargs={"enable_thinking": False}),
        TurnDefaults(thinking=True),
        mtp_loaded=True,
    )
    assert off.method.constraint is not None and not off.thinking


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"n": 2}, "n at most 1"),
        ({"top_logprobs": 2}, "top_logprobs needs logprobs"),
        ({"logprobs": False, "top_logprobs": 0}, "top_logprobs needs logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs must be 0 to 20"),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs must be 0 to 20"),
        ({"logit_bias": {"x": 5}}, "not a token id"),
        ({"logit_bias": {"42": 101}}, "-100 to 100"),
        ({"logit_bias": {"42": "5"}}, "must be a number"),
        ({"logit_bias": {str(i): 1 for i in range(301)}}, "at most 300"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "x"}}}},
            "Invalid type: x",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": {"type": "array", "minItems": 3, "maxItems": 1}},
                }
            },
            "minItems (3) is greater than maxItems (1)",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": {"$ref": "#/definitions/missing"}},
                }
            },
            "does not exist",
        ),
    ],
)
def test_settings_refuse_what_cannot_be_honoured(fields: dict[str, Any], needle: str) -> None:
    with pytest.raises(ApiError) as caught:
        plan_settings(parsed(**fields), TurnDefaults(), mtp_loaded=True)
    assert caught.value.status == 400 and needle in caught.value.message


def _png(size: tuple[int, int] = (4, 4), mode: str = "RGB", fmt: str = "PNG") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, size).save(buffer, fmt)
    return buffer.getvalue()


def test_images_only_as_data_urls(tmp_path: Path) -> None:
    import base64

    data = _png()
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    assert decode_data_url(url, "p") == (data, ".png")
    for bad, code in (
        ("https://example.com/cat.png", "invalid_image_url"),
        ("file:///etc/passwd", "invalid_image_url"),
        ("data:image/png,rawbytes", "invalid_image_url"),
        ("data:image/png;base64,!!!!", "invalid_image"),
        ("data:text/plain;base64," + base64.b64encode(b"hello").decode(), "invalid_image"),
    ):
        with pytest.raises(ApiError) as caught:
            decode_data_url(bad, "p")
        assert caught.value.code == code and caught.value.param == "p"
    huge = "data:image/png;base64," + base64.b64encode(_png((8000, 6000), "1")).decode()
    with pytest.raises(ApiError, match="million pixels"):
        decode_data_url(huge, "p")

    def folder() -> Path:
        return tmp_path

    message = {"type": "image_url", "image_url": {"url": url}}
    with_image = parsed(messages=[{"role": "user", "content": [message]}])
    with pytest.raises(ApiError, match="no vision encoder"):
        plan_messages(with_image, vision=False, image_dir=folder)
    gif = base64.b64encode(_png((3, 2), "RGB", "GIF")).decode()
    second = {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{gif}"}}
    two = parsed(
        messages=[{"role": "user", "content": [message, {"type": "text", "text": "?"}, second]}]
    )
    [both] = plan_messages(two, vision=True, image_dir=folder)
    # Several images in one message: each kept, in order (issue 43, item 6).
    assert len(both.images) == 2 and both.images[0] == both.image
    assert [path.suffix for path in both.images] == [".png", ".gif"]
    assert both.images[0].read_bytes() == data and both.content == "?"
    [engine_message] = plan_messages(with_image, vision=True, image_dir=folder)
    assert engine_message.image is not None and engine_message.image.read_bytes() == data
    assert engine_message.more_images == ()


def test_an_unreadable_image_names_every_accepted_format() -> None:
    import base64

    bad = "data:image/png;base64," + base64.b64encode(b"\x89PNG not really").decode()
    with pytest.raises(ApiError) as caught:
        decode_data_url(bad, "p")
    for name in ("PNG", "JPEG", "WebP", "GIF", "BMP"):
        assert name in caught.value.message, caught.value.message
    tiff = _png((2, 2), "RGB", "TIFF")
    tiff_url = "data:image/tiff;base64," + base64.b64encode(tiff).decode()
    with pytest.raises(ApiError) as caught:
        decode_data_url(tiff_url, "p")
    assert "TIFF" in caught.value.message and "GIF or BMP" in caught.value.message


def test_developer_role_is_system_and_parts_join() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    request = parsed(
        messages=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": parts},
        ]
    )
    system, user = plan_messages(request, vision=False, image_dir=Path)
    assert (system.role, system.content) == ("system", "be brief")
    assert user.content == "a\nb"


def test_bind_rules() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("127.8.9.10") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert not is_loopback("example.com")
    check_config(ServerConfig())
    check_config(ServerConfig(host="0.0.0.0", api_key="secret"))
    with pytest.raises(ServerConfigError, match="without an API key"):
        check_config(ServerConfig(host="0.0.0.0"))
    with pytest.raises(ServerConfigError, match="spaces"):
        check_config(ServerConfig(api_key=" secret"))
    assert host_name("127.0.0.1:8000") == "127.0.0.1"
    assert host_name("[::1]:8000") == "::1"
    assert host_name("LocalHost") == "localhost"
    assert host_name("evil.example:80") == "evil.example"


def test_mtp_object_from_stats() -> None:
    stats = build_stats(
        method=DecodingMethod.mtp(2),
        device="CPU",
        prompt_tokens=10,
        chunk_sizes=[1, 3, 1, 2],
        chunk_times=[0.1, 0.2, 0.3, 0.4],
        total_s=0.41,
        reasoning_tokens=0,
        answer_tokens=7,
        finish_reason="eos",
        decoder="app",
    )
    mtp = mtp_stats(stats, {"decoding": "fixed"}, queue_wait_s=0.05)
    assert mtp["mode"] == "mtp" and mtp["draft_tokens_per_step"] == 2
    assert mtp["method"] == DecodingMethod.mtp(2).to_record()
    assert (mtp["drafted_tokens"], mtp["accepted_tokens"]) == (6, 3)
    assert mtp["acceptance_rate"] == 0.5 and mtp["mean_accepted_per_step"] == 1.0
    assert mtp["acceptance_by_position"] == [0.6667, 0.3333]
    assert mtp["ttft_s"] == 0.1 and mtp["decode_tokens_per_s"] == pytest.approx(20.0)
    assert mtp["queue_wait_s"] == 0.05 and "auto" not in mtp


def test_curl_example_is_a_valid_command() -> None:
    text = curl_example("http://127.0.0.1:8000", "it's a model", "$QWEN_MTP_API_KEY")
    words = shlex.split(text.replace("\\\n", " "))
    assert words[0] == "curl" and words[1] == "http://127.0.0.1:8000/v1/chat/completions"
    assert "Authorization: Bearer $QWEN_MTP_API_KEY" in words
    body = json.loads(words[words.index("-d") + 1])
    assert body["model"] == "it's a model"


@pytest.mark.subprocess
def test_the_curl_example_needs_no_web_stack() -> None:
    """The window shows the example; its process must not load fastapi or uvicorn for it."""
    import subprocess
    import sys

    code = (
        "import sys, pathlib; "
        "from qwen_mtp_desktop.server.examples import curl_example, model_id_for; "
        "curl_example('http://x', model_id_for(pathlib.Path('/m')), None); "
        "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'pydantic') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_urls_of_a_wildcard_bind() -> None:
    from qwen_mtp_desktop.server.runner import bind_socket, network_urls, url_of

    with bind_socket("0.0.0.0", 0) as everywhere, bind_socket("127.0.0.1", 0) as local:
        port = everywhere.getsockname()[1]
        assert url_of(everywhere) == f"http://127.0.0.1:{port}"  # connectable from here
        others = network_urls(everywhere)
        assert all(u.endswith(f":{port}") and "127.0.0.1" not in u for u in others), others
        assert url_of(local) == f"http://127.0.0.1:{local.getsockname()[1]}"
        assert network_urls(local) == []


def test_mtp_object_of_a_prompt_lookup_turn() -> None:
    """Auto may run prompt lookup: the response says so and counts its drafts."""
    from qwen_mtp_desktop.core.decoding.stats import StepDrafts, build_stats
    from qwen_mtp_desktop.server.generation.turns import mtp_stats

    stats = build_stats(
        method=DecodingMethod.lookup(4), device="CPU", prompt_tokens=9,
        chunk_sizes=[1, 4, 1], chunk_times=[0.1, 0.2, 0.3], total_s=0.3, reasoning_tokens=0,
        answer_tokens=6, finish_reason="eos",
        drafts=[StepDrafts(0, 0), StepDrafts(4, 3), StepDrafts(2, 0)],
    )  # fmt: skip
    mtp = mtp_stats(stats, {"decoding": "auto"}, queue_wait_s=0.0)
    assert mtp["mode"] == "lookup" and mtp["draft_tokens_per_step"] == 4
    assert mtp["method"] == DecodingMethod.lookup(4).to_record()
    assert (mtp["drafted_tokens"], mtp["accepted_tokens"]) == (6, 3)
