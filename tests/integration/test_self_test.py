"""`--self-test` from source: the demo model, plain vs MTP decoding, one line, exit 0/1."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop.commands.self_test import run_self_test
from qwen_mtp_desktop.core.files.paths import RESOURCES_ENV, resources_dir


def _self_test(env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "--self-test"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.subprocess
def test_self_test_passes_from_source(app_home: Path) -> None:
    result = _self_test()
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith("self-test passed: ")
    match = re.search(r"(\d+)/(\d+) prompts identical", lines[0])
    assert match is not None and match.group(1) == match.group(2)
    acceptance = re.search(r"acceptance ([\d.]+)%", lines[0])
    assert acceptance is not None and float(acceptance.group(1)) > 0
    assert "source" in lines[0]
    # It writes no report into the app's data folder.
    assert not (app_home / "data" / "reports").exists()


@pytest.mark.subprocess
def test_self_test_fails_without_the_demo_model(tmp_path: Path) -> None:
    resources = tmp_path / "resources"
    shutil.copytree(resources_dir() / "prompts", resources / "prompts")
    result = _self_test({RESOURCES_ENV: str(resources)})
    assert result.returncode == 1
    assert result.stdout.startswith("self-test FAILED: ")
    assert len(result.stdout.strip().splitlines()) == 1


@pytest.mark.model
def test_self_test_fails_when_no_draft_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Acceptance 0 fails the check even when the outputs are identical."""
    import qwen_mtp_desktop.core.measure.validate as validate

    real = validate.run_validation

    def no_acceptance(*args: object, **kwargs: object) -> dict[str, object]:
        report = real(*args, **kwargs)  # type: ignore[arg-type]
        report["summary"]["acceptance_rate"] = 0.0
        return report

    monkeypatch.setattr(validate, "run_validation", no_acceptance)
    result = run_self_test(max_new_tokens=8)
    assert not result.passed
    assert "acceptance 0" in result.line and result.line.startswith("self-test FAILED")
