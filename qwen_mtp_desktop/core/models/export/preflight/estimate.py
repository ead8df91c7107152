"""How big an export gets and how much memory and disk it needs, from the parameter counts."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qwen_mtp_desktop.core.models.export.preflight.checklist import CheckItem
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import (
    CheckpointInfo,
    text_config_value,
)
from qwen_mtp_desktop.core.units import format_bytes

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.models.export.options import ExportOptions


#: Python + torch + transformers + optimum imported, before any weight is loaded (measured
#: 1.27-1.42 GB on the tiny fixtures).
EXPORT_BASE_RSS = int(1.4 * 1024**3)


#: Bytes per stored parameter after compression (INT4: 4 bits + a 16-bit scale and zero point
#: per group of 128, rounded up).
BYTES_PER_PARAM: dict[str, float] = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.56}


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


def existing_ancestor(path: Path) -> Path:
    path = Path(path).absolute()
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def free_disk_bytes(path: Path) -> int:
    return shutil.disk_usage(existing_ancestor(path)).free


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
        summary.append(
            f"{format_bytes(amount)} needed ({' + '.join(whats)}), {format_bytes(free)} free"
        )
        if amount > free:
            verb = "needs" if len(whats) == 1 else "need"
            problems.append(
                f"{' + '.join(whats)} {verb} about {format_bytes(amount)} on {anchor}, but only "
                f"{format_bytes(free)} is free"
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
            f"The export needs about {format_bytes(need)} of RAM at its peak (about twice the fp32 "
            f"weights), more than this computer's {format_bytes(total)}.",
            "Export on a computer with more RAM, or download an already exported OpenVINO "
            "model of this checkpoint.",
        )
    if available is not None and need > available:
        return CheckItem(
            "ram",
            "warn",
            "Memory",
            f"The export needs about {format_bytes(need)} of RAM at its peak but "
            f"{format_bytes(available)} is free now: the computer may swap and slow down, or the "
            "exporter may be killed.",
            "Close other applications (and unload the chat model) before exporting.",
        )
    shown = f", {format_bytes(available)} free" if available is not None else ""
    return CheckItem("ram", "pass", "Memory", f"Peak about {format_bytes(need)}{shown}.")


#: Peak RSS beyond the base, per byte of fp32 weights: the torch model plus the traced
#: OpenVINO graph (RUNTIME-NOTES: ~2x the fp32 checkpoint in total for Qwen3.5-0.8B).
EXPORT_RSS_PER_FP32_BYTE = 1.6
