"""The PyInstaller spec ships every file the app loads at run time.

What is required is derived from the code (`resources_dir() / ...` references, the demo model and
prompt locators, the version read-outs) and from the installed packages (the library OpenVINO
names for each device, the IR frontend, the path openvino_tokenizers loads its extension from);
what is shipped comes from the lists the spec builds from (packaging/bundle_files.py). A file the
app needs but the spec leaves out fails here, not on a user's machine.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.bundle_requirements import (
    PACKAGING,
    REQUIRED_DEVICES,
    SPEC,
    bundle_files,
    normalize,
    referenced_resources,
    required_metadata,
    required_openvino_files,
    required_resource_files,
    required_tokenizers_files,
    tokenizers_extension_path,
)


def _shipped(entries: list[tuple[str, str]]) -> dict[str, Path]:
    """(source, bundle folder) pairs as PyInstaller takes them -> bundle path: source."""
    return {
        f"{folder.rstrip('/')}/{Path(source).name}".lstrip("./"): Path(source).resolve()
        for source, folder in entries
    }


@pytest.fixture(scope="module")
def shipped() -> dict[str, Path]:
    files = bundle_files()
    return {
        **_shipped(files.resource_datas()),
        **_shipped(files.openvino_datas()),
        **_shipped(files.openvino_binaries()),
        **_shipped(files.tokenizers_binaries()),
    }


def test_spec_builds_from_the_checked_lists() -> None:
    """The spec is valid Python and takes its data files, binaries and excludes from
    bundle_files (so the checks below are checks of the spec)."""
    text = SPEC.read_text(encoding="utf-8")
    ast.parse(text)
    for name in (
        "resource_datas()",
        "openvino_datas()",
        "openvino_binaries()",
        "tokenizers_binaries()",
        "METADATA_PACKAGES",
        "EXCLUDED_MODULES",
        "MODEL_SOURCE_MODULES",
        "dropped_binary(",
        "dropped_data(",
        "BUILD_INFO_FILE",
    ):
        assert f"bundle_files.{name}" in text, name


def test_code_refers_to_resources_that_exist() -> None:
    references = referenced_resources()
    assert "icons/app.svg" in references  # the window icon
    assert "demo-model/openvino" in references
    assert "prompts" in references


def test_every_resource_the_app_loads_is_shipped(shipped: dict[str, Path]) -> None:
    required = required_resource_files()
    assert any(path.endswith("openvino_mtp_model.xml") for path in required)
    missing = sorted(path for path in required if path not in shipped)
    assert not missing, f"the spec does not ship: {missing}"
    for path, source in required.items():
        assert shipped[path] == source.resolve()


@pytest.mark.parametrize("device", REQUIRED_DEVICES)
def test_openvino_device_plugins_are_shipped_next_to_libopenvino(
    device: str, shipped: dict[str, Path]
) -> None:
    import openvino

    from tests.bundle_requirements import plugin_library

    library = plugin_library(openvino.Core(), device)
    required = {p: s for p, s in required_openvino_files().items() if s == library}
    assert required, f"no library found for {device}"
    for path in required:
        assert path in shipped, f"{device} plugin {path} is not shipped"
        # libopenvino looks for plugins in its own folder.
        assert Path(path).parent.as_posix() == bundle_files().OPENVINO_LIBS
        assert not bundle_files().dropped_binary(path)


def test_ir_frontend_is_shipped(shipped: dict[str, Path]) -> None:
    frontends = [p for p in required_openvino_files() if "ir_frontend" in p]
    assert frontends and all(p in shipped for p in frontends)


def test_unused_plugins_and_frontends_are_left_out(shipped: dict[str, Path]) -> None:
    files = bundle_files()
    dropped = files.openvino_library_files()["drop"]
    assert any("auto_batch" in p.name for p in dropped)
    assert any("onnx_frontend" in p.name for p in dropped)
    shipped_names = {Path(p).name for p in shipped}
    assert not shipped_names & {p.name for p in dropped}
    for path in dropped:
        assert files.dropped_binary(f"{files.OPENVINO_LIBS}/{path.name}")


def test_tokenizers_extension_is_shipped_where_the_package_looks(
    shipped: dict[str, Path],
) -> None:
    required = required_tokenizers_files()
    assert len(required) == 1
    for path, source in required.items():
        assert shipped.get(path) == source
    # In a bundle openvino_tokenizers/__init__.py sits at <root>/openvino_tokenizers/, and it
    # looks for <its folder's parent>/openvino_tokenizers/lib/<library>.
    assert tokenizers_extension_path().parent.name == "lib"


def test_runtime_metadata_is_shipped() -> None:
    shipped = {normalize(name) for name in bundle_files().METADATA_PACKAGES}
    missing = required_metadata() - shipped
    assert not missing, f"the bundle lacks the metadata of {sorted(missing)}"


#: Python code that makes every module the spec excludes unimportable (argv[1]: their names as
#: JSON), as they are in the bundle.
BLOCK_EXCLUDED = textwrap.dedent(
    """
    import importlib, importlib.abc, json, pkgutil, sys
    excluded = json.loads(sys.argv[1])

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == ex or name.startswith(ex + ".") for ex in excluded):
                raise ModuleNotFoundError(f"excluded from the bundle: {name}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    """
)


def _excluded() -> list[str]:
    return list(bundle_files().EXCLUDED_MODULES) + list(bundle_files().QT_EXCLUDES)


@pytest.mark.subprocess
def test_app_imports_without_the_excluded_modules() -> None:
    """With every module the spec excludes made unimportable, the app's modules and the runtime
    still import (a module the app needs but the spec excludes would only fail in the bundle;
    optional imports such as openvino's model converter may fail quietly)."""
    code = BLOCK_EXCLUDED + textwrap.dedent(
        """
        from qwen_mtp_desktop.core.system.privacy import block_telemetry
        block_telemetry()
        import openvino, openvino_genai, openvino_tokenizers
        import qwen_mtp_desktop.app, qwen_mtp_desktop.cli
        for pkg in ("qwen_mtp_desktop.ui", "qwen_mtp_desktop.workers", "qwen_mtp_desktop.core",
                    "qwen_mtp_desktop.commands", "qwen_mtp_desktop.server"):
            module = importlib.import_module(pkg)
            for info in pkgutil.walk_packages(module.__path__, pkg + "."):
                importlib.import_module(info.name)
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(_excluded())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


def _imports_of(module: str) -> set[str]:
    """Every absolute import in a module's source, inside functions too (where the app imports
    what only one command needs, so importing the module alone does not run them)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    names: set[str] = set()
    for node in ast.walk(ast.parse(Path(spec.origin).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names - {"__future__"}


@pytest.mark.subprocess
def test_model_source_commands_import_without_the_excluded_modules() -> None:
    """`models download` and `models add-mtp` in the installed app: the modules the spec lists
    for them, and everything those modules import (at any depth inside their functions, read
    from their source), import with the excluded modules blocked, so neither command reaches for
    the export toolkit or huggingface_hub in the bundle."""
    listed = bundle_files().MODEL_SOURCE_MODULES
    needed = set(listed)
    for module in listed:
        if module.startswith("qwen_mtp_desktop."):
            needed |= _imports_of(module)
    assert {"httpx", "openvino.opset13", "openvino.op.util", "numpy", "psutil"} <= needed
    code = BLOCK_EXCLUDED + textwrap.dedent(
        """
        from qwen_mtp_desktop.core.system.privacy import block_telemetry
        block_telemetry()
        for name in json.loads(sys.argv[2]):
            importlib.import_module(name)
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(_excluded()), json.dumps(sorted(needed))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


def test_import_probe_flag_is_the_entry_points() -> None:
    """build.py and the bundle test call the frozen entry point's probe by the flag that
    bundle_files names; entry.py cannot import bundle_files (it is not in the bundle)."""
    spec = importlib.util.spec_from_file_location("qwen_mtp_entry", PACKAGING / "entry.py")
    assert spec is not None and spec.loader is not None
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    assert entry.PROBE_IMPORTS == bundle_files().PROBE_IMPORTS


def test_dropped_binary_rules() -> None:
    files = bundle_files()
    assert files.dropped_binary("openvino/libs/libopenvino_auto_batch_plugin.so")
    assert files.dropped_binary("openvino/libs/libopenvino_onnx_frontend.so.2641")
    assert files.dropped_binary("openvino/libs/openvino_pytorch_frontend.dll")
    assert not files.dropped_binary("openvino/libs/libopenvino_intel_cpu_plugin.so")
    assert not files.dropped_binary("openvino/libs/openvino_intel_gpu_plugin.dll")
    assert not files.dropped_binary("openvino/libs/libopenvino_ir_frontend.so.2641")
    assert files.dropped_binary("PySide6/Qt/plugins/platformthemes/libqgtk3.so")
    assert files.dropped_binary("PySide6/Qt/plugins/sqldrivers/libqsqlite.so")
    assert not files.dropped_binary("PySide6/Qt/plugins/platforms/libqxcb.so")
    assert not files.dropped_binary("PySide6/Qt/plugins/platforms/libqoffscreen.so")
    assert not files.dropped_binary("PySide6/Qt/plugins/iconengines/libqsvgicon.so")
    assert files.dropped_data("PySide6/Qt/translations/qtwebengine_de.qm")
    assert not files.dropped_data("PySide6/Qt/translations/qtbase_de.qm")
    assert not files.dropped_data("resources/prompts/demo.json")


def test_unreachable_libraries_follows_links_from_kept_binaries() -> None:
    links = {
        "/s/QtGui.so": ["libQt6Gui.so.6"],
        "/s/libQt6Gui.so.6": ["libfreetype.so.6"],
        "/s/libqgtk3.so": ["libcairo.so.2"],  # dropped already: not in the entries
        "/s/libcairo.so.2": ["libpixman-1.so.0"],
    }
    entries = [
        ("PySide6/QtGui.abi3.so", "/s/QtGui.so"),
        ("PySide6/Qt/lib/libQt6Gui.so.6", "/s/libQt6Gui.so.6"),
        ("PySide6/Qt/lib/libQt6Network.so.6", "/s/libQt6Network.so.6"),
        ("libfreetype.so.6", "/s/libfreetype.so.6"),
        ("libcairo.so.2", "/s/libcairo.so.2"),
        ("libpixman-1.so.0", "/s/libpixman-1.so.0"),
        ("libpython3.11.so.1.0", "/s/libpython3.11.so.1.0"),
        # Python imports extension modules by name; nothing links against them.
        ("_cffi_backend.cpython-311-x86_64-linux-gnu.so", "/s/_cffi_backend.so"),
        ("libffi.so.8", "/s/libffi.so.8"),
    ]
    links["/s/_cffi_backend.so"] = ["libffi.so.8"]
    unreachable = bundle_files().unreachable_libraries(entries, lambda s: links.get(s, []))
    assert unreachable == {"libcairo.so.2", "libpixman-1.so.0", "PySide6/Qt/lib/libQt6Network.so.6"}


def test_extension_modules_are_told_from_libraries() -> None:
    files = bundle_files()
    assert files.is_extension_module("_cffi_backend.cpython-311-x86_64-linux-gnu.so")
    assert files.is_extension_module("PySide6/QtGui.abi3.so")
    assert not files.is_extension_module("libffi.so.8")
    assert not files.is_extension_module("libpython3.11.so.1.0")


def test_build_outputs_are_ignored_by_git() -> None:
    ignored = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().split()
    assert "build/" in ignored and "dist/" in ignored
