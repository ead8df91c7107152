"""The command lines of the export's subprocesses (the exporter and the generation check)."""

from __future__ import annotations

import sys
from pathlib import Path

from qwen_mtp_desktop.core.models.export.options import EXPORT_TASK, ExportOptions


def export_command(
    source: str, output_dir: Path, options: ExportOptions, *, python: str | None = None
) -> list[str]:
    """The optimum-cli command line for this export, run by the given interpreter."""
    command = [
        python or sys.executable,
        "-m",
        "qwen_mtp_desktop.core.models.export.optimum_cli",
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
    mtp = options.mtp_weight_format
    if mtp == "default" and options.weight_format == "int8":
        # optimum-intel's own INT8 export also turns the MTP head's RoPE frequencies into
        # INT8 (verification then warns that positions drift at long context); "same"
        # compresses the head like the main model but keeps them in full precision, which is
        # what that warning recommends, so it is the default (issue 28).
        mtp = "same"
    if mtp != "default":
        command += ["--mtp-weight-format", mtp]
    command.append(str(output_dir))
    return command


def generation_check_command(model_dir: Path, *, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "qwen_mtp_desktop.core.models.export.child",
            "check-generation", str(model_dir)]  # fmt: skip


def app_command(*args: str) -> list[str]:
    """This app's own command line with `args` (`models add-mtp ...`): the bundle's executable
    when frozen, else this interpreter running the package."""
    if getattr(sys, "frozen", False):
        return [sys.executable, *args]
    return [sys.executable, "-m", "qwen_mtp_desktop", *args]
