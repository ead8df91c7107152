"""What the bundle needs beyond PyInstaller's import analysis, and what it leaves out.

Shared by `qwen_mtp_desktop.spec` (which builds from these lists) and
`tests/unit/test_packaging.py` (which derives the files the app loads at run time from the code
and the installed packages, and checks that these lists cover them). Nothing here imports
PyInstaller, OpenVINO or Qt: packages are located with `importlib.util.find_spec`.

Files the import analysis cannot see, because they are opened or dlopen()ed by path at run time:

- `resources/` (icons, prompt sets, the demo model): found through
`core.files.paths.resources_dir()`, which is `sys._MEIPASS/resources` in a bundle;
- OpenVINO's device plugins and IR frontend: libopenvino loads them from its own folder
  (`openvino/libs`), by name, when a device is first used or a model is read; the GPU plugin
  also reads its tuning cache `cache.json` there; TBB dlopen()s `tbbbind` for NUMA binding;
- the openvino_tokenizers extension library: `openvino_tokenizers/__init__.py` looks for
  `<site-packages>/openvino_tokenizers/lib/<lib>openvino_tokenizers.<ext>` next to its own
  package folder, and openvino_genai asks that module for the path (`_ext_path`);
- package metadata (dist-info) of the runtime packages: `importlib.metadata` versions feed
  `doctor`, the release-family check, reports and the About dialog.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESOURCES = REPO_ROOT / "resources"
BUILD_INFO_FILE = "build_info.json"  # = qwen_mtp_desktop.core.system.buildinfo.BUILD_INFO_FILE

#: OpenVINO device plugins the bundle ships (AUTO_BATCH and any others are left out).
KEEP_PLUGINS = ("intel_cpu", "intel_gpu", "intel_npu", "auto", "hetero")
#: OpenVINO frontends the bundle ships: the app reads OpenVINO IR (.xml + .bin) only.
KEEP_FRONTENDS = ("ir",)
#: Where OpenVINO's shared libraries live inside the `openvino` package (and the bundle).
OPENVINO_LIBS = "openvino/libs"
TOKENIZERS_LIB = "openvino_tokenizers/lib"
QT_LIB_DIR = "PySide6/Qt/lib"

#: Distributions whose metadata (dist-info) the bundle carries.
METADATA_PACKAGES = (
    "qwen-mtp-desktop",
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
    "PySide6-Essentials",
    "shiboken6",
    "numpy",
    "pillow",
    "psutil",
    "platformdirs",
    "qasync",
    "pygments",
)

#: Python packages the bundle must not contain: the export toolkit (installed on demand in a
#: source install), dev tools, other Qt bindings, and converter parts of openvino the app never
#: imports (`openvino.tools` pulls the model converter and its framework frontends).
EXCLUDED_MODULES = (
    "torch",
    "torchvision",
    "transformers",
    "optimum",
    "nncf",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
    "accelerate",
    "datasets",
    "tqdm",
    "scipy",
    "sklearn",
    "pandas",
    "matplotlib",
    "sympy",
    "networkx",
    "IPython",
    "jupyter_client",
    "tkinter",
    "_tkinter",
    "pytest",
    "_pytest",
    "pytestqt",
    "hypothesis",
    "mypy",
    "PyQt5",
    "PyQt6",
    "PySide2",
    "tensorflow",
    "keras",
    "jax",
    "onnx",
    "onnxruntime",
    "openvino_telemetry",  # the app blocks it (core/system/privacy.py); openvino has a no-op stub
    "openvino.tools",
    "openvino.torch",
    "openvino.frontend.pytorch",
    "openvino.frontend.tensorflow",
    "openvino.frontend.jax",
    "qwen_mtp_desktop.devtools",  # builds the demo model; needs torch
    # Optional imports of numpy (its build config and f2py), not needed at run time.
    "yaml",
    "charset_normalizer",
    "numpy.f2py",
)

#: What `models download` and `models add-mtp` need in the installed app, all imported inside
#: functions: the app's own hub client (httpx), OpenVINO's graph API that builds the MTP head
#: (`openvino.opset13`, `openvino.op.util`), and the MTP == plain check, which the bundle starts
#: by name (`-m qwen_mtp_desktop.core.models.export.child`, dispatched by entry.py). The spec lists
#: them as hidden imports so a change to how they are imported cannot drop them silently;
#: tests/unit/test_packaging.py imports them, and everything these modules import, with the
#: excluded modules blocked.
MODEL_SOURCE_MODULES = (
    "httpx",
    "openvino.opset13",
    "openvino.op.util",
    "qwen_mtp_desktop.commands.model_sources",
    "qwen_mtp_desktop.core.models.ready.hub_client",
    "qwen_mtp_desktop.core.models.ready.download",
    "qwen_mtp_desktop.core.models.ready.tensor_source",
    "qwen_mtp_desktop.core.models.ready.mtp_graft",
    "qwen_mtp_desktop.core.models.export.child",
)

#: Modules the bundle must not be able to import (checked with the bundle's `--probe-imports`
#: by packaging/build.py and tests/integration/test_bundle.py): the export toolkit, which is
#: several GB and which `models download` / `models add-mtp` exist to do without.
MUST_NOT_IMPORT = ("torch", "transformers", "optimum")
PROBE_IMPORTS = "--probe-imports"  # = entry.PROBE_IMPORTS (entry.py imports nothing from here)

#: PySide6 modules the app does not use (it uses QtCore, QtGui, QtWidgets and QtNetwork's local
#: sockets for the single-instance check), in case the analysis reaches one through an
#: optional import. tests/unit/test_packaging.py imports the app with all of them blocked.
QT_EXCLUDES = tuple(
    f"PySide6.{name}"
    for name in (
        "QtQml",
        "QtQuick",
        "QtQuickWidgets",
        "QtOpenGL",
        "QtOpenGLWidgets",
        "QtSql",
        "QtTest",
        "QtXml",
        "QtDBus",
        "QtConcurrent",
        "QtPrintSupport",
        "QtSvg",
        "QtSvgWidgets",
        "QtUiTools",
        "QtHelp",
        "QtDesigner",
    )
)

#: Qt plugin folders the app does not use (printing, networking, SQL, QML tooling, designer,
#: embedded-Linux input and EGL device integrations).
UNUSED_QT_PLUGIN_DIRS = (
    "designer",
    "egldeviceintegrations",
    "generic",
    "networkinformation",
    "printsupport",
    "qmllint",
    "qmltooling",
    "sqldrivers",
    "tls",
    "vectorimageformats",
    "wayland-graphics-integration-server",
)
#: Single Qt plugins the app does not use: embedded-only platforms (EGLFS, framebuffer, VNC,
#: Vulkan display) and the GTK3 theme, which alone would pull in the GTK stack (cairo, pango,
#: gdk-pixbuf, atk: ~8 MB) that has to match the user's own GTK anyway; Qt falls back to the
#: XDG desktop portal theme.
UNUSED_QT_PLUGINS = (
    "libqgtk3",
    "libqeglfs",
    "libqlinuxfb",
    "libqvnc",
    "libqvkkhrdisplay",
    "libqminimalegl",
)


def package_dir(name: str) -> Path:
    """The installed folder of a Python package, without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def resource_datas(resources: Path = RESOURCES) -> list[tuple[str, str]]:
    """(source file, bundle folder) for every file under resources/."""
    entries = []
    for path in sorted(resources.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts or path.name == ".DS_Store":
            continue
        relative = path.relative_to(resources.parent)
        entries.append((str(path), relative.parent.as_posix()))
    return entries


def _library_kind(name: str) -> tuple[str, str] | None:
    """('plugin' | 'frontend', short name) for an OpenVINO library file name, else None."""
    match = re.match(r"^(?:lib)?openvino_(\w+?)_(plugin|frontend)\b", name)
    return (match.group(2), match.group(1)) if match else None


def _is_library(name: str) -> bool:
    return bool(re.search(r"\.(so(\.\d+)*|dylib|dll)$", name))


def openvino_library_files(libs: Path | None = None) -> dict[str, list[Path]]:
    """The loaded-by-name libraries in openvino/libs, split into 'keep' and 'drop'."""
    libs = libs or package_dir("openvino") / "libs"
    keep: list[Path] = []
    drop: list[Path] = []
    for path in sorted(libs.iterdir()):
        if not _is_library(path.name):
            continue
        kind = _library_kind(path.name)
        if kind is not None:
            wanted = KEEP_PLUGINS if kind[0] == "plugin" else KEEP_FRONTENDS
            (keep if kind[1] in wanted else drop).append(path)
        elif "tbbbind" in path.name:
            keep.append(path)
    return {"keep": keep, "drop": drop}


def openvino_binaries() -> list[tuple[str, str]]:
    """Plugins, the IR frontend and tbbbind, next to libopenvino (they are loaded from there)."""
    return [(str(path), OPENVINO_LIBS) for path in openvino_library_files()["keep"]]


def openvino_datas() -> list[tuple[str, str]]:
    """Non-library files the kept plugins read from openvino/libs (the GPU tuning cache)."""
    libs = package_dir("openvino") / "libs"
    return [(str(path), OPENVINO_LIBS) for path in sorted(libs.glob("*.json"))]


def tokenizers_extension() -> Path:
    """The openvino_tokenizers extension library, where the package itself looks for it."""
    folder = package_dir("openvino_tokenizers") / "lib"
    if sys.platform == "win32":
        name = "openvino_tokenizers.dll"
        candidates = [folder / name, folder / "Release" / name]
    elif sys.platform == "darwin":
        candidates = [folder / "libopenvino_tokenizers.dylib"]
    else:
        candidates = [folder / "libopenvino_tokenizers.so"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise RuntimeError(f"no openvino_tokenizers extension library in {folder}")


def tokenizers_binaries() -> list[tuple[str, str]]:
    ext = tokenizers_extension()
    dest = ext.parent.relative_to(package_dir("openvino_tokenizers").parent).as_posix()
    return [(str(ext), dest)]


def dropped_binary(dest_name: str) -> bool:
    """True for a collected binary the bundle leaves out (unused OpenVINO plugins/frontends,
    unused Qt plugins). `dest_name` is the path inside the bundle."""
    parts = dest_name.replace("\\", "/").split("/")
    name = parts[-1]
    kind = _library_kind(name)
    if kind is not None and _is_library(name):
        wanted = KEEP_PLUGINS if kind[0] == "plugin" else KEEP_FRONTENDS
        if kind[1] not in wanted:
            return True
    if "plugins" in parts and parts[0] == "PySide6":
        index = parts.index("plugins")
        if index + 1 < len(parts) - 1 and parts[index + 1] in UNUSED_QT_PLUGIN_DIRS:
            return True
        if name.split(".")[0] in UNUSED_QT_PLUGINS:
            return True
    return False


def is_extension_module(name: str) -> bool:
    """A Python extension module's file name on Linux: `NAME.cpython-311-x86_64-linux-gnu.so`
    or `NAME.abi3.so` (a plain shared library is `libNAME.so.N`)."""
    return bool(re.search(r"\.(cpython-[\w-]+|abi3)\.so$", name))


def unreachable_libraries(
    entries: list[tuple[str, str]], imports: Callable[[str], list[str]]
) -> set[str]:
    """Dependency-only libraries that no kept binary needs any more once the dropped plugins
    are gone: system libraries at the bundle's top level and Qt's own libraries
    (PySide6/Qt/lib) that only a dropped plugin pulled in. `entries` are (bundle path, source
    path); `imports(source)` lists the libraries a binary links against. Python extension
    modules at the top level (`_cffi_backend.cpython-311-x86_64-linux-gnu.so`) are never
    dependency-only: Python imports them by name, no binary links against them (dropping
    `_cffi_backend` broke cryptography, hence secretstorage and the keychain). Linux only
    (elsewhere the top level holds the Python runtime's DLLs).
    """
    source_of = {dest.replace("\\", "/"): source for dest, source in entries}
    by_name: dict[str, list[str]] = {}
    for dest, source in source_of.items():
        by_name.setdefault(dest.split("/")[-1], []).append(source)
    prunable = {
        dest
        for dest in source_of
        if ("/" not in dest and not is_extension_module(dest)) or dest.startswith(QT_LIB_DIR + "/")
    }
    # The bootloader loads libpython itself; everything else is reached from the roots.
    stack = [
        source
        for dest, source in source_of.items()
        if dest not in prunable or dest.startswith("libpython")
    ]
    seen: set[str] = set()
    while stack:
        source = stack.pop()
        if source in seen:
            continue
        seen.add(source)
        for needed in imports(source):
            stack.extend(by_name.get(needed.split("/")[-1], []))
    return {dest for dest in prunable if source_of[dest] not in seen}


def dropped_data(dest_name: str) -> bool:
    """True for a collected data file the bundle leaves out: Qt translations other than
    qtbase's (the app itself is English-only), and data of dropped plugins."""
    parts = dest_name.replace("\\", "/").split("/")
    if "translations" in parts and parts[0] == "PySide6":
        return not parts[-1].startswith("qtbase_")
    return dropped_binary(dest_name)
