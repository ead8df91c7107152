"""A real model for the installed app, through the commands a user runs: `models download` of a
ready OpenVINO repo and `models add-mtp` from the source checkpoint's repo, with the real
huggingface_hub client and the app's range reader against a hub-compatible server on loopback
(qwen_mtp_desktop.devtools.hub_server) that misbehaves on demand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.devtools.hub_server import HubServer
from tests.checkpoint_files import head_bytes, sharded_checkpoint
from tests.hub_repos import hub_env

HEADLESS = "test-org/demo-headless-ov"
CHECKPOINT = "test-org/demo-checkpoint"
STEM = "openvino_mtp_model"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    root = tmp_path / "hub"
    headless = root / HEADLESS
    shutil.copytree(demo_model_dir(), headless)
    for suffix in (".xml", ".bin"):
        (headless / f"{STEM}{suffix}").unlink()
    # The demo's export record lists the head it no longer has, as a stripped repo's might.
    (headless / "qwen_mtp_export.json").unlink()
    sharded_checkpoint(root / CHECKPOINT, shards=3, bf16=True)
    with HubServer(root) as server:
        hub_env(monkeypatch, server, cache_dir=tmp_path / "hf-cache")
        yield server


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ},
        check=False,
    )


def _library(app_home: Path) -> Path:
    return app_home / "data" / "models"


def _same_files(a: Path, b: Path) -> None:
    names = sorted(p.name for p in b.iterdir() if p.is_file())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.subprocess
def test_download_then_add_the_head(hub: HubServer, app_home: Path) -> None:
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    model = Path(result["model_dir"])
    assert model.parent == _library(app_home)
    assert result["mtp"] is False and result["missing_parts"] == []
    assert result["commit"] == hub.repo_sha(HEADLESS)
    _same_files(model, hub.root / HEADLESS)
    assert not [p for p in model.parent.iterdir() if p.name.startswith(".")]

    listed = json.loads(_cli("models", "list", "--json").stdout)
    assert any(Path(m["path"]) == model and not m["mtp"] for m in listed["models"])

    hub.clear_requests()
    added = _cli("models", "add-mtp", str(model), "--from", CHECKPOINT, "--json")
    assert added.returncode == 0, added.stderr
    graft = json.loads(added.stdout)
    assert graft["check"]["equal"] is True
    assert graft["commit"] == hub.repo_sha(CHECKPOINT)
    checkpoint = hub.root / CHECKPOINT
    index = (checkpoint / "model.safetensors.index.json").stat().st_size
    # Only the head's bytes, the index and two shard headers (the head spans two shards).
    assert graft["bytes_read"] <= head_bytes(checkpoint) + index + 2 * 8_192
    ranged = [r for r in hub.requests if r.path.endswith(".safetensors")]
    assert ranged and all(r.range for r in ranged)

    inspected = _cli("models", "inspect", str(model), "--verify", "--json")
    report = json.loads(inspected.stdout)
    assert report["mtp_usable"] is True
    assert "CHECKSUM_MISMATCH" not in {d["code"] for d in report["diagnostics"]}


@pytest.mark.subprocess
def test_a_connection_that_breaks_off_resumes_in_the_same_run(
    hub: HubServer, app_home: Path
) -> None:
    """Every request for one file is cut after 100 KB: each try resumes where the last broke
    off (a Range request), so the run still ends with a byte-identical model."""
    hub.fault("openvino_language_model.bin", "drop", after_bytes=100_000, times=None)
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0, done.stderr
    model = Path(json.loads(done.stdout)["model_dir"])
    _same_files(model, hub.root / HEADLESS)
    gets = [r for r in hub.requests if r.cdn and r.path.endswith("openvino_language_model.bin")]
    assert [r.range for r in gets][:3] == [None, "bytes=100000-", "bytes=200000-"]


@pytest.mark.subprocess
def test_a_killed_download_resumes_at_the_next_start(hub: HubServer, app_home: Path) -> None:
    """The app is killed mid-file, three times at different points: each run resumes from the
    bytes already on disk, the library never shows a partial model, and the end is
    byte-identical. (benchmarks/download_resume.py does this 20 times at random points.)"""
    import signal
    import time

    hub.fault("openvino_language_model.bin", "slow", bytes_per_second=150_000, times=None)
    library = _library(app_home)
    starts = []
    for wait in (0.8, 1.1, 0.9):
        hub.clear_requests()
        process = subprocess.Popen(
            [sys.executable, "-m", "qwen_mtp_desktop", "models", "download", HEADLESS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(wait)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            r.path.endswith("openvino_language_model.bin") and r.cdn for r in hub.requests
        ):
            time.sleep(0.05)
        time.sleep(0.3)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert [p.name for p in library.iterdir() if not p.name.startswith(".")] == []
        pending = json.loads(_cli("models", "list", "--json").stdout)
        assert not any("demo-headless-ov" in m["path"] for m in pending["models"])
        gets = [r for r in hub.requests if r.cdn and r.path.endswith("language_model.bin")]
        starts.append(gets[0].range if gets else None)
    assert starts[0] is None or starts[0] == "bytes=0-"
    assert all(start and start != "bytes=0-" for start in starts[1:]), starts
    hub.clear_faults()
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["resumed_bytes"] > 0
    _same_files(Path(result["model_dir"]), hub.root / HEADLESS)
    assert [p.name for p in library.iterdir()] == ["demo-headless-ov"]


@pytest.mark.subprocess
@pytest.mark.parametrize("kind", ["flip", "grow"])
def test_a_damaged_or_changed_file_is_refused(hub: HubServer, app_home: Path, kind: str) -> None:
    hub.fault("openvino_language_model.bin", kind, times=None)
    failed = _cli("models", "download", HEADLESS)
    assert failed.returncode == 1
    assert ("checksum" if kind == "flip" else "changed") in failed.stderr
    assert "Traceback" not in failed.stderr
    library = _library(app_home)
    assert [p.name for p in library.iterdir() if not p.name.startswith(".")] == []
    hub.clear_faults()
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0
    _same_files(Path(json.loads(done.stdout)["model_dir"]), hub.root / HEADLESS)


@pytest.mark.subprocess
def test_busy_servers_are_waited_for(hub: HubServer, app_home: Path) -> None:
    hub.fault("*.bin", "rate_limit", retry_after=0, times=2)
    hub.fault("*.xml", "status", status=503, times=2)
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0, done.stderr
    assert all(f.fired == 2 for f in hub.faults)


@pytest.mark.subprocess
def test_what_is_not_a_ready_model(hub: HubServer, app_home: Path) -> None:
    checkpoint = _cli("models", "download", CHECKPOINT)
    assert checkpoint.returncode == 1
    assert "not an OpenVINO export" in checkpoint.stderr
    missing = _cli("models", "download", "test-org/no-such-model")
    assert missing.returncode == 1
    assert "not found" in missing.stderr and "Traceback" not in missing.stderr
    busy = _library(app_home) / "demo-headless-ov"
    busy.mkdir(parents=True)
    (busy / "notes.txt").write_text("mine")
    taken = _cli("models", "download", HEADLESS)
    assert taken.returncode == 1 and "already exists" in taken.stderr
    assert (busy / "notes.txt").read_text() == "mine"


@pytest.mark.subprocess
def test_two_downloads_of_one_model_and_other_refusals(
    hub: HubServer, app_home: Path, tmp_path: Path
) -> None:
    """A second download of the same model while one runs is refused (the first goes on);
    offline mode and an unusable models folder are refused with the fix, nothing written."""
    import time

    hub.fault("openvino_language_model.bin", "slow", bytes_per_second=200_000, times=None)
    first = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", "models", "download", HEADLESS, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any(r.cdn for r in hub.requests):
        time.sleep(0.05)
    second = _cli("models", "download", HEADLESS)
    assert second.returncode == 1
    assert "already being downloaded" in second.stderr
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    _same_files(Path(json.loads(out)["model_dir"]), hub.root / HEADLESS)

    offline = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "models", "download", HEADLESS],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        check=False,
    )
    assert offline.returncode == 1 and "Offline mode is on" in offline.stderr

    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the models folder should be")
    refused = _cli("models", "download", HEADLESS, "--to", str(blocked / "model"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "models folder" in refused.stderr
    assert blocked.read_text() == "a file where the models folder should be"


def test_a_hostile_file_list_writes_nothing_outside_the_model(
    hub: HubServer, app_home: Path, tmp_path: Path
) -> None:
    """Names a hub answer may carry ('..', absolute paths) are never fetched or written."""
    from qwen_mtp_desktop.core.models.ready.hub_client import safe_repo_path

    for name in ("../x.json", "/etc/passwd", "a/../../b.json", "C:\\x.json", "a//b.json", ""):
        assert not safe_repo_path(name), name
    for name in ("config.json", "tokenizer/vocab.txt", "openvino_model.bin"):
        assert safe_repo_path(name), name


@pytest.mark.subprocess
def test_a_disk_that_fills_up_mid_download(hub: HubServer, app_home: Path) -> None:
    """Writing stops part-way (a file size limit stands in for a full disk: the same failed
    write, without needing a small file system): a clear message, nothing in the library, what
    arrived kept; with room again the download resumes and ends byte-identical."""
    import resource
    import signal

    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a failed write, not a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    full = subprocess.run(
        [sys.executable, "-m", "qwen_mtp_desktop", "models", "download", HEADLESS],
        capture_output=True,
        text=True,
        preexec_fn=small_disk,
        check=False,
        timeout=300,
    )
    assert full.returncode == 1, full.stderr
    assert "is full" in full.stderr and "resumes where it stopped" in full.stderr
    assert "Traceback" not in full.stderr
    library = _library(app_home)
    assert [p.name for p in library.iterdir() if not p.name.startswith(".")] == []
    parts = list((library / ".demo-headless-ov.downloading").rglob("*.part"))
    assert parts and parts[0].stat().st_size > 0
    hub.clear_requests()
    done = _cli("models", "download", HEADLESS, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["resumed_bytes"] > 0
    _same_files(Path(result["model_dir"]), hub.root / HEADLESS)


def test_the_weight_format_a_repo_records(hub: HubServer) -> None:
    """optimum-intel's openvino_config.json says the weight format; it wins over the name."""
    from qwen_mtp_desktop.core.models.ready.download import describe_repo

    folder = hub.root / HEADLESS
    (folder / "openvino_config.json").write_text(
        json.dumps({"dtype": "int8", "quantization_config": {"bits": 4, "group_size": 128}})
    )
    layout = describe_repo(HEADLESS)
    assert layout.weight_format == "INT4"  # the name says nothing; the file says 4 bits
    assert layout.config is not None and layout.config["model_type"] == "qwen3_5"
