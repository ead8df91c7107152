"""Reading a checkpoint without loading it: config.json, safetensors headers, MTP tensors."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.export.preflight.checklist import CheckItem

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


QWEN35_TYPES = ("qwen3_5", "qwen3_5_moe")
