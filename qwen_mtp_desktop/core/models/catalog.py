"""Discover: the curated list of Qwen3.5 checkpoints, sized for this computer.

The list is a versioned JSON resource (`resources/discover/qwen35.json`). It is read like any
other file the app did not write: size, nesting and numbers bounded, every field checked; an
entry that fails a check is left out (and named in `Catalog.problems`), never half-used.

Per entry and weight format the app estimates, with the same code the export preflight and the
Models panel use: the exported model's size (`core.models.export.preflight.estimate`), the memory
one chat needs on this device (`core.models.folders.memory`: weights + KV cache +
linear-attention state at the default context), and the RAM the export itself peaks at. From
these it recommends a precision for this device, or says that none fits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.files.paths import resources_dir
from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    UnsafeFileError,
    int_in_range,
    read_json_object,
)
from qwen_mtp_desktop.core.models.export.options import ExportOptions, WeightFormat
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import CheckpointInfo, TensorSummary
from qwen_mtp_desktop.core.models.export.preflight.estimate import estimate_export
from qwen_mtp_desktop.core.models.folders.memory import (
    DEFAULT_CONTEXT_LENGTH,
    default_kv_precision,
    estimate_memory,
    geometry_from_config,
)
from qwen_mtp_desktop.core.models.folders.report import Geometry, MemoryEstimate, Verdict
from qwen_mtp_desktop.core.units import format_bytes

SCHEMA_VERSION = 1
CATALOG_FILE = "qwen35.json"
MAX_CATALOG_BYTES = 256 * 1024
MAX_ENTRIES = 64
#: The formats Discover compares, in the order shown.
FORMATS: tuple[WeightFormat, ...] = ("int4", "int8", "fp16")
#: Bytes per parameter of the checkpoint as published (bf16 safetensors).
CHECKPOINT_BYTES_PER_PARAMETER = 2
#: Models up to this size get INT8 when it fits: on Qwen3.5-0.8B INT8 gave the larger MTP
#: speed-up (1.24x vs 1.12x at full acceptance, RUNTIME-NOTES); larger models are
#: memory-bound, where INT4 is faster.
INT8_PREFERRED_UP_TO = 2_000_000_000

_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
#: text_config keys the memory estimate reads, all positive whole numbers.
_SHAPE_KEYS = (
    "num_hidden_layers",
    "full_attention_interval",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
    "mtp_num_hidden_layers",
    "vocab_size",
    "num_experts",
)
_MODEL_TYPES = ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe")
_KIND = FileKind(
    "The Discover model list",
    "Reinstall the app; the list ships with it (resources/discover/).",
)


class CatalogError(UnsafeFileError):
    """The list as a whole cannot be used (unreadable, wrong shape, newer schema)."""


@dataclass(frozen=True)
class ReadyExport:
    """A ready OpenVINO export of a catalog model published on the hub by someone else. Its
    file list (and so whether it kept the MTP head) is read before anything is downloaded."""

    repo_id: str
    weight_format: WeightFormat
    #: Who publishes it, in a few words ("community upload").
    publisher: str


@dataclass(frozen=True)
class CatalogModel:
    hub_id: str
    kind: Literal["dense", "moe"]
    parameters: int
    active_parameters: int | None
    mtp: bool
    blurb: str
    #: The text model's shape where a config.json was seen, else None (weights-only memory).
    text_config: Mapping[str, Any] | None = None
    #: Ready OpenVINO exports of this checkpoint on the hub (download instead of exporting).
    ready: tuple[ReadyExport, ...] = ()

    @property
    def name(self) -> str:
        return self.hub_id.split("/", 1)[1]

    @property
    def download_bytes(self) -> int:
        return self.parameters * CHECKPOINT_BYTES_PER_PARAMETER

    @property
    def geometry(self) -> Geometry | None:
        return geometry_from_config(self.text_config) if self.text_config else None


@dataclass(frozen=True)
class Catalog:
    family: str
    models: list[CatalogModel]
    #: One line per entry that was left out, saying why.
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FormatFit:
    """One weight format of one model on this device."""

    weight_format: WeightFormat
    #: The exported folder (about what the runtime loads).
    model_bytes: int
    #: One chat at the default context: weights + KV cache + linear-attention state.
    memory: MemoryEstimate
    #: RAM the export peaks at (torch model + traced graph), whatever the format.
    export_peak_bytes: int

    @property
    def verdict(self) -> Verdict:
        return self.memory.verdict


@dataclass(frozen=True)
class DeviceFit:
    model: CatalogModel
    device: str
    fits: dict[str, FormatFit]
    #: The format to export for this device, or None when none fits.
    recommended: WeightFormat | None
    reason: str
    #: Why exporting here will fail (the export needs more RAM than the computer has), or None.
    export_problem: str | None = None


def catalog_path() -> Path:
    return resources_dir() / "discover" / CATALOG_FILE


def _text(value: object, limit: int) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= limit and value.isprintable():
        return value
    return None


def _shape(value: object) -> dict[str, Any] | None:
    """A text_config with only the keys the estimate reads, each checked; None if unusable."""
    if not isinstance(value, dict):
        return None
    shape: dict[str, Any] = {}
    for key in _SHAPE_KEYS:
        if key not in value:
            continue
        number = int_in_range(value[key], 1, 10_000_000)
        if number is None:
            return None
        shape[key] = number
    model_type = value.get("model_type")
    if model_type is not None:
        if model_type not in _MODEL_TYPES:
            return None
        shape["model_type"] = model_type
    tied = value.get("tie_word_embeddings")
    if tied is not None:
        if not isinstance(tied, bool):
            return None
        shape["tie_word_embeddings"] = tied
    if not {"num_hidden_layers", "num_attention_heads"} <= shape.keys():
        return None
    return shape


def parse_entry(raw: object) -> CatalogModel:
    """One model of the list; ValueError naming the first bad field."""
    if not isinstance(raw, dict):
        raise ValueError("an entry is not an object")
    hub_id = raw.get("id")
    if not isinstance(hub_id, str) or not _HUB_ID.fullmatch(hub_id) or ".." in hub_id:
        raise ValueError(f"id {str(hub_id)[:60]!r} is not a Hugging Face model id")
    kind = raw.get("kind")
    if kind not in ("dense", "moe"):
        raise ValueError(f"{hub_id}: kind must be 'dense' or 'moe'")
    parameters = int_in_range(raw.get("parameters"), 1_000_000, 10**13)
    if parameters is None:
        raise ValueError(f"{hub_id}: parameters must be a whole number from 1e6 to 1e13")
    active: int | None = None
    if raw.get("active_parameters") is not None:
        active = int_in_range(raw.get("active_parameters"), 1_000_000, parameters)
        if active is None:
            raise ValueError(f"{hub_id}: active_parameters must be at most parameters")
    if kind == "moe" and active is None:
        raise ValueError(f"{hub_id}: a mixture-of-experts model needs active_parameters")
    mtp = raw.get("mtp")
    if not isinstance(mtp, bool):
        raise ValueError(f"{hub_id}: mtp must be true or false")
    blurb = raw.get("blurb", "")
    if blurb != "" and _text(blurb, 300) is None:
        raise ValueError(f"{hub_id}: blurb must be printable text up to 300 characters")
    shape = None
    if raw.get("text_config") is not None:
        shape = _shape(raw.get("text_config"))
        if shape is None:
            raise ValueError(f"{hub_id}: text_config holds a value that is not a valid shape")
    ready = _ready_exports(hub_id, raw.get("openvino", []))
    return CatalogModel(hub_id, kind, parameters, active, mtp, str(blurb), shape, ready)


def _ready_exports(hub_id: str, raw: object) -> tuple[ReadyExport, ...]:
    if not isinstance(raw, list) or len(raw) > 8:
        raise ValueError(f"{hub_id}: openvino must be a list of up to 8 ready exports")
    found = []
    for item in raw:
        repo = item.get("repo") if isinstance(item, dict) else None
        if not isinstance(repo, str) or not _HUB_ID.fullmatch(repo) or ".." in repo:
            raise ValueError(f"{hub_id}: openvino repo {str(repo)[:60]!r} is not a model id")
        fmt = item.get("weight_format")
        if fmt not in FORMATS:
            raise ValueError(f"{hub_id}: {repo} weight_format must be one of {FORMATS}")
        publisher = item.get("publisher", "")
        if _text(publisher, 80) is None:
            raise ValueError(f"{hub_id}: {repo} publisher must be text up to 80 characters")
        found.append(ReadyExport(repo, fmt, str(publisher)))
    return tuple(found)


def parse_catalog(raw: Mapping[str, Any]) -> Catalog:
    version = raw.get("schema_version")
    if int_in_range(version, 1, 1_000_000) is None:
        raise CatalogError(f"{_KIND.what} has no valid schema_version.", _KIND.fix)
    assert isinstance(version, int)
    if version > SCHEMA_VERSION:
        raise CatalogError(
            f"{_KIND.what} was written for a newer app (schema {version}, this app knows "
            f"{SCHEMA_VERSION}).",
            "Update the app.",
        )
    family = _text(raw.get("family"), 80) or "Qwen3.5"
    entries = raw.get("models")
    if not isinstance(entries, list):
        raise CatalogError(f"{_KIND.what} has no list of models.", _KIND.fix)
    models: list[CatalogModel] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries[:MAX_ENTRIES]):
        try:
            model = parse_entry(entry)
        except ValueError as exc:
            problems.append(f"entry {index + 1}: {exc}")
            continue
        if model.hub_id.lower() in seen:
            problems.append(f"entry {index + 1}: {model.hub_id} is listed twice")
            continue
        seen.add(model.hub_id.lower())
        models.append(model)
    if len(entries) > MAX_ENTRIES:
        problems.append(f"only the first {MAX_ENTRIES} of {len(entries)} entries are used")
    return Catalog(family, models, problems)


def load_catalog(path: Path | None = None) -> Catalog:
    """The list, checked; CatalogError (with a fix) when it cannot be used at all."""
    path = path or catalog_path()
    try:
        raw = read_json_object(path, kind=_KIND, max_bytes=MAX_CATALOG_BYTES)
    except FileNotFoundError:
        raise CatalogError(f"{_KIND.what} is missing ({path}).", _KIND.fix) from None
    except UnsafeFileError as exc:
        raise CatalogError(exc.message, exc.fix) from None
    return parse_catalog(raw)


def _checkpoint(model: CatalogModel) -> CheckpointInfo:
    """What the export estimate needs, from the list instead of safetensors headers."""
    summary = TensorSummary(
        files=(),
        tensors=0,
        parameters=model.parameters,
        mtp_tensors=0,
        mtp_parameters=0,
        vision_parameters=0,
        data_bytes=model.download_bytes,
    )
    config = {"text_config": dict(model.text_config)} if model.text_config else {}
    return CheckpointInfo(
        source=model.hub_id,
        kind="hub",
        config=config,
        tensors=summary,
        download_bytes=model.download_bytes,
    )


def fit_on_device(
    model: CatalogModel,
    device: str,
    available_bytes: int | None,
    total_bytes: int | None = None,
    *,
    context_length: int = DEFAULT_CONTEXT_LENGTH,
) -> DeviceFit:
    """Sizes and memory per format on this device, and the format to recommend."""
    checkpoint = _checkpoint(model)
    geometry = model.geometry
    fits: dict[str, FormatFit] = {}
    for fmt in FORMATS:
        estimate = estimate_export(checkpoint, ExportOptions(weight_format=fmt))
        assert estimate is not None  # the summary is always there
        memory = estimate_memory(
            {"model": estimate.output_bytes},
            geometry,
            context_length=context_length,
            kv_precision=default_kv_precision(device),
            available_bytes=available_bytes,
        )
        fits[fmt] = FormatFit(fmt, estimate.output_bytes, memory, estimate.peak_ram_bytes)
    recommended, reason = _recommend(model, fits, available_bytes)
    peak = fits["int4"].export_peak_bytes
    problem = None
    if total_bytes is not None and peak > total_bytes:
        problem = (
            f"Exporting needs about {format_bytes(peak)} of RAM (the checkpoint is loaded in "
            f"full precision), more than this computer's {format_bytes(total_bytes)}: export "
            "it on a computer with more RAM and copy the folder here."
        )
    return DeviceFit(model, device, fits, recommended, reason, problem)


def _recommend(
    model: CatalogModel, fits: Mapping[str, FormatFit], available_bytes: int | None
) -> tuple[WeightFormat | None, str]:
    if available_bytes is None:
        return "int4", "Free memory is unknown here; INT4 needs the least."
    int8, int4 = fits["int8"], fits["int4"]
    if model.parameters <= INT8_PREFERRED_UP_TO and int8.verdict == "fits":
        return "int8", (
            "INT8 fits comfortably, and on small models it gives MTP the larger speed-up."
        )
    if int4.verdict == "fits":
        return "int4", "INT4 fits in the free memory and is the fastest on CPU."
    if int4.verdict == "tight":
        return "int4", "Only INT4 fits, and only just: close other apps while chatting."
    return None, "Too large for this computer's free memory, even in INT4."
