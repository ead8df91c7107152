"""`inspect_model`: one model folder, start to finish (files, metadata, IRs, diagnostics)."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.files.fileio import folder_bytes
from qwen_mtp_desktop.core.files.safe_files import FileKind, UnsafeFileError, read_json_object
from qwen_mtp_desktop.core.models.folders.diagnostics import (
    component_diagnostics,
    layout_diagnostics,
    main_component,
    mtp_diagnostics,
    not_a_model,
    tokenizer_diagnostics,
    version_diagnostics,
)
from qwen_mtp_desktop.core.models.folders.manifest import read_manifest
from qwen_mtp_desktop.core.models.folders.memory import (
    DEFAULT_CONTEXT_LENGTH,
    available_memory,
    estimate_memory,
    geometry_from_config,
    geometry_from_ir,
    implausible_shape,
    memory_diagnostics,
    positive_int,
)
from qwen_mtp_desktop.core.models.folders.report import (
    COMPONENTS,
    LLM_COMPONENT,
    QWEN35_MOE_TYPES,
    QWEN35_TYPES,
    ComponentReport,
    ComponentSpec,
    Diagnostic,
    Kind,
    KvPrecision,
    MemoryEstimate,
    ModelReport,
    SourceInfo,
)
from qwen_mtp_desktop.core.models.ir import (
    IrError,
    IrMissingError,
    IrUnreadableError,
    read_ir,
)
from qwen_mtp_desktop.core.system.environment import package_version


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
    experts = positive_int((text if isinstance(text, dict) else config).get("num_experts"))
    if types & QWEN35_MOE_TYPES or (types & QWEN35_TYPES and experts):
        return "qwen3_5_moe", "Qwen3.5 MoE", shown
    if types & QWEN35_TYPES:
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
    main, tokenizer = main_component(report), report.component("tokenizer")
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
    report.total_bytes = folder_bytes(folder)
    if not any(c.xml_present or c.bin_present for c in report.components):
        report.diagnostics.append(not_a_model(folder, names))
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
    main, mtp = main_component(report), report.component("mtp")
    if config is not None:
        report.geometry = geometry_from_config(config)
        implausible = implausible_shape(config)
        if implausible is not None:
            report.diagnostics.append(
                Diagnostic(
                    "CONFIG_INVALID",
                    "warning",
                    f"config.json gives a shape no model has ({implausible}); the memory "
                    "estimate leaves out what depends on it.",
                    "Copy config.json from the original export.",
                )
            )
    if report.geometry is None and main is not None and main.ir is not None:
        report.geometry = geometry_from_ir(main.ir, mtp.ir if mtp is not None else None)

    for component in report.components:
        report.diagnostics.extend(component_diagnostics(component))
    report.diagnostics.extend(layout_diagnostics(report))
    report.diagnostics.extend(tokenizer_diagnostics(report, names))
    report.diagnostics.extend(mtp_diagnostics(report))

    report.source = _source(report, config, folder)
    report.versions = _versions(report)
    if installed_versions is None:
        installed_versions = {
            name: package_version(name) for name in ("openvino", "openvino-tokenizers")
        }
    report.diagnostics.extend(version_diagnostics(report.versions, installed_versions))

    if measure_memory and available_bytes is None:
        available_bytes, measured_total = available_memory()
        total_ram_bytes = total_ram_bytes or measured_total
    report.memory = report_memory(
        report,
        context_length=context_length,
        kv_precision=kv_precision,
        available_bytes=available_bytes,
    )
    report.diagnostics.extend(memory_diagnostics(report.memory, total_ram_bytes))
    return report


def report_memory(
    report: ModelReport,
    *,
    context_length: int,
    kv_precision: KvPrecision,
    available_bytes: int | None,
) -> MemoryEstimate:
    """The memory a model needs, from its report's components and geometry: pure arithmetic
    (inspect_model, and core.models.library.reestimate for another context or KV precision)."""
    weights = {
        c.key: c.bin_bytes
        for c in report.components
        if c.use == "chat" and c.present and (c.key != "mtp" or report.mtp.present)
    }
    image = sum(c.bin_bytes for c in report.components if c.use == "image" and c.present)
    return estimate_memory(
        weights,
        report.geometry,
        context_length=context_length,
        kv_precision=kv_precision,
        include_mtp=report.mtp.present,
        image_extra_bytes=image,
        available_bytes=available_bytes,
    )
