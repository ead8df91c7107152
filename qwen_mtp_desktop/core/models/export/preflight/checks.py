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


#: The INT4 group sizes offered, largest first: 128 is optimum-intel's default, and a larger
#: group makes a smaller model.
INT4_GROUP_SIZES = (128, 64, 32, 16)
#: The sizes a linear layer's input can have, as (what to call it, its config keys multiplied).
_LAYER_INPUTS = (
    ("hidden size", ("hidden_size",)),
    ("intermediate size", ("intermediate_size",)),
    ("MoE intermediate size", ("moe_intermediate_size",)),
    ("shared-expert intermediate size", ("shared_expert_intermediate_size",)),
    ("attention output size", ("num_attention_heads", "head_dim")),
    ("linear-attention output size", ("linear_num_value_heads", "linear_value_head_dim")),
)


def layer_input_sizes(config: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The input sizes of the checkpoint's linear layers, which an INT4 group must divide (a
    group is that many input channels sharing one scale), from the text config's keys."""
    sizes = []
    for name, keys in _LAYER_INPUTS:
        values = [text_config_value(config, key) for key in keys]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            size = 1
            for value in values:
                size *= value
            sizes.append((name, size))
    return sizes


def fitting_group_size(config: Mapping[str, Any] | None) -> int | None:
    """The largest offered INT4 group size that divides every layer input of this checkpoint
    (-1, per channel, when none does); None when the config says nothing of its sizes."""
    sizes = [size for _name, size in layer_input_sizes(config)] if config is not None else []
    if not sizes:
        return None
    return next((g for g in INT4_GROUP_SIZES if all(s % g == 0 for s in sizes)), -1)


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
        group = options.group_size or INT4_GROUP_SIZES[0]
        misfit = [(n, s) for n, s in layer_input_sizes(config) if group > 0 and s % group]
        if misfit:
            name, size = misfit[0]
            kept = (
                "stay uncompressed"
                if options.group_size_fallback == "ignore"
                else "use a smaller group"
            )
            fitting = fitting_group_size(config)
            fits = "per channel" if fitting == -1 else f"{fitting}"
            items.append(
                CheckItem(
                    "group_size",
                    "warn",
                    "INT4 group size",
                    f"The {name} {size} is not a multiple of the group size {group}: "
                    f"{'many layers' if name == 'hidden size' else 'those layers'} will {kept}.",
                    f"Choose a group size that divides it: {fits} fits this checkpoint.",
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
