"""Export a Qwen3.5 checkpoint to an OpenVINO model directory with its MTP head.

The exporter (optimum-intel) runs as a subprocess: it imports torch and transformers, which the
app process never does, and a crash or a cancel there cannot take the app down. Output goes to a
temporary folder beside the destination and is moved into place only when the export succeeded
and the MTP head is really there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

WeightFormat = Literal["fp32", "fp16", "int8", "int4"]
GroupSizeFallback = Literal["error", "ignore", "adjust"]

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


class ExportError(RuntimeError):
    """An export failed: the message says why and what to do; `log_tail` ends the exporter log."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


@dataclass(frozen=True)
class ExportOptions:
    weight_format: WeightFormat | None = None
    group_size: int | None = None
    sym: bool = False
    ratio: float | None = None
    group_size_fallback: GroupSizeFallback | None = None
    trust_remote_code: bool = False


@dataclass(frozen=True)
class ExportResult:
    output_dir: Path
    seconds: float
    log: str


def export_command(
    source: str, output_dir: Path, options: ExportOptions, *, python: str | None = None
) -> list[str]:
    """The optimum-cli command line for this export, run by the given interpreter."""
    command = [
        python or sys.executable,
        "-m",
        "qwen_mtp_desktop.core.optimum_cli",
        "export",
        "openvino",
        "--model",
        source,
        "--task",
        EXPORT_TASK,
    ]
    if options.weight_format is not None:
        command += ["--weight-format", options.weight_format]
    if options.group_size is not None:
        command += ["--group-size", str(options.group_size)]
    if options.sym:
        command.append("--sym")
    if options.ratio is not None:
        command += ["--ratio", str(options.ratio)]
    if options.group_size_fallback is not None:
        command += ["--group-size-fallback", options.group_size_fallback]
    if options.trust_remote_code:
        command.append("--trust-remote-code")
    command.append(str(output_dir))
    return command


def missing_components(model_dir: Path) -> list[str]:
    """Required component files (xml and bin) absent from `model_dir`."""
    missing = []
    for component in REQUIRED_COMPONENTS:
        for suffix in (".xml", ".bin"):
            if not (model_dir / f"{component}{suffix}").is_file():
                missing.append(f"{component}{suffix}")
    return missing


def run_export(
    source: str,
    output_dir: Path,
    options: ExportOptions,
    *,
    on_line: Callable[[str], None] | None = None,
) -> ExportResult:
    """Run the exporter to completion; raise ExportError on failure, leaving nothing behind."""
    output_dir = output_dir.resolve()
    if output_dir.exists() and any(output_dir.iterdir()):
        raise ExportError(f"{output_dir} already exists and is not empty; choose another folder")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.exporting-", dir=output_dir.parent))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    lines: list[str] = []
    started = time.monotonic()
    try:
        with subprocess.Popen(
            export_command(source, staging, options),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=env,
        ) as process:
            assert process.stdout is not None
            for line in process.stdout:
                line = line.rstrip("\n")
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            status = process.wait()
        tail = "\n".join(lines[-30:])
        if status != 0:
            raise ExportError(f"the exporter failed (exit status {status})", tail)
        missing = missing_components(staging)
        if missing:
            raise ExportError(
                "the exporter finished but the model is incomplete (missing "
                f"{', '.join(missing)}); an MTP head is only exported for Qwen3.5 checkpoints "
                "that contain mtp.* weights",
                tail,
            )
        if output_dir.exists():
            output_dir.rmdir()  # empty, checked above
        staging.replace(output_dir)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging)
    return ExportResult(output_dir, time.monotonic() - started, "\n".join(lines))
