"""Build the PyInstaller bundle once (~1 min on 2 cores) and check it like a user would:
its own --self-test, --version, the window (offscreen screenshot), the files it must carry, a
real model from a hub (`models download` + `models add-mtp` against a hub-compatible server on
loopback) with no export toolkit inside, and the Linux tarball with its install script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.system.buildinfo import git_revision
from tests.bundle_requirements import PACKAGING, REPO_ROOT, bundle_files, required_files

# Whichever test runs first builds the PyInstaller bundle in its setup (~70 s here).
pytestmark = [pytest.mark.subprocess, pytest.mark.timeout(600)]
pytest.importorskip("PyInstaller", reason="the `package` extra is not installed")

APP_ID = "qwen-mtp-desktop"
HEADLESS = "test-org/demo-headless-ov"
CHECKPOINT = "test-org/demo-checkpoint"
#: What makes the demo export one with an MTP head (its export record lists the head).
HEAD_FILES = ("openvino_mtp_model.xml", "openvino_mtp_model.bin", "qwen_mtp_export.json")


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    root = tmp_path_factory.mktemp("bundle")
    result = subprocess.run(
        [
            sys.executable,
            str(PACKAGING / "build.py"),
            "--no-installer",
            "--dist",
            str(root / "dist"),
            "--work",
            str(root / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    yield root, result.stdout
    shutil.rmtree(root, ignore_errors=True)  # ~0.5 GB


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    for name in ("PYTHONPATH", "PYTHONHOME", "QWEN_MTP_DESKTOP_RESOURCES"):
        env.pop(name, None)
    return env


def _executable(root: Path) -> Path:
    name = f"{APP_ID}-cli.exe" if sys.platform == "win32" else APP_ID
    if sys.platform == "darwin":
        name = f"{APP_ID}-cli"
    return root / "dist" / APP_ID / name


def _hub_env(home: Path, url: str) -> dict[str, str]:
    """The bundle against the test hub: online (tests/conftest.py sets HF_HUB_OFFLINE=1), no
    token of the machine's, no proxy in the way of a loopback server."""
    env = _env(home)
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE"):
        env.pop(name, None)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env.pop(name, None)
        env.pop(name.lower(), None)
    return {**env, "HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(home / "hf-home")}


def _run(exe: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, env=env, timeout=600, check=False
    )


def _importable(exe: Path, names: list[str], home: Path) -> dict[str, bool]:
    """What the bundle itself can import (entry.py's probe: pure-Python modules live in the
    bundle's archive, so a look at its folder would not show them)."""
    probe = _run(exe, bundle_files().PROBE_IMPORTS, *names, env=_env(home))
    assert probe.returncode == 0, probe.stdout + probe.stderr
    found: dict[str, bool] = json.loads(probe.stdout)
    assert sorted(found) == sorted(names)
    return found


def test_build_runs_the_bundles_self_test(build: tuple[Path, str]) -> None:
    _root, output = build
    passed = [line for line in output.splitlines() if line.startswith("self-test passed: ")]
    assert len(passed) == 1, output
    assert f"bundle {__version__}" in passed[0]
    # Its second step: a model from the dev hub server, and no export toolkit in the bundle.
    hub = [line for line in output.splitlines() if line.startswith("hub self-test passed: ")]
    assert len(hub) == 1, output
    assert f"models download {HEADLESS}" in hub[0] and f"--from {CHECKPOINT}" in hub[0]
    assert "MTP == plain; torch, transformers, optimum not importable" in hub[0]
    assert "package: " in output and " MiB" in output


def test_bundle_downloads_a_model_and_adds_its_head(
    build: tuple[Path, str], tmp_path: Path
) -> None:
    """A real model in the installed app: the bundle downloads a ready export that has no MTP
    head, then adds the head from the source checkpoint (sharded, BF16, read by range
    requests), against a hub-compatible server on loopback. The server runs in this process
    (devtools is not in the bundle); the bundle is the client."""
    from qwen_mtp_desktop.core.files.paths import demo_model_dir
    from qwen_mtp_desktop.devtools.hub_server import HubServer
    from tests.checkpoint_files import sharded_checkpoint

    root, _output = build
    exe = _executable(root)
    repos = tmp_path / "hub"
    shutil.copytree(demo_model_dir(), repos / HEADLESS)
    for name in HEAD_FILES:
        (repos / HEADLESS / name).unlink()
    sharded_checkpoint(repos / CHECKPOINT, shards=3, bf16=True)
    home = tmp_path / "home"
    library = home / "data" / "models"

    with HubServer(repos) as hub:
        env = _hub_env(home, hub.url)
        done = _run(exe, "models", "download", HEADLESS, "--json", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        downloaded = json.loads(done.stdout)
        model = Path(downloaded["model_dir"])
        assert model == library / "demo-headless-ov"
        assert downloaded["mtp"] is False and downloaded["missing_parts"] == []
        assert downloaded["commit"] == hub.repo_sha(HEADLESS)
        for source in (repos / HEADLESS).iterdir():
            assert (model / source.name).read_bytes() == source.read_bytes(), source.name
        # Only the placed model: no staging folder left beside it.
        assert [p.name for p in library.iterdir()] == ["demo-headless-ov"]

        hub.clear_requests()
        added = _run(exe, "models", "add-mtp", str(model), "--from", CHECKPOINT, "--json", env=env)
        assert added.returncode == 0, added.stdout + added.stderr
        graft = json.loads(added.stdout)
        assert graft["check"]["equal"] is True, graft["check"]
        assert graft["commit"] == hub.repo_sha(CHECKPOINT)
        shards = [r for r in hub.requests if r.path.endswith(".safetensors")]
        assert shards and all(r.range for r in shards)  # only the head's bytes were read

    inspected = _run(exe, "models", "inspect", str(model), "--json", env=_env(home))
    assert inspected.returncode == 0, inspected.stdout + inspected.stderr
    assert json.loads(inspected.stdout)["mtp_usable"] is True
    listed = _run(exe, "models", "list", "--json", env=_env(home))
    assert listed.returncode == 0, listed.stderr
    assert [m["mtp"] for m in json.loads(listed.stdout)["models"] if Path(m["path"]) == model] == [
        True
    ]

    toolkit = list(bundle_files().MUST_NOT_IMPORT)
    assert toolkit == ["torch", "transformers", "optimum"]
    assert _importable(exe, toolkit, home) == dict.fromkeys(toolkit, False)


def test_bundle_imports_what_it_loads_by_name(build: tuple[Path, str], tmp_path: Path) -> None:
    """The modules the spec lists for `models download` / `models add-mtp` import inside the
    bundle (so the probe that finds torch absent can also find a module present), and on Linux
    so does secretstorage, keyring's way to the system keychain (the hub token, remote API
    keys), which needs the `_cffi_backend` extension module at the bundle's top level."""
    root, _output = build
    names = list(bundle_files().MODEL_SOURCE_MODULES)
    if sys.platform.startswith("linux"):
        names.append("secretstorage")
    found = _importable(_executable(root), names, tmp_path)
    assert found == dict.fromkeys(names, True)


def test_bundle_self_test_and_version(build: tuple[Path, str], tmp_path: Path) -> None:
    root, _output = build
    exe = _executable(root)
    result = subprocess.run(
        [str(exe), "--self-test"], capture_output=True, text=True, env=_env(tmp_path), timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("self-test passed: ")
    version = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True, env=_env(tmp_path), timeout=120
    )
    assert version.returncode == 0, version.stderr
    first = version.stdout.splitlines()[0]
    assert first.startswith(f"{APP_ID} {__version__} (git ") and "bundle built" in first
    revision = git_revision(REPO_ROOT)
    if revision is not None:
        assert f"git {revision}" in first
    assert "openvino 2026.4" in version.stdout


def test_bundle_opens_its_window(build: tuple[Path, str], tmp_path: Path) -> None:
    from PySide6.QtGui import QImage

    root, _output = build
    shot = tmp_path / "bundle.png"
    result = subprocess.run(
        [str(_executable(root).with_name(APP_ID)), "--screenshot", str(shot)],
        capture_output=True,
        text=True,
        env=_env(tmp_path / "home"),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    image = QImage(str(shot))
    assert image.width() >= 760 and image.height() >= 520
    screenshots = REPO_ROOT / ".cache" / "screenshots"
    screenshots.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, screenshots / "bundle_main_window.png")


def test_bundle_serves_the_api(build: tuple[Path, str], tmp_path: Path) -> None:
    """`serve` from the bundle: uvicorn picks its protocol and loop modules by name at run
    time, which PyInstaller's import analysis cannot see (its uvicorn hook collects them)."""
    import re

    import httpx

    root, _output = build
    demo = REPO_ROOT / "resources" / "demo-model" / "openvino"
    process = subprocess.Popen(
        [str(_executable(root)), "serve", str(demo), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path),
    )
    try:
        assert process.stdout is not None
        url = None
        for line in process.stdout:
            found = re.search(r"at (http://127\.0\.0\.1:\d+)/v1$", line.strip())
            if found:
                url = found.group(1)
                break
        assert url, process.stderr.read() if process.stderr else ""
        [model] = httpx.get(f"{url}/v1/models", timeout=60).json()["data"]
        answer = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": model["id"],
                "messages": [{"role": "user", "content": "Count from 1 to 4."}],
            },
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"].split() == ["1", "2", "3", "4"]
        assert answer.json()["mtp"]["mode"] == "mtp"
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
        assert process.returncode == 0 and "Server stopped." in err, err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def test_bundle_holds_every_runtime_file(build: tuple[Path, str]) -> None:
    root, _output = build
    bundle = root / "dist" / APP_ID
    contents = bundle / "_internal" if (bundle / "_internal").is_dir() else bundle
    missing = sorted(path for path in required_files() if not (contents / path).is_file())
    assert not missing, f"the bundle lacks {missing}"
    files = bundle_files()
    libs = contents / files.OPENVINO_LIBS
    left_out = [p.name for p in files.openvino_library_files()["drop"] if (libs / p.name).exists()]
    assert not left_out, f"unused OpenVINO libraries were bundled: {left_out}"
    heavy = [
        name for name in ("torch", "transformers", "optimum", "nncf") if (contents / name).exists()
    ]
    assert not heavy, f"the export toolkit was bundled: {heavy}"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the tarball is Linux's format")
def test_linux_tarball_installs_a_menu_entry(build: tuple[Path, str], tmp_path: Path) -> None:
    root, _output = build
    out = subprocess.run(
        [
            "bash",
            str(PACKAGING / "linux" / "make_tarball.sh"),
            str(root / "dist" / APP_ID),
            str(tmp_path),
            str(root / "work"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout.strip()
    archive = Path(out)
    assert archive.name == f"{APP_ID}-{__version__}-linux-{os.uname().machine}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "unpacked", filter="tar")
    folder = tmp_path / "unpacked" / archive.name.removesuffix(".tar.gz")
    for name in (APP_ID, f"{APP_ID}.desktop", f"{APP_ID}.svg", f"{APP_ID}.png", "install.sh"):
        assert (folder / name).exists(), name
    archive.unlink()
    prefix = tmp_path / "prefix"
    subprocess.run(
        ["bash", str(folder / "install.sh")],
        check=True,
        env={**os.environ, "PREFIX": str(prefix)},
        capture_output=True,
        timeout=300,
    )
    shutil.rmtree(folder)
    desktop = (prefix / "share" / "applications" / f"{APP_ID}.desktop").read_text()
    assert f"Exec={prefix}/opt/{APP_ID}/{APP_ID}" in desktop
    assert (prefix / "share" / "icons" / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").exists()
    installed = prefix / "bin" / APP_ID
    version = subprocess.run(
        [str(installed), "--version"], capture_output=True, text=True, timeout=120, check=True
    )
    assert __version__ in version.stdout
    subprocess.run(
        ["bash", str(prefix / "opt" / APP_ID / "uninstall.sh")],
        check=True,
        env={**os.environ, "PREFIX": str(prefix)},
        capture_output=True,
        timeout=120,
    )
    assert not (prefix / "opt" / APP_ID).exists() and not installed.exists()
