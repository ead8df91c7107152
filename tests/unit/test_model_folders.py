"""core.models.folders: inspect, diagnose, estimate memory, discover and verify model folders.

The folders are made of real IRs saved with the openvino API (see tests.unit.test_ir for the
builders), laid out the way optimum-intel's image-text-to-text export lays them out.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
import pytest
from openvino import opset13 as ops

from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
from qwen_mtp_desktop.core.models.folders.discovery import discover_models
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, ExportManifest
from qwen_mtp_desktop.core.models.folders.memory import (
    default_kv_precision,
    estimate_memory,
    geometry_from_config,
)
from qwen_mtp_desktop.core.models.folders.report import COMPONENTS, Geometry, ModelReport
from tests.unit.test_ir import compressed_linear, mlp_model, save, stateful_model

GIB = 1024**3
PLENTY = 64 * GIB
SAME_FAMILY = {"openvino": ov.get_version().split("-")[0], "openvino-tokenizers": "2026.4.1.0"}

#: Qwen3.5-0.8B's text geometry (24 layers, 3 linear : 1 full attention, one MTP layer).
QWEN_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "text_config": {
        "model_type": "qwen3_5_text",
        "num_hidden_layers": 24,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mtp_num_hidden_layers": 1,
        "vocab_size": 248320,
    },
    "vision_config": {"depth": 1, "hidden_size": 32, "out_hidden_size": 1024},
}
CHAT_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['content'] }}<|im_end|>{% endfor %}"


def tokenizer_model(name: str, *, chat_template: bool = True) -> ov.Model:
    ids = ops.parameter([-1], np.int32, name="ids")
    table = ops.constant(np.arange(64, dtype=np.int32), name="vocab")
    model = ov.Model([ops.gather(table, ids, ops.constant(np.int64(0)))], [ids], name)
    model.set_rt_info("2026.4.1.0-738-9bfda529607", "openvino_tokenizers_version")
    if chat_template:
        model.set_rt_info(CHAT_TEMPLATE, "chat_template")
    return model


def with_versions(model: ov.Model) -> ov.Model:
    for key, value in {
        "optimum_intel_version": "2.2.0",
        "optimum_version": "2.3.0",
        "transformers_version": "5.2.0",
        "nncf_version": "3.4.0",
        "pytorch_version": "2.14.1",
    }.items():
        model.set_rt_info(value, ["optimum", key])
    return model


def make_export(
    folder: Path,
    *,
    main: str | None = "u4",
    mtp: str | None = "u4",
    with_mtp: bool = True,
    tokenizer: bool = True,
    chat_template: bool = True,
    config: dict[str, Any] | None = QWEN_CONFIG,
) -> Path:
    """An image-text-to-text export: every component a real (tiny) IR."""
    groups = {"u4": 16, "i4": 16}
    save(
        with_versions(mlp_model(storage=main, group=groups.get(main or ""))),
        folder / "openvino_language_model.xml",
    )
    save(mlp_model(storage="i8", zero_point=False), folder / "openvino_text_embeddings_model.xml")
    if with_mtp:
        save(
            with_versions(mlp_model(storage=mtp, group=groups.get(mtp or ""))),
            folder / "openvino_mtp_model.xml",
        )
    if tokenizer:
        for stem in ("openvino_tokenizer", "openvino_detokenizer"):
            save(tokenizer_model(stem, chat_template=chat_template), folder / f"{stem}.xml")
    for stem in (
        "openvino_vision_embeddings_model",
        "openvino_vision_embeddings_merger_model",
        "openvino_vision_embeddings_pos_model",
    ):
        save(mlp_model(), folder / f"{stem}.xml", fp16=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def inspect(folder: Path, **kwargs: Any) -> ModelReport:
    kwargs.setdefault("available_bytes", PLENTY)
    kwargs.setdefault("total_ram_bytes", PLENTY)
    kwargs.setdefault("installed_versions", SAME_FAMILY)
    return inspect_model(folder, **kwargs)


def bin_size(folder: Path, stem: str) -> int:
    return (folder / f"{stem}.bin").stat().st_size


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return make_export(tmp_path / "Qwen3.5-0.8B-int4")


# --- a healthy export ----------------------------------------------------------------------


def test_healthy_export(export: Path) -> None:
    report = inspect(export)
    assert report.diagnostics == []
    assert report.usable_for_chat and report.mtp_usable
    assert (report.kind, report.kind_label, report.layout) == (
        "qwen3_5_dense",
        "Qwen3.5 dense",
        "vlm",
    )
    assert [c.key for c in report.components] == [spec.key for spec in COMPONENTS]
    assert all(c.present and c.readable for c in report.components)
    lm = report.component("language_model")
    assert lm is not None
    assert lm.precision == "INT4 asym g16 (100 %)"
    assert lm.bin_bytes == bin_size(export, "openvino_language_model")
    emb = report.component("text_embeddings")
    assert emb is not None and emb.precision == "INT8 sym (100 %)"
    tok = report.component("tokenizer")
    assert tok is not None and tok.precision == ""
    assert report.mtp.present
    assert report.mtp.compressed_like_main is True
    assert report.mtp.precision == "INT4 asym g16 (100 %)"
    mtp = report.component("mtp")
    assert mtp is not None and report.mtp.bytes == mtp.total_bytes > 0
    assert report.chat_template
    assert report.versions["optimum-intel"] == "2.2.0"
    assert report.versions["openvino-tokenizers"].startswith("2026.4.1.0")
    assert report.versions["openvino"].startswith(SAME_FAMILY["openvino"])
    assert report.total_bytes == sum(p.stat().st_size for p in export.iterdir())


def test_json_schema_is_stable(export: Path) -> None:
    data = inspect(export).to_json_dict()
    json.dumps(data)  # plain JSON types only
    assert list(data) == [
        "schema_version",
        "path",
        "name",
        "kind",
        "kind_label",
        "model_type",
        "architectures",
        "layout",
        "source",
        "manifest",
        "versions",
        "components",
        "mtp",
        "geometry",
        "chat_template",
        "total_bytes",
        "memory",
        "diagnostics",
        "usable_for_chat",
        "mtp_usable",
    ]
    assert data["schema_version"] == 1
    assert set(data["components"][0]) == {
        "key",
        "label",
        "stem",
        "use",
        "present",
        "xml_present",
        "bin_present",
        "xml_bytes",
        "bin_bytes",
        "total_bytes",
        "precision",
        "precision_shares",
        "dominant_precision",
        "weight_parameters",
        "const_bytes_by_type",
        "rt_info",
        "issues",
        "error",
    }
    assert set(data["mtp"]) == {
        "present",
        "bytes",
        "precision",
        "dominant_precision",
        "main_precision",
        "compressed_like_main",
    }
    assert set(data["memory"]) == {
        "context_length",
        "kv_precision",
        "terms",
        "total_bytes",
        "image_extra_bytes",
        "available_bytes",
        "fraction",
        "verdict",
        "notes",
    }
    assert set(data["memory"]["terms"][0]) == {"key", "label", "bytes", "formula"}


# --- memory --------------------------------------------------------------------------------


def test_memory_estimate_matches_hand_calculation(export: Path) -> None:
    report = inspect(export, context_length=4096, kv_precision="u8", available_bytes=PLENTY)
    memory = report.memory
    assert memory is not None
    weights = sum(
        bin_size(export, stem)
        for stem in (
            "openvino_language_model",
            "openvino_text_embeddings_model",
            "openvino_mtp_model",
            "openvino_tokenizer",
            "openvino_detokenizer",
        )
    )
    # By hand, Qwen3.5-0.8B at 4,096 tokens with a u8 KV cache:
    kv = 2 * 6 * 2 * 256 * 4096 * 1  # 2 (K, V) × 6 full layers × 2 heads × 256 dim × ctx × 1 B
    kv_params = 2 * 6 * 2 * 4096 * 8  # f32 scale + zero point per token and head
    state = 18 * 16 * 128 * 128 * 4  # 18 linear layers × 16 v-heads × 128 × 128 × f32
    conv = 18 * (2 * 16 * 128 + 16 * 128) * 4 * 4  # channels × kernel 4 × f32
    mtp_kv = 2 * 1 * 2 * 256 * 4096 * 1
    mtp_params = 2 * 1 * 2 * 4096 * 8
    assert kv == 25_165_824 and state == 18_874_368 and conv == 1_769_472
    expected = {
        "weights": weights,
        "kv_cache": kv,
        "kv_cache_quant_params": kv_params,
        "linear_state": state,
        "linear_conv_state": conv,
        "mtp_kv_cache": mtp_kv,
        "mtp_kv_cache_quant_params": mtp_params,
    }
    assert {t.key: t.bytes for t in memory.terms} == expected
    assert memory.total_bytes == sum(expected.values())
    kv_term = memory.term("kv_cache")
    assert kv_term is not None
    assert kv_term.formula == (
        "2 × 6 layers × 2 KV heads × 256 head dim × 4,096 tokens × 1 B (u8) = 25,165,824 B"
    )
    image = sum(bin_size(export, s.stem) for s in COMPONENTS if s.use == "image")
    assert memory.image_extra_bytes == image
    assert any("only when a chat includes an image" in note for note in memory.notes)
    assert memory.verdict == "fits"


def test_f16_kv_cache_doubles_and_drops_scales(export: Path) -> None:
    u8 = inspect(export, kv_precision="u8").memory
    f16 = inspect(export, kv_precision="f16", context_length=8192).memory
    assert u8 is not None and f16 is not None
    u8_kv, f16_kv = u8.term("kv_cache"), f16.term("kv_cache")
    assert u8_kv is not None and f16_kv is not None
    assert f16_kv.bytes == u8_kv.bytes * 2 * 2  # twice the bytes, twice the tokens
    assert f16.term("kv_cache_quant_params") is None
    linear_u8, linear_f16 = u8.term("linear_state"), f16.term("linear_state")
    assert linear_u8 is not None and linear_f16 is not None
    assert linear_u8.bytes == linear_f16.bytes  # independent of the context length


@pytest.mark.parametrize(
    ("available", "verdict"),
    [
        (10_000, "fits"),
        (1_250, "tight"),
        (1_000, "tight"),
        (999, "does_not_fit"),
        (None, "unknown"),
    ],
)
def test_verdict_thresholds(available: int | None, verdict: str) -> None:
    memory = estimate_memory({"language_model": 1000}, None, available_bytes=available)
    assert memory.total_bytes == 1000
    assert memory.verdict == verdict
    assert any("weights only" in note for note in memory.notes)


def test_estimate_memory_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        estimate_memory({}, None, kv_precision="q3")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        estimate_memory({}, None, context_length=0)


def test_too_large_for_memory(export: Path) -> None:
    report = inspect(export, available_bytes=1_000_000, total_ram_bytes=PLENTY)
    assert [(d.code, d.severity) for d in report.diagnostics] == [
        ("TOO_LARGE_FOR_MEMORY", "warning")
    ]
    assert report.usable_for_chat
    report = inspect(export, available_bytes=1_000_000, total_ram_bytes=2_000_000)
    assert [(d.code, d.severity) for d in report.diagnostics] == [("TOO_LARGE_FOR_MEMORY", "error")]
    assert not report.usable_for_chat


def test_memory_tight(export: Path) -> None:
    need = inspect(export).memory
    assert need is not None
    report = inspect(export, available_bytes=int(need.total_bytes / 0.8))
    assert report.memory is not None and report.memory.verdict == "tight"
    assert report.codes() == ["MEMORY_TIGHT"]


def test_geometry_from_config_defaults() -> None:
    config = copy.deepcopy(QWEN_CONFIG)
    del config["text_config"]["layer_types"]  # Qwen3.5's default interval is 4
    geometry = geometry_from_config(config)
    assert geometry is not None
    assert (geometry.full_attention_layers, geometry.linear_attention_layers) == (6, 18)
    plain = geometry_from_config(
        {"num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}
    )
    assert plain == Geometry(
        layers=4,
        full_attention_layers=4,
        linear_attention_layers=0,
        kv_heads=8,
        head_dim=64,
        hidden_size=512,
    )
    assert geometry_from_config({"model_type": "x"}) is None


def test_geometry_from_ir_when_config_is_missing(tmp_path: Path) -> None:
    folder = make_export(tmp_path / "m", config=None)
    save(stateful_model(keys=1, ssm=3), folder / "openvino_language_model.xml")
    save(stateful_model(keys=1, ssm=0), folder / "openvino_mtp_model.xml")
    report = inspect(folder)
    assert "CONFIG_MISSING" in report.codes()
    assert report.kind == "unknown"
    geometry = report.geometry
    assert geometry is not None and geometry.source == "ir"
    assert (geometry.full_attention_layers, geometry.linear_attention_layers) == (1, 3)
    assert (geometry.kv_heads, geometry.head_dim) == (2, 32)
    assert (geometry.linear_num_value_heads, geometry.linear_key_head_dim) == (4, 16)
    assert (geometry.linear_num_key_heads, geometry.linear_conv_kernel) == (2, 4)
    assert geometry.linear_conv_dim == 128
    assert geometry.mtp_layers == 1


# --- diagnostics ---------------------------------------------------------------------------


def test_mtp_missing(export: Path) -> None:
    for suffix in (".xml", ".bin"):
        (export / f"openvino_mtp_model{suffix}").unlink()
    report = inspect(export)
    assert report.codes() == ["MTP_MISSING"]
    diagnostic = report.diagnostics[0]
    assert diagnostic.severity == "warning"
    assert "most conversions drop it" in diagnostic.message
    assert "Add MTP head" in diagnostic.fix and "models add-mtp" in diagnostic.fix
    assert report.usable_for_chat and not report.mtp_usable
    assert report.memory is not None and report.memory.term("mtp_kv_cache") is None


def test_mtp_not_compressed_like_main(tmp_path: Path) -> None:
    report = inspect(make_export(tmp_path / "m", main="u4", mtp=None))
    assert report.codes() == ["MTP_NOT_COMPRESSED_LIKE_MAIN"]
    assert report.mtp.compressed_like_main is False
    assert (report.mtp.dominant_precision, report.mtp.main_precision) == ("FP32", "INT4")
    assert report.mtp_usable  # a warning, not a blocker


def test_int8_lm_head_does_not_count_against_an_int4_mtp(export: Path) -> None:
    # nncf keeps the vocabulary-sized lm_head in INT8 whatever the mode: by parameter count it
    # can outweigh the INT4 body, yet the export is still "INT4 like its MTP head".
    config = copy.deepcopy(QWEN_CONFIG)
    config["text_config"]["vocab_size"] = 4000
    (export / "config.json").write_text(json.dumps(config))
    x = ops.parameter([1, 64], np.float32, name="x")
    body = compressed_linear(x, 64, 64, storage="u4", group=16, name="layers.0.mlp")
    head = compressed_linear(body, 4000, 64, storage="u8", name="lm_head")
    save(ov.Model([head], [x], "lm"), export / "openvino_language_model.xml")
    report = inspect(export)
    lm = report.component("language_model")
    assert lm is not None and lm.dominant_precision == "INT8"
    assert report.mtp.main_precision == "INT4"
    assert report.mtp.compressed_like_main is True
    assert report.codes() == []


def test_default_kv_precision() -> None:
    assert default_kv_precision("CPU") == "u8"
    assert default_kv_precision("GPU.0") == "f16"
    assert default_kv_precision("AUTO") == "f16"


def test_mtp_rope_quantized(export: Path) -> None:
    x = ops.parameter([1, 64], np.float32, name="x")
    rope = compressed_linear(x, 4, 64, storage="u8", name="__module.rotary_emb/aten::to/Convert")
    main = compressed_linear(rope, 64, 4, storage="u4", group=4, name="self.fc.weight")
    save(ov.Model([main], [x], "mtp"), export / "openvino_mtp_model.xml")
    report = inspect(export)
    assert "MTP_ROPE_QUANTIZED" in report.codes()


def test_xml_without_bin_is_incomplete(export: Path) -> None:
    (export / "openvino_language_model.bin").unlink()
    report = inspect(export)
    assert ("IR_INCOMPLETE", "error") in [(d.code, d.severity) for d in report.diagnostics]
    assert not report.usable_for_chat


def test_bin_without_xml_is_incomplete(export: Path) -> None:
    (export / "openvino_text_embeddings_model.xml").unlink()
    report = inspect(export)
    assert report.codes() == ["IR_INCOMPLETE"]
    assert not report.usable_for_chat


def test_missing_language_model_is_incomplete(export: Path) -> None:
    for suffix in (".xml", ".bin"):
        (export / f"openvino_text_embeddings_model{suffix}").unlink()
    report = inspect(export)
    assert report.codes() == ["IR_INCOMPLETE"]
    assert "Text embeddings" in report.diagnostics[0].message


def test_truncated_bin_is_corrupt(export: Path) -> None:
    path = export / "openvino_language_model.bin"
    path.write_bytes(path.read_bytes()[:100])
    report = inspect(export)
    assert [(d.code, d.severity) for d in report.diagnostics] == [("IR_CORRUPT", "error")]
    assert "truncated" in report.diagnostics[0].message


def test_garbage_xml_is_corrupt(export: Path) -> None:
    (export / "openvino_language_model.xml").write_text("<net><layers>")
    report = inspect(export)
    assert [(d.code, d.severity) for d in report.diagnostics] == [("IR_CORRUPT", "error")]
    lm = report.component("language_model")
    assert lm is not None and lm.error is not None and "well-formed" in lm.error


def test_corrupt_mtp_only_costs_the_speed_up(export: Path) -> None:
    path = export / "openvino_mtp_model.bin"
    path.write_bytes(path.read_bytes()[:10])
    report = inspect(export)
    assert [(d.code, d.severity) for d in report.diagnostics] == [("IR_CORRUPT", "warning")]
    assert "without speculative decoding" in report.diagnostics[0].message
    assert report.usable_for_chat and not report.mtp_usable


def test_broken_vision_only_costs_images(export: Path) -> None:
    (export / "openvino_vision_embeddings_pos_model.bin").unlink()
    report = inspect(export)
    assert sorted((d.code, d.severity) for d in report.diagnostics) == [
        ("IR_INCOMPLETE", "warning"),
        ("VISION_INCOMPLETE", "warning"),
    ]
    assert report.usable_for_chat


def test_tokenizer_missing(tmp_path: Path) -> None:
    report = inspect(make_export(tmp_path / "m", tokenizer=False))
    assert report.codes() == ["TOKENIZER_MISSING"]
    assert not report.usable_for_chat


def test_no_chat_template(tmp_path: Path) -> None:
    report = inspect(make_export(tmp_path / "m", chat_template=False))
    assert report.codes() == ["NO_CHAT_TEMPLATE"]
    (tmp_path / "m" / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    assert inspect(tmp_path / "m").codes() == []


@pytest.mark.parametrize(("installed", "wording"), [("2025.3.0", "newer"), ("2027.1.0", "older")])
def test_runtime_family_mismatch(export: Path, installed: str, wording: str) -> None:
    report = inspect(
        export, installed_versions={"openvino": installed, "openvino-tokenizers": installed}
    )
    assert report.codes() == ["RUNTIME_FAMILY_MISMATCH"]
    assert wording in report.diagnostics[0].message
    assert report.usable_for_chat
    # Nothing installed (or an unparsable version) is not a mismatch to report here.
    assert inspect(export, installed_versions={}).codes() == []


def test_manifest_source_and_versions(export: Path) -> None:
    manifest = ExportManifest(
        source="Qwen/Qwen3.5-0.8B",
        revision="abc123",
        options={"weight_format": "int4"},
        versions={"openvino": "2026.4.1", "huggingface_hub": "1.0"},
        files={},
        duration_s=12.5,
        peak_rss_bytes=123,
    )
    (export / MANIFEST_NAME).write_text(json.dumps(manifest.to_json_dict()))
    report = inspect(export)
    assert report.source.to_json_dict() == {
        "model_id": "Qwen/Qwen3.5-0.8B",
        "revision": "abc123",
        "origin": "manifest",
    }
    assert report.manifest == manifest
    assert report.versions["huggingface_hub"] == "1.0"
    # The IR's own record wins over the manifest for what wrote the IR.
    assert report.versions["openvino"].startswith(SAME_FAMILY["openvino"] + "-")


def test_source_from_config_and_openvino_config(export: Path) -> None:
    config = dict(QWEN_CONFIG, _name_or_path="Qwen/Qwen3.5-2B")
    (export / "config.json").write_text(json.dumps(config))
    assert inspect(export).source.model_id == "Qwen/Qwen3.5-2B"
    (export / "config.json").write_text(json.dumps(QWEN_CONFIG))
    (export / "openvino_config.json").write_text(
        json.dumps({"quantization_config": {"tokenizer": "/models/Qwen3.5-9B"}})
    )
    source = inspect(export).source
    assert (source.model_id, source.origin) == ("/models/Qwen3.5-9B", "openvino_config")


def test_damaged_manifest_and_config(export: Path) -> None:
    (export / MANIFEST_NAME).write_text('{"source": 3}')
    (export / "config.json").write_text("{not json")
    report = inspect(export)
    assert sorted(report.codes()) == ["CONFIG_INVALID", "MANIFEST_INVALID"]
    assert report.kind == "unknown"
    assert report.usable_for_chat


def test_moe_and_other_kinds(export: Path) -> None:
    moe = copy.deepcopy(QWEN_CONFIG)
    moe["model_type"] = "qwen3_5_moe"
    moe["text_config"].update(model_type="qwen3_5_moe_text", num_experts=256)
    (export / "config.json").write_text(json.dumps(moe))
    report = inspect(export)
    assert (report.kind, report.kind_label) == ("qwen3_5_moe", "Qwen3.5 MoE")
    assert report.geometry is not None and report.geometry.num_experts == 256

    other = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "hidden_size": 64,
    }
    (export / "config.json").write_text(json.dumps(other))
    for suffix in (".xml", ".bin"):
        (export / f"openvino_mtp_model{suffix}").unlink()
    report = inspect(export)
    assert (report.kind, report.kind_label) == ("other", "other (llama)")
    assert report.codes() == ["NOT_QWEN35"]  # and no MTP_MISSING: MTP is not a thing here
    assert report.usable_for_chat and not report.mtp_usable


def test_text_only_export(tmp_path: Path) -> None:
    folder = tmp_path / "text-only"
    save(mlp_model(storage="u8"), folder / "openvino_model.xml")
    for stem in ("openvino_tokenizer", "openvino_detokenizer"):
        save(tokenizer_model(stem), folder / f"{stem}.xml")
    config = {"model_type": "qwen3_5_text", **QWEN_CONFIG["text_config"]}
    (folder / "config.json").write_text(json.dumps(config))
    report = inspect(folder)
    assert report.layout == "llm"
    assert sorted(report.codes()) == ["MTP_MISSING", "TEXT_ONLY_EXPORT"]
    model = report.component("model")
    assert model is not None and model.precision == "INT8 asym (100 %)"
    assert report.component("language_model") is None
    assert report.memory is not None and report.memory.term("kv_cache") is not None


def test_extra_irs_are_listed(export: Path) -> None:
    save(mlp_model(), export / "openvino_assistant_model.xml", fp16=True)
    report = inspect(export)
    extra = report.component("openvino_assistant_model")
    assert extra is not None and extra.use == "other" and extra.precision == "FP16 (100 %)"
    assert report.codes() == []


# --- not a model / unreadable --------------------------------------------------------------


def test_empty_folder(tmp_path: Path) -> None:
    report = inspect(tmp_path)
    assert report.codes() == ["NOT_A_MODEL"]
    assert "empty" in report.diagnostics[0].message
    assert not report.usable_for_chat


def test_unrelated_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "photo.xml").write_text("<svg/>")
    report = inspect(tmp_path)
    assert report.codes() == ["NOT_A_MODEL"]
    assert report.total_bytes == 5 + 6


def test_hugging_face_checkpoint_is_not_a_model(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN_CONFIG))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 8)
    report = inspect(tmp_path)
    assert report.codes() == ["NOT_A_MODEL"]
    assert "checkpoint" in report.diagnostics[0].message
    assert "export wizard" in report.diagnostics[0].fix


def test_a_file_is_not_a_model(tmp_path: Path) -> None:
    path = tmp_path / "openvino_language_model.xml"
    path.write_text("<net/>")
    assert inspect(path).codes() == ["NOT_A_MODEL"]


def test_missing_folder(tmp_path: Path) -> None:
    report = inspect(tmp_path / "gone")
    assert report.codes() == ["NOT_FOUND"]
    json.dumps(report.to_json_dict())


def test_unreadable_folder(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests run as root, where permission bits block nothing: make the listing fail the way
    # it does for an ordinary user on a folder without read permission.
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == export:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    report = inspect(export)
    assert report.codes() == ["UNREADABLE"]
    assert "Permission denied" in report.diagnostics[0].message
    assert not report.usable_for_chat


def test_unreadable_component_file(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = export / "openvino_language_model.xml"
    real_open = os.open

    def guarded_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path) == target:  # the IR reader opens with os.open (non-blocking)
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    report = inspect(export)
    assert [(d.code, d.severity) for d in report.diagnostics] == [("UNREADABLE", "error")]


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root reads files regardless of permission bits; covered by the simulated tests",
)
def test_unreadable_folder_by_permissions(export: Path) -> None:
    export.chmod(0)
    try:
        assert inspect(export).codes() == ["UNREADABLE"]
    finally:
        export.chmod(0o755)


def test_non_ascii_and_spaces_in_path(tmp_path: Path) -> None:
    folder = make_export(tmp_path / "Мои модели" / "Qwen 3.5 — 模型 int4")
    report = inspect(folder)
    assert report.codes() == []
    assert report.name == "Qwen 3.5 — 模型 int4"
    assert json.loads(json.dumps(report.to_json_dict(), ensure_ascii=False))["path"] == str(folder)


# --- discovery -----------------------------------------------------------------------------


def _model_dir(path: Path, layout: str = "vlm") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if layout == "vlm":
        (path / "openvino_language_model.xml").write_text("<net/>")
    elif layout == "llm":
        (path / "openvino_model.xml").write_text("<net/>")
    else:  # config.json plus some IR pair
        (path / "config.json").write_text("{}")
        (path / "openvino_encoder.xml").write_text("<net/>")
        (path / "openvino_encoder.bin").write_bytes(b"")
    return path


def test_discover_models(tmp_path: Path) -> None:
    root = tmp_path / "models"
    a = _model_dir(root / "a")
    b = _model_dir(root / "group" / "b model", "llm")
    c = _model_dir(root / "group" / "deeper" / "ç 模型", "config")
    _model_dir(root / "one" / "two" / "three" / "too deep")
    _model_dir(root / ".a.exporting-123")  # an export's staging folder
    _model_dir(a / "nested")  # inside a model: not searched
    (root / "group" / "notes.txt").write_text("x")
    (root / "empty").mkdir()
    found = discover_models([root], max_depth=3)
    assert found == [a, b, c]
    assert discover_models([root], max_depth=1) == [a]


def test_discover_root_is_a_model_and_odd_roots(tmp_path: Path) -> None:
    model = _model_dir(tmp_path / "m")
    (tmp_path / "file.txt").write_text("x")
    found = discover_models([model, tmp_path / "missing", tmp_path / "file.txt", model])
    assert found == [model]


def test_discover_survives_symlink_loops(tmp_path: Path) -> None:
    root = tmp_path / "root"
    model = _model_dir(root / "sub" / "model")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "self").symlink_to(root / "sub", target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    found = discover_models([root], max_depth=10)
    assert found == [model] or [p.resolve() for p in found] == [model.resolve()]


def test_discover_skips_unreadable_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    good = _model_dir(root / "good")
    locked = root / "locked"
    _model_dir(locked / "hidden model")
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert discover_models([root]) == [good]


# --- checksums -----------------------------------------------------------------------------


def _write_manifest(folder: Path, files: dict[str, str]) -> None:
    manifest = ExportManifest(source="local", files=files)
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest.to_json_dict()))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_verify_checksums(export: Path) -> None:
    names = ["openvino_language_model.bin", "openvino_language_model.xml", "config.json"]
    _write_manifest(export, {n: _sha(export / n) for n in names})
    calls: list[tuple[int, int]] = []
    result = verify_checksums(export, progress=lambda done, total: calls.append((done, total)))
    assert [d.code for d in result] == ["CHECKSUMS_OK"]
    total = sum((export / n).stat().st_size for n in names)
    assert calls[-1] == (total, total)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)

    with (export / "openvino_language_model.bin").open("r+b") as handle:
        handle.write(b"\xff")
    (export / "config.json").unlink()
    result = verify_checksums(export)
    assert sorted((d.code, d.severity) for d in result) == [
        ("CHECKSUM_FILE_MISSING", "error"),
        ("CHECKSUM_MISMATCH", "error"),
    ]


def test_verify_checksums_cancel(export: Path) -> None:
    names = ["openvino_language_model.bin", "openvino_mtp_model.bin"]
    _write_manifest(export, {n: _sha(export / n) for n in names})
    assert [d.code for d in verify_checksums(export, cancel=lambda: True)] == [
        "CHECKSUMS_CANCELLED"
    ]


def test_verify_checksums_without_or_with_bad_manifest(export: Path) -> None:
    assert [d.code for d in verify_checksums(export)] == ["CHECKSUMS_UNAVAILABLE"]
    _write_manifest(export, {"../../etc/passwd": "0" * 64, "config.json": "not-a-hash"})
    assert [d.code for d in verify_checksums(export)] == ["MANIFEST_INVALID", "MANIFEST_INVALID"]
    (export / MANIFEST_NAME).write_text("[]")
    assert [d.code for d in verify_checksums(export)] == ["MANIFEST_INVALID"]


def test_manifest_validation() -> None:
    with pytest.raises(ValueError, match="files"):
        ExportManifest.from_json_dict({"files": {"a": 1}})
    with pytest.raises(ValueError, match="peak_rss_bytes"):
        ExportManifest.from_json_dict({"peak_rss_bytes": True})
    manifest = ExportManifest.from_json_dict({"source": "x", "duration_s": 3})
    assert manifest.duration_s == 3.0 and manifest.files == {}


# --- real exports --------------------------------------------------------------------------


@pytest.mark.skipif(
    not (demo_model_dir() / "openvino_language_model.xml").is_file(),
    reason="the bundled demo model has not been built yet (resources/demo-model/openvino)",
)
def test_demo_model() -> None:
    report = inspect(demo_model_dir(), installed_versions={})
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert errors == []
    assert report.kind in ("qwen3_5_dense", "qwen3_5_moe")
    assert report.layout == "vlm"
    for key in ("language_model", "text_embeddings", "mtp", "tokenizer", "detokenizer"):
        component = report.component(key)
        assert component is not None and component.readable, key
    assert report.mtp.present and report.mtp_usable
    lm = report.component("language_model")
    assert lm is not None and lm.precision  # e.g. "INT4 asym g16 (89 %), INT8 asym (11 %)"
    assert report.mtp.precision and report.mtp.compressed_like_main is not None
    assert report.chat_template
    assert report.geometry is not None and report.geometry.mtp_layers == 1


@pytest.mark.export
@pytest.mark.export
def test_real_int4_export_precisions() -> None:
    """optimum-intel's own INT4 output: precisions read back from the IR match what it wrote."""
    pytest.importorskip("qwen_mtp_desktop.devtools.tiny_model")
    from tests.models import cached_checkpoint, cached_export

    folder = cached_export(cached_checkpoint(moe=False), "int4")
    report = inspect(folder)
    assert not [d for d in report.diagnostics if d.severity == "error"]
    lm, mtp, emb = (report.component(k) for k in ("language_model", "mtp", "text_embeddings"))
    assert lm is not None and mtp is not None and emb is not None
    # The exporter asks for INT4 asym group 16; nncf keeps the tied lm_head in INT8 asym.
    assert lm.precision_shares[0].label == "INT4 asym g16"
    assert mtp.precision_shares[0].label == "INT4 asym g16"
    assert emb.precision == "INT8 sym (100 %)"
    assert report.mtp.compressed_like_main is True
    assert lm.ir is not None
    assert lm.ir.rt_value("nncf", "weight_compression", "mode") == "int4_asym"
    assert report.versions["optimum-intel"].startswith("2.2")


def test_copied_export_keeps_its_report(export: Path, tmp_path: Path) -> None:
    copy_dir = tmp_path / "copy"
    shutil.copytree(export, copy_dir)
    original = inspect(export).to_json_dict()
    copied = inspect(copy_dir).to_json_dict()
    for data in (original, copied):
        data.pop("path")
        data.pop("name")
    assert original == copied


def test_a_damaged_mtp_head_is_one_warning_not_an_error_and_a_warning(export: Path) -> None:
    """Inspection calls a broken MTP head a warning (chat works); Verify must agree."""
    names = ["openvino_language_model.bin", "openvino_mtp_model.bin", "openvino_mtp_model.xml"]
    _write_manifest(export, {n: _sha(export / n) for n in names})
    with (export / "openvino_mtp_model.bin").open("r+b") as handle:
        handle.write(b"\xff")
    (export / "openvino_mtp_model.xml").unlink()
    result = verify_checksums(export)
    assert sorted((d.code, d.severity) for d in result) == [
        ("CHECKSUM_FILE_MISSING", "warning"),
        ("CHECKSUM_MISMATCH", "warning"),
    ]
    assert all("Chat still works, without speculative decoding." in d.message for d in result)
