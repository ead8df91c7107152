"""Fast tests of the demo model's training data and chat template (no torch needed)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.devtools import corpus

WORD_NUMBERS = {"twice": 2, "two": 2, "three": 3, "four": 4, "five": 5}


def _jinja_render(messages: list[dict[str, object]], **context: object) -> str:
    pytest.importorskip("jinja2")
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # Same environment settings transformers uses for chat templates.
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
    )
    return env.from_string(corpus.CHAT_TEMPLATE).render(messages=messages, **context)


@pytest.mark.parametrize("enable_thinking", [True, False, None])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_python_renderer_matches_jinja_template(enable_thinking: bool | None, seed: int) -> None:
    for sample in corpus.generate_samples(40, seed):
        messages = sample.message_dicts()
        context: dict[str, object] = {"add_generation_prompt": True}
        if enable_thinking is not None:
            context["enable_thinking"] = enable_thinking
        expected = _jinja_render(list(messages), **context)
        got = corpus.render_chat(
            messages, add_generation_prompt=True, enable_thinking=enable_thinking
        )
        assert got == expected


def test_generation_prompt_follows_thinking_switch() -> None:
    messages = [{"role": "user", "content": "Count to 3."}]
    off = corpus.render_chat(messages, add_generation_prompt=True, enable_thinking=False)
    on = corpus.render_chat(messages, add_generation_prompt=True, enable_thinking=True)
    default = corpus.render_chat(messages, add_generation_prompt=True)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert on.endswith("<|im_start|>assistant\n<think>\n")
    assert default == on  # Qwen3.5 thinks unless told not to
    assert corpus.render_chat(messages, add_generation_prompt=False) == (
        "<|im_start|>user\nCount to 3.<|im_end|>\n"
    )


def test_history_drops_reasoning_and_list_content_renders() -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Hi"}]},
        {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"},
        {"role": "user", "content": "Count to 2."},
    ]
    text = _jinja_render(messages, add_generation_prompt=True, enable_thinking=False)
    assert "<|vision_start|><|image_pad|><|vision_end|>Hi<|im_end|>" in text
    assert "<|im_start|>assistant\nHello!<|im_end|>\n" in text
    assert "hmm" not in text


def test_samples_are_deterministic_per_seed() -> None:
    assert corpus.generate_samples(60, 7) == corpus.generate_samples(60, 7)
    assert corpus.generate_samples(60, 7) != corpus.generate_samples(60, 8)
    stream = corpus.iter_samples(7)
    assert [next(stream) for _ in range(60)] == corpus.generate_samples(60, 7)


def test_tokenizer_corpus_is_deterministic_and_has_no_special_tokens() -> None:
    texts = corpus.tokenizer_corpus(samples=200)
    assert texts == corpus.tokenizer_corpus(samples=200)
    joined = "".join(texts)
    for token in corpus.SPECIAL_TOKENS:
        assert token not in joined


def test_special_tokens() -> None:
    assert len(set(corpus.SPECIAL_TOKENS)) == 9
    assert corpus.SPECIAL_TOKENS[0] == "<|endoftext|>"
    assert {"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|image_pad|>"} <= set(
        corpus.SPECIAL_TOKENS
    )


def test_count_and_repeat_answers() -> None:
    assert corpus.count_answer(3, 7) == "3 4 5 6 7"
    assert corpus.count_answer(12, 9) == "12 11 10 9"
    assert corpus.repeat_answer("the cat sat on the mat", 3) == "\n".join(
        ["the cat sat on the mat"] * 3
    )


def _expected_answer(user: str) -> str | None:
    """Independent reading of the instruction (what a user expects to see)."""
    numbers = [int(n) for n in re.findall(r"\d+", user)]
    if re.match(r"(?i)count (up )?to", user):
        return corpus.count_answer(1, numbers[0])
    if "count" in user.lower() or user.startswith("List the numbers"):
        return corpus.count_answer(numbers[0], numbers[1])
    quoted = re.search(r"""['"](.+)['"] (\w+)""", user)
    if quoted:
        times = WORD_NUMBERS.get(quoted.group(2)) or int(quoted.group(2))
        return corpus.repeat_answer(quoted.group(1), times)
    return None


def test_samples_answer_what_the_user_asked() -> None:
    kinds = {"count": 0, "repeat": 0, "other": 0}
    for sample in corpus.generate_samples(400, 3):
        role, user = sample.messages[-1]
        assert role == "user"
        expected = _expected_answer(user)
        if expected is None:
            kinds["other"] += 1
        else:
            kinds["repeat" if "\n" in expected or "'" in user or '"' in user else "count"] += 1
            assert sample.answer == expected, user
        assert all(int(n) <= corpus.MAX_NUMBER for n in re.findall(r"\d+", sample.answer))
    assert min(kinds.values()) > 10  # all three kinds show up


def test_completion_shape_matches_prompt_mode() -> None:
    samples = corpus.generate_samples(200, 5)
    assert any(s.enable_thinking for s in samples)
    assert any(not s.enable_thinking for s in samples)
    for sample in samples:
        assert sample.completion.endswith(corpus.IM_END)
        if sample.enable_thinking:
            assert sample.prompt.endswith("<think>\n")
            assert sample.completion.startswith(sample.thinking + "\n</think>\n\n")
        else:
            assert sample.prompt.endswith("<think>\n\n</think>\n\n")
            assert sample.completion == sample.answer + corpus.IM_END
        if sample.messages[0][0] == "system":
            assert sample.prompt.startswith("<|im_start|>system\n")


@pytest.mark.subprocess
def test_corpus_module_does_not_import_torch() -> None:
    code = "import sys, qwen_mtp_desktop.devtools.corpus; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_build_checkpoint_refuses_non_empty_folder(tmp_path: Path) -> None:
    from qwen_mtp_desktop.devtools import tiny_model

    target = tmp_path / "model"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not an empty folder"):
        tiny_model.build_checkpoint(target)
    with pytest.raises(ValueError, match="train_steps"):
        tiny_model.build_checkpoint(tmp_path / "other", train_steps=-1)
    assert (target / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temp folder left behind


@pytest.mark.subprocess
def test_tiny_model_module_imports_torch_lazily() -> None:
    code = (
        "import sys, qwen_mtp_desktop.devtools.tiny_model as t; "
        "print(isinstance(t.BUILDER_VERSION, str), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False"]


def test_bundled_demo_model_is_what_the_builder_makes_today() -> None:
    """`make demo-model` must rebuild the committed demo: same builder version, seed and steps."""
    from qwen_mtp_desktop.core.files.paths import demo_checkpoint_dir
    from qwen_mtp_desktop.devtools import tiny_model

    checkpoint = demo_checkpoint_dir()
    record = tiny_model.read_provenance(checkpoint)
    assert record is not None, f"{checkpoint} has no {tiny_model.PROVENANCE_FILE}"
    assert record["builder_version"] == tiny_model.BUILDER_VERSION, "run `make demo-model`"
    assert (record["seed"], record["kind"]) == (0, "qwen3_5")
    assert record["train_steps"] == tiny_model.RECOMMENDED_DEMO_STEPS
    assert record["self_check"]["mtp_agreement"] >= 0.9

    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    match = re.search(r"^DEMO_TRAIN_STEPS \?= (\d+)$", makefile, re.M)
    assert match and int(match.group(1)) == tiny_model.RECOMMENDED_DEMO_STEPS
