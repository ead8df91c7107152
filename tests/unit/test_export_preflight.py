"""Preflight: the checklist for every way a source, the toolkit or the machine can be wrong."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.models.export.options import ExportOptions
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import (
    CheckpointError,
    checkpoint_tensors,
    inspect_checkpoint_folder,
    read_safetensors_header,
)
from qwen_mtp_desktop.core.models.export.preflight.checks import (
    PreflightReport,
    fitting_group_size,
    run_preflight,
)
from qwen_mtp_desktop.core.models.export.preflight.estimate import estimate_export
from qwen_mtp_desktop.core.models.export.preflight.toolkit import (
    check_toolkit,
    install_command,
    toolkit_missing,
)

GOOD_VERSIONS: dict[str, str | None] = {
    "openvino": "2026.4.1",
    "openvino-genai": "2026.4.1.0",
    "openvino-tokenizers": "2026.4.1.0",
    "optimum-intel": "2.2.0",
    "optimum": "2.3.0",
    "transformers": "5.2.0",
    "nncf": "3.4.0",
    "torch": "2.14.1",
    "huggingface_hub": "1.21.0",
}
PLENTY = 10**12
MEMORY = (32 * 1024**3, 64 * 1024**3)
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A valid safetensors file of zeros, written with the standard library only."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def qwen_config(**text: Any) -> dict[str, Any]:
    text_config = {
        "hidden_size": 64,
        "vocab_size": 768,
        "tie_word_embeddings": True,
        "mtp_num_hidden_layers": 1,
        "model_type": "qwen3_5_text",
    }
    text_config.update(text)
    return {"model_type": "qwen3_5", "text_config": text_config, "tie_word_embeddings": True}


TENSORS: dict[str, tuple[str, list[int]]] = {
    "model.language_model.embed_tokens.weight": ("F32", [768, 64]),
    "model.language_model.layers.0.mlp.up_proj.weight": ("F32", [128, 64]),
    "model.visual.patch_embed.proj.weight": ("F32", [32, 3, 2, 16, 16]),
    "mtp.fc.weight": ("F32", [64, 128]),
    "mtp.layers.0.self_attn.q_proj.weight": ("F32", [256, 64]),
}


def make_checkpoint(
    folder: Path,
    config: dict[str, Any] | None = None,
    tensors: dict[str, tuple[str, list[int]]] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or qwen_config()))
    write_safetensors(folder / "model.safetensors", TENSORS if tensors is None else tensors)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def preflight(
    folder: Path,
    tmp_path: Path,
    options: ExportOptions | None = None,
    *,
    versions: dict[str, str | None] | None = None,
    free: int = PLENTY,
    destination: Path | None = None,
    overwrite: bool = False,
    memory: tuple[int | None, int | None] = MEMORY,
) -> PreflightReport:
    return run_preflight(
        inspect_checkpoint_folder(folder),
        options or ExportOptions.recommended("int4", group_size=16),
        destination or tmp_path / "models" / "out",
        overwrite=overwrite,
        versions=versions or GOOD_VERSIONS,
        free_bytes=lambda _path: free,
        memory=memory,
    )


def status(report: PreflightReport, key: str) -> str:
    item = report.item(key)
    assert item is not None, [i.key for i in report.items]
    return item.status


def failure(report: PreflightReport) -> str:
    assert not report.ok
    item = report.failures[0]
    return f"{item.key}: {item.message} {item.fix}"


# --- good checkpoints ------------------------------------------------------------------------


def test_good_checkpoint_passes_everything(tmp_path: Path) -> None:
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path)
    assert report.ok, [i for i in report.items if i.status != "pass"]
    for key in ("model_type", "mtp_layers", "mtp_tensors", "toolkit", "openvino_family"):
        assert status(report, key) == "pass"
    for key in ("destination", "disk", "ram"):
        assert status(report, key) == "pass"
    tensors = report.checkpoint.tensors
    assert tensors is not None
    assert tensors.mtp_tensors == 2
    assert tensors.mtp_parameters == 64 * 128 + 256 * 64
    assert tensors.vision_parameters == 32 * 3 * 2 * 16 * 16
    assert report.to_json_dict()["ok"] is True


@pytest.mark.export
def test_real_fixture_checkpoint_headers() -> None:
    from tests.models import cached_checkpoint

    summary = checkpoint_tensors(cached_checkpoint(moe=False))
    assert summary.mtp_tensors > 0
    assert summary.dtypes == {"F32": summary.parameters}
    assert summary.data_bytes == 4 * summary.parameters


def test_sharded_checkpoint_reads_every_shard(tmp_path: Path) -> None:
    folder = tmp_path / "sharded"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(qwen_config()))
    names = list(TENSORS)
    write_safetensors(folder / "model-1.safetensors", {n: TENSORS[n] for n in names[:3]})
    write_safetensors(folder / "model-2.safetensors", {n: TENSORS[n] for n in names[3:]})
    index = {"weight_map": {n: "model-1.safetensors" for n in names[:3]}}
    index["weight_map"].update({n: "model-2.safetensors" for n in names[3:]})
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    summary = checkpoint_tensors(folder)
    assert summary.files == ("model-1.safetensors", "model-2.safetensors")
    assert summary.mtp_tensors == 2
    (folder / "model-2.safetensors").unlink()
    with pytest.raises(CheckpointError, match="missing"):
        checkpoint_tensors(folder)


# --- bad sources, each with its own message ---------------------------------------------------


def test_source_does_not_exist(tmp_path: Path) -> None:
    report = preflight(tmp_path / "nope", tmp_path)
    assert "does not exist" in failure(report)


def test_source_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"x")
    assert "is a file, not a checkpoint folder" in failure(preflight(file, tmp_path))


def test_no_config_json(tmp_path: Path) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    message = failure(preflight(folder, tmp_path))
    assert message.startswith("config:") and "no config.json" in message


def test_an_openvino_export_is_not_a_checkpoint(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ov")
    (folder / "openvino_language_model.xml").write_text("<net/>")
    assert "already an exported OpenVINO model" in failure(preflight(folder, tmp_path))


def test_not_a_qwen35_model(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "llama", {"model_type": "llama", "hidden_size": 64})
    report = preflight(folder, tmp_path)
    assert status(report, "model_type") == "fail"
    assert "'llama', not Qwen3.5: no MTP head will be exported" in failure(report)


def test_text_only_qwen35_config(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "text", {"model_type": "qwen3_5_text"})
    assert "text-only" in failure(preflight(folder, tmp_path))


def test_qwen35_without_mtp_tensors(tmp_path: Path) -> None:
    tensors = {k: v for k, v in TENSORS.items() if not k.startswith("mtp.")}
    folder = make_checkpoint(tmp_path / "stripped", tensors=tensors)
    report = preflight(folder, tmp_path)
    assert status(report, "mtp_tensors") == "fail"
    assert "no mtp.* tensors" in failure(report)


@pytest.mark.parametrize(
    ("layers", "expected"), [(2, "declares 2 MTP layers"), (0, "no MTP layer")]
)
def test_mtp_layer_count(tmp_path: Path, layers: int, expected: str) -> None:
    folder = make_checkpoint(tmp_path / "ckpt", qwen_config(mtp_num_hidden_layers=layers))
    report = preflight(folder, tmp_path)
    assert status(report, "mtp_layers") == "fail"
    assert expected in failure(report)


def test_mtp_layers_at_top_level_of_an_older_config(tmp_path: Path) -> None:
    config = {"model_type": "qwen3_5_moe", "mtp_num_hidden_layers": 1, "hidden_size": 64}
    report = preflight(make_checkpoint(tmp_path / "moe", config), tmp_path)
    assert status(report, "mtp_layers") == "pass"
    assert "Qwen3.5-MoE" in (report.item("model_type") or report.items[0]).message


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda b: b[:5], "too short"),
        (lambda b: struct.pack("<Q", 10**9) + b[8:], "corrupted safetensors header"),
        (lambda b: b[:8] + b"{not json" + b[17:], "not valid JSON"),
        (lambda b: b[: len(b) - 4096], "truncated"),
    ],
    ids=["too-short", "huge-length", "bad-json", "truncated"],
)
def test_corrupted_safetensors(tmp_path: Path, damage: Any, expected: str) -> None:
    folder = make_checkpoint(tmp_path / "ckpt")
    weights = folder / "model.safetensors"
    weights.write_bytes(damage(weights.read_bytes()))
    report = preflight(folder, tmp_path)
    assert status(report, "weights") == "fail"
    assert expected in failure(report)
    assert "download or copy the checkpoint again" in failure(report)


def test_pytorch_bin_only(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "bin")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"x")
    assert "only pytorch_model.bin" in failure(preflight(folder, tmp_path))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_header_reader_only_raises_checkpoint_errors(tmp_path_factory: Any, data: bytes) -> None:
    path = tmp_path_factory.mktemp("st") / "x.safetensors"
    path.write_bytes(data)
    try:
        header = read_safetensors_header(path)
    except CheckpointError as exc:
        assert exc.fix
    else:
        assert isinstance(header, dict)


# --- destination, disk, memory ---------------------------------------------------------------


def test_destination_exists_and_is_not_empty(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt")
    taken = tmp_path / "models" / "taken"
    taken.mkdir(parents=True)
    (taken / "old.txt").write_text("old")
    report = preflight(folder, tmp_path, destination=taken)
    assert "already exists and is not empty" in failure(report)
    assert "--force" in failure(report)
    # Issue 19: a folder that is not a previous export is never replaced, even with --force...
    refused = preflight(folder, tmp_path, destination=taken, overwrite=True)
    assert status(refused, "destination") == "fail"
    assert "not a model exported by this app" in failure(refused)
    # ...while a previous export (its manifest lists every file) is.
    (taken / "qwen_mtp_export.json").write_text(
        json.dumps({"source": "x", "files": {"old.txt": "0" * 64}})
    )
    replaced = preflight(folder, tmp_path, destination=taken, overwrite=True)
    assert replaced.ok and status(replaced, "destination") == "warn"


def test_destination_under_a_regular_file_is_not_writable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path, destination=blocker / "out")
    assert status(report, "destination") == "fail"
    assert "is a file, not a folder" in failure(report)


def test_too_little_disk_space(tmp_path: Path) -> None:
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path, free=1000)
    assert status(report, "disk") == "fail"
    assert "Not enough disk space" in failure(report)


def test_memory_warn_and_fail(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt")
    tight = preflight(folder, tmp_path, memory=(100 * 1024**2, 64 * 1024**3))
    assert tight.ok and status(tight, "ram") == "warn"
    small = preflight(folder, tmp_path, memory=(100 * 1024**2, 512 * 1024**2))
    assert status(small, "ram") == "fail"


def test_estimates_follow_the_weight_format(tmp_path: Path) -> None:
    info = inspect_checkpoint_folder(make_checkpoint(tmp_path / "ckpt"))
    sizes = {
        fmt: estimate_export(info, ExportOptions.recommended(fmt))  # type: ignore[arg-type]
        for fmt in ("fp16", "int8", "int4")
    }
    assert all(s is not None for s in sizes.values())
    fp16, int8, int4 = (sizes[f].output_bytes for f in ("fp16", "int8", "int4"))  # type: ignore[union-attr]
    assert fp16 > int8 > int4
    assert sizes["fp16"].scratch_bytes == 0  # type: ignore[union-attr]
    assert sizes["int4"].scratch_bytes > 0  # type: ignore[union-attr]
    assert sizes["int4"].peak_ram_bytes > 2 * 4 * sizes["int4"].parameters  # type: ignore[union-attr]


# --- options ---------------------------------------------------------------------------------


def test_int4_with_error_fallback_fails(tmp_path: Path) -> None:
    options = ExportOptions(weight_format="int4", group_size_fallback="error")
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path, options)
    assert "rotary-embedding frequencies" in failure(report)


def test_group_size_not_dividing_hidden_size_warns(tmp_path: Path) -> None:
    options = ExportOptions.recommended("int4", group_size=48)
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path, options)
    assert report.ok and status(report, "group_size") == "warn"


def test_the_fitting_group_size_divides_every_layer_input_and_silences_the_warning(
    tmp_path: Path,
) -> None:
    """The default a checkpoint gets is the largest offered group size dividing each of its
    linear layers' input sizes, so the default never triggers the check's own warning; a
    larger one warns and names the size it misses and the size that fits."""
    assert fitting_group_size(None) is None and fitting_group_size({"model_type": "x"}) is None
    assert fitting_group_size(qwen_config()) == 64  # the demo's hidden size
    assert fitting_group_size(qwen_config(hidden_size=1024, intermediate_size=3584)) == 128
    # Qwen3.5-0.8B's sizes: attention output 8 x 256, linear attention 16 x 128.
    full = qwen_config(
        hidden_size=1024, intermediate_size=3584, num_attention_heads=8, head_dim=256,
        linear_num_value_heads=16, linear_value_head_dim=128,
    )  # fmt: skip
    assert fitting_group_size(full) == 128
    assert fitting_group_size(qwen_config(hidden_size=64, intermediate_size=96)) == 32
    assert fitting_group_size(qwen_config(hidden_size=72)) == -1  # per channel only
    odd = qwen_config(hidden_size=128, num_attention_heads=3, head_dim=16)
    assert fitting_group_size(odd) == 16
    for config, group in ((qwen_config(), 128), (odd, 32)):
        folder = make_checkpoint(tmp_path / f"ckpt{group}", config)
        fit = fitting_group_size(config)
        warned = preflight(folder, tmp_path, ExportOptions.recommended("int4", group_size=group))
        item = next(i for i in warned.items if i.key == "group_size")
        assert item.status == "warn" and f"{fit} fits this checkpoint" in item.fix
        size = "hidden size 64" if group == 128 else "attention output size 48"
        assert f"The {size} is not a multiple of the group size {group}" in item.message
        fitted = preflight(folder, tmp_path, ExportOptions.recommended("int4", group_size=fit))
        assert fitted.item("group_size") is None


def test_trust_remote_code_warns(tmp_path: Path) -> None:
    options = ExportOptions.recommended("int4", group_size=16, trust_remote_code=True)
    report = preflight(make_checkpoint(tmp_path / "ckpt"), tmp_path, options)
    assert status(report, "trust_remote_code") == "warn"


# --- the export toolkit ----------------------------------------------------------------------


def test_missing_toolkit_is_detected_from_the_versions() -> None:
    versions = dict(GOOD_VERSIONS, **{"optimum-intel": None, "torch": None})
    assert toolkit_missing(versions) == ["optimum-intel", "torch"]
    items = check_toolkit(versions)
    assert items[0].status == "fail"
    assert "export toolkit is not installed" in items[0].message
    assert "pip install" in items[0].fix
    assert toolkit_missing(GOOD_VERSIONS, hub=True) == []
    assert toolkit_missing(dict(GOOD_VERSIONS, huggingface_hub=None), hub=True) == [
        "huggingface_hub"
    ]


@pytest.mark.parametrize(
    ("package", "version", "expected"),
    [
        ("optimum-intel", "2.1.0", "optimum-intel 2.2.x"),
        ("transformers", "5.5.1", "5.2.x"),
        ("nncf", "3.2.0", "nncf 3.2.0 is too old"),
    ],
)
def test_unsupported_toolkit_versions(package: str, version: str, expected: str) -> None:
    items = check_toolkit(dict(GOOD_VERSIONS, **{package: version}))
    assert any(i.status == "fail" and expected in i.message for i in items)


def test_openvino_packages_from_different_families() -> None:
    items = check_toolkit(dict(GOOD_VERSIONS, **{"openvino-genai": "2026.3.0.0"}))
    family = next(i for i in items if i.key == "openvino_family")
    assert family.status == "fail" and "different release families" in family.message


def test_install_command_pins_the_extra_and_the_runtime() -> None:
    command = install_command("/py", versions=GOOD_VERSIONS)
    assert command[:4] == ["/py", "-m", "pip", "install"]
    assert "optimum-intel==2.2.*" in command
    assert "transformers==5.2.*" in command
    assert "huggingface_hub" in command
    # The installed runtime is pinned so pip cannot move it out of its release family.
    assert command[-3:] == [
        "openvino==2026.4.1",
        "openvino-genai==2026.4.1.0",
        "openvino-tokenizers==2026.4.1.0",
    ]


def test_recommended_options_protect_int4_parts() -> None:
    assert ExportOptions.recommended("int4").group_size_fallback == "ignore"
    assert ExportOptions.recommended("int8", mtp_weight_format="int4").group_size_fallback == (
        "ignore"
    )
    assert ExportOptions.recommended("fp16").group_size_fallback is None
    adjust = ExportOptions.recommended("int4", group_size_fallback="adjust")
    assert adjust.group_size_fallback == "adjust"
