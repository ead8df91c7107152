"""Build the PyInstaller bundle once (~1 min on 2 cores) and check it like a user would:
its own --self-test, --version, the window (offscreen screenshot), the files it must carry, and
the Linux tarball with its install script."""

from __future__ import annotations

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
from qwen_mtp_desktop.core.buildinfo import git_revision
from tests.bundle_requirements import PACKAGING, REPO_ROOT, bundle_files, required_files

pytestmark = pytest.mark.slow
pytest.importorskip("PyInstaller", reason="the `package` extra is not installed")

APP_ID = "qwen-mtp-desktop"


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


def test_build_runs_the_bundles_self_test(build: tuple[Path, str]) -> None:
    _root, output = build
    passed = [line for line in output.splitlines() if line.startswith("self-test passed: ")]
    assert len(passed) == 1, output
    assert f"bundle {__version__}" in passed[0]
    assert "package: " in output and " MiB" in output


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
