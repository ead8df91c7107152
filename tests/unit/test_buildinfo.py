"""Version and build info: from git in a checkout, from build_info.json in a bundle, else
"unknown"."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.system import buildinfo
from qwen_mtp_desktop.core.system.environment import package_version

REPO_ROOT = Path(__file__).resolve().parents[2]


def _git_head() -> str | None:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        return None
    result = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() or None


def test_source_checkout_reports_its_git_revision() -> None:
    info = buildinfo.build_info()
    assert info.kind == "source" and info.built_at is None
    assert info.app_version == __version__
    head = _git_head()
    if head is None:
        assert info.revision == buildinfo.UNKNOWN
    else:
        assert info.revision.removesuffix("-dirty") == head
    assert info.versions["openvino"] == package_version("openvino")
    assert list(info.versions) == list(buildinfo.VERSION_PACKAGES)


def test_a_folder_without_git_is_unknown(tmp_path: Path) -> None:
    assert buildinfo.git_revision(tmp_path) is None


def test_bundle_reads_the_recorded_build_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = buildinfo.write_build_info(tmp_path / buildinfo.BUILD_INFO_FILE, REPO_ROOT)
    assert record["revision"] == (buildinfo.git_revision(REPO_ROOT) or buildinfo.UNKNOWN)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    info = buildinfo.build_info()
    assert info.kind == "bundle"
    assert info.revision == record["revision"]
    assert info.built_at == record["built_at"]
    assert "bundle built" in info.headline


def test_bundle_without_build_info_says_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    info = buildinfo.build_info()
    assert (info.kind, info.revision, info.built_at) == ("bundle", "unknown", "unknown")


def test_bundle_falls_back_to_recorded_versions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / buildinfo.BUILD_INFO_FILE).write_text(
        json.dumps({"revision": "abc123", "versions": {"openvino": "2026.4.9"}})
    )
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    monkeypatch.setattr(buildinfo, "package_version", lambda name: None)
    info = buildinfo.build_info()
    assert info.revision == "abc123"
    assert info.versions["openvino"] == "2026.4.9"
    assert info.versions["numpy"] is None
    assert "numpy not installed" in info.version_text()
