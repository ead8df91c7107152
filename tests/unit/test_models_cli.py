"""`models list` / `models inspect` and the library glue under them (core.models.library).

Models here are the tiny IR folders of tests.unit.test_model_folders (real IRs, built in a second);
the real exported fixtures are in tests/integration/test_models_cli.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import qwen_mtp_desktop.cli as cli
from qwen_mtp_desktop.commands import models as models_command
from qwen_mtp_desktop.core.files.fileio import folder_bytes
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.models import library as ml
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, ExportManifest
from qwen_mtp_desktop.core.models.folders.report import KvPrecision
from qwen_mtp_desktop.core.settings.store import Settings, SettingsStore
from qwen_mtp_desktop.core.units import format_bytes
from tests.unit.test_model_folders import make_export

#: The CLI with the `models` command, whether or not cli.py lists it yet.
CLI_BOOT = textwrap.dedent(
    """
    import sys
    import qwen_mtp_desktop.cli as cli
    from qwen_mtp_desktop.commands import models
    if models not in cli.COMMAND_MODULES:
        cli.COMMAND_MODULES = (*cli.COMMAND_MODULES, models)
    raise SystemExit(cli.main(sys.argv[1:]))
    """
)


@pytest.fixture(autouse=True)
def models_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if models_command not in cli.COMMAND_MODULES:
        monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, models_command))
    # No bundled demo model unless a test puts one there.
    monkeypatch.setenv("QWEN_MTP_DESKTOP_RESOURCES", str(tmp_path / "resources"))


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def run_subprocess(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI_BOOT, *argv], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return make_export(tmp_path / "models" / "Qwen int4")


def store() -> SettingsStore:
    paths = app_paths().ensure()
    return SettingsStore(paths.settings_file)


# --- models inspect ------------------------------------------------------------------------


def test_inspect_healthy_human(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "models", "inspect", str(model))
    assert code == 0, err
    assert out.startswith("Qwen int4\n")
    assert "Kind           Qwen3.5 dense" in out
    # Components in aligned columns, sizes in KB, precisions.
    lines = out.splitlines()
    header = next(line for line in lines if line.strip().startswith("COMPONENT"))
    lm = next(line for line in lines if line.strip().startswith("Language model"))
    assert header.index("PRECISION") == lm.index("INT4 asym g16")
    assert header.index("BIN") <= lm.index(" KB", header.index("BIN")) + 3
    assert "MTP head: present" in out and "compressed like the language model (INT4)" in out
    assert "Memory at 4,096 tokens of context (KV cache u8)" in out
    assert "No problems found." in out
    assert out.rstrip().endswith("Result: usable for chat, with MTP")


def test_inspect_json_is_the_report(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(
        capsys, "models", "inspect", str(model), "--json", "--context-length", "32768"
    )
    assert code == 0
    data = json.loads(out)
    expected = inspect_model(model, context_length=32768).to_json_dict()
    # Free RAM moves between two measurements; everything else is identical.
    for report in (data, expected):
        for key in ("available_bytes", "fraction", "verdict"):
            report["memory"].pop(key)
    assert data == expected
    assert data["schema_version"] == 1
    assert data["memory"]["context_length"] == 32768


def test_inspect_kv_precision_option(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _code, out, _err = run(capsys, "models", "inspect", str(model), "--json")
    _code, out16, _err = run(
        capsys, "models", "inspect", str(model), "--json", "--kv-precision", "f16"
    )
    u8, f16 = json.loads(out)["memory"], json.loads(out16)["memory"]
    assert u8["kv_precision"] == "u8" and f16["kv_precision"] == "f16"
    assert f16["total_bytes"] > u8["total_bytes"]


def test_inspect_errors_exit_1_with_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_export(tmp_path / "no tokenizer", tokenizer=False)
    code, out, err = run(capsys, "models", "inspect", str(folder))
    assert code == 1
    assert err == ""
    assert "ERROR     TOKENIZER_MISSING" in out
    assert "fix: Re-export the model with openvino-tokenizers" in out
    assert "Result: NOT usable for chat" in out
    code, out, _err = run(capsys, "models", "inspect", str(folder), "--json")
    assert code == 1 and "TOKENIZER_MISSING" in [d["code"] for d in json.loads(out)["diagnostics"]]


@pytest.mark.parametrize(
    "argv",
    [
        ["models", "inspect", "{missing}"],
        ["models", "inspect", "{file}"],
        ["models", "inspect", "{model}", "--context-length", "0"],
        ["models", "inspect", "{model}", "--context-length", "many"],
        ["models", "inspect", "{model}", "--kv-precision", "q3"],
        ["models", "inspect"],
        ["models"],
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file.txt").write_text("x")
    names = {"missing": tmp_path / "nowhere", "file": tmp_path / "file.txt", "model": model}
    code, out, err = run(capsys, *(a.format(**names) for a in argv))
    assert code == 2
    assert out == ""
    assert "Traceback" not in err and err.strip()


def test_verify_appends_checksum_findings(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import hashlib

    name = "openvino_language_model.bin"
    good = hashlib.sha256((model / name).read_bytes()).hexdigest()
    manifest = ExportManifest(source="Qwen/Qwen3.5-0.8B", revision="abc123", files={name: good})
    (model / MANIFEST_NAME).write_text(json.dumps(manifest.to_json_dict()))
    code, out, _err = run(capsys, "models", "inspect", str(model), "--verify")
    assert code == 0
    assert "INFO      CHECKSUMS_OK" in out
    assert "Qwen/Qwen3.5-0.8B (revision abc123, from the export record)" in out

    manifest = ExportManifest(source="Qwen/Qwen3.5-0.8B", files={name: "0" * 64})
    (model / MANIFEST_NAME).write_text(json.dumps(manifest.to_json_dict()))
    code, out, _err = run(capsys, "models", "inspect", str(model), "--verify", "--json")
    assert code == 1
    assert [d["code"] for d in json.loads(out)["diagnostics"]][-1] == "CHECKSUM_MISMATCH"
    code, _out, _err = run(capsys, "models", "inspect", str(model))
    assert code == 0, "without --verify the checksums are not read"


@pytest.mark.subprocess
def test_inspect_odd_folders_never_trace(tmp_path: Path) -> None:
    """In a real process: bad folders give a message and a status, never a traceback."""
    empty = tmp_path / "empty folder"
    empty.mkdir()
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for folder, status in ((empty, 1), (loop, 2), (tmp_path / "missing", 2)):
        result = run_subprocess("models", "inspect", str(folder))
        assert result.returncode == status, result.stderr
        assert "Traceback" not in result.stderr + result.stdout
    result = run_subprocess("models", "inspect", str(empty))
    assert "NOT_A_MODEL" in result.stdout and "is empty" in result.stdout


# --- models list ---------------------------------------------------------------------------


def test_list_json_and_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = app_paths().ensure()
    managed = make_export(paths.models_dir / "managed int4")
    group = tmp_path / "my models"
    a = make_export(group / "a", tokenizer=False)
    b = make_export(group / "nested" / "b", with_mtp=False)
    demo = make_export(tmp_path / "resources" / "demo-model" / "openvino")
    settings = store()
    settings.settings.model_folders = [str(group), str(tmp_path / "gone")]
    settings.settings.default_model = str(b)
    settings.save()

    code, out, _err = run(capsys, "models", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] == 1
    assert [(f["origin"], f["exists"]) for f in data["folders"]] == [
        ("managed", True),
        ("folder", True),
        ("folder", False),
    ]
    rows = {Path(m["path"]): m for m in data["models"]}
    assert list(rows) == [demo, managed, a, b]
    assert rows[demo]["name"] == "Demo model" and rows[demo]["origin"] == "demo"
    assert rows[managed]["origin"] == "managed" and rows[managed]["mtp"] is True
    assert rows[a]["usable_for_chat"] is False and rows[a]["worst_severity"] == "error"
    assert "TOKENIZER_MISSING" in rows[a]["diagnostic_codes"]
    assert rows[b]["default"] is True and rows[b]["mtp"] is False
    assert rows[b]["root"] == str(group)

    code, out, _err = run(capsys, "models", "list")
    assert code == 0
    assert "(missing)" in out
    header = next(line for line in out.splitlines() if "NAME" in line)
    line_b = next(line for line in out.splitlines() if line.startswith("*"))
    assert line_b[header.index("NAME") :].startswith("b ")
    assert line_b[header.index("MTP") :].startswith("no")
    assert "1 error" in out and "4 models" in out


def test_list_empty_library(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run(capsys, "models", "list")
    assert code == 0
    assert "No models yet" in out


# --- core.models.library --------------------------------------------------------------------


def test_add_remove_hide_and_default(tmp_path: Path) -> None:
    group = tmp_path / "group"
    a, b = make_export(group / "a"), make_export(group / "b")
    settings = Settings()
    assert ml.add_folder(settings, group) is True
    assert ml.add_folder(settings, group) is False
    with pytest.raises(ml.LibraryError):
        ml.add_folder(settings, tmp_path / "missing")
    assert [e.path for e in ml.scan_library(settings)] == [a, b]

    ml.set_default_model(settings, a)
    assert ml.is_default(settings, a) and not ml.is_default(settings, b)
    assert ml.remove_from_library(settings, a) == "hidden"
    assert settings.default_model is None, "a removed model is no longer the default"
    assert [e.path for e in ml.scan_library(settings)] == [b]
    assert a.is_dir(), "removing never touches files"
    assert ml.add_folder(settings, group) is True, "adding the folder again shows it again"
    assert [e.path for e in ml.scan_library(settings)] == [a, b]

    single = make_export(tmp_path / "single")
    ml.add_folder(settings, single)
    assert ml.remove_from_library(settings, single) == "folder"
    assert str(single) not in settings.model_folders


def test_demo_is_listed_first_and_protected(tmp_path: Path) -> None:
    demo = make_export(tmp_path / "resources" / "demo-model" / "openvino")
    settings = Settings()
    entries = ml.scan_library(settings)
    assert [(e.name, e.origin) for e in entries] == [("Demo model", "demo")]
    assert ml.is_default(settings, demo)
    with pytest.raises(ml.LibraryError, match="demo"):
        ml.remove_from_library(settings, demo)
    assert ml.deletion_problem(demo) is not None
    with pytest.raises(ml.LibraryError):
        ml.delete_model_dir(demo)
    assert demo.is_dir()


def test_duplicate_names_get_their_parent(tmp_path: Path) -> None:
    settings = Settings(model_folders=[str(tmp_path / "lib")])
    one = make_export(tmp_path / "lib" / "Qwen3.5-0.8B" / "openvino")
    two = make_export(tmp_path / "lib" / "Qwen3.5-2B" / "openvino")
    names = {e.path: e.name for e in ml.scan_library(settings)}
    assert names == {one: "openvino (Qwen3.5-0.8B)", two: "openvino (Qwen3.5-2B)"}


def test_deletion_refuses_what_is_not_a_model_folder(tmp_path: Path) -> None:
    paths = app_paths().ensure()
    model = make_export(tmp_path / "lib" / "m")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("keep me")
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "link").symlink_to(model, target_is_directory=True)
    outer = make_export(tmp_path / "outer")
    make_export(outer / "inner")
    refusals = {
        "plain": tmp_path / "plain",
        "file": tmp_path / "file.txt",
        "missing": tmp_path / "missing",
        "link": tmp_path / "link",
        "nested models": outer,
        "home": Path.home(),
        "root": Path("/"),
        "managed folder": paths.models_dir,
        "data dir": paths.data_dir,
        "ancestor of the data dir": paths.data_dir.parent,
    }
    paths.models_dir.mkdir(parents=True, exist_ok=True)
    for label, folder in refusals.items():
        assert ml.deletion_problem(folder, paths) is not None, label
        with pytest.raises(ml.LibraryError):
            ml.delete_model_dir(folder, paths)
    assert (tmp_path / "plain" / "notes.txt").read_text() == "keep me"
    assert model.is_dir() and (tmp_path / "link").is_symlink()

    assert ml.deletion_problem(model, paths) is None
    size = folder_bytes(model)
    assert ml.delete_model_dir(model, paths) == size > 0
    assert not model.exists()
    assert list((tmp_path / "lib").iterdir()) == [], "no hidden leftovers"


def test_forget_model_drops_every_reference(tmp_path: Path) -> None:
    model = make_export(tmp_path / "m")
    settings = Settings(model_folders=[str(model)], default_model=str(model))
    ml.forget_model(settings, model)
    assert settings.model_folders == [] and settings.default_model is None


def test_reestimate_matches_a_fresh_inspection(model: Path) -> None:
    gib = 1024**3
    base = inspect_model(model, available_bytes=8 * gib, total_ram_bytes=16 * gib)
    cases: list[tuple[int, KvPrecision]] = [(2048, "u8"), (262144, "f16")]
    for context, kv in cases:
        again = ml.reestimate(base, context, kv, available_bytes=8 * gib, total_ram_bytes=16 * gib)
        fresh = inspect_model(
            model,
            context_length=context,
            kv_precision=kv,
            available_bytes=8 * gib,
            total_ram_bytes=16 * gib,
        )
        assert again.to_json_dict() == fresh.to_json_dict()
    tight = ml.reestimate(base, 4096, "u8", available_bytes=1, total_ram_bytes=None)
    assert tight.memory is not None and tight.memory.verdict == "does_not_fit"
    assert tight.codes()[-1] == "TOO_LARGE_FOR_MEMORY"


def test_watch_targets_cover_subfolders_and_models(tmp_path: Path) -> None:
    settings = Settings(model_folders=[str(tmp_path / "lib")])
    model = make_export(tmp_path / "lib" / "group" / "m")
    (tmp_path / "lib" / ".staging").mkdir()
    folders = ml.library_folders(settings)
    targets = ml.watch_targets(folders, ml.scan_library(settings))
    assert model in targets
    assert tmp_path / "lib" in targets and tmp_path / "lib" / "group" in targets
    assert tmp_path / "lib" / ".staging" not in targets
    assert len(ml.watch_targets(folders, [], limit=1)) == 1


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (12_345, "12.3 KB"),
        (1_400_000, "1.4 MB"),
        (2_050_000_000, "2.05 GB"),
        (123 * 10**9, "123.0 GB"),
    ],
)
def test_format_bytes(size: int, text: str) -> None:
    assert format_bytes(size) == text
