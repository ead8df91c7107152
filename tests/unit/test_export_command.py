from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from qwen_mtp_desktop import cli
from qwen_mtp_desktop.commands import export as export_command_module
from qwen_mtp_desktop.core.models.export.command import export_command
from qwen_mtp_desktop.core.models.export.options import ExportOptions, missing_components
from tests.unit.test_export_preflight import make_checkpoint


def test_default_command_exports_the_vlm_task() -> None:
    command = export_command("Qwen/Qwen3.5-0.8B", Path("/out"), ExportOptions(), python="py")
    assert command == [
        "py",
        "-m",
        "qwen_mtp_desktop.core.models.export.optimum_cli",
        "export",
        "openvino",
        "--model",
        "Qwen/Qwen3.5-0.8B",
        "--task",
        "image-text-to-text",
        "/out",
    ]


def test_compression_options() -> None:
    options = ExportOptions(
        weight_format="int4", group_size=64, sym=True, ratio=0.8, group_size_fallback="ignore"
    )
    command = export_command("/src", Path("/out"), options, python="py")
    tail = command[command.index("image-text-to-text") + 1 :]
    assert tail == [
        "--weight-format",
        "int4",
        "--group-size",
        "64",
        "--sym",
        "--ratio",
        "0.8",
        "--group-size-fallback",
        "ignore",
        "/out",
    ]
    assert "--trust-remote-code" not in command


def test_missing_components(tmp_path: Path) -> None:
    assert "openvino_mtp_model.xml" in missing_components(tmp_path)
    for name in (
        "openvino_language_model",
        "openvino_text_embeddings_model",
        "openvino_mtp_model",
        "openvino_tokenizer",
        "openvino_detokenizer",
    ):
        (tmp_path / f"{name}.xml").write_text("<net/>")
        (tmp_path / f"{name}.bin").write_bytes(b"")
    assert missing_components(tmp_path) == []
    (tmp_path / "openvino_mtp_model.bin").unlink()
    assert missing_components(tmp_path) == ["openvino_mtp_model.bin"]


# --- the `export` CLI command (no export runs here: every case stops at preflight) -----------


def _run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_bad_source_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _out, err = _run_cli(
        monkeypatch, capsys, "export", str(tmp_path / "missing"), str(tmp_path / "out")
    )
    assert status == 1
    assert "does not exist" in _error_line(err)


def test_cli_refuses_a_non_empty_destination_without_force(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = make_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    status, _out, err = _run_cli(monkeypatch, capsys, "export", str(source), str(out))
    assert status == 1
    assert "--force" in _error_line(err)
    assert (out / "keep").exists()


def test_cli_json_reports_the_failed_preflight(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = make_checkpoint(tmp_path / "ckpt", {"model_type": "llama"})
    status, out, err = _run_cli(
        monkeypatch, capsys, "export", str(source), str(tmp_path / "o"), "--json"
    )
    assert status == 1
    payload = json.loads(out)
    assert payload["status"] == "preflight_failed"
    failed = [i["key"] for i in payload["preflight"]["items"] if i["status"] == "fail"]
    assert "model_type" in failed
    assert "not Qwen3.5" in _error_line(err)


def test_cli_options_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    export_command_module.register(commands)
    paths = ["export", "Qwen/Qwen3.5-0.8B", "/tmp/o"]
    flags = ["--weight-format", "int8", "--ratio", "0.8", "--mtp-weight-format", "none"]
    more = ["--group-size", "64", "--sym", "--force", "--json"]
    args = parser.parse_args([*paths, *flags, *more])
    assert (args.weight_format, args.ratio, args.mtp_weight_format) == ("int8", 0.8, "none")
    assert (args.group_size, args.sym, args.force, args.json) == (64, True, True, True)
    assert parser.parse_args(["export", "x"]).weight_format == "int4"
    with pytest.raises(SystemExit):
        parser.parse_args(["export", "x", "--ratio", "1.5"])
    with pytest.raises(SystemExit):
        parser.parse_args(["export", "x", "--mtp-weight-format", "int2"])
