from __future__ import annotations

from pathlib import Path

from qwen_mtp_desktop.core.export import ExportOptions, export_command, missing_components


def test_default_command_exports_the_vlm_task() -> None:
    command = export_command("Qwen/Qwen3.5-0.8B", Path("/out"), ExportOptions(), python="py")
    assert command == [
        "py",
        "-m",
        "qwen_mtp_desktop.core.optimum_cli",
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
