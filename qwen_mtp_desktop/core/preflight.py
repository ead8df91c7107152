"""Before an export: can this checkpoint be exported with its MTP head, here, now?

`run_preflight()` returns a checklist of pass / warn / fail items, each with a fix. It never
loads weights: the checkpoint is read from config.json and the safetensors headers (an 8-byte
little-endian length, then that many bytes of JSON), which also give the parameter counts the
disk and memory estimates are made from. Nothing here imports torch, transformers or optimum.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
import shlex
import shutil
import struct
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from qwen_mtp_desktop.core.environment import (
    EXPORT_PACKAGES,
    RUNTIME_PACKAGES,
    SUPPORTED_TRANSFORMERS,
    family_verdict,
    package_version,
)
from qwen_mtp_desktop.core.errors import UserFacingError

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.export import ExportOptions

Status = Literal["pass", "warn", "fail"]

QWEN35_TYPES = ("qwen3_5", "qwen3_5_moe")
#: optimum-intel series with the Qwen3.5 / Qwen3.5-MoE MTP exporter.
SUPPORTED_OPTIMUM_INTEL = "2.2"
MIN_NNCF = (3, 3)
#: Everything an export needs beyond the chat runtime (huggingface_hub: hub downloads).
TOOLKIT_PACKAGES = (*EXPORT_PACKAGES, "huggingface_hub")
#: pyproject's `export` extra, used when the installed metadata cannot be read (frozen app).
EXPORT_REQUIREMENTS = (
    "optimum-intel==2.2.*",
    "optimum>=2.3",
    "transformers==5.2.*",
    "nncf>=3.3",
    "torch>=2.9",
    "torchvision",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
)
#: Python + torch + transformers + optimum imported, before any weight is loaded (measured
#: 1.27-1.42 GB on the tiny fixtures).
EXPORT_BASE_RSS = int(1.4 * 1024**3)
#: Peak RSS beyond the base, per byte of fp32 weights: the torch model plus the traced
#: OpenVINO graph (RUNTIME-NOTES: ~2x the fp32 checkpoint in total for Qwen3.5-0.8B).
EXPORT_RSS_PER_FP32_BYTE = 1.6
#: Bytes per stored parameter after compression (INT4: 4 bits + a 16-bit scale and zero point
#: per group of 128, rounded up).
BYTES_PER_PARAM: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.56}
_HEADER_LIMIT = 100 * 1024 * 1024  # a real header is KBs to a few MB; refuse absurd lengths
_DTYPE_BYTES: dict[str, float] = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "F4": 0.5,
}
_VISION_PREFIXES = ("model.visual.", "visual.", "vision_tower.", "model.vision_tower.")


class CheckpointError(UserFacingError):
    """A checkpoint file cannot be read (corrupted safetensors header, unreadable index...)."""


@dataclass(frozen=True)
class CheckItem:
    """One line of a checklist. `key` is stable (tests and the UI use it)."""

    key: str
    status: Status
    title: str
    message: str
    fix: str = ""

    def to_json_dict(self) -> dict[str, str]:
        return {
            "key": self.key,
            "status": self.status,
            "title": self.title,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass(frozen=True)
class TensorSummary:
    """What the safetensors headers say, without reading a single weight."""

    files: tuple[str, ...]
    tensors: int
    parameters: int
    mtp_tensors: int
    mtp_parameters: int
    vision_parameters: int
    #: Bytes of tensor data on disk.
    data_bytes: int
    #: Parameter count per safetensors dtype ("F32", "BF16", ...).
    dtypes: dict[str, int] = field(default_factory=dict)

    @property
    def fp32_bytes(self) -> int:
        return 4 * self.parameters

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "files": list(self.files),
            "tensors": self.tensors,
            "parameters": self.parameters,
            "mtp_tensors": self.mtp_tensors,
            "mtp_parameters": self.mtp_parameters,
            "vision_parameters": self.vision_parameters,
            "data_bytes": self.data_bytes,
            "dtypes": dict(self.dtypes),
        }


@dataclass
class CheckpointInfo:
    """A source as far as preflight can see it: a local folder or a hub repository."""

    #: The folder or model id the user gave.
    source: str
    kind: Literal["folder", "hub"]
    #: Where the files are (None: a hub model that is not downloaded yet).
    local_dir: Path | None = None
    revision: str | None = None
    config: dict[str, Any] | None = None
    tensors: TensorSummary | None = None
    #: Bytes still to download into the Hugging Face cache (0: local or cached).
    download_bytes: int = 0
    #: Size of tokenizer.json etc. (the tokenizer IR is about that big).
    tokenizer_bytes: int = 0
    #: Problems found while reading (no folder, no config.json, corrupted header...).
    problems: list[CheckItem] = field(default_factory=list)


@dataclass(frozen=True)
class ExportEstimate:
    parameters: int
    mtp_parameters: int
    fp32_bytes: int
    #: The finished model folder.
    output_bytes: int
    #: Extra room needed while the exporter works (the uncompressed IR before compression).
    scratch_bytes: int
    download_bytes: int
    peak_ram_bytes: int

    def to_json_dict(self) -> dict[str, int]:
        return {
            "parameters": self.parameters,
            "mtp_parameters": self.mtp_parameters,
            "fp32_bytes": self.fp32_bytes,
            "output_bytes": self.output_bytes,
            "scratch_bytes": self.scratch_bytes,
            "download_bytes": self.download_bytes,
            "peak_ram_bytes": self.peak_ram_bytes,
        }


@dataclass
class PreflightReport:
    checkpoint: CheckpointInfo
    items: list[CheckItem]
    estimate: ExportEstimate | None = None

    @property
    def ok(self) -> bool:
        """No item failed: the export may start."""
        return not any(item.status == "fail" for item in self.items)

    @property
    def failures(self) -> list[CheckItem]:
        return [item for item in self.items if item.status == "fail"]

    @property
    def warnings(self) -> list[CheckItem]:
        return [item for item in self.items if item.status == "warn"]

    def item(self, key: str) -> CheckItem | None:
        return next((item for item in self.items if item.key == key), None)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "source": self.checkpoint.source,
            "kind": self.checkpoint.kind,
            "local_dir": str(self.checkpoint.local_dir) if self.checkpoint.local_dir else None,
            "revision": self.checkpoint.revision,
            "items": [item.to_json_dict() for item in self.items],
            "estimate": self.estimate.to_json_dict() if self.estimate else None,
            "tensors": self.checkpoint.tensors.to_json_dict() if self.checkpoint.tensors else None,
        }


# --- safetensors headers ------------------------------------------------------------------


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file: {name: {dtype, shape, data_offsets}, ...}.

    Only the first 8 + N bytes are read. Raises CheckpointError for a damaged file.
    """
    fix = "The file is damaged or only partly downloaded: download or copy the checkpoint again."
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise CheckpointError(
                    f"{path.name} is too short to be a safetensors file ({size} bytes).",
                    fix,
                    code="CHECKPOINT_CORRUPT",
                )
            (length,) = struct.unpack("<Q", prefix)
            if length == 0 or length > _HEADER_LIMIT or 8 + length > size:
                raise CheckpointError(
                    f"{path.name} has a corrupted safetensors header (it declares {length:,} "
                    f"header bytes in a {size:,}-byte file).",
                    fix,
                    code="CHECKPOINT_CORRUPT",
                )
            raw = handle.read(length)
    except OSError as exc:
        raise CheckpointError(
            f"{path.name} cannot be read ({exc.strerror or exc}).",
            "Check the file's permissions.",
            code="CHECKPOINT_UNREADABLE",
        ) from exc
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{path.name} has a corrupted safetensors header (not valid JSON: {exc}).",
            fix,
            code="CHECKPOINT_CORRUPT",
        ) from exc
    if not isinstance(header, dict):
        raise CheckpointError(
            f"{path.name} has a corrupted safetensors header (not a JSON object).",
            fix,
            code="CHECKPOINT_CORRUPT",
        )
    data_size = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(v, int) for v in offsets)
            or not isinstance(shape, list)
            or not all(isinstance(v, int) and v >= 0 for v in shape)
        ):
            raise CheckpointError(
                f"{path.name} has a corrupted safetensors header (tensor {name!r} is malformed).",
                fix,
                code="CHECKPOINT_CORRUPT",
            )
        if not 0 <= offsets[0] <= offsets[1] <= data_size:
            raise CheckpointError(
                f"{path.name} is truncated: tensor {name!r} lies beyond the end of the file.",
                fix,
                code="CHECKPOINT_CORRUPT",
            )
    return header


def summarize_headers(headers: Mapping[str, Mapping[str, Any]]) -> TensorSummary:
    """Count tensors and parameters over {file name: header} (local or from the hub API)."""
    tensors = parameters = mtp_tensors = mtp_parameters = vision = data_bytes = 0
    dtypes: dict[str, int] = {}
    for header in headers.values():
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, Mapping):
                continue
            count = math.prod(int(v) for v in entry.get("shape", []))
            dtype = str(entry.get("dtype", "?"))
            tensors += 1
            parameters += count
            dtypes[dtype] = dtypes.get(dtype, 0) + count
            offsets = entry.get("data_offsets")
            if isinstance(offsets, list | tuple) and len(offsets) == 2:
                data_bytes += int(offsets[1]) - int(offsets[0])
            else:
                data_bytes += int(count * _DTYPE_BYTES.get(dtype, 4))
            if name.startswith("mtp."):
                mtp_tensors += 1
                mtp_parameters += count
            elif name.startswith(_VISION_PREFIXES):
                vision += count
    return TensorSummary(
        files=tuple(sorted(headers)),
        tensors=tensors,
        parameters=parameters,
        mtp_tensors=mtp_tensors,
        mtp_parameters=mtp_parameters,
        vision_parameters=vision,
        data_bytes=data_bytes,
        dtypes=dict(sorted(dtypes.items())),
    )


def checkpoint_tensors(folder: Path) -> TensorSummary:
    """Read every safetensors header of a checkpoint folder (sharded or not)."""
    index_path = folder / "model.safetensors.index.json"
    if index_path.is_file():
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            weight_map = index["weight_map"]
            if not isinstance(weight_map, dict):
                raise TypeError("weight_map is not an object")
            shards = sorted({str(v) for v in weight_map.values()})
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(
                f"model.safetensors.index.json cannot be used ({exc}).",
                "The index is damaged: download or copy the checkpoint again.",
                code="CHECKPOINT_CORRUPT",
            ) from exc
        missing = [name for name in shards if not (folder / name).is_file()]
        if missing:
            raise CheckpointError(
                f"{len(missing)} weight file(s) listed in model.safetensors.index.json are "
                f"missing (e.g. {missing[0]}).",
                "The download is incomplete: download the checkpoint again (it resumes).",
                code="CHECKPOINT_INCOMPLETE",
            )
    else:
        shards = sorted(p.name for p in folder.glob("*.safetensors"))
    if not shards:
        has_bin = any(folder.glob("pytorch_model*.bin"))
        raise CheckpointError(
            "The checkpoint has no .safetensors weights"
            + (" (only pytorch_model.bin)." if has_bin else "."),
            "The exporter reads the MTP head from safetensors files: use a checkpoint published "
            "with model.safetensors (every official Qwen3.5 release is).",
            code="NO_SAFETENSORS",
        )
    return summarize_headers({name: read_safetensors_header(folder / name) for name in shards})


# --- reading a local checkpoint ------------------------------------------------------------


def inspect_checkpoint_folder(
    folder: Path, *, source: str | None = None, kind: Literal["folder", "hub"] = "folder"
) -> CheckpointInfo:
    """config.json and tensor headers of a local checkpoint; problems land in `problems`."""
    info = CheckpointInfo(source=source or str(folder), kind=kind, local_dir=folder)
    if not folder.exists():
        info.problems.append(
            CheckItem(
                "source",
                "fail",
                "Source",
                f"{folder} does not exist.",
                "Choose the folder that holds the checkpoint's config.json and "
                "model.safetensors, or enter a Hugging Face model id such as Qwen/Qwen3.5-0.8B.",
            )
        )
        return info
    if not folder.is_dir():
        info.problems.append(
            CheckItem(
                "source",
                "fail",
                "Source",
                f"{folder} is a file, not a checkpoint folder.",
                "Choose the folder that contains it.",
            )
        )
        return info
    config_path = folder / "config.json"
    if (folder / "openvino_language_model.xml").is_file():
        info.problems.append(
            CheckItem(
                "source",
                "fail",
                "Source",
                f"{folder.name} is already an exported OpenVINO model, not a checkpoint.",
                "Open it in the Models panel (or chat with it); to export, choose the Hugging "
                "Face checkpoint it was made from.",
            )
        )
        return info
    if not config_path.is_file():
        info.problems.append(
            CheckItem(
                "config",
                "fail",
                "Model config",
                f"{folder.name} has no config.json, so it is not a Hugging Face checkpoint.",
                "Choose the folder that holds config.json and model.safetensors (for a "
                "downloaded model, the snapshot folder).",
            )
        )
        return info
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        info.problems.append(
            CheckItem(
                "config",
                "fail",
                "Model config",
                f"config.json cannot be read ({exc}).",
                "The file is damaged: download or copy the checkpoint again.",
            )
        )
        return info
    info.config = config
    try:
        info.tensors = checkpoint_tensors(folder)
    except CheckpointError as exc:
        info.problems.append(CheckItem("weights", "fail", "Weights", exc.message, exc.fix))
    info.tokenizer_bytes = sum(
        (folder / name).stat().st_size
        for name in ("tokenizer.json", "vocab.json", "merges.txt")
        if (folder / name).is_file()
    )
    return info


# --- individual checks ---------------------------------------------------------------------


def text_config_value(config: Mapping[str, Any], key: str) -> Any:
    """A text-model setting: Qwen3.5's VLM config keeps it in text_config, older ones at top."""
    text = config.get("text_config")
    if isinstance(text, Mapping) and key in text:
        return text[key]
    return config.get(key)


def check_model_type(config: Mapping[str, Any]) -> CheckItem:
    model_type = config.get("model_type")
    if model_type in QWEN35_TYPES:
        kind = "Qwen3.5-MoE" if model_type == "qwen3_5_moe" else "Qwen3.5"
        return CheckItem("model_type", "pass", "Model type", f"{kind} ({model_type}).")
    if model_type in ("qwen3_5_text", "qwen3_5_moe_text"):
        return CheckItem(
            "model_type",
            "fail",
            "Model type",
            f"This is a text-only Qwen3.5 config ({model_type}): the exporter's text-only path "
            "exports no MTP head.",
            "Use the full Qwen3.5 checkpoint (model_type qwen3_5 or qwen3_5_moe), as published "
            "on the Hugging Face hub.",
        )
    shown = repr(model_type) if model_type else "missing"
    return CheckItem(
        "model_type",
        "fail",
        "Model type",
        f"model_type is {shown}, not Qwen3.5: no MTP head will be exported, and this app runs "
        "only Qwen3.5 models.",
        "Choose a Qwen3.5 or Qwen3.5-MoE checkpoint (e.g. Qwen/Qwen3.5-0.8B).",
    )


def check_mtp_layers(config: Mapping[str, Any]) -> CheckItem:
    layers = text_config_value(config, "mtp_num_hidden_layers")
    if layers == 1:
        return CheckItem(
            "mtp_layers", "pass", "MTP layers", "One MTP layer, as the exporter expects."
        )
    if not layers:
        return CheckItem(
            "mtp_layers",
            "fail",
            "MTP layers",
            "The config declares no MTP layer (mtp_num_hidden_layers is missing or 0), so there "
            "is no MTP head to export.",
            "Use a checkpoint with an MTP head: Qwen3.5 releases declare "
            "mtp_num_hidden_layers = 1 in text_config.",
        )
    return CheckItem(
        "mtp_layers",
        "fail",
        "MTP layers",
        f"The config declares {layers} MTP layers; optimum-intel 2.2 exports exactly one "
        "(it stops with NotImplementedError).",
        "Use a checkpoint with mtp_num_hidden_layers = 1 (every Qwen3.5 release so far).",
    )


def check_mtp_tensors(tensors: TensorSummary) -> CheckItem:
    if tensors.mtp_tensors:
        return CheckItem(
            "mtp_tensors",
            "pass",
            "MTP weights",
            f"{tensors.mtp_tensors} mtp.* tensors ({tensors.mtp_parameters:,} parameters).",
        )
    return CheckItem(
        "mtp_tensors",
        "fail",
        "MTP weights",
        "The weights contain no mtp.* tensors: the MTP head was stripped from this checkpoint "
        "(transformers drops it when a model is re-saved).",
        "Use the original checkpoint from its publisher, not a re-saved or fine-tuned copy "
        "without mtp.* weights.",
    )


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        match = re.match(r"\d+", piece)
        parts.append(int(match.group()) if match else 0)
    return tuple(parts)


def toolkit_missing(versions: Mapping[str, str | None], *, hub: bool = False) -> list[str]:
    """Toolkit packages not installed (huggingface_hub only matters for hub sources)."""
    names = TOOLKIT_PACKAGES if hub else EXPORT_PACKAGES
    return [name for name in names if not versions.get(name)]


def check_toolkit(versions: Mapping[str, str | None], *, hub: bool = False) -> list[CheckItem]:
    """The export toolkit: installed, at the versions that export Qwen3.5 with MTP."""
    missing = toolkit_missing(versions, hub=hub)
    if missing:
        return [
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"The export toolkit is not installed (missing {', '.join(missing)}).",
                "Click Install export toolkit, or run: "
                + shlex.join(install_command(versions=versions)),
            )
        ]
    items: list[CheckItem] = []
    intel = versions.get("optimum-intel") or ""
    if not intel.startswith(SUPPORTED_OPTIMUM_INTEL + "."):
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"optimum-intel {intel} is installed; the Qwen3.5 MTP exporter is in "
                f"optimum-intel {SUPPORTED_OPTIMUM_INTEL}.x.",
                f"pip install 'optimum-intel=={SUPPORTED_OPTIMUM_INTEL}.*'",
            )
        )
    transformers = versions.get("transformers") or ""
    if not transformers.startswith(SUPPORTED_TRANSFORMERS + "."):
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"transformers {transformers} is outside the Qwen3.5 exporter's range "
                f"{SUPPORTED_TRANSFORMERS}.x.",
                f"pip install 'transformers=={SUPPORTED_TRANSFORMERS}.*'",
            )
        )
    nncf = versions.get("nncf") or ""
    if _version_tuple(nncf) < MIN_NNCF:
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"nncf {nncf} is too old for weight compression of this exporter.",
                "pip install 'nncf>=3.3'",
            )
        )
    if not items:
        items.append(
            CheckItem(
                "toolkit",
                "pass",
                "Export toolkit",
                f"optimum-intel {intel}, transformers {transformers}, nncf {nncf}, "
                f"torch {versions.get('torch')}.",
            )
        )
    verdict = family_verdict(dict(versions))
    items.append(
        CheckItem(
            "openvino_family",
            "pass" if verdict.ok else "fail",
            "OpenVINO packages",
            verdict.message[:1].upper() + verdict.message[1:] + ".",
            "" if verdict.ok else "Install matching versions (see the message).",
        )
    )
    return items


def installed_versions() -> dict[str, str | None]:
    names = (*RUNTIME_PACKAGES, *TOOLKIT_PACKAGES)
    return {name: package_version(name) for name in names}


def export_requirements() -> list[str]:
    """The `export` extra's requirements, from this app's installed metadata if readable."""
    try:
        requires = importlib.metadata.requires("qwen-mtp-desktop") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    found = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if re.search(r"""extra\s*==\s*['"]export['"]""", marker):
            found.append(requirement.strip().replace(" ", ""))
    return found or list(EXPORT_REQUIREMENTS)


def install_command(
    python: str | None = None, *, versions: Mapping[str, str | None] | None = None
) -> list[str]:
    """`python -m pip install` of the export toolkit with the extra's pins.

    The installed OpenVINO packages are pinned to their exact versions so pip cannot move them
    out of their release family while it resolves the toolkit.
    """
    command = [python or sys.executable, "-m", "pip", "install", *export_requirements()]
    versions = versions if versions is not None else installed_versions()
    for name in RUNTIME_PACKAGES:
        version = versions.get(name)
        if version:
            command.append(f"{name}=={version}")
    return command


# --- estimates -----------------------------------------------------------------------------


def _bytes_for(fmt: str | None, parameters: int) -> int:
    return int(parameters * BYTES_PER_PARAM.get(fmt or "fp32", 4.0))


def estimate_export(checkpoint: CheckpointInfo, options: ExportOptions) -> ExportEstimate | None:
    """Disk and memory an export needs, from the parameter counts in the headers."""
    tensors = checkpoint.tensors
    if tensors is None:
        return None
    config = checkpoint.config or {}
    fmt = options.weight_format or "fp32"
    hidden = text_config_value(config, "hidden_size")
    vocab = text_config_value(config, "vocab_size")
    embedding = (
        int(hidden) * int(vocab) if isinstance(hidden, int) and isinstance(vocab, int) else 0
    )
    tied = bool(text_config_value(config, "tie_word_embeddings"))
    mtp = tensors.mtp_parameters
    vision = tensors.vision_parameters
    # The IR holds the embedding twice when tied: the text-embeddings model and the lm_head.
    body = max(tensors.parameters - mtp - vision - embedding, 0)
    lm_head = embedding
    if fmt == "int4":
        # optimum keeps the vocabulary-sized tables in INT8 (RUNTIME-NOTES).
        main = _bytes_for("int4", body) + _bytes_for("int8", lm_head + embedding)
        small = _bytes_for("int8", vision)
    elif fmt == "int8":
        main = _bytes_for("int8", body + lm_head + embedding)
        small = _bytes_for("int8", vision)
    else:
        main = _bytes_for(fmt, body + lm_head + embedding)
        small = _bytes_for(fmt, vision)
    if not tied:
        main -= _bytes_for("int8" if fmt in ("int4", "int8") else fmt, lm_head) // 2
    mtp_format = mtp_weight_format_for(options)
    output = main + small + _bytes_for(mtp_format, mtp) + 2 * checkpoint.tokenizer_bytes
    output += 2 * 1024**2  # xml files, configs, tokenizer/processor JSON
    compressing = fmt in ("int4", "int8") or mtp_format in ("int4", "int8")
    # Compression rewrites an uncompressed IR exported first (fp32, or fp16 for fp16 exports).
    ir_parameters = tensors.parameters + (embedding if tied else 0)
    scratch = _bytes_for("fp16" if fmt == "fp16" else "fp32", ir_parameters) if compressing else 0
    fp32 = tensors.fp32_bytes
    return ExportEstimate(
        parameters=tensors.parameters,
        mtp_parameters=mtp,
        fp32_bytes=fp32,
        output_bytes=output,
        scratch_bytes=scratch,
        download_bytes=checkpoint.download_bytes,
        peak_ram_bytes=EXPORT_BASE_RSS + int(EXPORT_RSS_PER_FP32_BYTE * fp32),
    )


def mtp_weight_format_for(options: ExportOptions) -> str:
    """The weight format the MTP head should end up in (for estimates and verification)."""
    main = options.weight_format or "fp32"
    choice = options.mtp_weight_format
    if choice in ("default", "same"):
        # optimum-intel 2.2 compresses the MTP head with the main model's settings.
        return main
    if choice == "none":
        return "fp16"
    return choice


# --- disk, memory, destination -------------------------------------------------------------


def existing_ancestor(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def free_disk_bytes(path: Path) -> int:
    return shutil.disk_usage(existing_ancestor(path)).free


def _gib(value: int) -> str:
    if value < 1024**2:
        return f"{value / 1024:,.0f} KB"
    if value < 1024**3:
        return f"{value / 1024**2:,.0f} MB"
    return f"{value / 1024**3:,.1f} GB"


def check_disk(
    needs: Iterable[tuple[Path, int, str]], free_bytes: Callable[[Path], int]
) -> CheckItem:
    """`needs`: (folder, bytes, what) tuples; needs on one filesystem are added up."""
    by_device: dict[object, tuple[Path, int, list[str]]] = {}
    for folder, amount, what in needs:
        if amount <= 0:
            continue
        anchor = existing_ancestor(folder)
        try:
            device: object = anchor.stat().st_dev
        except OSError:
            device = anchor
        known = by_device.get(device)
        if known is None:
            by_device[device] = (anchor, amount, [what])
        else:
            by_device[device] = (known[0], known[1] + amount, [*known[2], what])
    problems = []
    summary = []
    for anchor, amount, whats in by_device.values():
        try:
            free = free_bytes(anchor)
        except OSError as exc:
            return CheckItem(
                "disk",
                "warn",
                "Disk space",
                f"Free space on {anchor} cannot be measured ({exc}).",
                "Make sure several GB are free before exporting.",
            )
        summary.append(f"{_gib(amount)} needed ({' + '.join(whats)}), {_gib(free)} free")
        if amount > free:
            verb = "needs" if len(whats) == 1 else "need"
            problems.append(
                f"{' + '.join(whats)} {verb} about {_gib(amount)} on {anchor}, but only "
                f"{_gib(free)} is free"
            )
    if problems:
        return CheckItem(
            "disk",
            "fail",
            "Disk space",
            "Not enough disk space: " + "; ".join(problems) + ".",
            "Free some space, choose a destination on another disk, or pick a stronger "
            "compression (INT4 needs the least).",
        )
    return CheckItem("disk", "pass", "Disk space", "; ".join(summary) + "." if summary else "OK.")


def check_memory(estimate: ExportEstimate, available: int | None, total: int | None) -> CheckItem:
    need = estimate.peak_ram_bytes
    if total is not None and need > total:
        return CheckItem(
            "ram",
            "fail",
            "Memory",
            f"The export needs about {_gib(need)} of RAM at its peak (about twice the fp32 "
            f"weights), more than this computer's {_gib(total)}.",
            "Export on a computer with more RAM, or download an already exported OpenVINO "
            "model of this checkpoint.",
        )
    if available is not None and need > available:
        return CheckItem(
            "ram",
            "warn",
            "Memory",
            f"The export needs about {_gib(need)} of RAM at its peak but {_gib(available)} is "
            "free now: the computer may swap and slow down, or the exporter may be killed.",
            "Close other applications (and unload the chat model) before exporting.",
        )
    shown = f", {_gib(available)} free" if available is not None else ""
    return CheckItem("ram", "pass", "Memory", f"Peak about {_gib(need)}{shown}.")


def check_destination(
    destination: Path, *, overwrite: bool, source: Path | None = None
) -> CheckItem:
    """`source`: the checkpoint folder (a local export), which the destination must not overlap.
    Only a previous export is replaced (core.export_guard)."""
    from qwen_mtp_desktop.core.export_guard import overlap_problem, replace_problem

    destination = Path(destination)
    overlap = overlap_problem(source, destination) if source is not None else None
    if overlap is not None:
        return CheckItem(
            "destination",
            "fail",
            "Destination",
            overlap,
            "Choose a destination outside the checkpoint folder (the default is the app's "
            "Models folder).",
        )
    anchor = existing_ancestor(destination.parent)
    if anchor.exists() and not anchor.is_dir():
        return CheckItem(
            "destination",
            "fail",
            "Destination",
            f"{destination} cannot be created: {anchor} is a file, not a folder.",
            "Choose a destination inside an existing folder.",
        )
    if destination.exists():
        if not destination.is_dir():
            return CheckItem(
                "destination",
                "fail",
                "Destination",
                f"{destination} is a file.",
                "Choose a new folder name.",
            )
        try:
            occupied = any(destination.iterdir())
        except OSError as exc:
            return CheckItem(
                "destination",
                "fail",
                "Destination",
                f"{destination} cannot be read ({exc.strerror}).",
                "Choose another folder.",
            )
        if occupied and not overwrite:
            return CheckItem(
                "destination",
                "fail",
                "Destination",
                f"{destination} already exists and is not empty.",
                "Choose a new folder name, or confirm that the existing folder may be replaced "
                "(CLI: --force).",
            )
        problem = replace_problem(destination) if occupied else None
        if problem is not None:
            return CheckItem(
                "destination",
                "fail",
                "Destination",
                problem,
                "Choose a new folder name; only a previous export made by this app can be "
                "replaced.",
            )
        if occupied:
            return CheckItem(
                "destination",
                "warn",
                "Destination",
                f"{destination} exists and will be replaced once the new export succeeded.",
                "",
            )
    if not os.access(anchor, os.W_OK | os.X_OK):
        return CheckItem(
            "destination",
            "fail",
            "Destination",
            f"{anchor} is not writable.",
            "Choose a folder you can write to (the default is the app's Models folder).",
        )
    return CheckItem("destination", "pass", "Destination", f"{destination}.")


def check_options(config: Mapping[str, Any] | None, options: ExportOptions) -> list[CheckItem]:
    items: list[CheckItem] = []
    int4_parts = options.weight_format == "int4" or options.mtp_weight_format == "int4"
    # Our own MTP-only INT4 config defaults to "ignore"; optimum-cli's INT4 defaults to "error".
    strict = ("error", None) if options.weight_format == "int4" else ("error",)
    if int4_parts and options.group_size_fallback in strict:
        items.append(
            CheckItem(
                "group_size",
                "fail",
                "INT4 group size",
                "With group-size fallback 'error', INT4 compression stops at the MTP head's "
                "rotary-embedding frequencies (a channel of size 1 fits no group).",
                "Set the group-size fallback to 'ignore' (the wizard's default for INT4).",
            )
        )
    elif int4_parts and config is not None:
        hidden = text_config_value(config, "hidden_size")
        group = options.group_size or 128
        if isinstance(hidden, int) and group > 0 and hidden % group:
            kept = (
                "stay uncompressed"
                if options.group_size_fallback == "ignore"
                else "use a smaller group"
            )
            items.append(
                CheckItem(
                    "group_size",
                    "warn",
                    "INT4 group size",
                    f"The hidden size {hidden} is not a multiple of the group size {group}: "
                    f"many layers will {kept}.",
                    "Choose a group size that divides the hidden size (e.g. 64, 32 or 16).",
                )
            )
    if options.trust_remote_code:
        items.append(
            CheckItem(
                "trust_remote_code",
                "warn",
                "Remote code",
                "trust_remote_code is on: Python code shipped with the checkpoint will run "
                "during the export.",
                "Turn it off unless you have read that code; Qwen3.5 does not need it.",
            )
        )
    elif config is not None and config.get("auto_map"):
        items.append(
            CheckItem(
                "trust_remote_code",
                "pass",
                "Remote code",
                "The checkpoint ships custom code; it stays unused (Qwen3.5 is built into "
                "transformers).",
            )
        )
    return items


# --- the checklist -------------------------------------------------------------------------


def run_preflight(
    checkpoint: CheckpointInfo,
    options: ExportOptions,
    destination: Path,
    *,
    overwrite: bool = False,
    versions: Mapping[str, str | None] | None = None,
    free_bytes: Callable[[Path], int] | None = None,
    memory: tuple[int | None, int | None] | None = None,
    hf_cache: Path | None = None,
) -> PreflightReport:
    """Every check, in the order the wizard shows them.

    `free_bytes(folder)` and `memory` = (available, total) RAM default to the real machine;
    tests inject them. `versions` defaults to the installed packages.
    """
    items: list[CheckItem] = list(checkpoint.problems)
    config = checkpoint.config
    if config is not None:
        items.append(check_model_type(config))
        items.append(check_mtp_layers(config))
    if checkpoint.tensors is not None:
        items.append(check_mtp_tensors(checkpoint.tensors))
    items.extend(check_options(config, options))
    versions = versions if versions is not None else installed_versions()
    items.extend(check_toolkit(versions, hub=checkpoint.kind == "hub"))
    source = checkpoint.local_dir if checkpoint.kind == "folder" else None
    items.append(check_destination(destination, overwrite=overwrite, source=source))
    estimate = estimate_export(checkpoint, options)
    if estimate is not None:
        needs = [
            (destination.parent, estimate.output_bytes + estimate.scratch_bytes, "the export"),
        ]
        if estimate.download_bytes and hf_cache is not None:
            needs.append((hf_cache, estimate.download_bytes, "the download"))
        items.append(check_disk(needs, free_bytes or free_disk_bytes))
        if memory is None:
            from qwen_mtp_desktop.core.library import available_memory

            memory = available_memory()
        items.append(check_memory(estimate, *memory))
    return PreflightReport(checkpoint=checkpoint, items=items, estimate=estimate)


def first_failure(report: PreflightReport) -> str:
    """One line for the CLI: the first failing item with its fix."""
    for item in report.failures:
        return f"{item.message} {item.fix}".strip()
    return ""
