"""`validate` on real models: MTP must reproduce plain greedy decoding token for token."""

from __future__ import annotations

import importlib.metadata
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.errors import RunCancelledError
from qwen_mtp_desktop.core.measure import validate as validate_module
from qwen_mtp_desktop.core.measure.measurement import MODEL_KEYS, RUN_KEYS
from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set, read_prompt_set
from qwen_mtp_desktop.core.measure.report_markdown import report_markdown
from qwen_mtp_desktop.core.measure.reports import reports_dir
from qwen_mtp_desktop.core.measure.validate import (
    DIVERGENCE_KEYS,
    RESULT_KEYS,
    VALIDATION_KEYS,
    LogitProbe,
    run_validation,
)
from qwen_mtp_desktop.devtools.mtp_head import make_broken_mtp_copy

MTP_STEM = "openvino_mtp_model"

__all__ = ["make_broken_mtp_copy", "small_set"]


def small_set(tmp_path: Path, max_new_tokens: int = 32) -> Path:
    """Two demo prompts: enough to compare, short enough for CI."""
    demo = load_prompt_set("demo")
    path = tmp_path / "small.json"
    prompts = [{"id": case.id, "user": case.text} for case in demo.prompts[::3]]
    path.write_text(json.dumps({"name": "small", "max_new_tokens": max_new_tokens,
                                "prompts": prompts}))  # fmt: skip
    return path


@pytest.fixture(scope="module")
def broken_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_broken_mtp_copy(demo_model, tmp_path_factory.mktemp("broken") / "broken MTP")


def _cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    from qwen_mtp_desktop import cli

    return cli.main(list(args))


def _check_schema(report: dict[str, Any]) -> None:
    assert set(report) == VALIDATION_KEYS
    assert set(report["model"]) == MODEL_KEYS
    for result in report["results"]:
        assert set(result) == RESULT_KEYS
        assert set(result["baseline"]) == set(result["mtp"]) == RUN_KEYS
        if result["divergence"] is not None:
            assert set(result["divergence"]) == DIVERGENCE_KEYS


@pytest.mark.model
def test_validate_cli_on_the_demo_model(
    demo_model: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    path = demo_model
    markdown = tmp_path / "report.md"
    code = _cli(
        monkeypatch, "validate", str(path), "--prompts", str(small_set(tmp_path)),
        "--json", "--export", str(markdown),
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(out)
    _check_schema(report)
    assert report["summary"]["all_identical"] and report["numerics"] == "exact"
    assert report["settings"]["method"] == DecodingMethod.mtp(1).to_record()
    assert report["device"] == "CPU" and report["model"]["path"] == str(path.resolve())
    for name, version in report["versions"].items():
        assert version == importlib.metadata.version(name), name
    assert set(report["versions"]) >= {"openvino", "openvino-genai", "openvino-tokenizers",
                                       "optimum-intel", "transformers", "nncf"}  # fmt: skip
    assert report["model"]["precisions"]["mtp"] and report["model"]["source_model_id"]
    for result in report["results"]:
        assert result["baseline_tokens"] == result["mtp_tokens"] > 0
        timing = result["timing"]
        assert timing is not None and timing["speedup"] > 0
        assert timing["baseline"]["decode_tokens_per_s"] > 0 and timing["mtp"]["ttft_s"] > 0
    # The demo model counts, and its MTP head predicts that well.
    assert report["summary"]["acceptance_rate"] >= 0.6
    assert report["results"][0]["output"].split()[:3] == ["1", "2", "3"]
    assert report["model"]["name"] == "Demo model"
    saved = sorted(reports_dir(path).glob("*.json"))
    assert [p.stem for p in saved] == [report["id"]]
    assert markdown.read_text().startswith("# MTP validation") and "**PASS" in markdown.read_text()


@pytest.mark.export
def test_validate_moe_model_at_depth_two(moe_model: Path, tmp_path: Path) -> None:
    report = run_validation(
        moe_model, read_prompt_set(small_set(tmp_path, 24)), method=DecodingMethod.mtp(2)
    )
    _check_schema(report)
    assert report["summary"]["all_identical"]
    assert report["model"]["kind"] == "qwen3_5_moe"
    assert len(report["summary"]["acceptance_by_position"]) == 2


@pytest.mark.model
def test_broken_mtp_head_keeps_the_output_but_not_the_acceptance(
    broken_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:  # fmt: skip
    code = _cli(
        monkeypatch, "validate", str(broken_model), "--prompts", str(small_set(tmp_path)),
        "--json", "--no-save",
    )  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["summary"]["all_identical"]
    assert report["summary"]["acceptance_rate"] < 0.1  # the demo's own head: >= 0.6
    assert not reports_dir(broken_model).exists()


@pytest.mark.model
def test_logit_probe_reproduces_the_pipelines_greedy_tokens(demo_model: Path) -> None:
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
    from qwen_mtp_desktop.core.measure.measurement import generate_ids
    from qwen_mtp_desktop.core.measure.validate import ModelTokenizer

    path = demo_model
    engine = Engine()
    engine.load(path, LoadOptions(mtp=False, exact_numerics=True))
    try:
        prompt = engine.render_prompt([Message("user", "Count from 7 to 15.")])
        ids, _stats = generate_ids(engine, prompt, GenerationSettings(max_new_tokens=8))
    finally:
        engine.unload()
    prompt_ids = ModelTokenizer(path).encode(prompt)
    probe = LogitProbe(path, "CPU")
    for position in (0, 3, 7):
        logits = probe.logits([*prompt_ids, *ids[:position]])
        assert int(logits.argmax()) == ids[position]


@pytest.mark.model
def test_a_divergence_is_located_and_explained(
    demo_model: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = validate_module.generate_ids

    def corrupt_mtp(engine: Any, prompt: str, settings: Any, cancel: Any = None) -> Any:
        ids, stats = real(engine, prompt, settings, cancel)
        if engine.loaded.mtp and len(ids) > 3:
            ids[3] = ids[3] + 1  # what a faulty draft acceptance would do
        return ids, stats

    monkeypatch.setattr(validate_module, "generate_ids", corrupt_mtp)
    report = run_validation(demo_model, read_prompt_set(small_set(tmp_path, 12)))
    _check_schema(report)
    assert not report["summary"]["all_identical"]
    for result in report["results"]:
        assert result["timing"] is None  # no speed figures for a wrong output
        div = result["divergence"]
        assert div["position"] == 3 and div["mtp_token_id"] == div["baseline_token_id"] + 1
        assert div["top_token_id"] == div["baseline_token_id"]
        assert div["baseline_margin"] > 0 and div["verdict"] in ("fault", "near_tie")
        assert isinstance(div["baseline_token"], str) and div["context"] is not None
    text = report_markdown(report)
    assert "**FAIL" in text and "position 3" in text


@pytest.mark.model
def test_validation_can_be_cancelled(demo_model: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    messages: list[str] = []

    def on_progress(progress: validate_module.Progress) -> None:
        messages.append(progress.message)
        if progress.message.endswith(": MTP n=1"):
            cancel.set()

    with pytest.raises(RunCancelledError):
        run_validation(
            demo_model,
            read_prompt_set(small_set(tmp_path, 200)),
            progress=on_progress,
            cancel=cancel,
        )
    assert not any("timing" in m for m in messages)
    assert not reports_dir(demo_model).exists()
    # Progress names prompts by place and words, never by their internal ids.
    assert "prompt 1/2 “Count from 1 to 20.”: plain decoding" in messages
    assert not any("count-up" in m for m in messages), messages


@pytest.mark.model
@pytest.mark.export
@pytest.mark.parametrize("fixture", ["demo_model", "moe_model"])
def test_validate_prompt_lookup_cli(
    fixture: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """`validate --prompt-lookup`: output equal to plain decoding, drafts really counted,
    and the report says which method drafted."""
    path: Path = request.getfixturevalue(fixture)
    code = _cli(
        monkeypatch, "validate", str(path), "--prompts", str(small_set(tmp_path, 40)),
        "--prompt-lookup", "--num-assistant-tokens", "4", "--max-ngram-size", "2", "--json",
        "--no-save",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    report = json.loads(out)
    _check_schema(report)
    settings = report["settings"]
    lookup = DecodingMethod.lookup(4, 2)
    assert settings["method"] == lookup.to_record()
    for result in report["results"]:
        assert result["identical"] and result["mtp"]["method"] == lookup.to_record()
        assert result["mtp"]["accepted_tokens"] <= result["mtp"]["drafted_tokens"]
    if fixture == "demo_model":
        # Counting and repeating answers copy from themselves.
        assert report["summary"]["acceptance_rate"] > 0
    assert "Prompt lookup validation" in report_markdown(report)


def test_validate_prompt_lookup_usage_errors(
    demo_model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (["--max-ngram-size", "2"], ["--prompt-lookup", "--num-assistant-tokens", "99"]):
        with pytest.raises(SystemExit) as raised:
            _cli(monkeypatch, "validate", str(demo_model), *args)
        assert raised.value.code == 2
        assert "error:" in capsys.readouterr().err
