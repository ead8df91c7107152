from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod

pytestmark = pytest.mark.subprocess


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_generate_streams_answer(demo_model: Path) -> None:
    result = _cli("generate", str(demo_model), "Count from 1 to 12.", "--max-new-tokens", "60")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:12] == [str(i) for i in range(1, 13)]
    assert "MTP n=1" in result.stderr and "accepted" in result.stderr


def test_generate_json_has_every_stats_field(demo_model: Path) -> None:
    result = _cli(
        "generate",
        str(demo_model),
        "Count from 1 to 8.",
        "--json",
        "--num-assistant-tokens",
        "2",
        "--max-new-tokens",
        "40",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    stats = payload["stats"]
    for field in (
        "prompt_tokens",
        "generated_tokens",
        "ttft_s",
        "decode_tokens_per_s",
        "total_s",
        "steps",
        "drafted_tokens",
        "accepted_tokens",
        "acceptance_rate",
        "mean_accepted_per_step",
        "acceptance_by_position",
        "method",
        "device",
        "reasoning_tokens",
        "answer_tokens",
        "finish_reason",
    ):
        assert field in stats, field
    assert stats["method"] == DecodingMethod.mtp(2).to_record()
    assert len(stats["acceptance_by_position"]) == 2
    assert payload["text"].split()[:3] == ["1", "2", "3"]


def test_generate_baseline(demo_model: Path) -> None:
    result = _cli("generate", str(demo_model), "Count from 1 to 5.", "--no-mtp", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stats"]["method"] == PLAIN.to_record()


def test_generate_prompt_lookup(demo_model: Path) -> None:
    """Same answer as plain decoding, with the drafts prompt lookup proposed and accepted."""
    prompt = "Say 'we like apples' four times."
    plain = _cli("generate", str(demo_model), prompt, "--no-mtp", "--json")
    result = _cli(
        "generate",
        str(demo_model),
        prompt,
        "--prompt-lookup",
        "--num-assistant-tokens",
        "5",
        "--max-ngram-size",
        "2",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    stats = payload["stats"]
    assert payload["text"] == json.loads(plain.stdout)["text"]
    assert stats["method"] == DecodingMethod.lookup(5, 2).to_record()
    assert 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    text = _cli("generate", str(demo_model), prompt, "--prompt-lookup")
    assert text.returncode == 0, text.stderr
    assert "prompt lookup K=4, n-gram 3:" in text.stderr and "accepted" in text.stderr


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["generate", "/no/such/dir", "hi"], 1, "does not exist"),
        (["generate", ".", "hi", "--num-assistant-tokens", "0"], 2, "must be at least 1"),
        (["generate", ".", "hi", "--no-mtp", "--num-assistant-tokens", "2"], 2, "not allowed"),
        (["generate", ".", "hi", "--no-mtp", "--prompt-lookup"], 2, "not allowed"),
        (["generate", ".", "hi", "--prompt-lookup", "--num-assistant-tokens", "auto"], 2, "Auto"),
        (["generate", ".", "hi", "--prompt-lookup", "--num-assistant-tokens", "17"], 2, "at most"),
        (["generate", ".", "hi", "--max-ngram-size", "2"], 2, "only with --prompt-lookup"),
        (["generate", ".", "hi", "--prompt-lookup", "--max-ngram-size", "0"], 2, "at least 1"),
    ],
)
def test_generate_bad_input(args: list[str], code: int, needle: str) -> None:
    result = _cli(*args)
    assert result.returncode == code
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    if code == 1:
        assert len(result.stderr.strip().splitlines()) == 1


def test_generate_follows_the_models_generation_config(demo_model: Path, tmp_path: Path) -> None:
    """As the chat and serve: the model's sampling defaults unless --generation-config none."""
    import shutil

    model = tmp_path / "sampling-model"
    shutil.copytree(demo_model, model)
    config = json.loads((model / "generation_config.json").read_text())
    config |= {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "top_k": 5}
    (model / "generation_config.json").write_text(json.dumps(config))
    found = {}
    for choice in ("auto", "none"):
        result = _cli(
            "generate",
            str(model),
            "Count from 1 to 5.",
            "--json",
            "--max-new-tokens",
            "8",
            "--generation-config",
            choice,
        )
        assert result.returncode == 0, result.stderr
        found[choice] = json.loads(result.stdout)["stats"]["method"]["sampling"]
    assert (found["auto"]["temperature"], found["auto"]["top_k"]) == (0.7, 5)
    assert found["auto"]["seed"] is not None
    assert found["none"]["temperature"] == 0
