"""What an inspection finds in a model folder: the report dataclasses and their JSON schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.models.folders.manifest import ExportManifest
from qwen_mtp_desktop.core.models.ir import (
    IrInfo,
    IrIssue,
    PrecisionShare,
    RtInfo,
)

REPORT_SCHEMA_VERSION = 1


Severity = Literal["error", "warning", "info"]


ComponentUse = Literal["chat", "image", "other"]


Kind = Literal["qwen3_5_dense", "qwen3_5_moe", "other", "unknown"]


Layout = Literal["vlm", "llm", "none"]


Verdict = Literal["fits", "tight", "does_not_fit", "unknown"]


KvPrecision = Literal["u8", "u4", "f16", "bf16", "f32"]


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


QWEN35_TYPES = frozenset({"qwen3_5", "qwen3_5_text"})


QWEN35_MOE_TYPES = frozenset({"qwen3_5_moe", "qwen3_5_moe_text"})
