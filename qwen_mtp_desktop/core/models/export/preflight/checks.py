"""Before an export: can this checkpoint be exported with its MTP head, here, now?

`run_preflight()` returns a checklist of pass / warn / fail items, each with a fix. It never
loads weights: the checkpoint is read from config.json and the safetensors headers (an 8-byte
little-endian length, then that many bytes of JSON), which also give the parameter counts the
disk and memory estimates are made from. Nothing here imports torch, transformers or optimum.

The checklist's types are in `checklist`, the checkpoint reading in `checkpoint`, the toolkit's
versions in `toolkit`, the size, disk and memory estimates in `estimate`; this module holds the
destination and option checks and `run_preflight()`, which runs them all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.models.export.preflight.checklist import CheckItem
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import (
    CheckpointInfo,
    check_model_type,
    check_mtp_layers,
    check_mtp_tensors,
    text_config_value,
)
from qwen_mtp_desktop.core.models.export.preflight.estimate import (
    ExportEstimate,
    check_disk,
    check_memory,
    estimate_export,
    existing_ancestor,
    free_disk_bytes,
)
from qwen_mtp_desktop.core.models.export.preflight.toolkit import check_toolkit, installed_versions

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.models.export.options import ExportOptions


def check_destination(
    destination: Path, *, overwrite: bool, source: Path | None = None
) -> CheckItem:
    """`source`: the checkpoint folder (a local export), which the destination must not overlap.
    Only a previous export is replaced (core.models.export.guard)."""
    from qwen_mtp_desktop.core.models.export.guard import overlap_problem, replace_problem

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
            from qwen_mtp_desktop.core.models.folders.memory import available_memory

            memory = available_memory()
        items.append(check_memory(estimate, *memory))
    return PreflightReport(checkpoint=checkpoint, items=items, estimate=estimate)


def first_failure(report: PreflightReport) -> str:
    """One line for the CLI: the first failing item with its fix."""
    for item in report.failures:
        return f"{item.message} {item.fix}".strip()
    return ""


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
