"""What to export and where: the options, the source (hub id or local folder), and the errors."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.paths import app_paths

WeightFormat = Literal["fp32", "fp16", "int8", "int4"]


GroupSizeFallback = Literal["error", "ignore", "adjust"]


MtpWeightFormat = Literal["default", "same", "none", "int8", "int4"]


WEIGHT_FORMATS: tuple[WeightFormat, ...] = ("fp16", "int8", "int4")


MTP_WEIGHT_FORMATS: tuple[MtpWeightFormat, ...] = ("default", "same", "none", "int8", "int4")


#: Files every Qwen3.5 + MTP export must contain (each .xml with its .bin).
REQUIRED_COMPONENTS = (
    "openvino_language_model",
    "openvino_text_embeddings_model",
    "openvino_mtp_model",
    "openvino_tokenizer",
    "openvino_detokenizer",
)


#: The task that exports the VLM together with its MTP head (the text-only path has no MTP).
EXPORT_TASK = "image-text-to-text"


_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class ExportError(UserFacingError):
    """An export failed: message + fix say why and what to do; `log_tail` ends the exporter log."""

    code = "EXPORT_FAILED"

    def __init__(
        self, message: str, fix: str = "", *, code: str | None = None, log_tail: str = ""
    ) -> None:
        super().__init__(message, fix, code=code)
        self.log_tail = log_tail


@dataclass(frozen=True)
class ExportOptions:
    weight_format: WeightFormat | None = None
    group_size: int | None = None
    sym: bool = False
    ratio: float | None = None
    group_size_fallback: GroupSizeFallback | None = None
    trust_remote_code: bool = False
    #: How the MTP head is compressed: optimum-intel's choice, like the main model, not at all
    #: (fp16), or INT8 / INT4 regardless of the main model.
    mtp_weight_format: MtpWeightFormat = "default"

    @classmethod
    def recommended(cls, weight_format: WeightFormat = "int4", **changes: Any) -> ExportOptions:
        """The wizard's defaults: INT4 skips what fits no group (the MTP RoPE frequencies)."""
        options = replace(cls(weight_format=weight_format), **changes)
        int4 = weight_format == "int4" or options.mtp_weight_format == "int4"
        if int4 and "group_size_fallback" not in changes:
            options = replace(options, group_size_fallback="ignore")
        return options

    def check(self) -> None:
        """ExportError for options no export can run with."""
        if self.weight_format not in (None, "fp32", "fp16", "int8", "int4"):
            raise ExportError(f"Unknown weight format {self.weight_format!r}.", code="BAD_OPTIONS")
        if self.mtp_weight_format not in MTP_WEIGHT_FORMATS:
            raise ExportError(
                f"Unknown MTP weight format {self.mtp_weight_format!r}.",
                f"Choose one of {', '.join(MTP_WEIGHT_FORMATS)}.",
                code="BAD_OPTIONS",
            )
        if self.group_size is not None and self.group_size != -1 and self.group_size < 1:
            raise ExportError(
                f"Group size must be a positive number (or -1 for per-channel), not "
                f"{self.group_size}.",
                "Use 128, 64, 32 or 16.",
                code="BAD_OPTIONS",
            )
        if self.ratio is not None and not 0 < self.ratio <= 1:
            raise ExportError(
                f"Ratio must be between 0 and 1, not {self.ratio}.",
                "Use 1.0 to compress every layer to INT4, or e.g. 0.8 to keep 20 % in INT8.",
                code="BAD_OPTIONS",
            )

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ExportSource:
    """A checkpoint to export: a local folder or a Hugging Face hub repository."""

    kind: Literal["folder", "hub"]
    value: str
    revision: str | None = None

    @property
    def display(self) -> str:
        if self.kind == "hub" and self.revision:
            return f"{self.value}@{self.revision}"
        return self.value

    @property
    def short_name(self) -> str:
        """A name for the destination folder: repo name, or the checkpoint folder's name."""
        if self.kind == "hub":
            return self.value.rsplit("/", 1)[-1]
        path = Path(self.value)
        # A folder inside the HF cache (models--org--name/snapshots/<hash>) is named after the repo.
        if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
            return path.parent.parent.name.split("--")[-1]
        return path.name or "model"


def parse_source(text: str, revision: str | None = None) -> ExportSource:
    """A folder if it exists (or looks like a path), else a hub id like `Qwen/Qwen3.5-0.8B`.

    `org/name@rev` selects a hub revision.
    """
    text = text.strip()
    if not text:
        raise ExportError(
            "No source was given.",
            "Enter a Hugging Face model id (e.g. Qwen/Qwen3.5-0.8B) or choose a checkpoint folder.",
            code="NO_SOURCE",
        )
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # "~name/..." for a user that does not exist
        path = Path(text)
    if path.exists() or text.startswith(("/", ".", "~", "\\")) or re.match(r"^[A-Za-z]:", text):
        return ExportSource("folder", str(path.resolve()))
    repo, _, rev = text.partition("@")
    if _HUB_ID_RE.match(repo):
        return ExportSource("hub", repo, revision or rev or None)
    return ExportSource("folder", str(path.resolve()))


def default_destination(
    source: ExportSource, options: ExportOptions, models_dir: Path | None = None
) -> Path:
    """`models_dir / <name>-<format>`, numbered if taken; the model library scans models_dir."""
    root = models_dir if models_dir is not None else app_paths().models_dir
    fmt = options.weight_format or "default"
    base = f"{source.short_name}-{fmt}"
    if options.mtp_weight_format not in ("default", "same"):
        base += f"-mtp-{options.mtp_weight_format}"
    candidate = root / base
    number = 2
    while candidate.exists() and (not candidate.is_dir() or any(candidate.iterdir())):
        candidate = root / f"{base}-{number}"
        number += 1
    return candidate


def missing_components(model_dir: Path) -> list[str]:
    """Required component files (xml and bin) absent from `model_dir`."""
    missing = []
    for component in REQUIRED_COMPONENTS:
        for suffix in (".xml", ".bin"):
            if not (model_dir / f"{component}{suffix}").is_file():
                missing.append(f"{component}{suffix}")
    return missing


class ExportCancelledError(Exception):
    """Raised inside a job when the user cancelled."""
