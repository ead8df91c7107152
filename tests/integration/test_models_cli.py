"""`models inspect` / `models list` on real exports (optimum-intel output of the tiny Qwen3.5 and
Qwen3.5-MoE checkpoints) and on damaged copies of them.

The exports are built once (~35 s each) and cached under .cache/fixtures; `damaged_library`
is also used by the Models panel test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import qwen_mtp_desktop.cli as cli
from tests.models import cached_checkpoint, cached_export
from tests.unit.test_models_cli import CLI_BOOT

pytestmark = pytest.mark.export

CHAT_PARTS = ["language_model", "text_embeddings", "mtp", "tokenizer", "detokenizer"]
VISION_PARTS = ["vision_embeddings", "vision_embeddings_merger", "vision_embeddings_pos"]

#: Damaged copy -> (a diagnostic it must have, whether the model is still usable for chat).
DAMAGE: dict[str, tuple[str, bool]] = {
    "missing mtp": ("MTP_MISSING", True),
    "truncated bin": ("IR_CORRUPT", False),
    "garbage xml": ("IR_CORRUPT", False),
    "missing tokenizer": ("TOKENIZER_MISSING", False),
    "looping link": ("UNREADABLE", True),
    "Модель с пробелами 模型": ("", True),
}


def dense_int4() -> Path:
    return cached_export(cached_checkpoint(moe=False), "int4")


def damaged_library(root: Path, source: Path) -> dict[str, Path]:
    """Copies of `source` under `root`, each damaged one way, plus an empty folder, a folder of
    unrelated files and a symlink loop; keys are DAMAGE's plus "empty" and "unrelated"."""
    out: dict[str, Path] = {}
    for name in DAMAGE:
        out[name] = root / name
        shutil.copytree(source, out[name])
    for suffix in (".xml", ".bin"):
        (out["missing mtp"] / f"openvino_mtp_model{suffix}").unlink()
        (out["missing tokenizer"] / f"openvino_tokenizer{suffix}").unlink()
    lm_bin = out["truncated bin"] / "openvino_language_model.bin"
    with lm_bin.open("r+b") as handle:
        handle.truncate(lm_bin.stat().st_size // 2)
    (out["garbage xml"] / "openvino_language_model.xml").write_bytes(os.urandom(4096))
    # The MTP head's .xml is a link to itself, and a subfolder links back to the model.
    xml = out["looping link"] / "openvino_mtp_model.xml"
    xml.unlink()
    xml.symlink_to(xml.name)
    (out["looping link"] / "again").symlink_to(out["looping link"], target_is_directory=True)
    out["empty"] = root / "empty"
    out["empty"].mkdir()
    out["unrelated"] = root / "unrelated"
    out["unrelated"].mkdir()
    (out["unrelated"] / "notes.txt").write_text("shopping list")
    (out["unrelated"] / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    (root / "loop").symlink_to(root, target_is_directory=True)
    return out


@pytest.fixture(autouse=True)
def models_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QWEN_MTP_DESKTOP_RESOURCES", str(tmp_path / "resources"))


def inspect_json(capsys: pytest.CaptureFixture[str], folder: Path) -> tuple[int, dict[str, Any]]:
    code = cli.main(["models", "inspect", str(folder), "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, json.loads(out)


def components(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["key"]: c for c in report["components"]}


def test_dense_int4_export(capsys: pytest.CaptureFixture[str]) -> None:
    folder = dense_int4()
    code, report = inspect_json(capsys, folder)
    assert code == 0, report["diagnostics"]
    assert report["kind"] == "qwen3_5_dense" and report["layout"] == "vlm"
    parts = components(report)
    assert list(parts) == CHAT_PARTS + VISION_PARTS
    assert all(parts[key]["present"] for key in parts)
    # optimum-intel's INT4 asym, group 16 (the fixture's setting); the tied lm_head stays INT8.
    assert parts["language_model"]["precision_shares"][0]["label"] == "INT4 asym g16"
    assert parts["mtp"]["precision_shares"][0]["label"] == "INT4 asym g16"
    assert parts["text_embeddings"]["precision"] == "INT8 sym (100 %)"
    assert report["mtp"]["present"] and report["mtp"]["compressed_like_main"] is True
    assert report["mtp_usable"] is True

    assert cli.main(["models", "inspect", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Qwen3.5 dense" in out and "INT4 asym g16" in out
    assert "MTP head: present" in out and "Result: usable for chat, with MTP" in out


def test_moe_export(moe_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = inspect_json(capsys, moe_model)
    assert code == 0, report["diagnostics"]
    assert report["kind"] == "qwen3_5_moe"
    assert report["geometry"]["num_experts"] and report["geometry"]["mtp_layers"] == 1
    parts = components(report)
    assert list(parts) == CHAT_PARTS + VISION_PARTS
    assert parts["language_model"]["precision"] == "FP16 (100 %)"
    assert parts["mtp"]["precision"] == "FP16 (100 %)"
    assert report["mtp"]["present"] is True
    assert cli.main(["models", "inspect", str(moe_model)]) == 0
    assert "Qwen3.5 MoE, " in capsys.readouterr().out


def test_export_without_weight_compression(capsys: pytest.CaptureFixture[str]) -> None:
    """No --weight-format: optimum-intel decides (tiny models stay in floating point)."""
    folder = cached_export(cached_checkpoint(moe=False), None)
    code, report = inspect_json(capsys, folder)
    assert code == 0, report["diagnostics"]
    parts = components(report)
    assert list(parts) == CHAT_PARTS + VISION_PARTS
    for key in ("language_model", "mtp"):
        shares = parts[key]["precision_shares"]
        assert shares and not any(s["label"].startswith(("INT4", "INT8")) for s in shares), key
    assert report["mtp"]["present"] and report["mtp"]["compressed_like_main"] is True


@pytest.fixture
def damaged(tmp_path: Path) -> dict[str, Path]:
    return damaged_library(tmp_path / "library", dense_int4())


def test_damaged_copies(damaged: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    for name, (code_expected, usable) in DAMAGE.items():
        status, report = inspect_json(capsys, damaged[name])
        codes = [d["code"] for d in report["diagnostics"]]
        assert status == (0 if usable else 1), (name, codes)
        if code_expected:
            assert code_expected in codes, (name, codes)
        else:
            assert codes == [], (name, codes)
    _status, report = inspect_json(capsys, damaged["missing mtp"])
    assert report["mtp"]["present"] is False and report["mtp_usable"] is False
    _status, report = inspect_json(capsys, damaged["garbage xml"])
    assert "not well-formed XML" in components(report)["language_model"]["error"]
    _status, report = inspect_json(capsys, damaged["truncated bin"])
    assert components(report)["language_model"]["issues"][0]["code"] == "IR_CORRUPT"
    for name in ("empty", "unrelated"):
        status, report = inspect_json(capsys, damaged[name])
        assert status == 1 and [d["code"] for d in report["diagnostics"]] == ["NOT_A_MODEL"]


def test_damaged_copies_in_a_real_process(damaged: dict[str, Path]) -> None:
    """Human output for every damaged folder: status, a plain message, never a traceback."""
    expected = {name: 0 if usable else 1 for name, (_code, usable) in DAMAGE.items()}
    expected |= {"empty": 1, "unrelated": 1}
    for name, status in expected.items():
        result = subprocess.run(
            [sys.executable, "-c", CLI_BOOT, "models", "inspect", str(damaged[name])],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == status, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert "Result:" in result.stdout or "NOT_A_MODEL" in result.stdout
    loop = damaged["empty"].parent / "loop"
    result = subprocess.run(
        [sys.executable, "-c", CLI_BOOT, "models", "inspect", str(loop / "loop" / "loop")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1 and "NOT_A_MODEL" in result.stdout  # the library root itself


def test_list_finds_damaged_models_and_survives_loops(
    damaged: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore

    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.model_folders = [str(damaged["empty"].parent)]
    store.save()
    assert cli.main(["models", "list", "--json"]) == 0
    listed = {Path(m["path"]): m for m in json.loads(capsys.readouterr().out)["models"]}
    assert set(listed) == {damaged[name] for name in DAMAGE}
    for name, (code, usable) in DAMAGE.items():
        row = listed[damaged[name]]
        assert row["usable_for_chat"] is usable, name
        if code:
            assert code in row["diagnostic_codes"], name
    assert cli.main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "Модель с пробелами 模型" in out
