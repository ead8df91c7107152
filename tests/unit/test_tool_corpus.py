"""The tool model's training chats (devtools.tool_corpus): rendered exactly as the runtime
renders them, offering exactly the tools the tests' MCP server offers, with held-out questions
that training never sees, and a self-check judge that tells right calls from wrong ones."""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.tools import ToolCatalog
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.tools.mcp.client import McpHub
from qwen_mtp_desktop.core.tools.mcp.config import McpServer
from qwen_mtp_desktop.devtools import corpus, tool_corpus

TOOL_SERVER = McpServer(
    "tests",
    command=sys.executable,
    args=(str(Path(__file__).parents[1] / "mcp_server.py"), "--tools", "add,get_weather"),
)


def test_the_python_twin_renders_tool_chats_as_the_runtime_does() -> None:
    """openvino-genai's own Jinja engine on the template both models carry (the demo's
    tokenizer holds the same template) gives the twin's text, tools, calls and results
    included."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(demo_model_dir()))
    rng = random.Random(3)
    shapes = set()
    for _ in range(150):
        sample = tool_corpus.make_tool_sample(rng)
        shapes.add((bool(sample.tools), len(sample.messages), sample.enable_thinking))
        native = tokenizer.apply_chat_template(
            [dict(message) for message in sample.messages],
            add_generation_prompt=True,
            tools=[dict(tool) for tool in sample.tools] or None,
            extra_context={"enable_thinking": sample.enable_thinking},
        )
        assert native == sample.prompt
    assert len(shapes) > 10  # tools or none, earlier exchanges, thinking on and off


def test_the_template_holds_the_twins_tools_block() -> None:
    for text in (corpus.TOOLS_HEADER, corpus.TOOLS_FOOTER):
        assert text.replace("\n", "\\n") in corpus.CHAT_TEMPLATE


@pytest.mark.subprocess
def test_the_mcp_server_offers_the_tools_the_model_learnt() -> None:
    """`tests/mcp_server.py --tools add,get_weather`, listed by the chat's MCP client and
    turned into the chat's OpenAI tools, is exactly the tools block the model was trained on;
    its get_weather answers what the corpus's results look like."""
    hub = McpHub()
    try:
        infos = hub.list_tools(TOOL_SERVER).result(60)
        assert list(ToolCatalog.of(infos).tools) == list(tool_corpus.BOTH_TOOLS)
        result = hub.call_tool(TOOL_SERVER, "get_weather", {"city": "Oslo"}).result(60)
        assert result.text == tool_corpus.weather_report("Oslo")
    finally:
        hub.close()
    assert re.fullmatch(r"Oslo: (\w+), (\d+) C", result.text)
    assert result.text.split(": ")[1].split(",")[0] in tool_corpus.CONDITIONS


def test_samples_are_deterministic_and_never_ask_a_held_out_question() -> None:
    first = [tool_corpus.make_tool_sample(random.Random(9)) for _ in range(3)]
    assert first == [tool_corpus.make_tool_sample(random.Random(9)) for _ in range(3)]
    # Training begins with short chats (no tools block), then the full ones.
    stream = tool_corpus.iter_tool_samples(1, short_first=50)
    assert not any(next(stream).tools for _ in range(50))
    assert any(next(stream).tools for _ in range(20))
    stream = tool_corpus.iter_tool_samples(1, short_first=0)
    kinds = {"call": 0, "answer": 0, "text": 0, "earlier": 0}
    for _ in range(1500):
        sample = next(stream)
        questions = [m["content"] for m in sample.messages if m["role"] == "user"]
        assert not any(tool_corpus.is_held_out(question) for question in questions)
        kinds["earlier"] += len(questions) > 1
        if sample.call is not None:
            kinds["call"] += 1
            assert sample.answer.startswith("<tool_call>\n<function=")
        elif sample.messages[-1]["role"] == "tool":
            kinds["answer"] += 1
        else:
            kinds["text"] += 1
    assert min(kinds.values()) > 200, kinds
    checks = tool_corpus.held_out_samples(24, 5)
    assert all(tool_corpus.is_held_out(_last_question(sample)) for sample in checks)
    assert all(sample.tools == tool_corpus.BOTH_TOOLS for sample in checks)
    assert checks == tool_corpus.held_out_samples(24, 5)


def _last_question(sample: tool_corpus.ToolSample) -> str:
    return str([m["content"] for m in sample.messages if m["role"] == "user"][-1])


def test_a_call_takes_its_values_from_the_question_and_an_answer_from_the_result() -> None:
    rng = random.Random(4)
    seen = 0
    for _ in range(400):
        sample = tool_corpus.make_tool_sample(rng)
        question = _last_question(sample)
        if sample.call is not None:
            name, arguments = sample.call
            if name == "get_weather":
                assert arguments["city"] in question
            else:
                assert [str(arguments["a"]), str(arguments["b"])] == re.findall(r"\d+", question)
            seen += 1
        elif sample.messages[-1]["role"] == "tool" and sample.answer.startswith("It is"):
            result = str(sample.messages[-1]["content"])
            city, rest = result.split(": ")
            condition, temperature = rest.removesuffix(" C").split(", ")
            assert sample.answer == f"It is {condition} and {temperature} C in {city}."
    assert seen > 50


def test_the_judge_passes_right_answers_and_names_wrong_ones() -> None:
    samples = tool_corpus.held_out_samples(24, 0)
    assert tool_corpus.judge_answers(samples, [s.completion for s in samples]) == []
    index = next(i for i, s in enumerate(samples) if s.call is not None)
    name, arguments = samples[index].call or ("", {})
    wrong = {key: (value + 1 if isinstance(value, int) else "Atlantis")
             for key, value in arguments.items()}  # fmt: skip
    from qwen_mtp_desktop.core.tools.calls import render_calls

    texts = [s.completion for s in samples]
    texts[index] = render_calls([(name, wrong)]) + corpus.IM_END
    texts[-1] = texts[-1].removesuffix(corpus.IM_END)  # never stopped
    problems = tool_corpus.judge_answers(samples, texts)
    assert len(problems) == 2
    assert f"expected a call of {name}" in problems[0] and "no end" in problems[1]
    # The reasoning before a call is not judged; the call is.
    thinking = next(s for s in samples if s.call is not None and s.enable_thinking)
    other = thinking.completion.replace(thinking.thinking, "Something else.")
    assert tool_corpus.judge_answers([thinking], [other]) == []


def test_earlier_answers_are_trained_and_their_pieces_tokenize_as_the_whole() -> None:
    """The pieces of a sample (cut around each earlier answer) give the tokens the runtime
    gives the whole text, and only assistant text is marked trained."""
    pytest.importorskip("transformers")
    from qwen_mtp_desktop.devtools.tiny_model import TOOLS, build_tokenizer
    from qwen_mtp_desktop.devtools.training import encode_sample

    tokenizer = build_tokenizer(TOOLS.tokenizer_texts(), TOOLS.bpe_vocab_size)
    rng = random.Random(2)
    for _ in range(60):
        sample = tool_corpus.make_tool_sample(rng)
        ids, mask = encode_sample(tokenizer, sample)
        whole = sample.prompt + sample.completion
        assert ids == tokenizer.encode(whole, add_special_tokens=False)
        trained = "".join(text for text, flag in sample.pieces() if flag)
        answers = [m for m in sample.messages if m["role"] == "assistant"]
        assert trained.count(corpus.IM_END) == len(answers) + 1
        assert tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m]) == trained
    # The tools block is whole words, not letters: the prompt stays short (the demo's
    # tokenizer makes about 770 tokens of a question with one tool).
    tools_only = corpus.render_chat(
        [{"role": "user", "content": "Hello"}],
        add_generation_prompt=True,
        tools=tool_corpus.BOTH_TOOLS,
    )
    assert len(tokenizer.encode(tools_only, add_special_tokens=False)) < 360


def test_tool_results_are_fixed_per_city() -> None:
    reports = {city: tool_corpus.weather_report(city) for city in tool_corpus.CITIES}
    assert reports == {city: tool_corpus.weather_report(city) for city in tool_corpus.CITIES}
    assert len(set(reports.values())) == len(reports)
    assert tool_corpus.add_report(12, 30) == "12 + 30 = 42"
    assert json.dumps(tool_corpus.BOTH_TOOLS)  # plain JSON, as a request carries it


def test_the_committed_tool_model_is_what_the_builder_makes_today() -> None:
    """`make tool-model` must rebuild the committed model: the same recipe version, seed and
    steps, and its build's self-check answered every held-out chat right."""
    from qwen_mtp_desktop.devtools.tiny_model import TOOL_CHECK_SAMPLES, TOOLS, read_provenance
    from tests.models import TOOL_MODEL

    record = read_provenance(TOOL_MODEL)
    assert record is not None, f"{TOOL_MODEL} has no build record: run `make tool-model`"
    assert record["recipe"] == "tools"
    assert record["builder_version"] == TOOLS.version, "run `make tool-model`"
    assert (record["seed"], record["kind"]) == (0, "qwen3_5")
    assert record["train_steps"] == TOOLS.recommended_steps
    check = record["self_check"]
    assert check["judged_right"] == check["answers"] == TOOL_CHECK_SAMPLES
    assert (TOOL_MODEL / "chat_template.jinja").read_text(encoding="utf-8") == corpus.CHAT_TEMPLATE
    assert (TOOL_MODEL / "openvino_mtp_model.xml").is_file()
    assert (TOOL_MODEL / "qwen_mtp_export.json").is_file()
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    match = re.search(r"^TOOL_TRAIN_STEPS \?= (\d+)$", makefile, re.M)
    assert match and int(match.group(1)) == TOOLS.recommended_steps


@pytest.mark.export
def test_a_build_whose_self_check_fails_stops_and_leaves_nothing(tmp_path: Path) -> None:
    """Two training steps cannot call tools: the build fails, naming the wrong answer."""
    pytest.importorskip("torch")
    from dataclasses import replace

    from qwen_mtp_desktop.devtools.tiny_model import TOOLS, SelfCheckError, build_checkpoint

    def one_check(seed: int) -> list[tool_corpus.ToolSample]:
        return tool_corpus.held_out_samples(1, seed)

    recipe = replace(TOOLS, check_samples=one_check)
    with pytest.raises(SelfCheckError, match="1 of 1 held-out chats answered wrongly"):
        build_checkpoint(tmp_path / "model", train_steps=2, recipe=recipe)
    assert list(tmp_path.iterdir()) == []
