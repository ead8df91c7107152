"""The OVMS files `core.models.ovms` generates, checked field by field against OVMS's
documented format (tests/ovms_format.py names the sources), and every user-controlled string (folder
names,
model names, output paths) through generated inputs: it comes out intact or is refused."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.models.ovms import (
    DEVICES,
    OvmsDeployError,
    check_name,
    config_json,
    curl_command,
    docker_command,
    graph_pbtxt,
    kserve_yaml,
    pbtxt_string,
    servable_name,
)
from tests.ovms_format import FormatError, check_config, check_graph, parse, tokenize, unescape

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
#: Any text a file system could hold in a name (no surrogates: not encodable).
ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)


@pytest.mark.parametrize("pipeline_type", ["VLM_CB", "LM_CB"])
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mtp", [True, False])
def test_graph_matches_the_documented_llm_graph(pipeline_type: str, device: str, mtp: bool) -> None:
    values = check_graph(graph_pbtxt(pipeline_type=pipeline_type, device=device, mtp=mtp))
    expected = {
        "pipeline_type": pipeline_type,
        "models_path": "./",
        "enable_prefix_caching": False,
        "cache_size": 0,
        "device": device,
    }
    if mtp:
        expected |= {"draft_models_path": "./", "draft_device": device}
    assert values == expected


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("cache_size: 0", "cache_size: -1"), "unsigned"),
        (("cache_size: 0", 'cache_size: "0"'), "unsigned"),
        (("enable_prefix_caching: false", "enable_prefix_caching: 0"), "true or false"),
        (("pipeline_type: VLM_CB", "pipeline_type: VLM_MTP"), "not one of"),
        (("device: ", "devices: "), "no field"),
        ((' models_path: "./",', ""), "required"),
        (('draft_models_path: "./",', ""), "without draft_models_path"),
        (('calculator: "HttpLLMCalculator"', 'calculator: "LLMCalculator"'), "calculator"),
        (("back_edge: true", "back_edge: false"), "back_edge"),
        (('tag_index: "LOOPBACK:0"', 'tag_index: "LOOPBACK:1"'), "sync_set"),
        (("}\n", ""), "missing"),
    ],
)
def test_the_format_check_catches_each_kind_of_mistake(
    change: tuple[str, str], problem: str
) -> None:
    good = graph_pbtxt(pipeline_type="VLM_CB", device="CPU", mtp=True)
    old, new = change
    assert old in good
    bad = good[::-1].replace(old[::-1], new[::-1], 1)[::-1]  # the last occurrence
    with pytest.raises(FormatError, match=problem):
        check_graph(bad)


@given(ANY_TEXT)
def test_pbtxt_strings_round_trip(text: str) -> None:
    literal = pbtxt_string(text)
    assert tokenize(f"f: {literal}") == [("ident", "f"), ("punct", ":"), ("string", literal)]
    assert unescape(literal) == text
    assert "\n" not in literal


@given(ANY_TEXT)
def test_any_folder_name_gives_a_safe_model_name(folder: str) -> None:
    name = servable_name(folder)
    assert NAME_RE.fullmatch(name)
    assert check_name(name) == name
    # Letters, digits and . _ - of the folder name survive.
    kept = re.sub(r"[^A-Za-z0-9._-]+", "-", folder).strip("-._")
    if kept and NAME_RE.fullmatch(kept[:63]):
        assert name == kept[:63]


@pytest.mark.parametrize(
    "bad",
    ["", "with space", 'quo"te', "it's", "new\nline", "a/b", "..", ".hidden", "-x", "x" * 64,
     "tab\there", "$(rm -rf ~)", "名前"],
)  # fmt: skip
def test_unsafe_model_names_are_refused(bad: str) -> None:
    with pytest.raises(OvmsDeployError) as caught:
        check_name(bad)
    assert caught.value.code == "BAD_NAME"
    assert "letters, digits" in caught.value.fix


@given(ANY_TEXT.map(servable_name), st.sampled_from(DEVICES))
@settings(max_examples=60)
def test_config_kserve_and_curl_carry_the_name_intact(name: str, device: str) -> None:
    (entry,) = check_config(json.loads(config_json(name)))
    assert entry == {"name": name, "base_path": name}

    runtime, service = yaml.safe_load_all(kserve_yaml(name, device))
    assert runtime["kind"] == "ServingRuntime"
    assert service["kind"] == "InferenceService"
    assert service["spec"]["predictor"]["model"]["runtime"] == runtime["metadata"]["name"]
    assert service["spec"]["predictor"]["model"]["storageUri"].endswith("/" + name)
    k8s_name = service["metadata"]["name"]
    assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", k8s_name) and len(k8s_name) <= 63
    args = runtime["spec"]["containers"][0]["args"]
    assert "--model_path=/mnt/models" in args and "--model_name={{.Name}}" in args
    image = runtime["spec"]["containers"][0]["image"]
    assert image.startswith("openvino/model_server:2026.4")
    assert image.endswith("-gpu") == (device == "GPU")

    words = shlex.split(curl_command(name))
    assert words[:3] == ["curl", "-s", "http://localhost:8000/v3/chat/completions"]
    body = json.loads(words[words.index("-d") + 1])
    assert body["model"] == name
    assert body["temperature"] == 0


@given(ANY_TEXT.filter(lambda t: not any(ord(c) < 32 or ord(c) == 127 for c in t)))
def test_docker_line_keeps_any_printable_path_as_one_word(tail: str) -> None:
    out = Path("/srv") / (tail.replace("/", "_") or "x")
    words = shlex.split(docker_command(out, "m", "CPU"))
    assert words[words.index("-v") + 1] == f"{out}:/workspace:ro"
    assert words[-2:] == ["--config_path", "/workspace/config.json"]
    assert "openvino/model_server:2026.4.1" in words


def test_parse_reads_nested_messages_and_extensions() -> None:
    message = parse("a: \"x\" b { [ext.y / z.W]: { c: 1, d: true } } e: 'q\\'s'")
    assert message.one("a").value == "x"
    inner = message.one("b").one("[ext.y/z.W]")
    assert inner.one("c").text == "1"
    assert message.one("e").value == "q's"
