"""The files a bundle of the app must contain, derived from the code and the installed packages
(not copied from the spec): what the app opens or dlopen()s by path at run time.

Used by tests/unit/test_packaging.py (the spec's lists cover these) and by the bundle build
test (the built folder holds them).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE_SOURCE = REPO_ROOT / "qwen_mtp_desktop"
PACKAGING = REPO_ROOT / "packaging"
SPEC = PACKAGING / "qwen_mtp_desktop.spec"
#: The issue's policy: the devices the bundle must be able to run on.
REQUIRED_DEVICES = ("CPU", "GPU", "NPU", "AUTO", "HETERO")
#: `resources_dir() / "a" / "b"` in the app's code.
RESOURCE_REFERENCE = re.compile(r"resources_dir\(\)((?:\s*/\s*\"[^\"]+\")+)")


def bundle_files() -> ModuleType:
    """packaging/bundle_files.py (packaging/ is no Python package: PyPA's `packaging` is)."""
    name = "qwen_mtp_bundle_files"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, PACKAGING / "bundle_files.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bundle_resources_prefix() -> str:
    """Where resources live inside a bundle, as `core.files.paths.resources_dir()` computes it when
    frozen (sys._MEIPASS set)."""
    from qwen_mtp_desktop.core.files import paths

    fake_root = Path("/frozen-root")
    had = hasattr(sys, "_MEIPASS")
    old = getattr(sys, "_MEIPASS", None)
    sys._MEIPASS = str(fake_root)  # type: ignore[attr-defined]
    try:
        import os

        saved = os.environ.pop(paths.RESOURCES_ENV, None)
        try:
            frozen = paths.resources_dir()
        finally:
            if saved is not None:
                os.environ[paths.RESOURCES_ENV] = saved
    finally:
        if had:
            sys._MEIPASS = old  # type: ignore[attr-defined]
        else:
            del sys._MEIPASS  # type: ignore[attr-defined]
    return frozen.relative_to(fake_root).as_posix()


def referenced_resources() -> dict[str, list[Path]]:
    """Resource paths the code refers to (relative to resources/) -> the source files using
    them. Every `resources_dir() / ...` chain in qwen_mtp_desktop/."""
    found: dict[str, list[Path]] = {}
    for source in sorted(PACKAGE_SOURCE.rglob("*.py")):
        for match in RESOURCE_REFERENCE.finditer(source.read_text(encoding="utf-8")):
            parts = re.findall(r"\"([^\"]+)\"", match.group(1))
            found.setdefault("/".join(parts), []).append(source)
    return found


def required_resource_files() -> dict[str, Path]:
    """Bundle path -> source for every file under every resource the code refers to, and the
    demo model and prompt sets through the functions that locate them."""
    from qwen_mtp_desktop.core.files.paths import demo_checkpoint_dir, demo_model_dir, resources_dir
    from qwen_mtp_desktop.core.measure.prompt_sets import prompts_dir

    root = resources_dir()
    targets = [root / relative for relative in referenced_resources()]
    targets += [demo_model_dir(), demo_checkpoint_dir(), prompts_dir()]
    prefix = bundle_resources_prefix()
    required: dict[str, Path] = {}
    for target in targets:
        files = (
            [target] if target.is_file() else sorted(p for p in target.rglob("*") if p.is_file())
        )
        if not files:
            raise AssertionError(f"the code refers to {target}, which does not exist")
        for path in files:
            required[f"{prefix}/{path.relative_to(root).as_posix()}"] = path
    return required


def _site_packages_of(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).resolve().parents[1]


def plugin_library(core: Any, device: str) -> Path:
    """The shared library OpenVINO loads for `device`, as OpenVINO itself names it: the
    plugin's version description ("openvino_intel_cpu_plugin"), or the path in its load error
    when the plugin cannot load here (the GPU plugin needs libOpenCL)."""
    libs = Path(importlib.util.find_spec("openvino").origin).parent / "libs"  # type: ignore[union-attr, arg-type]
    try:
        description = core.get_versions(device)[device].description
    except Exception as exc:
        match = re.search(r"Cannot load library \"([^\"]+)\"", str(exc))
        if match is None:
            raise
        return Path(match.group(1)).resolve()
    candidates = sorted(libs.glob(f"*{description}.*"))
    assert candidates, f"no library for {device} ({description}) in {libs}"
    return candidates[0].resolve()


def ir_frontend_library() -> Path:
    """The frontend that reads OpenVINO IR (every model the app loads is IR)."""
    from openvino.frontend import FrontEndManager

    assert "ir" in FrontEndManager().get_available_front_ends()
    libs = Path(importlib.util.find_spec("openvino").origin).parent / "libs"  # type: ignore[union-attr, arg-type]
    candidates = sorted(libs.glob("*openvino_ir_frontend*"))
    assert candidates, f"no IR frontend in {libs}"
    return candidates[0].resolve()


def required_openvino_files() -> dict[str, Path]:
    """Bundle path -> source: the required devices' plugins and the IR frontend, at their
    path relative to site-packages (libopenvino loads them from its own folder)."""
    import openvino

    core = openvino.Core()
    site = _site_packages_of("openvino")
    libraries = [plugin_library(core, device) for device in REQUIRED_DEVICES]
    libraries.append(ir_frontend_library())
    return {path.relative_to(site).as_posix(): path for path in libraries}


def tokenizers_extension_path() -> Path:
    """Where openvino_tokenizers (and through it openvino_genai) loads its extension from."""
    import openvino_tokenizers

    return Path(openvino_tokenizers._ext_path).resolve()


def required_tokenizers_files() -> dict[str, Path]:
    path = tokenizers_extension_path()
    site = _site_packages_of("openvino_tokenizers")
    return {path.relative_to(site).as_posix(): path}


def required_metadata() -> set[str]:
    """Distributions whose versions the app reads with importlib.metadata."""
    from qwen_mtp_desktop.core.system.buildinfo import VERSION_PACKAGES
    from qwen_mtp_desktop.core.system.environment import RUNTIME_PACKAGES, UI_PACKAGES

    names: set[str] = set()
    for name in {*RUNTIME_PACKAGES, *UI_PACKAGES, *VERSION_PACKAGES}:
        for candidate in (name, f"{name}-Essentials"):
            try:
                names.add(importlib.metadata.distribution(candidate).metadata["Name"])
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return {normalize(name) for name in names}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def required_files() -> dict[str, Path]:
    """Every file the bundle must hold beyond Python modules: bundle path -> source."""
    return {
        **required_resource_files(),
        **required_openvino_files(),
        **required_tokenizers_files(),
    }
