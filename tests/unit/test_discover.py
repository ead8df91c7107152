"""Discover's list: the shipped JSON, hostile JSON, and the fit of each model on a device."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.models.catalog import (
    FORMATS,
    MAX_ENTRIES,
    Catalog,
    CatalogError,
    catalog_path,
    fit_on_device,
    load_catalog,
    parse_catalog,
    parse_entry,
)

GB = 1024**3
#: The Qwen3.5 family as Qwen's collection lists it (Small and Medium).
FAMILY = {
    "Qwen/Qwen3.5-0.8B",
    "Qwen/Qwen3.5-2B",
    "Qwen/Qwen3.5-4B",
    "Qwen/Qwen3.5-9B",
    "Qwen/Qwen3.5-27B",
    "Qwen/Qwen3.5-35B-A3B",
    "Qwen/Qwen3.5-122B-A10B",
    "Qwen/Qwen3.5-397B-A17B",
}


def shipped() -> dict[str, Any]:
    raw = json.loads(catalog_path().read_text(encoding="utf-8"))
    assert isinstance(raw, dict)
    return raw


def model(catalog: Catalog, hub_id: str) -> Any:
    return next(m for m in catalog.models if m.hub_id == hub_id)


def test_the_shipped_list_is_the_qwen35_family() -> None:
    catalog = load_catalog()
    assert catalog.problems == []
    assert {m.hub_id for m in catalog.models} == FAMILY
    assert all(m.mtp for m in catalog.models)
    moe = {m.hub_id: m.active_parameters for m in catalog.models if m.kind == "moe"}
    assert moe == {
        "Qwen/Qwen3.5-35B-A3B": 3_000_000_000,
        "Qwen/Qwen3.5-122B-A10B": 10_000_000_000,
        "Qwen/Qwen3.5-397B-A17B": 17_000_000_000,
    }
    # The parameter count is the one in the name.
    for entry in catalog.models:
        size = entry.name.split("-")[1].rstrip("B")
        assert entry.parameters == round(float(size) * 1e9)


def test_a_known_shape_gives_the_kv_cache_and_an_unknown_one_says_weights_only() -> None:
    catalog = load_catalog()
    small = fit_on_device(model(catalog, "Qwen/Qwen3.5-0.8B"), "CPU", 16 * GB, 32 * GB)
    memory = small.fits["int4"].memory
    kv = memory.term("kv_cache")
    # 6 full-attention layers x 2 KV heads x 256 head dim x 4096 tokens x 2 (K, V), u8 on CPU.
    assert kv is not None and kv.bytes == 2 * 6 * 2 * 256 * 4096
    assert memory.term("linear_state") is not None and memory.term("mtp_kv_cache") is not None
    unknown = fit_on_device(model(catalog, "Qwen/Qwen3.5-2B"), "CPU", 16 * GB, 32 * GB)
    assert unknown.fits["int4"].memory.term("kv_cache") is None
    assert any("weights only" in note for note in unknown.fits["int4"].memory.notes)
    # GPU keeps the KV cache in f16: twice the CPU's u8 cache.
    gpu = fit_on_device(model(catalog, "Qwen/Qwen3.5-0.8B"), "GPU", 16 * GB, 32 * GB)
    gpu_kv = gpu.fits["int4"].memory.term("kv_cache")
    assert gpu_kv is not None and gpu_kv.bytes == 2 * kv.bytes


def test_sizes_follow_the_formats_and_the_measured_export() -> None:
    catalog = load_catalog()
    fit = fit_on_device(model(catalog, "Qwen/Qwen3.5-0.8B"), "CPU", 16 * GB, 32 * GB)
    sizes = [fit.fits[fmt].model_bytes for fmt in FORMATS]
    assert sizes == sorted(sizes)  # int4 < int8 < fp16
    # Measured here (RUNTIME-NOTES, 0.8B geometry, INT4): language model 514 MB + text
    # embeddings 255 MB + MTP head 12 MB, plus the vision encoder. The estimate from the
    # parameter count lands near that.
    assert 0.75 * 781e6 < fit.fits["int4"].model_bytes < 1.3 * 781e6
    # Export peak: measured 6.2-6.4 GB for the fp32 0.8B checkpoint.
    assert 5.5 * GB < fit.fits["int4"].export_peak_bytes < 7.5 * GB


def test_recommendation_depends_on_the_free_memory() -> None:
    catalog = load_catalog()
    small, nine, flagship = (
        model(catalog, hub_id)
        for hub_id in ("Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-9B", "Qwen/Qwen3.5-397B-A17B")
    )
    assert fit_on_device(small, "CPU", 16 * GB, 32 * GB).recommended == "int8"
    assert fit_on_device(nine, "CPU", 16 * GB, 32 * GB).recommended == "int4"
    huge = fit_on_device(flagship, "CPU", 16 * GB, 32 * GB)
    assert huge.recommended is None and "Too large" in huge.reason
    assert huge.export_problem is not None and "more than this computer's" in huge.export_problem
    # With little free memory even the smallest gets INT4 only, or nothing.
    tight = fit_on_device(small, "CPU", int(1.0 * GB), 2 * GB)
    assert tight.recommended == "int4" and tight.fits["int8"].verdict != "fits"
    assert fit_on_device(small, "CPU", 200 * 1024**2, 2 * GB).recommended is None
    assert fit_on_device(small, "CPU", None, None).recommended == "int4"


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"id": "../../etc/passwd"}, "id"),
        ({"id": "Qwen/Qwen3.5-0.8B\n"}, "id"),
        ({"id": "no-slash"}, "id"),
        ({"kind": "huge"}, "kind"),
        ({"parameters": True}, "parameters"),
        ({"parameters": 1e12}, "parameters"),
        ({"parameters": -5}, "parameters"),
        ({"active_parameters": 10**15}, "active_parameters"),
        ({"mtp": "yes"}, "mtp"),
        ({"blurb": "x" * 301}, "blurb"),
        ({"blurb": "bell\x07"}, "blurb"),
        ({"text_config": {"num_hidden_layers": 0, "num_attention_heads": 8}}, "text_config"),
        ({"text_config": {"num_hidden_layers": "24", "num_attention_heads": 8}}, "text_config"),
        ({"text_config": {"num_hidden_layers": 24}}, "text_config"),
        ({"text_config": [1, 2]}, "text_config"),
    ],
)
def test_a_bad_field_leaves_the_entry_out_and_says_which(change: dict[str, Any], word: str) -> None:
    raw = shipped()
    entry = dict(raw["models"][0])
    entry.update(change)
    raw["models"][0] = entry
    catalog = parse_catalog(raw)
    assert len(catalog.models) == len(FAMILY) - 1
    assert len(catalog.problems) == 1 and word in catalog.problems[0]
    assert "entry 1" in catalog.problems[0]


def test_a_duplicate_and_a_newer_schema() -> None:
    raw = shipped()
    raw["models"].append(dict(raw["models"][1]))
    catalog = parse_catalog(raw)
    assert len(catalog.models) == len(FAMILY) and "listed twice" in catalog.problems[0]
    raw["schema_version"] = 99
    with pytest.raises(CatalogError, match="newer app"):
        parse_catalog(raw)


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b'{"schema_version": 1}', b"\xff\xfe", b'{"schema_version": NaN}',
     b"[" * 100_000, b'{"schema_version": 1, "models": ' + b"1" * 200_000 + b"}"],
)  # fmt: skip
def test_unusable_files_raise_one_clear_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "list.json"
    path.write_bytes(content)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path)
    assert caught.value.fix  # says what to do
    with pytest.raises(CatalogError, match="missing"):
        load_catalog(tmp_path / "absent.json")


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=30,
)
FIELDS = ("id", "kind", "parameters", "active_parameters", "mtp", "blurb", "text_config")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    index=st.integers(min_value=0, max_value=len(FAMILY) - 1),
    field=st.sampled_from(FIELDS),
    value=JSON,
)
def test_any_value_in_any_field_is_used_or_refused_never_crashes(
    index: int, field: str, value: Any
) -> None:
    raw = shipped()
    raw["models"][index] = {**raw["models"][index], field: value}
    catalog = parse_catalog(raw)
    assert len(catalog.models) + len(catalog.problems) == len(FAMILY)
    for entry in catalog.models:  # whatever was kept is usable
        fit = fit_on_device(entry, "CPU", 16 * GB, 32 * GB)
        assert set(fit.fits) == set(FORMATS)
        assert all(f.memory.total_bytes > 0 for f in fit.fits.values())


@settings(max_examples=200, deadline=None)
@given(raw=st.dictionaries(st.sampled_from(["schema_version", "family", "models", "x"]), JSON))
def test_any_top_level_object_is_a_catalog_or_a_catalog_error(raw: dict[str, Any]) -> None:
    try:
        catalog = parse_catalog(raw)
    except CatalogError as exc:
        assert exc.message
        return
    assert len(catalog.models) <= MAX_ENTRIES


@settings(max_examples=150, deadline=None)
@given(entry=JSON)
def test_parse_entry_raises_only_value_error(entry: Any) -> None:
    try:
        parse_entry(entry)
    except ValueError as exc:
        assert str(exc)
