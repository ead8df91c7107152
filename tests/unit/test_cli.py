from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.cli import main


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.subprocess
def test_doctor_json_is_valid_and_complete(app_home: Path) -> None:
    result = _cli("doctor", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for package in (
        "python",
        "openvino",
        "openvino-genai",
        "openvino-tokenizers",
        "optimum-intel",
        "transformers",
        "torch",
        "PySide6",
    ):
        assert package in report["versions"]
    assert report["versions"]["openvino"].startswith("2026.4")
    assert report["release_family"]["ok"] is True
    assert report["release_family"]["family"] == "2026.4"
    assert "CPU" in [device["name"] for device in report["devices"]]
    assert report["runtime_usable"] is True
    assert report["export_toolkit"] == "export toolkit installed"
    assert report["dirs"]["data"].startswith(str(app_home))


def test_doctor_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "Chat runtime: usable" in out
    assert "openvino-genai" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_demo_model_build_refuses_non_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["demo-model", "build", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "not an empty folder" in err
    assert (tmp_path / "keep.txt").read_text() == "mine"


@pytest.mark.subprocess
def test_unknown_command_is_a_usage_error() -> None:
    result = _cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
    assert "Traceback" not in result.stderr
