"""What the app runs on: package versions, OpenVINO release family, devices, folders.

Versions come from package metadata, so nothing heavy (torch, transformers) is imported to learn
them. `doctor()` is what `qwen-mtp-desktop doctor` prints.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.files.paths import app_paths

#: The three OpenVINO packages that must come from one release family (same YYYY.R).
RUNTIME_PACKAGES = ("openvino", "openvino-genai", "openvino-tokenizers")
#: The export toolkit (optional extra). transformers must stay in the Qwen3.5 exporter's range.
EXPORT_PACKAGES = ("optimum-intel", "optimum", "transformers", "nncf", "torch")
UI_PACKAGES = ("PySide6", "qasync", "platformdirs")
SUPPORTED_TRANSFORMERS = "5.2"
#: The family this app is built and tested against.
TESTED_FAMILY = "2026.4"


def package_version(name: str) -> str | None:
    candidates = [name]
    if name == "PySide6":  # the slim wheel is enough; report whichever is installed
        candidates.append("PySide6-Essentials")
    for candidate in candidates:
        try:
            return importlib.metadata.version(candidate)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def release_family(version: str | None) -> str | None:
    """'2026.4.1.0' -> '2026.4'; None when the version is missing or not of that form."""
    if version is None:
        return None
    match = re.match(r"^(\d{4})\.(\d+)", version)
    return f"{match.group(1)}.{match.group(2)}" if match else None


@dataclass(frozen=True)
class FamilyVerdict:
    ok: bool
    family: str | None
    message: str


def family_verdict(versions: dict[str, str | None]) -> FamilyVerdict:
    missing = [name for name in RUNTIME_PACKAGES if not versions.get(name)]
    if missing:
        return FamilyVerdict(
            False,
            None,
            f"missing {', '.join(missing)}: install the app's runtime "
            "(pip install qwen-mtp-desktop, or `make run` from a checkout)",
        )
    families = {name: release_family(versions[name]) for name in RUNTIME_PACKAGES}
    distinct = set(families.values())
    if len(distinct) != 1 or None in distinct:
        listing = ", ".join(f"{name} {versions[name]}" for name in RUNTIME_PACKAGES)
        return FamilyVerdict(
            False,
            None,
            f"OpenVINO packages come from different release families ({listing}); install "
            "matching versions, e.g. pip install 'openvino==2026.4.*' 'openvino-genai==2026.4.*' "
            "'openvino-tokenizers==2026.4.*'",
        )
    family = distinct.pop()
    note = "" if family == TESTED_FAMILY else f" (this app is tested with {TESTED_FAMILY})"
    return FamilyVerdict(True, family, f"one release family: {family}{note}")


@dataclass(frozen=True)
class Device:
    name: str
    full_name: str


def available_devices() -> tuple[list[Device], str | None]:
    """OpenVINO devices and an error message if the runtime could not be queried."""
    try:
        import openvino

        core = openvino.Core()
        devices = []
        for name in core.available_devices:
            try:
                full = str(core.get_property(name, "FULL_DEVICE_NAME"))
            except Exception:  # a device that cannot describe itself is still listed
                full = name
            devices.append(Device(name, full))
        return devices, None
    except Exception as exc:  # ImportError or a broken native install
        return [], f"{type(exc).__name__}: {exc}"


#: Shared libraries Qt's xcb platform plugin (the Linux desktop window) loads, and the Debian/
#: Ubuntu package of each: what `doctor` names when one is missing (docs/user-guide.md: Linux
#: libraries).
XCB_LIBRARY_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libX11.so.6": "libx11-6",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3",
    "libglib-2.0.so.0": "libglib2.0-0",
}


def xcb_plugin() -> Path | None:
    """PySide6's xcb platform plugin, found without importing Qt."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or spec.origin is None:
        return None
    plugin = Path(spec.origin).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return plugin if plugin.is_file() else None


def missing_from_ldd(text: str) -> list[str]:
    """The libraries `ldd` printed as "name => not found", each once, in order."""
    missing: list[str] = []
    for line in text.splitlines():
        name, arrow, target = line.strip().partition(" => ")
        if arrow and target.strip() == "not found" and name not in missing:
            missing.append(name)
    return missing


def missing_display_libraries() -> list[str] | None:
    """The libraries the Linux desktop window (Qt's xcb plugin) needs that cannot be loaded, or
    None when that cannot be checked (not Linux, no plugin, no `ldd`)."""
    if not sys.platform.startswith("linux"):
        return None
    plugin, ldd = xcb_plugin(), shutil.which("ldd")
    if plugin is None or ldd is None:
        return None
    try:
        result = subprocess.run(
            [ldd, str(plugin)], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return missing_from_ldd(result.stdout)


def display_libraries_note(missing: list[str]) -> str:
    packages = [XCB_LIBRARY_PACKAGES[name] for name in missing if name in XCB_LIBRARY_PACKAGES]
    unknown = [name for name in missing if name not in XCB_LIBRARY_PACKAGES]
    text = (
        "the desktop window cannot open on X11: Qt's xcb plugin needs "
        + ", ".join(missing)
        + " (the command line works without them)."
    )
    if packages:
        text += f" Debian/Ubuntu: sudo apt install {' '.join(packages)}."
    if unknown:
        text += " Install the packages that provide " + ", ".join(unknown) + "."
    return text


@dataclass
class DoctorReport:
    app_version: str
    python: str
    platform: str
    versions: dict[str, str | None]
    release_family: FamilyVerdict
    devices: list[Device]
    runtime_usable: bool
    export_toolkit: str
    dirs: dict[str, str]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Libraries the Linux desktop window needs but cannot load (None: not checked).
    missing_display_libraries: list[str] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


def _genai_importable() -> str | None:
    try:
        import openvino_genai  # noqa: F401
        import openvino_tokenizers  # noqa: F401  (registers the tokenizer ops)
    except Exception as exc:
        return f"openvino_genai cannot be imported ({type(exc).__name__}: {exc})"
    return None


def export_toolkit_status(versions: dict[str, str | None]) -> tuple[str, list[str]]:
    """A one-line status of the optional export toolkit and notes about it."""
    missing = [name for name in EXPORT_PACKAGES if not versions.get(name)]
    if missing:
        return "export toolkit not installed", [
            f"export toolkit not installed (missing {', '.join(missing)}); the export wizard "
            "can install it, or run: pip install 'qwen-mtp-desktop[export]'"
        ]
    transformers = versions["transformers"] or ""
    if not transformers.startswith(SUPPORTED_TRANSFORMERS + "."):
        return "export toolkit installed, unsupported transformers", [
            f"transformers {transformers} is outside the Qwen3.5 exporter's range "
            f"{SUPPORTED_TRANSFORMERS}.x: pip install 'transformers=={SUPPORTED_TRANSFORMERS}.*'"
        ]
    return "export toolkit installed", []


def doctor() -> DoctorReport:
    names = ("python", *RUNTIME_PACKAGES, *EXPORT_PACKAGES, *UI_PACKAGES)
    versions: dict[str, str | None] = {
        name: (platform.python_version() if name == "python" else package_version(name))
        for name in names
    }
    verdict = family_verdict(versions)
    problems: list[str] = []
    if not verdict.ok:
        problems.append(verdict.message)
    devices: list[Device] = []
    if verdict.ok:
        import_error = _genai_importable()
        if import_error:
            problems.append(import_error + "; reinstall the runtime packages")
        devices, device_error = available_devices()
        if device_error:
            problems.append(f"OpenVINO could not list devices: {device_error}")
        elif not devices:
            problems.append("OpenVINO found no device to run on")
    export_status, notes = export_toolkit_status(versions)
    display_missing = missing_display_libraries()
    if display_missing:
        notes.append(display_libraries_note(display_missing))
    paths = app_paths()
    return DoctorReport(
        app_version=__version__,
        python=sys.version.split()[0],
        platform=platform.platform(),
        versions=versions,
        release_family=verdict,
        devices=devices,
        runtime_usable=not problems,
        export_toolkit=export_status,
        dirs={
            "data": str(paths.data_dir),
            "config": str(paths.config_dir),
            "cache": str(paths.cache_dir),
            "logs": str(paths.log_dir),
        },
        problems=problems,
        notes=notes,
        missing_display_libraries=display_missing,
    )
