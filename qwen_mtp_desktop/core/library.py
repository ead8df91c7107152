"""Model directories: discover them, inspect them, diagnose problems, estimate memory, verify.

Nothing here compiles a model or imports openvino: IRs are read by `core.ir` (XML + file sizes),
the rest comes from the folder's JSON files. So inspecting costs about as much as reading the
.xml files (the weights are never read), and it works even when the runtime is broken, which is
when the diagnostics matter most. Checksum verification, which does read everything, is a
separate, cancellable call.

Every result is a plain dataclass with a `to_json_dict()` whose field names are stable (the CLI
prints them and the UI reads them); `ModelReport.to_json_dict` documents the schema.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil

from qwen_mtp_desktop.core.chat_template import template_source
from qwen_mtp_desktop.core.environment import package_version, release_family
from qwen_mtp_desktop.core.ir import (
    IrError,
    IrInfo,
    IrIssue,
    IrMissingError,
    IrUnreadableError,
    PortInfo,
    PrecisionShare,
    RtInfo,
    read_ir,
)
from qwen_mtp_desktop.core.safe_files import (
    FileKind,
    UnsafeFileError,
    read_json_file,
    read_json_object,
)

#: Our own record of an export, written next to the IR by the export job.
MANIFEST_NAME = "qwen_mtp_export.json"
REPORT_SCHEMA_VERSION = 1
DEFAULT_CONTEXT_LENGTH = 4096
#: Above this share of available RAM a model is "tight": it loads, but the system may swap.
TIGHT_FRACTION = 0.70

Severity = Literal["error", "warning", "info"]
ComponentUse = Literal["chat", "image", "other"]
Kind = Literal["qwen3_5_dense", "qwen3_5_moe", "other", "unknown"]
Layout = Literal["vlm", "llm", "none"]
Verdict = Literal["fits", "tight", "does_not_fit", "unknown"]
KvPrecision = Literal["u8", "u4", "f16", "bf16", "f32"]

#: Bits per KV-cache element. OpenVINO 2026's CPU plugin defaults to u8 (KV_CACHE_PRECISION);
#: GPU keeps f16.
KV_BITS: dict[str, int] = {"u8": 8, "u4": 4, "f16": 16, "bf16": 16, "f32": 32}
#: Extra bytes per token and head for a quantized KV cache: the CPU plugin stores an f32 scale
#: and an f32 zero point per group, and the default group is the whole head
#: (intel_cpu transformation pipeline, ConvertPagedAttnInputs shape callback).
KV_QUANT_PARAM_BYTES: dict[str, int] = {"u8": 8, "u4": 8}
#: Gated DeltaNet recurrent and convolution states are kept in f32 (the IR's state variables).
LINEAR_STATE_BYTES = 4

_HASH_CHUNK = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_QWEN35_TYPES = frozenset({"qwen3_5", "qwen3_5_text"})
_QWEN35_MOE_TYPES = frozenset({"qwen3_5_moe", "qwen3_5_moe_text"})
_CHECKPOINT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")

REEXPORT_FIX = (
    "Re-export the checkpoint with the export wizard (task image-text-to-text, "
    "optimum-intel >= 2.2)."
)


@dataclass(frozen=True)
class Diagnostic:
    """One finding. Severity "error" means the model cannot be used for chat."""

    code: str
    severity: Severity
    message: str
    fix: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class ComponentSpec:
    key: str
    stem: str
    label: str
    #: "chat": loaded for every chat; "image": only when a message has an image.
    use: ComponentUse


COMPONENTS: tuple[ComponentSpec, ...] = (
    ComponentSpec("language_model", "openvino_language_model", "Language model", "chat"),
    ComponentSpec("text_embeddings", "openvino_text_embeddings_model", "Text embeddings", "chat"),
    ComponentSpec("mtp", "openvino_mtp_model", "MTP head", "chat"),
    ComponentSpec("tokenizer", "openvino_tokenizer", "Tokenizer", "chat"),
    ComponentSpec("detokenizer", "openvino_detokenizer", "Detokenizer", "chat"),
    ComponentSpec(
        "vision_embeddings", "openvino_vision_embeddings_model", "Vision embeddings", "image"
    ),
    ComponentSpec(
        "vision_embeddings_merger",
        "openvino_vision_embeddings_merger_model",
        "Vision merger",
        "image",
    ),
    ComponentSpec(
        "vision_embeddings_pos",
        "openvino_vision_embeddings_pos_model",
        "Vision position embeddings",
        "image",
    ),
)
#: A text-only export (optimum's text-generation task) keeps the whole model in one IR.
LLM_COMPONENT = ComponentSpec("model", "openvino_model", "Language model (text-only)", "chat")


# --- manifest ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportManifest:
    """`qwen_mtp_export.json`: what the export job recorded about how this folder was made.

    JSON object: {"source": str, "revision": str | null, "options": {...},
    "versions": {package: version}, "files": {relative name: sha256 hex},
    "duration_s": float | null, "peak_rss_bytes": int | null}.
    """

    source: str | None = None
    revision: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    duration_s: float | None = None
    peak_rss_bytes: int | None = None

    @classmethod
    def from_json_dict(cls, raw: object) -> ExportManifest:
        """Validate a decoded manifest; ValueError names the first field that is wrong."""
        if not isinstance(raw, dict):
            raise ValueError("the manifest is not a JSON object")

        def optional(name: str, kinds: tuple[type, ...]) -> Any:
            value = raw.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                raise ValueError(f"manifest field {name!r} has the wrong type")
            return value

        def mapping(name: str, value_kind: type) -> dict[str, Any]:
            value = raw.get(name) or {}
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, value_kind) for k, v in value.items()
            ):
                raise ValueError(f"manifest field {name!r} has the wrong type")
            return dict(value)

        duration = optional("duration_s", (int, float))
        return cls(
            source=optional("source", (str,)),
            revision=optional("revision", (str,)),
            options=mapping("options", object),
            versions=mapping("versions", str),
            files=mapping("files", str),
            duration_s=float(duration) if duration is not None else None,
            peak_rss_bytes=optional("peak_rss_bytes", (int,)),
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "revision": self.revision,
            "options": dict(self.options),
            "versions": dict(self.versions),
            "files": dict(self.files),
            "duration_s": self.duration_s,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


def read_manifest(model_dir: Path) -> ExportManifest | None:
    """The folder's export manifest; None if absent. ValueError if present but unusable."""
    path = Path(model_dir) / MANIFEST_NAME
    try:
        raw = read_json_file(path, kind=FileKind(MANIFEST_NAME, ""))
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:
        raise ValueError(exc.message) from exc
    return ExportManifest.from_json_dict(raw)


# --- report dataclasses --------------------------------------------------------------------


@dataclass
class ComponentReport:
    key: str
    label: str
    stem: str
    use: ComponentUse
    xml_present: bool
    bin_present: bool
    xml_bytes: int = 0
    bin_bytes: int = 0
    precision: str = ""
    precision_shares: list[PrecisionShare] = field(default_factory=list)
    dominant_precision: str | None = None
    weight_parameters: int = 0
    const_bytes_by_type: dict[str, int] = field(default_factory=dict)
    rt_info: RtInfo = field(default_factory=dict)
    issues: list[IrIssue] = field(default_factory=list)
    #: Why the .xml could not be read at all, else None.
    error: str | None = None
    #: True when `error` is about access (permissions, I/O), not about the file's content.
    unreadable: bool = False
    ir: IrInfo | None = field(default=None, repr=False, compare=False)

    @property
    def present(self) -> bool:
        return self.xml_present and self.bin_present

    @property
    def readable(self) -> bool:
        """Present, parsed and consistent: the runtime has a chance to load it."""
        return (
            self.present
            and self.error is None
            and not any(i.severity == "error" for i in self.issues)
        )

    @property
    def total_bytes(self) -> int:
        return self.xml_bytes + self.bin_bytes

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "stem": self.stem,
            "use": self.use,
            "present": self.present,
            "xml_present": self.xml_present,
            "bin_present": self.bin_present,
            "xml_bytes": self.xml_bytes,
            "bin_bytes": self.bin_bytes,
            "total_bytes": self.total_bytes,
            "precision": self.precision,
            "precision_shares": [share.to_json_dict() for share in self.precision_shares],
            "dominant_precision": self.dominant_precision,
            "weight_parameters": self.weight_parameters,
            "const_bytes_by_type": dict(self.const_bytes_by_type),
            "rt_info": self.rt_info,
            "issues": [issue.to_json_dict() for issue in self.issues],
            "error": self.error,
        }


@dataclass(frozen=True)
class SourceInfo:
    model_id: str | None = None
    revision: str | None = None
    #: Where it came from: "manifest", "config" (_name_or_path), "openvino_config", or None.
    origin: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "revision": self.revision, "origin": self.origin}


@dataclass(frozen=True)
class Geometry:
    """The text model's shape, as far as memory is concerned."""

    layers: int
    full_attention_layers: int
    linear_attention_layers: int
    kv_heads: int
    head_dim: int
    linear_num_key_heads: int = 0
    linear_num_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    mtp_layers: int = 0
    hidden_size: int | None = None
    vocab_size: int | None = None
    num_experts: int | None = None
    #: "config.json" or "ir" (read from the language model's state variables).
    source: str = "config.json"

    @property
    def linear_conv_dim(self) -> int:
        """Channels of the causal conv over q, k and v: 2 * key heads * key dim + value dim."""
        return (
            2 * self.linear_num_key_heads * self.linear_key_head_dim
            + self.linear_num_value_heads * self.linear_value_head_dim
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "full_attention_layers": self.full_attention_layers,
            "linear_attention_layers": self.linear_attention_layers,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "linear_num_key_heads": self.linear_num_key_heads,
            "linear_num_value_heads": self.linear_num_value_heads,
            "linear_key_head_dim": self.linear_key_head_dim,
            "linear_value_head_dim": self.linear_value_head_dim,
            "linear_conv_kernel": self.linear_conv_kernel,
            "linear_conv_dim": self.linear_conv_dim,
            "mtp_layers": self.mtp_layers,
            "hidden_size": self.hidden_size,
            "vocab_size": self.vocab_size,
            "num_experts": self.num_experts,
            "source": self.source,
        }


@dataclass(frozen=True)
class MemoryTerm:
    key: str
    label: str
    bytes: int
    #: The arithmetic, with the numbers used, e.g. "2 × 6 layers × 2 heads × ... = 1,234 B".
    formula: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "bytes": self.bytes, "formula": self.formula}


@dataclass(frozen=True)
class MemoryEstimate:
    context_length: int
    kv_precision: str
    terms: list[MemoryTerm]
    total_bytes: int
    #: Loaded on top of `total_bytes` only when a chat uses an image (vision encoder weights).
    image_extra_bytes: int
    available_bytes: int | None
    #: total_bytes / available_bytes, or None when availability is unknown.
    fraction: float | None
    verdict: Verdict
    notes: list[str]

    def term(self, key: str) -> MemoryTerm | None:
        return next((t for t in self.terms if t.key == key), None)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "context_length": self.context_length,
            "kv_precision": self.kv_precision,
            "terms": [t.to_json_dict() for t in self.terms],
            "total_bytes": self.total_bytes,
            "image_extra_bytes": self.image_extra_bytes,
            "available_bytes": self.available_bytes,
            "fraction": self.fraction,
            "verdict": self.verdict,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class MtpSummary:
    present: bool
    bytes: int
    precision: str
    dominant_precision: str | None
    #: The language model's dominant precision, for comparison.
    main_precision: str | None
    #: None when it cannot be told (no MTP, or the main model is unreadable).
    compressed_like_main: bool | None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "bytes": self.bytes,
            "precision": self.precision,
            "dominant_precision": self.dominant_precision,
            "main_precision": self.main_precision,
            "compressed_like_main": self.compressed_like_main,
        }


@dataclass
class ModelReport:
    """Everything the model manager shows about one folder.

    `to_json_dict()` schema (schema_version 1; keys always present, null when unknown)::

        {
          "schema_version": 1,
          "path": str, "name": str,
          "kind": "qwen3_5_dense" | "qwen3_5_moe" | "other" | "unknown", "kind_label": str,
          "model_type": str | null, "architectures": [str],
          "layout": "vlm" | "llm" | "none",
          "source": {"model_id": str | null, "revision": str | null, "origin": str | null},
          "manifest": ExportManifest.to_json_dict() | null,
          "versions": {package: version},      # from IR rt_info, then the manifest
          "components": [{
              "key", "label", "stem", "use": "chat" | "image" | "other",
              "present", "xml_present", "bin_present": bool,
              "xml_bytes", "bin_bytes", "total_bytes": int,
              "precision": str,                # "INT4 asym g64 (92 %), INT8 sym (8 %)"
              "precision_shares": [{"label", "parameters", "tensors", "percent"}],
              "dominant_precision": str | null, "weight_parameters": int,
              "const_bytes_by_type": {element_type: bytes},
              "rt_info": {...}, "issues": [{"code", "severity", "message"}],
              "error": str | null}],
          "mtp": {"present", "bytes", "precision", "dominant_precision", "main_precision",
                  "compressed_like_main": bool | null},
          "geometry": Geometry.to_json_dict() | null,
          "chat_template": bool,
          "total_bytes": int,                  # every file in the folder
          "memory": {"context_length", "kv_precision",
                     "terms": [{"key", "label", "bytes", "formula"}], "total_bytes",
                     "image_extra_bytes", "available_bytes", "fraction",
                     "verdict": "fits" | "tight" | "does_not_fit" | "unknown",
                     "notes": [str]} | null,
          "diagnostics": [{"code", "severity": "error" | "warning" | "info", "message", "fix"}],
          "usable_for_chat": bool, "mtp_usable": bool
        }
    """

    path: Path
    name: str
    kind: Kind = "unknown"
    kind_label: str = "unknown"
    model_type: str | None = None
    architectures: list[str] = field(default_factory=list)
    layout: Layout = "none"
    source: SourceInfo = field(default_factory=SourceInfo)
    manifest: ExportManifest | None = None
    versions: dict[str, str] = field(default_factory=dict)
    components: list[ComponentReport] = field(default_factory=list)
    mtp: MtpSummary = field(default_factory=lambda: MtpSummary(False, 0, "", None, None, None))
    geometry: Geometry | None = None
    chat_template: bool = False
    total_bytes: int = 0
    memory: MemoryEstimate | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def usable_for_chat(self) -> bool:
        return not any(d.severity == "error" for d in self.diagnostics)

    @property
    def mtp_usable(self) -> bool:
        return self.usable_for_chat and self.mtp.present and self.kind != "other"

    def component(self, key: str) -> ComponentReport | None:
        return next((c for c in self.components if c.key == key), None)

    def codes(self) -> list[str]:
        return [d.code for d in self.diagnostics]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "path": str(self.path),
            "name": self.name,
            "kind": self.kind,
            "kind_label": self.kind_label,
            "model_type": self.model_type,
            "architectures": list(self.architectures),
            "layout": self.layout,
            "source": self.source.to_json_dict(),
            "manifest": self.manifest.to_json_dict() if self.manifest else None,
            "versions": dict(self.versions),
            "components": [c.to_json_dict() for c in self.components],
            "mtp": self.mtp.to_json_dict(),
            "geometry": self.geometry.to_json_dict() if self.geometry else None,
            "chat_template": self.chat_template,
            "total_bytes": self.total_bytes,
            "memory": self.memory.to_json_dict() if self.memory else None,
            "diagnostics": [d.to_json_dict() for d in self.diagnostics],
            "usable_for_chat": self.usable_for_chat,
            "mtp_usable": self.mtp_usable,
        }


# --- discovery -----------------------------------------------------------------------------


def _looks_like_model(names: set[str]) -> bool:
    if "openvino_language_model.xml" in names or "openvino_model.xml" in names:
        return True
    if "config.json" not in names:
        return False
    return any(n.endswith(".xml") and n[:-4] + ".bin" in names for n in names)


def discover_models(roots: Iterable[Path], max_depth: int = 3) -> list[Path]:
    """Model folders under `roots` (each root may itself be one), at most `max_depth` levels down.

    A folder holding openvino_language_model.xml or openvino_model.xml, or config.json with an
    IR pair, is a model; its subfolders are not searched. Hidden folders (".name", which is also
    where exports stage their output) are skipped; unreadable folders and symlink loops are
    passed over silently. Order: roots in the order given, then depth-first by name.
    """
    found: list[Path] = []
    visited: set[tuple[int, int]] = set()

    def visit(folder: Path, depth: int) -> None:
        try:
            info = folder.stat()
        except OSError:
            return
        if not stat.S_ISDIR(info.st_mode):
            return
        key = (info.st_dev, info.st_ino)
        if key in visited:
            return  # a symlink loop, or a folder reached twice
        visited.add(key)
        try:
            with os.scandir(folder) as entries:
                listing = sorted(entries, key=lambda e: e.name)
        except OSError:
            return
        names = {entry.name for entry in listing}
        if _looks_like_model(names):
            found.append(folder)
            return
        if depth >= max_depth:
            return
        for entry in listing:
            if entry.name.startswith("."):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                visit(Path(entry.path), depth + 1)

    for root in roots:
        visit(Path(root), 0)
    return found


# --- memory --------------------------------------------------------------------------------


def _n(value: int) -> str:
    return f"{value:,}"


def estimate_memory(
    weight_bytes: Mapping[str, int],
    geometry: Geometry | None,
    *,
    context_length: int = DEFAULT_CONTEXT_LENGTH,
    kv_precision: KvPrecision = "u8",
    include_mtp: bool = True,
    image_extra_bytes: int = 0,
    available_bytes: int | None = None,
) -> MemoryEstimate:
    """RAM for one chat of `context_length` tokens: weights + KV cache + linear-attention state.

    `weight_bytes` maps component keys to the bytes the runtime loads (their .bin sizes).
    KV cache per full-attention layer = 2 (K and V) × kv_heads × head_dim × tokens × element
    size; a quantized cache (u8/u4) adds an f32 scale and zero point per token and head. Each
    Gated DeltaNet layer keeps a recurrent state (value heads × key dim × value dim) and a conv
    state (conv channels × kernel), both f32, whatever the context length. The MTP head adds
    one layer of KV cache.
    """
    if kv_precision not in KV_BITS:
        raise ValueError(f"unknown KV cache precision {kv_precision!r}")
    if context_length <= 0:
        raise ValueError("context_length must be positive")
    bits = KV_BITS[kv_precision]
    terms: list[MemoryTerm] = []
    notes: list[str] = []

    weights_total = sum(weight_bytes.values())
    listing = " + ".join(f"{key} {_n(size)} B" for key, size in weight_bytes.items())
    terms.append(
        MemoryTerm(
            "weights",
            "Weights (files the chat runtime loads)",
            weights_total,
            f"{listing or '0 B'} = {_n(weights_total)} B",
        )
    )

    def kv_terms(key: str, label: str, layers: int, geo: Geometry) -> None:
        heads, dim, ctx = geo.kv_heads, geo.head_dim, context_length
        size = 2 * layers * heads * dim * ctx * bits // 8
        terms.append(
            MemoryTerm(
                key,
                label,
                size,
                f"2 × {layers} layers × {heads} KV heads × {dim} head dim × {_n(ctx)} tokens "
                f"× {bits // 8 if bits >= 8 else bits / 8} B ({kv_precision}) = {_n(size)} B",
            )
        )
        extra = KV_QUANT_PARAM_BYTES.get(kv_precision, 0)
        if extra:
            params = 2 * layers * heads * ctx * extra
            terms.append(
                MemoryTerm(
                    f"{key}_quant_params",
                    f"{label}: scales and zero points",
                    params,
                    f"2 × {layers} layers × {heads} KV heads × {_n(ctx)} tokens × {extra} B "
                    f"(f32 scale + zero point per token and head) = {_n(params)} B",
                )
            )

    if geometry is None:
        notes.append(
            "The model's shape is unknown (no usable config.json), so the KV cache is not "
            "included: the estimate covers weights only."
        )
    else:
        geo = geometry
        if geo.full_attention_layers:
            kv_terms("kv_cache", "KV cache (full-attention layers)", geo.full_attention_layers, geo)
        if geo.linear_attention_layers:
            n = geo.linear_attention_layers
            state = n * geo.linear_num_value_heads * geo.linear_key_head_dim
            state = state * geo.linear_value_head_dim * LINEAR_STATE_BYTES
            terms.append(
                MemoryTerm(
                    "linear_state",
                    "Gated DeltaNet recurrent state (independent of context length)",
                    state,
                    f"{n} layers × {geo.linear_num_value_heads} value heads × "
                    f"{geo.linear_key_head_dim} key dim × {geo.linear_value_head_dim} value dim "
                    f"× {LINEAR_STATE_BYTES} B (f32) = {_n(state)} B",
                )
            )
            conv = n * geo.linear_conv_dim * geo.linear_conv_kernel * LINEAR_STATE_BYTES
            terms.append(
                MemoryTerm(
                    "linear_conv_state",
                    "Gated DeltaNet convolution state",
                    conv,
                    f"{n} layers × {geo.linear_conv_dim} channels (2 × "
                    f"{geo.linear_num_key_heads} × {geo.linear_key_head_dim} + "
                    f"{geo.linear_num_value_heads} × {geo.linear_value_head_dim}) × "
                    f"{geo.linear_conv_kernel} kernel × {LINEAR_STATE_BYTES} B (f32) = "
                    f"{_n(conv)} B",
                )
            )
        if include_mtp and geo.mtp_layers:
            kv_terms("mtp_kv_cache", "MTP head KV cache", geo.mtp_layers, geo)
    total = sum(t.bytes for t in terms)
    if image_extra_bytes:
        notes.append(
            f"The vision encoder ({_n(image_extra_bytes)} B of weights, plus activations that "
            "grow with image size) is loaded only when a chat includes an image; it is not in "
            "the total."
        )
    notes.append(
        "The runtime adds working memory on top (activations, compiled kernels, the Python "
        "process): allow a few hundred MB more."
    )
    fraction: float | None = None
    verdict: Verdict = "unknown"
    if available_bytes is not None and available_bytes > 0:
        fraction = total / available_bytes
        if fraction < TIGHT_FRACTION:
            verdict = "fits"
        elif fraction <= 1.0:
            verdict = "tight"
        else:
            verdict = "does_not_fit"
    return MemoryEstimate(
        context_length=context_length,
        kv_precision=kv_precision,
        terms=terms,
        total_bytes=total,
        image_extra_bytes=image_extra_bytes,
        available_bytes=available_bytes,
        fraction=fraction,
        verdict=verdict,
        notes=notes,
    )


def default_kv_precision(device: str) -> KvPrecision:
    """The KV-cache precision OpenVINO 2026 picks by default: u8 on CPU, f16 on GPU and NPU.

    AUTO and multi-device strings get f16, the larger of the two, so the estimate errs high.
    """
    return "u8" if device.strip().upper() == "CPU" else "f16"


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def geometry_from_config(config: Mapping[str, Any]) -> Geometry | None:
    """The text model's shape from config.json (a VLM's text_config, or the config itself)."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        text = config
    layers = _positive_int(text.get("num_hidden_layers"))
    heads = _positive_int(text.get("num_attention_heads"))
    if layers is None or heads is None:
        return None
    kv_heads = _positive_int(text.get("num_key_value_heads")) or heads
    hidden = _positive_int(text.get("hidden_size"))
    head_dim = _positive_int(text.get("head_dim")) or (hidden // heads if hidden else None)
    if head_dim is None:
        return None
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        full = sum(1 for t in layer_types if t == "full_attention")
        linear = sum(1 for t in layer_types if t == "linear_attention")
    else:
        model_type = str(text.get("model_type", ""))
        interval = _positive_int(text.get("full_attention_interval"))
        if interval is None and model_type.startswith("qwen3_5"):
            interval = 4  # Qwen3.5's default: three linear-attention layers, then one full
        if interval is not None:
            full = sum(1 for i in range(layers) if (i + 1) % interval == 0)
            linear = layers - full
        else:
            full, linear = layers, 0
    experts = _positive_int(text.get("num_experts"))
    return Geometry(
        layers=layers,
        full_attention_layers=full,
        linear_attention_layers=linear,
        kv_heads=kv_heads,
        head_dim=head_dim,
        linear_num_key_heads=_positive_int(text.get("linear_num_key_heads")) or 0,
        linear_num_value_heads=_positive_int(text.get("linear_num_value_heads")) or 0,
        linear_key_head_dim=_positive_int(text.get("linear_key_head_dim")) or 0,
        linear_value_head_dim=_positive_int(text.get("linear_value_head_dim")) or 0,
        linear_conv_kernel=_positive_int(text.get("linear_conv_kernel_dim")) or 0,
        mtp_layers=_positive_int(text.get("mtp_num_hidden_layers")) or 0,
        hidden_size=hidden,
        vocab_size=_positive_int(text.get("vocab_size")),
        num_experts=experts,
        source="config.json",
    )


def geometry_from_ir(language_model: IrInfo, mtp: IrInfo | None) -> Geometry | None:
    """The shape read from the state variables of a stateful export (when config.json is gone).

    optimum-intel names them cache_params.past.{key,value,conv,ssm}.N with shapes
    [batch, kv heads, tokens, head dim], [batch, conv channels, kernel] and
    [batch, value heads, key dim, value dim].
    """

    def dims(port: PortInfo) -> list[int | None]:
        try:
            return port.dims()
        except ValueError:
            return []

    keys = [dims(s) for s in language_model.states if ".key." in s.name]
    ssm = [dims(s) for s in language_model.states if ".ssm." in s.name]
    conv = [dims(s) for s in language_model.states if ".conv." in s.name]
    if not keys or len(keys[0]) != 4 or keys[0][1] is None or keys[0][3] is None:
        return None
    kv_heads, head_dim = keys[0][1], keys[0][3]
    value_heads = key_dim = value_dim = channels = kernel = 0
    if ssm and len(ssm[0]) == 4 and None not in ssm[0][1:]:
        value_heads, key_dim, value_dim = (int(d or 0) for d in ssm[0][1:])
    if conv and len(conv[0]) == 3 and None not in conv[0][1:]:
        channels, kernel = (int(d or 0) for d in conv[0][1:])
    # conv channels = 2 * key heads * key dim + value heads * value dim
    key_heads = (channels - value_heads * value_dim) // (2 * key_dim) if key_dim else 0
    mtp_layers = 0
    if mtp is not None:
        mtp_layers = len([s for s in mtp.states if ".key" in s.name])
    return Geometry(
        layers=len(keys) + len(ssm),
        full_attention_layers=len(keys),
        linear_attention_layers=len(ssm),
        kv_heads=kv_heads,
        head_dim=head_dim,
        linear_num_key_heads=max(key_heads, 0),
        linear_num_value_heads=value_heads,
        linear_key_head_dim=key_dim,
        linear_value_head_dim=value_dim,
        linear_conv_kernel=kernel,
        mtp_layers=mtp_layers,
        source="ir",
    )


def available_memory() -> tuple[int | None, int | None]:
    """(available, total) RAM in bytes, or (None, None) if the system will not say."""
    try:
        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)
    except Exception:  # psutil can fail in odd containers; the estimate then says "unknown"
        return None, None


# --- inspection ----------------------------------------------------------------------------


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None), (None, None) when absent, or (None, reason) when unreadable."""
    try:
        return read_json_object(path, kind=FileKind(path.name, "")), None
    except FileNotFoundError:
        return None, None
    except UnsafeFileError as exc:
        return None, exc.message


def _kind(config: Mapping[str, Any] | None) -> tuple[Kind, str, str | None]:
    if config is None:
        return "unknown", "unknown (no config.json)", None
    model_type = config.get("model_type")
    text = config.get("text_config")
    text_type = text.get("model_type") if isinstance(text, dict) else None
    types = {t for t in (model_type, text_type) if isinstance(t, str)}
    shown = model_type if isinstance(model_type, str) else None
    experts = _positive_int((text if isinstance(text, dict) else config).get("num_experts"))
    if types & _QWEN35_MOE_TYPES or (types & _QWEN35_TYPES and experts):
        return "qwen3_5_moe", "Qwen3.5 MoE", shown
    if types & _QWEN35_TYPES:
        return "qwen3_5_dense", "Qwen3.5 dense", shown
    if shown:
        return "other", f"other ({shown})", shown
    return "unknown", "unknown (config.json has no model_type)", None


def _inspect_component(folder: Path, spec: ComponentSpec, names: set[str]) -> ComponentReport:
    xml_name, bin_name = f"{spec.stem}.xml", f"{spec.stem}.bin"
    report = ComponentReport(
        key=spec.key,
        label=spec.label,
        stem=spec.stem,
        use=spec.use,
        xml_present=xml_name in names,
        bin_present=bin_name in names,
    )
    if report.bin_present:
        with contextlib.suppress(OSError):
            report.bin_bytes = (folder / bin_name).stat().st_size
    if not report.xml_present:
        return report
    try:
        ir = read_ir(folder / xml_name, folder / bin_name)
    except IrError as exc:
        report.error = exc.reason
        report.unreadable = isinstance(exc, IrUnreadableError | IrMissingError)
        with contextlib.suppress(OSError):
            report.xml_bytes = (folder / xml_name).stat().st_size
        return report
    report.ir = ir
    report.xml_bytes = ir.xml_bytes
    report.bin_bytes = ir.bin_bytes or 0
    report.precision = ir.precision_summary
    report.precision_shares = ir.precision_shares
    report.dominant_precision = ir.dominant_precision
    report.weight_parameters = ir.weight_parameters
    report.const_bytes_by_type = ir.const_bytes_by_type
    report.rt_info = ir.rt_info
    report.issues = list(ir.issues)
    return report


def _folder_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder, onerror=lambda _e: None):
        for name in files:
            try:
                info = (Path(dirpath) / name).lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _family_key(family: str) -> tuple[int, int]:
    year, release = family.split(".")
    return int(year), int(release)


def _version_diagnostics(
    versions: Mapping[str, str], installed: Mapping[str, str | None]
) -> list[Diagnostic]:
    mismatches: list[str] = []
    newer = False
    for package in ("openvino", "openvino-tokenizers"):
        exported = release_family(versions.get(package))
        have = release_family(installed.get(package))
        if exported is None or have is None or exported == have:
            continue
        mismatches.append(f"{package}: exported with {exported}, installed {have}")
        newer = newer or _family_key(exported) > _family_key(have)
    if not mismatches:
        return []
    if newer:
        fix = (
            "Update the runtime to the export's release family (openvino, openvino-genai and "
            "openvino-tokenizers together), or re-export with the installed toolkit."
        )
        message = (
            "This model was exported by a newer OpenVINO than the one installed ("
            + "; ".join(mismatches)
            + "). Newer IRs and tokenizer operations may not load."
        )
    else:
        fix = "If loading fails, re-export the model with the export wizard."
        message = (
            "This model was exported by an older OpenVINO release family ("
            + "; ".join(mismatches)
            + "). Older IRs usually load, but this combination is untested."
        )
    return [Diagnostic("RUNTIME_FAMILY_MISMATCH", "warning", message, fix)]


def _component_diagnostics(component: ComponentReport) -> list[Diagnostic]:
    """IR_INCOMPLETE / IR_CORRUPT / UNREADABLE for one component, severity by what it is for."""
    out: list[Diagnostic] = []
    # Broken vision parts only cost image input; a broken MTP head only costs the speed-up.
    critical = component.use == "chat" and component.key != "mtp"
    severity: Severity = "error" if critical else "warning"
    consequence = ""
    if component.key == "mtp":
        consequence = " Chat still works, without speculative decoding."
    elif component.use == "image":
        consequence = " Chat still works, without image input."
    name = component.label
    if component.xml_present != component.bin_present:
        have, missing = (".xml", ".bin") if component.xml_present else (".bin", ".xml")
        out.append(
            Diagnostic(
                "IR_INCOMPLETE",
                severity,
                f"{name}: {component.stem}{have} is there but {component.stem}{missing} is "
                f"missing.{consequence}",
                "Copy the missing file from the original export, or re-export the model.",
            )
        )
    if component.error is not None:
        code = "UNREADABLE" if component.unreadable else "IR_CORRUPT"
        out.append(
            Diagnostic(
                code,
                severity,
                f"{name}: {component.stem}.xml {component.error}.{consequence}",
                "Check the file's permissions."
                if code == "UNREADABLE"
                else "The file is damaged: re-export the model or copy it again.",
            )
        )
    for issue in component.issues:
        if issue.code == "IR_INCOMPLETE" and component.xml_present != component.bin_present:
            continue  # already said above
        issue_severity: Severity = severity if issue.severity == "error" else "warning"
        out.append(
            Diagnostic(
                issue.code,
                issue_severity,
                f"{name}: {issue.message}.{consequence if issue.severity == 'error' else ''}",
                "Re-export the model or copy the files again; a copy may have been interrupted.",
            )
        )
    return out


def _list_folder(folder: Path) -> tuple[set[str] | None, Diagnostic | None]:
    """The folder's entry names, or a diagnostic saying why there are none to read."""
    try:
        is_dir = folder.is_dir()
        exists = is_dir or folder.exists()
    except OSError as exc:
        return None, Diagnostic("UNREADABLE", "error", f"{folder} cannot be accessed ({exc}).")
    if not exists and folder.is_symlink():
        # exists() is False for a dangling link and for a loop (ELOOP); say which.
        try:
            folder.resolve(strict=True)
        except RuntimeError:  # Python 3.11-3.12 report a loop this way
            loop = True
        except OSError as exc:
            loop = exc.errno == errno.ELOOP
        else:
            loop = False
        if loop:
            return None, Diagnostic(
                "SYMLINK_LOOP",
                "error",
                f"{folder} is a symbolic link that leads back to itself (a link loop).",
                "Point the link at the real model folder, or choose that folder instead.",
            )
        try:
            target = str(folder.readlink())
        except OSError:
            target = "a place"
        return None, Diagnostic(
            "NOT_FOUND",
            "error",
            f"{folder} is a symbolic link to {target}, which does not exist.",
            "Point the link at the model folder again, or remove it from the model list.",
        )
    if not exists:
        return None, Diagnostic(
            "NOT_FOUND",
            "error",
            f"{folder} does not exist.",
            "Choose the folder again, or remove it from the model list.",
        )
    if not is_dir:
        return None, Diagnostic(
            "NOT_A_MODEL",
            "error",
            f"{folder} is a file, not a model folder.",
            "Choose the folder that holds openvino_language_model.xml.",
        )
    try:
        with os.scandir(folder) as entries:
            return {entry.name for entry in entries}, None
    except OSError as exc:
        return None, Diagnostic(
            "UNREADABLE",
            "error",
            f"The folder {folder} cannot be read ({exc.strerror or exc}).",
            "Check the folder's permissions (the app needs read access to every file).",
        )


def _read_metadata(report: ModelReport, folder: Path) -> tuple[dict[str, Any] | None, bool]:
    """Fill kind, architectures and manifest; return (config.json, whether it was damaged)."""
    config, config_error = _read_json(folder / "config.json")
    if config_error is not None:
        report.diagnostics.append(
            Diagnostic(
                "CONFIG_INVALID",
                "warning",
                f"config.json cannot be read ({config_error}); the model kind and memory "
                "estimate are unknown.",
                "Copy config.json from the original export.",
            )
        )
    report.kind, report.kind_label, report.model_type = _kind(config)
    if config is not None:
        architectures = config.get("architectures")
        if isinstance(architectures, list):
            report.architectures = [str(a) for a in architectures]
    try:
        report.manifest = read_manifest(folder)
    except ValueError as exc:
        report.diagnostics.append(
            Diagnostic(
                "MANIFEST_INVALID",
                "warning",
                f"The export record is damaged: {exc}.",
                "Checksums cannot be verified; the model may still work.",
            )
        )
    return config, config_error is not None


def _collect_components(report: ModelReport, folder: Path, names: set[str]) -> None:
    """Inspect the VLM layout the runtime loads, or a single-IR text-only export, plus extras."""
    if "openvino_language_model.xml" in names or "openvino_language_model.bin" in names:
        report.layout = "vlm"
    elif "openvino_model.xml" in names or "openvino_model.bin" in names:
        report.layout = "llm"
    specs = list(COMPONENTS)
    if report.layout == "llm":
        text_parts = ("language_model", "text_embeddings")
        specs = [LLM_COMPONENT, *(s for s in COMPONENTS if s.key not in text_parts)]
    for spec in specs:
        report.components.append(_inspect_component(folder, spec, names))
    extra_stems = sorted(
        {n[: -len(".xml")] for n in names if n.startswith("openvino_") and n.endswith(".xml")}
        - {spec.stem for spec in specs}
    )
    for stem in extra_stems:
        label = stem.removeprefix("openvino_").replace("_", " ")
        report.components.append(
            _inspect_component(folder, ComponentSpec(stem, stem, label, "other"), names)
        )


def _not_a_model(folder: Path, names: set[str]) -> Diagnostic:
    checkpoint = any(n in names for n in _CHECKPOINT_FILES)
    if not names:
        message = f"The folder {folder.name} is empty."
    elif checkpoint:
        message = f"{folder.name} holds a Hugging Face checkpoint, not an OpenVINO export."
    else:
        message = f"{folder.name} holds no OpenVINO model files ({len(names)} other files)."
    fix = (
        "Export it with the export wizard first."
        if checkpoint
        else "Choose a folder made by the export wizard or by optimum-cli export openvino."
    )
    return Diagnostic("NOT_A_MODEL", "error", message, fix)


def _layout_diagnostics(report: ModelReport) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    if report.layout == "llm":
        out.append(
            Diagnostic(
                "TEXT_ONLY_EXPORT",
                "warning",
                "This is a text-only export (openvino_model.xml). The app's runtime expects "
                "the image-text-to-text layout, and only that export includes the MTP head.",
                REEXPORT_FIX,
            )
        )
        return out
    for key in ("language_model", "text_embeddings"):
        part = report.component(key)
        if part is not None and not part.xml_present and not part.bin_present:
            out.append(
                Diagnostic(
                    "IR_INCOMPLETE",
                    "error",
                    f"{part.label} ({part.stem}.xml/.bin) is missing.",
                    "Re-export the model; an export that was interrupted leaves parts out.",
                )
            )
    vision = [c for c in report.components if c.use == "image"]
    if any(v.present for v in vision) and not all(v.present for v in vision):
        out.append(
            Diagnostic(
                "VISION_INCOMPLETE",
                "warning",
                "Some vision parts are missing: images cannot be used in chats.",
                "Re-export the model to restore image input.",
            )
        )
    return out


def _tokenizer_diagnostics(report: ModelReport, names: set[str]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    parts = [c for c in report.components if c.key in ("tokenizer", "detokenizer")]
    missing = [c.stem for c in parts if not c.xml_present]
    if missing:
        out.append(
            Diagnostic(
                "TOKENIZER_MISSING",
                "error",
                f"The OpenVINO tokenizer is missing ({', '.join(missing)}); the runtime "
                "cannot turn text into tokens without it.",
                "Re-export the model with openvino-tokenizers installed (the export wizard "
                "does this), or convert the tokenizer with convert_tokenizer --with-detokenizer.",
            )
        )
    tokenizer = report.component("tokenizer")
    tokenizer_ir = tokenizer.ir if tokenizer is not None else None
    # Where the runtime finds it (core.chat_template), so inspect and the engine agree.
    source = None
    if tokenizer_ir is not None:
        source = template_source(report.path, tokenizer_ir.rt_value("chat_template") or None)
    report.chat_template = source is not None and source.usable
    if source is not None and source.problem is not None:
        out.append(
            Diagnostic(
                "CHAT_TEMPLATE",
                "error",
                f"The chat template file cannot be used: {source.problem}",
                "Remove chat_template.jinja or replace it with the model's original template.",
            )
        )
    if tokenizer_ir is not None and not report.chat_template:
        out.append(
            Diagnostic(
                "NO_CHAT_TEMPLATE",
                "warning",
                "The tokenizer has no chat template, so conversations cannot be formatted the "
                "way the model was trained.",
                "Re-export from a checkpoint whose tokenizer_config.json has a chat_template.",
            )
        )
    return out


def _main_component(report: ModelReport) -> ComponentReport | None:
    return report.component("language_model") or report.component("model")


def _body_precision(ir: IrInfo | None, vocab_size: int | None) -> str | None:
    """The dominant weight precision, leaving out vocabulary-sized tensors.

    nncf keeps the lm_head / embedding in INT8 whatever the mode asked for, and the MTP head has
    no lm_head of its own, so comparing with it in would skew the comparison.
    """
    if ir is None:
        return None
    totals: dict[str, int] = {}
    for weight in ir.weights:
        if vocab_size is not None and vocab_size in weight.shape:
            continue
        totals[weight.precision] = totals.get(weight.precision, 0) + weight.parameters
    if not totals:
        return ir.dominant_precision
    return max(sorted(totals), key=lambda name: totals[name])


def _mtp_diagnostics(report: ModelReport) -> list[Diagnostic]:
    """Fill `report.mtp` and say whether the MTP head is missing, mismatched or damaged."""
    out: list[Diagnostic] = []
    mtp = report.component("mtp")
    main = _main_component(report)
    if mtp is None:
        return out
    present = mtp.present and mtp.readable
    vocab = report.geometry.vocab_size if report.geometry is not None else None
    main_precision = _body_precision(main.ir if main is not None else None, vocab)
    mtp_precision = _body_precision(mtp.ir, vocab)
    like: bool | None = None
    if present and main_precision is not None and mtp_precision is not None:
        like = mtp_precision == main_precision
    report.mtp = MtpSummary(
        present=present,
        bytes=mtp.total_bytes,
        precision=mtp.precision,
        dominant_precision=mtp_precision,
        main_precision=main_precision,
        compressed_like_main=like,
    )
    if report.kind == "other":
        out.append(
            Diagnostic(
                "NOT_QWEN35",
                "warning",
                f"This is not a Qwen3.5 model (model_type {report.model_type}). The app can "
                "only try to run it with plain decoding: MTP speculative decoding needs "
                "Qwen3.5's MTP head.",
                "For the speed-up, export a Qwen3.5 or Qwen3.5-MoE checkpoint.",
            )
        )
    elif not mtp.xml_present and not mtp.bin_present:
        out.append(
            Diagnostic(
                "MTP_MISSING",
                "warning",
                "No MTP head (openvino_mtp_model.xml) in this export: the exporter did not "
                "enable MTP for this architecture or optimum-intel revision (the text-only "
                "export path never includes it, nor does optimum-intel before 2.2). Chat works "
                "without the speed-up.",
                REEXPORT_FIX,
            )
        )
    if like is False:
        out.append(
            Diagnostic(
                "MTP_NOT_COMPRESSED_LIKE_MAIN",
                "warning",
                f"The MTP head is mostly {mtp_precision} but the language model is "
                f"mostly {main_precision}. A heavier draft head costs speed; a lighter one "
                "can lower acceptance.",
                "Re-export with one --weight-format for the whole model (the export wizard "
                "does this).",
            )
        )
    rope = [
        w
        for w in (mtp.ir.weights if mtp.ir is not None else [])
        if ("rotary_emb" in w.name or "inv_freq" in w.name) and w.symmetric is not None
    ]
    if rope:
        # optimum-intel's int8 mode compresses RoPE's inv_freq too (measured: 28 % error).
        out.append(
            Diagnostic(
                "MTP_ROPE_QUANTIZED",
                "warning",
                f"The MTP head's rotary-embedding frequencies are stored as {rope[0].label}: "
                "positions get distorted at long context, which can lower draft acceptance.",
                "Re-export with --weight-format int4 --group-size-fallback ignore (keeps them "
                "in full precision), and compare acceptance in the benchmark.",
            )
        )
    return out


def _source(report: ModelReport, config: Mapping[str, Any] | None, folder: Path) -> SourceInfo:
    manifest = report.manifest
    if manifest is not None and manifest.source:
        return SourceInfo(manifest.source, manifest.revision, "manifest")
    name_or_path = config.get("_name_or_path") if config else None
    if isinstance(name_or_path, str) and name_or_path:
        return SourceInfo(name_or_path, None, "config")
    ov_config, _ = _read_json(folder / "openvino_config.json")
    quant = ov_config.get("quantization_config") if ov_config else None
    if isinstance(quant, dict):  # the exporter records its --model argument here
        origin = quant.get("tokenizer") or quant.get("processor")
        if isinstance(origin, str) and origin:
            return SourceInfo(origin, None, "openvino_config")
    return SourceInfo()


#: Package -> where optimum-intel / openvino-tokenizers record its version in rt_info.
_RT_VERSIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("openvino", "main", ("OpenVINO Runtime",)),
    ("optimum-intel", "main", ("optimum", "optimum_intel_version")),
    ("optimum", "main", ("optimum", "optimum_version")),
    ("transformers", "main", ("optimum", "transformers_version")),
    ("nncf", "main", ("optimum", "nncf_version")),
    ("torch", "main", ("optimum", "pytorch_version")),
    ("openvino-tokenizers", "tokenizer", ("openvino_tokenizers_version",)),
)


def _versions(report: ModelReport) -> dict[str, str]:
    """Versions that made the export: the IRs' rt_info first, then the manifest."""
    main, tokenizer = _main_component(report), report.component("tokenizer")
    irs = {
        "main": main.ir if main is not None else None,
        "tokenizer": tokenizer.ir if tokenizer is not None else None,
    }
    versions: dict[str, str] = {}
    for package, which, path in _RT_VERSIONS:
        ir = irs[which]
        value = ir.rt_value(*path) if ir is not None else None
        if value:
            versions[package] = value
    if report.manifest is not None:
        for package, version in report.manifest.versions.items():
            versions.setdefault(package, version)
    return dict(sorted(versions.items()))


def inspect_model(
    model_dir: Path,
    *,
    context_length: int = DEFAULT_CONTEXT_LENGTH,
    kv_precision: KvPrecision = "u8",
    available_bytes: int | None = None,
    total_ram_bytes: int | None = None,
    installed_versions: Mapping[str, str | None] | None = None,
    measure_memory: bool = True,
) -> ModelReport:
    """Describe and diagnose the model folder `model_dir` without loading it.

    `available_bytes` / `total_ram_bytes` default to what psutil reports (`measure_memory=False`
    leaves them unknown); `installed_versions` defaults to the installed openvino packages.
    Never raises for a bad folder: every problem becomes a `Diagnostic`.
    """
    folder = Path(model_dir)
    report = ModelReport(path=folder, name=folder.name or str(folder))
    names, problem = _list_folder(folder)
    if names is None:
        report.diagnostics.append(problem or Diagnostic("UNREADABLE", "error", str(folder)))
        return report
    config, config_damaged = _read_metadata(report, folder)
    _collect_components(report, folder, names)
    report.total_bytes = _folder_bytes(folder)
    if not any(c.xml_present or c.bin_present for c in report.components):
        report.diagnostics.append(_not_a_model(folder, names))
        return report
    if config is None and not config_damaged:
        report.diagnostics.append(
            Diagnostic(
                "CONFIG_MISSING",
                "warning",
                "config.json is missing: the model kind is unknown and the runtime may refuse "
                "to load the model.",
                "Copy config.json from the original export.",
            )
        )
    main, mtp = _main_component(report), report.component("mtp")
    if config is not None:
        report.geometry = geometry_from_config(config)
    if report.geometry is None and main is not None and main.ir is not None:
        report.geometry = geometry_from_ir(main.ir, mtp.ir if mtp is not None else None)

    for component in report.components:
        report.diagnostics.extend(_component_diagnostics(component))
    report.diagnostics.extend(_layout_diagnostics(report))
    report.diagnostics.extend(_tokenizer_diagnostics(report, names))
    report.diagnostics.extend(_mtp_diagnostics(report))

    report.source = _source(report, config, folder)
    report.versions = _versions(report)
    if installed_versions is None:
        installed_versions = {
            name: package_version(name) for name in ("openvino", "openvino-tokenizers")
        }
    report.diagnostics.extend(_version_diagnostics(report.versions, installed_versions))

    if measure_memory and available_bytes is None:
        available_bytes, measured_total = available_memory()
        total_ram_bytes = total_ram_bytes or measured_total
    weights = {
        c.key: c.bin_bytes
        for c in report.components
        if c.use == "chat" and c.present and (c.key != "mtp" or report.mtp.present)
    }
    image = sum(c.bin_bytes for c in report.components if c.use == "image" and c.present)
    report.memory = estimate_memory(
        weights,
        report.geometry,
        context_length=context_length,
        kv_precision=kv_precision,
        include_mtp=report.mtp.present,
        image_extra_bytes=image,
        available_bytes=available_bytes,
    )
    report.diagnostics.extend(_memory_diagnostics(report.memory, total_ram_bytes))
    return report


def _memory_diagnostics(memory: MemoryEstimate, total_ram: int | None) -> list[Diagnostic]:
    gib = 1024**3
    need = f"{memory.total_bytes / gib:.1f} GiB"
    if total_ram is not None and memory.total_bytes > total_ram:
        return [
            Diagnostic(
                "TOO_LARGE_FOR_MEMORY",
                "error",
                f"The model needs about {need} at {memory.context_length:,} tokens of context, "
                f"more than this computer's {total_ram / gib:.1f} GiB of RAM.",
                "Use a smaller model or a stronger compression (INT4), or shorten the context.",
            )
        ]
    if memory.verdict == "does_not_fit" and memory.available_bytes is not None:
        return [
            Diagnostic(
                "TOO_LARGE_FOR_MEMORY",
                "warning",
                f"The model needs about {need} but only "
                f"{memory.available_bytes / gib:.1f} GiB of RAM is free now.",
                "Close other applications, shorten the context, or use a smaller model.",
            )
        ]
    if memory.verdict == "tight" and memory.fraction is not None:
        return [
            Diagnostic(
                "MEMORY_TIGHT",
                "info",
                f"The model needs about {need}, {memory.fraction:.0%} of the free RAM: it "
                "should load, but the computer may slow down.",
                "Close other applications for the best speed.",
            )
        ]
    return []


# --- checksums -----------------------------------------------------------------------------


def _safe_relative(name: str) -> bool:
    path = Path(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def verify_checksums(
    model_dir: Path,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> list[Diagnostic]:
    """Check every file in the manifest's `files` map against its SHA-256, streaming.

    `progress(done_bytes, total_bytes)` is called after each chunk; `cancel()` is polled as
    often, and a True answer stops the check with a CHECKSUMS_CANCELLED diagnostic. All good
    gives one CHECKSUMS_OK info.
    """
    folder = Path(model_dir)
    try:
        manifest = read_manifest(folder)
    except ValueError as exc:
        return [Diagnostic("MANIFEST_INVALID", "warning", f"{exc}.", "")]
    if manifest is None or not manifest.files:
        return [
            Diagnostic(
                "CHECKSUMS_UNAVAILABLE",
                "info",
                "This folder has no export record with checksums (exports made outside the "
                "app have none), so its files cannot be verified.",
                "",
            )
        ]
    out: list[Diagnostic] = []
    plan: list[tuple[str, str, Path, int]] = []
    for name, listed in sorted(manifest.files.items()):
        if not _safe_relative(name) or not _SHA256.match(listed.lower()):
            out.append(
                Diagnostic(
                    "MANIFEST_INVALID",
                    "warning",
                    f"The export record lists an invalid entry ({name!r}); it was skipped.",
                    "",
                )
            )
            continue
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            out.append(
                Diagnostic(
                    "CHECKSUM_FILE_MISSING",
                    "error",
                    f"{name} is listed in the export record but missing.",
                    "Copy the file from the original export, or re-export the model.",
                )
            )
            continue
        except OSError as exc:
            out.append(Diagnostic("UNREADABLE", "error", f"{name} cannot be read ({exc}).", ""))
            continue
        plan.append((name, listed.lower(), path, size))
    total = sum(item[3] for item in plan)
    done = 0
    checked = 0
    for name, expected, path, _size in plan:
        digest = hashlib.sha256()
        try:
            with path.open("rb") as handle:
                while chunk := handle.read(_HASH_CHUNK):
                    if cancel is not None and cancel():
                        out.append(
                            Diagnostic(
                                "CHECKSUMS_CANCELLED",
                                "info",
                                f"Verification was cancelled after {checked} of {len(plan)} files.",
                                "",
                            )
                        )
                        return out
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        except OSError as exc:
            out.append(Diagnostic("UNREADABLE", "error", f"{name} cannot be read ({exc}).", ""))
            continue
        checked += 1
        if digest.hexdigest() != expected:
            out.append(
                Diagnostic(
                    "CHECKSUM_MISMATCH",
                    "error",
                    f"{name} differs from the file the export wrote (SHA-256 mismatch): it is "
                    "damaged or was replaced.",
                    "Re-export the model or copy it again from a good source.",
                )
            )
    if not out:
        out.append(
            Diagnostic(
                "CHECKSUMS_OK",
                "info",
                f"All {checked} files match the export record.",
                "",
            )
        )
    return out
