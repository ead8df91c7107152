"""Post-export verification reads each component's precision from the IR (never assumes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.models.export.manifest import write_manifest
from qwen_mtp_desktop.core.models.export.options import ExportOptions
from qwen_mtp_desktop.core.models.export.verify import (
    expected_mtp_format,
    generation_item,
    verify_precisions,
)
from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
from qwen_mtp_desktop.core.models.folders.manifest import read_manifest
from tests.models import cached_checkpoint, cached_export


@pytest.fixture(scope="module")
def int4_model() -> Path:
    return cached_export(cached_checkpoint(moe=False), "int4")


def _statuses(result: object) -> dict[str, str]:
    return {f"{i.key}:{i.message[:20]}": i.status for i in result.items}  # type: ignore[attr-defined]


@pytest.mark.export
def test_int4_export_matches_int4_options(int4_model: Path) -> None:
    result = verify_precisions(int4_model, ExportOptions.recommended("int4", group_size=16))
    assert result.ok, result.items
    assert result.precisions["language_model"].startswith("INT4")
    assert result.precisions["mtp"].startswith("INT4")


@pytest.mark.export
def test_a_head_that_did_not_follow_the_request_fails(int4_model: Path) -> None:
    asked = ExportOptions.recommended("int4", group_size=16, mtp_weight_format="none")
    assert expected_mtp_format(asked) == "fp16"
    result = verify_precisions(int4_model, asked)
    failed = [i for i in result.items if i.status == "fail"]
    assert len(failed) == 1 and "MTP head" in failed[0].message and "FP16" in failed[0].message
    assert result.files_ok  # the model is usable, the verification says it is not as asked


@pytest.mark.export
def test_missing_mtp_files_fail(int4_model: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(int4_model, copy)
    (copy / "openvino_mtp_model.bin").unlink()
    result = verify_precisions(copy, ExportOptions.recommended("int4", group_size=16))
    assert not result.files_ok
    assert "openvino_mtp_model.bin" in result.items[0].message


@pytest.mark.export
def test_manifest_checksums_round_trip(int4_model: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(int4_model, copy)
    data = write_manifest(
        copy,
        source="Qwen/Qwen3.5-0.8B",
        revision="abc",
        options=ExportOptions.recommended("int4"),
        duration_s=12.5,
        peak_rss_bytes=123456789,
    )
    manifest = read_manifest(copy)
    assert manifest is not None
    assert (manifest.source, manifest.revision, manifest.peak_rss_bytes) == (
        "Qwen/Qwen3.5-0.8B",
        "abc",
        123456789,
    )
    assert manifest.options["group_size_fallback"] == "ignore"
    assert set(data["versions"]) >= {"openvino", "openvino-genai", "openvino-tokenizers"}
    assert [d.code for d in verify_checksums(copy)] == ["CHECKSUMS_OK"]
    (copy / "openvino_mtp_model.bin").write_bytes(b"tampered")
    assert "CHECKSUM_MISMATCH" in [d.code for d in verify_checksums(copy)]


def test_generation_mismatch_names_the_position() -> None:
    item = generation_item(
        {
            "equal": False,
            "num_assistant_tokens": 2,
            "baseline_tokens": [1, 2, 3],
            "mtp_tokens": [1, 2, 4],
            "first_difference": 2,
        }
    )
    assert item.status == "fail"
    assert "at token 2 (plain 3, MTP 4)" in item.message
    broken = generation_item({"equal": False, "error": "LOAD_FAILED: bad IR"})
    assert broken.status == "fail" and "could not be run" in broken.message
    ok = generation_item({"equal": True, "num_assistant_tokens": 1, "tokens": 32})
    assert ok.status == "pass" and "32 tokens" in ok.message


def test_a_check_that_crashed_once_is_a_warning_with_both_outcomes() -> None:
    passed = generation_item(
        {"equal": True, "num_assistant_tokens": 2, "tokens": 32, "first_run": "stopped by SIGSEGV"}
    )
    assert passed.status == "warn"
    assert "first run was stopped by SIGSEGV" in passed.message
    assert "Second run: Loads with its MTP head" in passed.message
    assert passed.fix
    crashed_twice = generation_item(
        {
            "equal": False,
            "error": "The verification was stopped by SIGSEGV.",
            "first_run": "stopped by SIGSEGV",
        }
    )
    assert crashed_twice.status == "fail"
    assert "Second run: The exported model could not be run" in crashed_twice.message
