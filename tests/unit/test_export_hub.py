"""Hub sources: the standard cache layout, offline use, download markers, source parsing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.models.export import hub
from qwen_mtp_desktop.core.models.export.options import (
    ExportOptions,
    ExportSource,
    default_destination,
    parse_source,
)
from tests.unit.test_export_preflight import make_checkpoint

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def cache_model(hf_home: Path, repo_id: str, source: Path, commit: str = COMMIT) -> Path:
    """Place `source` in the hub cache layout: models--org--name/{refs/main, snapshots/<rev>}."""
    repo = hf_home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


def test_cache_dir_follows_the_environment(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert hub.hub_cache_dir() == hf_home / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_home / "elsewhere"))
    assert hub.hub_cache_dir() == hf_home / "elsewhere"
    assert hub.offline()


def test_cached_model_is_found_and_inspected_offline(hf_home: Path, tmp_path: Path) -> None:
    snapshot = cache_model(hf_home, "tiny/qwen35", make_checkpoint(tmp_path / "src"))
    assert hub.cached_snapshot("tiny/qwen35") == (snapshot, COMMIT)
    assert hub.cached_snapshot("tiny/qwen35", COMMIT) == (snapshot, COMMIT)
    assert hub.cached_snapshot("tiny/qwen35", "v2") is None
    info = hub.inspect_hub_checkpoint("tiny/qwen35")
    assert info.kind == "hub" and info.source == "tiny/qwen35"
    assert info.local_dir == snapshot and info.revision == COMMIT
    assert info.problems == []
    assert info.tensors is not None and info.tensors.mtp_tensors == 2


def test_uncached_model_offline_says_what_to_do(hf_home: Path) -> None:
    info = hub.inspect_hub_checkpoint("Qwen/Qwen3.5-0.8B")
    assert info.problems[0].status == "fail"
    assert "not in the Hugging Face cache" in info.problems[0].message
    assert "HF_HUB_OFFLINE" in info.problems[0].fix


def test_download_command() -> None:
    assert hub.download_command("org/name", "v1", python="py") == [
        "py",
        "-m",
        "qwen_mtp_desktop.core.models.export.hub",
        "download",
        "org/name",
        "--revision",
        "v1",
    ]


def test_download_of_a_cached_model_offline_reports_the_snapshot(
    hf_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = cache_model(hf_home, "tiny/qwen35", make_checkpoint(tmp_path / "src"))
    assert hub.main(["download", "tiny/qwen35"]) == 0
    lines = [json.loads(line[7:]) for line in capsys.readouterr().out.splitlines()]
    assert lines[-1] == {"event": "snapshot", "path": str(snapshot), "revision": COMMIT}


def test_download_failure_is_one_actionable_error(
    hf_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert hub.main(["download", "Qwen/not-cached"]) == 1
    markers = [json.loads(line[7:]) for line in capsys.readouterr().out.splitlines()]
    error = markers[-1]
    assert error["event"] == "error"
    assert "not in the local cache" in error["message"]


def test_marker_tqdm_reports_bytes(capsys: pytest.CaptureFixture[str]) -> None:
    cls = hub.make_marker_tqdm(min_seconds=0.0)
    bar = cls(total=1000, unit="B", desc="Downloading")
    bar.update(250)
    bar.update(750)
    bar.close()
    markers = [json.loads(line[7:]) for line in capsys.readouterr().out.splitlines()]
    assert markers[-1] == {"event": "download", "done": 1000, "total": 1000}


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("GatedRepoError", "gated"),
        ("RepositoryNotFoundError", "was not found"),
        ("RevisionNotFoundError", "no such revision"),
        ("ConnectError", "could not be reached"),
    ],
)
def test_hub_errors_are_described(name: str, fragment: str) -> None:
    error = type(name, (Exception,), {})("boom")
    message, fix = hub.describe_hub_error(error, "org/name")
    assert fragment in message and fix


def test_parse_source(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "org" / "name")
    assert parse_source("Qwen/Qwen3.5-0.8B") == ExportSource("hub", "Qwen/Qwen3.5-0.8B")
    assert parse_source("Qwen/Qwen3.5-0.8B@v1") == ExportSource("hub", "Qwen/Qwen3.5-0.8B", "v1")
    assert parse_source(str(folder)).kind == "folder"
    assert parse_source("./relative/thing").kind == "folder"
    assert parse_source("just-a-name").kind == "folder"  # not an org/name id
    with pytest.raises(Exception, match="No source"):
        parse_source("  ")


def test_default_destination_names(tmp_path: Path) -> None:
    models = tmp_path / "models"
    hub_source = ExportSource("hub", "Qwen/Qwen3.5-0.8B")
    assert default_destination(hub_source, ExportOptions(weight_format="int4"), models) == (
        models / "Qwen3.5-0.8B-int4"
    )
    (models / "Qwen3.5-0.8B-int4").mkdir(parents=True)
    (models / "Qwen3.5-0.8B-int4" / "x").write_text("taken")
    assert default_destination(hub_source, ExportOptions(weight_format="int4"), models).name == (
        "Qwen3.5-0.8B-int4-2"
    )
    snapshot = ExportSource(
        "folder", str(tmp_path / "models--Qwen--Qwen3.5-2B" / "snapshots" / "abc")
    )
    mtp = ExportOptions(weight_format="int8", mtp_weight_format="none")
    assert default_destination(snapshot, mtp, models).name == "Qwen3.5-2B-int8-mtp-none"


def test_unreachable_hub_says_the_computer_is_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Online mode, but the hub cannot be reached (here: a closed local port, so the test never
    leaves this computer): one line that says so and what to do, not a library error."""
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    info = hub.inspect_hub_checkpoint("Qwen/Qwen3.5-0.8B")
    assert [p.key for p in info.problems] == ["source"]
    problem = info.problems[0]
    assert "seems to be offline" in problem.message and "Qwen/Qwen3.5-0.8B" in problem.message
    assert "Connect to the internet" in problem.fix and "checkpoint folder" in problem.fix
