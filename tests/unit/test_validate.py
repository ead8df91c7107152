"""core.measure.validate without a model: prompt sets, report schema, history, Markdown, helpers."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP, PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats, build_stats
from qwen_mtp_desktop.core.errors import MeasurementError
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.measure.measurement import (
    MODEL_KEYS,
    RUN_KEYS,
    VERSION_PACKAGES,
    acceptance_summary,
    installed_versions,
    run_record,
    spread,
)
from qwen_mtp_desktop.core.measure.prompt_sets import (
    builtin_prompt_set_names,
    builtin_prompt_sets,
    default_prompt_set_name,
    load_prompt_set,
    read_prompt_set,
)
from qwen_mtp_desktop.core.measure.report_markdown import export_report, report_markdown
from qwen_mtp_desktop.core.measure.reports import (
    list_reports,
    load_report,
    model_key,
    reports_dir,
    save_report,
)
from qwen_mtp_desktop.core.measure.validate import (
    DIVERGENCE_KEYS,
    RESULT_KEYS,
    VALIDATION_KEYS,
    first_divergence,
)

EXPECTED_SETS = {"chat", "code", "demo", "edit", "list", "summarise"}


def fake_stats(
    method: DecodingMethod = DEFAULT_MTP,
    sizes: tuple[int, ...] = (1, 2, 1, 2, 2),
    tok_s: float = 50.0,
) -> GenerationStats:
    """Stats as the engine would build them from streamer chunk sizes."""
    times = [0.05 + i * (1 / tok_s) for i in range(len(sizes))]
    return build_stats(
        method=method,
        device="CPU",
        prompt_tokens=20,
        chunk_sizes=list(sizes),
        chunk_times=times,
        total_s=times[-1],
        reasoning_tokens=0,
        answer_tokens=sum(sizes),
        finish_reason="length",
    )


def fake_model(path: Path) -> dict[str, Any]:
    return {
        "path": str(path.resolve()),
        "key": model_key(path),
        "name": path.name,
        "source_model_id": "Qwen/Qwen3.5-0.8B",
        "source_revision": "abc123",
        "kind": "qwen3_5_dense",
        "model_type": "qwen3_5",
        "precisions": {"language_model": "INT4 asym g128 (100 %)", "mtp": "INT4 (100 %)"},
        "mtp_precision": "INT4 (100 %)",
        "export_versions": {"openvino": "2026.4.1"},
    }


def fake_validation(
    path: Path,
    *,
    identical: bool = True,
    created: str = "2026-11-30T01:00:00Z",
    report_id: str = "20261130-010000-validate-aaaaaa",
) -> dict[str, Any]:
    from qwen_mtp_desktop.core.measure.validate import _validation_summary

    base = run_record(fake_stats(PLAIN, (1, 1, 1, 1, 1)))
    mtp = run_record(fake_stats())
    result = {
        "prompt_id": "count",
        "prompt": "Count | to 5.",
        "identical": identical,
        "baseline_tokens": 5,
        "mtp_tokens": 5,
        "divergence": None
        if identical
        else {
            "position": 3,
            "baseline_token_id": 17,
            "mtp_token_id": 18,
            "baseline_token": " 4",
            "mtp_token": " 5",
            "context": "1 2 3",
            "baseline_margin": 0.003,
            "top_token_id": 17,
            "verdict": "near_tie",
        },
        "output": "1 2 3 4 5",
        "baseline": base,
        "mtp": mtp,
        "timing": {"baseline": base, "mtp": mtp, "speedup": 1.2} if identical else None,
    }
    return {
        "schema_version": 3,
        "kind": "validate",
        "id": report_id,
        "created": created,
        "app_version": "0.1.0",
        "duration_s": 3.0,
        "model": fake_model(path),
        "versions": installed_versions(),
        "machine": {"device_name": "Test CPU"},
        "device": "CPU",
        "numerics": "exact",
        "prompt_set": {"name": "demo", "title": "Demo", "path": None, "prompt_ids": ["count"]},
        "settings": {
            "max_new_tokens": 5,
            "method": DecodingMethod.mtp(1).to_record(),
            "greedy": True,
        },
        "results": [result],
        "summary": _validation_summary([result]),
    }


# --- prompt sets ---


def test_builtin_prompt_sets_load_and_cover_the_content_kinds() -> None:
    assert set(builtin_prompt_set_names()) == EXPECTED_SETS
    for prompt_set in builtin_prompt_sets():
        assert prompt_set.prompts and prompt_set.title and prompt_set.description
        assert prompt_set.max_new_tokens >= 16
        assert all(case.messages[-1].role == "user" for case in prompt_set.prompts)
    summarise = load_prompt_set("summarise")
    assert len(summarise.prompts[0].text.split()) > 400  # a genuinely long passage


def test_default_set_is_demo_only_for_the_demo_model(tmp_path: Path) -> None:
    assert default_prompt_set_name(demo_model_dir()) == "demo"
    assert default_prompt_set_name(tmp_path) == "chat"


def test_prompt_set_file_forms(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(
        json.dumps(
            {
                "title": "Mine",
                "max_new_tokens": 20,
                "prompts": [
                    {"id": "a", "user": "Hi", "system": "Be brief."},
                    {
                        "messages": [
                            {"role": "user", "content": "x"},
                            {"role": "assistant", "content": "y"},
                            {"role": "user", "content": "z"},
                        ]
                    },
                ],
            }
        )
    )
    loaded = load_prompt_set(path)
    assert loaded.name == "mine" and loaded.title == "Mine" and loaded.max_new_tokens == 20
    assert [m.role for m in loaded.prompts[0].messages] == ["system", "user"]
    assert loaded.prompts[1].id == "prompt-2" and loaded.prompts[1].text == "z"
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([{"user": "one"}]))
    assert read_prompt_set(bare).prompts[0].text == "one"


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "{}",
        '{"prompts": []}',
        '{"prompts": [{"id": "a"}]}',
        '{"prompts": [{"id": "a", "user": "x"}, {"id": "a", "user": "y"}]}',
        '{"prompts": [{"messages": [{"role": "user", "content": "x"}, '
        '{"role": "assistant", "content": "y"}]}]}',
        '{"max_new_tokens": 0, "prompts": [{"user": "x"}]}',
    ],
)
def test_bad_prompt_sets_are_user_errors(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(MeasurementError) as info:
        load_prompt_set(path)
    assert info.value.code == "BAD_PROMPT_SET" and info.value.fix


def test_unknown_builtin_set_names_the_choices() -> None:
    with pytest.raises(MeasurementError) as info:
        load_prompt_set("poetry")
    assert "demo" in info.value.fix
    with pytest.raises(MeasurementError):
        load_prompt_set(Path("/nonexistent/set.json"))


# --- helpers ---


@given(st.lists(st.integers(0, 5), max_size=8), st.lists(st.integers(0, 5), max_size=8))
def test_first_divergence(a: list[int], b: list[int]) -> None:
    position = first_divergence(a, b)
    if a == b:
        assert position is None
    else:
        assert position is not None
        assert a[:position] == b[:position]
        assert position == min(len(a), len(b)) or a[position] != b[position]


def test_spread_ignores_missing_values() -> None:
    assert spread([]) is None
    assert spread([3.0, 1.0, 2.0, float("nan")]) == {"median": 2.0, "min": 1.0, "max": 3.0}


def test_run_record_and_acceptance_summary() -> None:
    n2 = DecodingMethod.mtp(2)
    record = run_record(fake_stats(n2, sizes=(1, 3, 1, 2, 3)))
    assert set(record) == RUN_KEYS
    assert record["method"] == n2.to_record()
    assert record["drafted_tokens"] == 8 and record["accepted_tokens"] == 5
    assert record["step_ms"] == pytest.approx(20.0)
    summary = acceptance_summary([record, run_record(fake_stats(n2, sizes=(1, 1, 1)))])
    assert summary["acceptance_rate"] == pytest.approx(5 / 12)
    assert summary["mean_accepted_per_step"] == pytest.approx(5 / 6)
    # Position 1 was accepted in 3 of 6 decode steps, position 2 in 2 of 6.
    assert summary["acceptance_by_position"] == pytest.approx([3 / 6, 2 / 6])
    plain = run_record(fake_stats(PLAIN, (1, 1, 1)))
    assert plain["method"] == PLAIN.to_record() and plain["acceptance_rate"] is None


def test_installed_versions_match_package_metadata() -> None:
    versions = installed_versions()
    assert (
        set(versions)
        == set(VERSION_PACKAGES)
        == {
            "optimum-intel",
            "transformers",
            "nncf",
            "openvino",
            "openvino-genai",
            "openvino-tokenizers",
        }
    )
    for name, version in versions.items():
        assert version == importlib.metadata.version(name)


def test_model_key_is_stable_and_safe(tmp_path: Path) -> None:
    folder = tmp_path / "My model: v2"
    folder.mkdir()
    key = model_key(folder)
    assert key == model_key(folder / ".." / folder.name)
    assert key.startswith("My-model-v2-") and "/" not in key and ":" not in key
    assert model_key(tmp_path / "other") != key


# --- schema, history, export ---


def test_validation_schema_key_set_is_pinned(tmp_path: Path) -> None:
    # Renaming or dropping a key breaks saved histories and scripts: bump the schema instead.
    assert {
        "schema_version", "kind", "id", "created", "app_version", "duration_s", "model",
        "versions", "machine", "device", "numerics", "prompt_set", "settings", "results",
        "summary",
    } == VALIDATION_KEYS  # fmt: skip
    assert {
        "path", "key", "name", "source_model_id", "source_revision", "kind", "model_type",
        "precisions", "mtp_precision", "export_versions",
    } == MODEL_KEYS  # fmt: skip
    assert {
        "prompt_id", "prompt", "identical", "baseline_tokens", "mtp_tokens", "divergence",
        "output", "baseline", "mtp", "timing",
    } == RESULT_KEYS  # fmt: skip
    assert {
        "position", "baseline_token_id", "mtp_token_id", "baseline_token", "mtp_token",
        "context", "baseline_margin", "top_token_id", "verdict",
    } == DIVERGENCE_KEYS  # fmt: skip
    report = fake_validation(tmp_path)
    assert set(report) == VALIDATION_KEYS
    assert set(report["model"]) == MODEL_KEYS


def test_history_is_kept_under_the_data_dir(tmp_path: Path, app_home: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    model.chmod(0o555)  # read-only model folders (the bundled demo) must work
    older = fake_validation(
        model,
        identical=False,
        created="2026-11-29T10:00:00Z",
        report_id="20261129-100000-validate-bbbbbb",
    )
    newer = fake_validation(model)
    for report in (older, newer):
        path = save_report(report)
        assert path.parent == reports_dir(model)
        assert str(path).startswith(str(app_home / "data" / "reports"))
    (reports_dir(model) / "garbage.json").write_text("{")
    entries = list_reports(model)
    assert [e.created for e in entries] == [newer["created"], older["created"]]
    assert entries[0].ok and not entries[1].ok
    assert entries[0].headline.startswith("identical 1/1")
    assert load_report(entries[0].path) == newer
    assert list(model.iterdir()) == []


def test_load_report_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"kind": "something"}))
    with pytest.raises(MeasurementError):
        load_report(path)
    path.write_text(json.dumps({"kind": "validate", "schema_version": 99}))
    with pytest.raises(MeasurementError, match="schema 99"):
        load_report(path)


def test_markdown_and_json_export(tmp_path: Path) -> None:
    passed = fake_validation(tmp_path)
    text = report_markdown(passed)
    assert "**PASS" in text and "Qwen/Qwen3.5-0.8B" in text and "abc123" in text
    assert "Count \\| to 5." in text  # table cells are escaped
    for name, version in installed_versions().items():
        assert f"| {name} | {version} |" in text
    failed = report_markdown(fake_validation(tmp_path, identical=False))
    assert "**FAIL" in failed and "position 3" in failed and "near-tie" in failed
    md = export_report(passed, tmp_path / "out.md")
    js = export_report(passed, tmp_path / "out.json")
    assert md.read_text() == text
    assert json.loads(js.read_text()) == passed
