"""Build the app bundle for this OS, self-test it, report its size, wrap it for installing.

    python packaging/build.py [--no-installer] [--skip-self-test]

Steps:
1. PyInstaller, one folder: dist/qwen-mtp-desktop/ (spec: packaging/qwen_mtp_desktop.spec;
   intermediate files in build/pyinstaller/);
2. the bundle's own `--self-test` (demo model, plain vs MTP decoding), with a throw-away app
   home so it touches no real profile; a failure stops the build;
3. a real model the way a user of the installed app gets one: the dev hub server
   (`python -m qwen_mtp_desktop.devtools.hub_server`, run with this Python: devtools is not in
   the bundle) serves the demo export without its MTP head and a sharded BF16 copy of the demo
   checkpoint on loopback, and the bundle runs `models download` and `models add-mtp` against
   it (exit 0, MTP == plain); the bundle's `--probe-imports` then shows torch, transformers and
   optimum cannot be imported in it; a failure stops the build (`--skip-self-test` skips 2 and
   3);
4. the bundle's size and the build time;
5. the installer for this OS: Linux a .tar.gz with a .desktop file, icon and install script
   (packaging/linux/make_tarball.sh); Windows an Inno Setup installer if `iscc` is on PATH
   (packaging/windows/qwen_mtp_desktop.iss); macOS a .dmg of the .app
   (packaging/macos/make_dmg.sh).

`make package` runs this on Linux after installing the `package` extra into .venv; on Windows
and macOS run it with the venv's Python (see packaging/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import bundle_files  # packaging/bundle_files.py (this script's folder is first on sys.path)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIST = ROOT / "dist"
WORK = ROOT / "build" / "pyinstaller"
#: The output folders; --dist / --work move them (the packaging test builds in a temp folder).
dirs = {"dist": DIST, "work": WORK}
SPEC = HERE / "qwen_mtp_desktop.spec"
APP_ID = "qwen-mtp-desktop"
APP_NAME = "Qwen MTP Desktop"
DEMO_MODEL = ROOT / "resources" / "demo-model"
#: The dev hub server's repos (named as in tests/integration/test_model_download.py).
HEADLESS_REPO = "test-org/demo-headless-ov"
CHECKPOINT_REPO = "test-org/demo-checkpoint"
#: What makes the demo export one with an MTP head; without them it is a "headless" ready export
#: (the export record lists the head, so a stripped repo would not carry it either).
HEAD_FILES = ("openvino_mtp_model.xml", "openvino_mtp_model.bin", "qwen_mtp_export.json")
#: Proxy settings the app's hub client honours (httpx, trust_env): the dev hub is on loopback.
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)
#: One safetensors tensor: (dtype, shape, raw little-endian bytes).
Tensor = tuple[str, list[int], bytes]


def bundle_dir() -> Path:
    return dirs["dist"] / APP_ID


def console_executable() -> Path:
    """The bundle's executable that prints to a console (the windowed one does not)."""
    if sys.platform == "win32":
        return bundle_dir() / f"{APP_ID}-cli.exe"
    if sys.platform == "darwin":
        return bundle_dir() / f"{APP_ID}-cli"
    return bundle_dir() / APP_ID


def folder_size(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        if item.is_file() and not item.is_symlink():
            total += item.stat().st_size
    return total


def human(size: int) -> str:
    return f"{size / 1024**2:.0f} MiB"


def run_pyinstaller(clean: bool) -> None:
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        "--noconfirm",
        "--log-level",
        "WARN",
        "--distpath",
        str(dirs["dist"]),
        "--workpath",
        str(dirs["work"]),
        str(SPEC),
    ]
    if clean:
        command.insert(3, "--clean")
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def bundle_env(home: Path) -> dict[str, str]:
    """The environment the bundle runs in here: a private app home, so no real profile is
    touched."""
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home)}
    # Nothing from the build environment may leak into the frozen app.
    for name in ("PYTHONPATH", "PYTHONHOME", "QWEN_MTP_DESKTOP_RESOURCES"):
        env.pop(name, None)
    return env


def self_test(executable: Path) -> int:
    """Run the bundle's --self-test with a private app home; returns its exit code."""
    with tempfile.TemporaryDirectory(prefix="qmd-selftest-") as home:
        env = bundle_env(Path(home))
        result = subprocess.run([str(executable), "--self-test"], env=env, check=False)
    return result.returncode


def read_safetensors(path: Path) -> dict[str, Tensor]:
    """{name: tensor} of a safetensors file: 8-byte little-endian header length, JSON header,
    data. Written out here rather than imported from tests/checkpoint_files.py: a build script
    run as a file should not reach into the test package."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header: dict[str, Any] = json.loads(raw[8 : 8 + length])
    data = raw[8 + length :]
    tensors: dict[str, Tensor] = {}
    for name, entry in header.items():
        if name != "__metadata__":
            start, end = entry["data_offsets"]
            tensors[name] = (entry["dtype"], entry["shape"], data[start:end])
    return tensors


def write_safetensors(path: Path, tensors: Mapping[str, Tensor]) -> None:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(blob)],
        }
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(t[2] for t in tensors.values()))


def to_bf16(tensor: Tensor) -> Tensor:
    """F32 -> BF16 rounded to nearest even (as torch does); other dtypes unchanged."""
    dtype, shape, blob = tensor
    if dtype != "F32":
        return tensor
    import numpy as np  # a runtime dependency of the app, so in the build's venv

    bits = np.frombuffer(blob, dtype=np.uint32).astype(np.uint64)  # no overflow on the add
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "BF16", shape, rounded.astype(np.uint16).tobytes()


def write_hub_repos(root: Path) -> None:
    """ROOT/ORG/NAME repo folders for the dev hub server: the demo export without its MTP head,
    and the demo checkpoint in BF16 and three shards with an index, as real Qwen3.5 releases are
    published; the head's tensors are split over the last two shards, so `add-mtp` has to read
    two shard headers and range-read only the head's bytes, as it does on the real hub."""
    headless = root / HEADLESS_REPO
    shutil.copytree(DEMO_MODEL / "openvino", headless)
    for name in HEAD_FILES:
        (headless / name).unlink()
    source = DEMO_MODEL / "checkpoint"
    checkpoint = root / CHECKPOINT_REPO
    checkpoint.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file() and item.suffix != ".safetensors":
            shutil.copy2(item, checkpoint / item.name)
    tensors = {k: to_bf16(v) for k, v in read_safetensors(source / "model.safetensors").items()}
    trunk = [name for name in tensors if not name.startswith("mtp.")]
    head = [name for name in tensors if name.startswith("mtp.")]
    shards = [f"model-{i:05d}-of-00003.safetensors" for i in (1, 2, 3)]
    plan = {shards[0]: trunk, shards[1]: head[: len(head) // 2], shards[2]: head[len(head) // 2 :]}
    for shard, names in plan.items():
        write_safetensors(checkpoint / shard, {name: tensors[name] for name in names})
    index = {
        "metadata": {"total_size": sum(len(t[2]) for t in tensors.values())},
        "weight_map": {name: shard for shard, names in plan.items() for name in names},
    }
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


@contextlib.contextmanager
def dev_hub_server(root: Path, log: Path, timeout: float = 60.0) -> Iterator[str]:
    """The dev hub server over `root` on a free loopback port (it picks one with `--port 0`
    and prints its URL first); yields the URL, stops the server on exit."""
    command = [sys.executable, "-m", "qwen_mtp_desktop.devtools.hub_server", str(root)]
    with log.open("w", encoding="utf-8") as errors:
        process = subprocess.Popen(
            [*command, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            cwd=ROOT,
        )
    try:
        # readline() blocks: on a thread, so a server that hangs before printing cannot.
        lines: queue.Queue[str] = queue.Queue()
        stdout = process.stdout
        assert stdout is not None
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            url = lines.get(timeout=timeout).strip()
        except queue.Empty:
            url = ""
        if not url.startswith("http://"):
            raise RuntimeError(
                f"the dev hub server did not start: {log.read_text(encoding='utf-8')[-2000:]}"
            )
        yield url
    finally:
        # SIGTERM: the server stops its listeners and exits 0 (Windows: TerminateProcess).
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        if process.stdout is not None:
            process.stdout.close()


def hub_env(home: Path, url: str) -> dict[str, str]:
    """The bundle's environment for the hub step: the dev hub as the hub, online, and nothing
    of the builder's own hub setup (no token is sent to the test server, no keychain is asked:
    a locked one could prompt in the middle of a build, no proxy for a loopback server)."""
    env = bundle_env(home)
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_TOKEN_PATH",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        *PROXY_VARIABLES,
    ):
        env.pop(name, None)
    env.update(
        {
            "HF_ENDPOINT": url,
            "HF_HUB_OFFLINE": "0",
            "HF_HOME": str(home / "hf-home"),  # its `token` file: none
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
        }
    )
    return env


def run_json(executable: Path, args: list[str], env: dict[str, str]) -> Any:
    """Run the bundle with `args`; its stdout parsed as JSON, or None (said why on stderr)
    when it exits non-zero or prints something else."""
    shown = " ".join([executable.name, *args])
    try:
        done = subprocess.run(
            [str(executable), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    except subprocess.TimeoutExpired:
        print(f"`{shown}` did not finish in 600 s", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"`{shown}` failed (exit {done.returncode}):", file=sys.stderr)
        print(done.stdout[-2000:] + done.stderr[-4000:], file=sys.stderr)
        return None
    try:
        return json.loads(done.stdout)
    except ValueError:
        print(f"`{shown}` printed no JSON:\n{done.stdout[-2000:]}", file=sys.stderr)
        return None


def hub_self_test(executable: Path) -> int:
    """Step 3: `models download` and `models add-mtp` from the bundle against the dev hub
    server, then the import probe; prints one summary line, returns 0 when all passed."""
    with tempfile.TemporaryDirectory(prefix="qmd-hubtest-") as temp:
        folder = Path(temp)
        write_hub_repos(folder / "hub")
        home = folder / "home"
        try:
            with dev_hub_server(folder / "hub", folder / "hub-server.log") as url:
                env = hub_env(home, url)
                download = run_json(
                    executable, ["models", "download", HEADLESS_REPO, "--json"], env
                )
                if download is None:
                    return 1
                model = Path(download["model_dir"])
                add = ["models", "add-mtp", str(model), "--from", CHECKPOINT_REPO, "--json"]
                graft = run_json(executable, add, env)
                if graft is None:
                    return 1
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
        check = graft.get("check") or {}
        if check.get("equal") is not True:
            print(f"models add-mtp: the MTP == plain check did not pass: {check}", file=sys.stderr)
            return 1
        names = list(bundle_files.MUST_NOT_IMPORT)
        probe = run_json(executable, [bundle_files.PROBE_IMPORTS, *names], bundle_env(home))
        if probe is None:
            return 1
        importable = [name for name in names if probe.get(name) is not False]
        if importable:
            print(f"the bundle can import {', '.join(importable)}: {probe}", file=sys.stderr)
            return 1
    print(
        f"hub self-test passed: models download {HEADLESS_REPO} ({download['files']} files, "
        f"{download['download_bytes'] / 1024**2:.1f} MiB), models add-mtp --from "
        f"{CHECKPOINT_REPO} ({graft['bytes_read'] / 1024:.0f} KiB in {graft['requests']} "
        f"range requests), MTP == plain; {', '.join(names)} not importable",
        flush=True,
    )
    return 0


def make_installer() -> list[Path]:
    if sys.platform.startswith("linux"):
        script = HERE / "linux" / "make_tarball.sh"
        output = subprocess.run(
            ["bash", str(script), str(bundle_dir()), str(dirs["dist"]), str(dirs["work"])],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return [Path(line) for line in output.split() if line.endswith(".tar.gz")]
    if sys.platform == "win32":
        iscc = shutil.which("iscc") or shutil.which("ISCC")
        if iscc is None:
            print("Inno Setup (iscc) is not on PATH: skipping the installer", flush=True)
            return []
        from qwen_mtp_desktop import __version__

        subprocess.run(
            [
                iscc,
                f"/DAppVersion={__version__}",
                f"/DBundleDir={bundle_dir()}",
                f"/DOutputDir={dirs['dist']}",
                f"/DIconFile={dirs['work'] / 'qwen_mtp_desktop' / 'icons' / 'app.ico'}",
                str(HERE / "windows" / "qwen_mtp_desktop.iss"),
            ],
            check=True,
        )
        return sorted(dirs["dist"].glob(f"{APP_ID}-*-setup.exe"))
    if sys.platform == "darwin":
        script = HERE / "macos" / "make_dmg.sh"
        output = subprocess.run(
            ["bash", str(script), str(dirs["dist"] / f"{APP_NAME}.app"), str(dirs["dist"])],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return [Path(line) for line in output.split() if line.endswith(".dmg")]
    print(f"no installer format for {sys.platform}", flush=True)
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-installer", action="store_true", help="stop after the bundle")
    parser.add_argument("--skip-self-test", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    parser.add_argument("--dist", type=Path, default=DIST, help="output folder (default dist/)")
    parser.add_argument(
        "--work", type=Path, default=WORK, help="PyInstaller's work folder (build/pyinstaller)"
    )
    args = parser.parse_args(argv)
    dirs["dist"], dirs["work"] = args.dist.resolve(), args.work.resolve()

    started = time.perf_counter()
    run_pyinstaller(args.clean)
    build_s = time.perf_counter() - started
    bundle = bundle_dir()
    print(f"bundle: {bundle} ({human(folder_size(bundle))}), built in {build_s:.0f} s", flush=True)

    if not args.skip_self_test:
        code = self_test(console_executable())
        if code != 0:
            print(f"the bundle's self-test failed (exit {code})", file=sys.stderr)
            return 1
        if hub_self_test(console_executable()) != 0:
            print("the bundle's hub self-test failed", file=sys.stderr)
            return 1

    for path in [] if args.no_installer else make_installer():
        print(f"installer: {path} ({human(path.stat().st_size)})", flush=True)
    total = time.perf_counter() - started
    print(
        f"package: {bundle} {human(folder_size(bundle))} · build {build_s:.0f} s · "
        f"total {total:.0f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
