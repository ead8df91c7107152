"""Build the app bundle for this OS, self-test it, report its size, wrap it for installing.

    python packaging/build.py [--no-installer] [--skip-self-test]

Steps:
1. PyInstaller, one folder: dist/qwen-mtp-desktop/ (spec: packaging/qwen_mtp_desktop.spec;
   intermediate files in build/pyinstaller/);
2. the bundle's own `--self-test` (demo model, plain vs MTP decoding), with a throw-away app
   home so it touches no real profile; a failure stops the build;
3. the bundle's size and the build time;
4. the installer for this OS: Linux a .tar.gz with a .desktop file, icon and install script
   (packaging/linux/make_tarball.sh); Windows an Inno Setup installer if `iscc` is on PATH
   (packaging/windows/qwen_mtp_desktop.iss); macOS a .dmg of the .app
   (packaging/macos/make_dmg.sh).

`make package` runs this on Linux after installing the `package` extra into .venv; on Windows
and macOS run it with the venv's Python (see packaging/README.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIST = ROOT / "dist"
WORK = ROOT / "build" / "pyinstaller"
#: The output folders; --dist / --work move them (the packaging test builds in a temp folder).
dirs = {"dist": DIST, "work": WORK}
SPEC = HERE / "qwen_mtp_desktop.spec"
APP_ID = "qwen-mtp-desktop"
APP_NAME = "Qwen MTP Desktop"


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


def self_test(executable: Path) -> int:
    """Run the bundle's --self-test with a private app home; returns its exit code."""
    with tempfile.TemporaryDirectory(prefix="qmd-selftest-") as home:
        env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": home}
        # Nothing from the build environment may leak into the frozen app.
        for name in ("PYTHONPATH", "PYTHONHOME", "QWEN_MTP_DESKTOP_RESOURCES"):
            env.pop(name, None)
        result = subprocess.run([str(executable), "--self-test"], env=env, check=False)
    return result.returncode


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
