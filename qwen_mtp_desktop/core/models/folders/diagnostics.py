"""What can be wrong with a model folder, each as a Diagnostic with a code, a message and a fix."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from qwen_mtp_desktop.core.models.folders.discovery import CHECKPOINT_FILES
from qwen_mtp_desktop.core.models.folders.report import (
    REEXPORT_FIX,
    ComponentReport,
    Diagnostic,
    ModelReport,
    MtpSummary,
    Severity,
)
from qwen_mtp_desktop.core.models.ir import (
    IrInfo,
)
from qwen_mtp_desktop.core.prompt.template import template_source
from qwen_mtp_desktop.core.system.environment import release_family


def _family_key(family: str) -> tuple[int, int]:
    year, release = family.split(".")
    return int(year), int(release)


def version_diagnostics(
    versions: Mapping[str, str], installed: Mapping[str, str | None]
) -> list[Diagnostic]:
    mismatches: list[str] = []
    newer = False
    for package in ("openvino", "openvino-tokenizers"):
        exported = release_family(versions.get(package))
        have = release_family(installed.get(package))
        if exported is None or have is None or exported == have:
            continue
        mismatches.append(f"{package}: exported with {exported}, installed {have}")
        newer = newer or _family_key(exported) > _family_key(have)
    if not mismatches:
        return []
    if newer:
        fix = (
            "Update the runtime to the export's release family (openvino, openvino-genai and "
            "openvino-tokenizers together), or re-export with the installed toolkit."
        )
        message = (
            "This model was exported by a newer OpenVINO than the one installed ("
            + "; ".join(mismatches)
            + "). Newer IRs and tokenizer operations may not load."
        )
    else:
        fix = "If loading fails, re-export the model with the export wizard."
        message = (
            "This model was exported by an older OpenVINO release family ("
            + "; ".join(mismatches)
            + "). Older IRs usually load, but this combination is untested."
        )
    return [Diagnostic("RUNTIME_FAMILY_MISMATCH", "warning", message, fix)]


def component_diagnostics(component: ComponentReport) -> list[Diagnostic]:
    """IR_INCOMPLETE / IR_CORRUPT / UNREADABLE for one component, severity by what it is for."""
    out: list[Diagnostic] = []
    # Broken vision parts only cost image input; a broken MTP head only costs the speed-up.
    critical = component.use == "chat" and component.key != "mtp"
    severity: Severity = "error" if critical else "warning"
    consequence = ""
    if component.key == "mtp":
        consequence = " Chat still works, without speculative decoding."
    elif component.use == "image":
        consequence = " Chat still works, without image input."
    name = component.label
    if component.xml_present != component.bin_present:
        have, missing = (".xml", ".bin") if component.xml_present else (".bin", ".xml")
        out.append(
            Diagnostic(
                "IR_INCOMPLETE",
                severity,
                f"{name}: {component.stem}{have} is there but {component.stem}{missing} is "
                f"missing.{consequence}",
                "Copy the missing file from the original export, or re-export the model.",
            )
        )
    if component.error is not None:
        code = "UNREADABLE" if component.unreadable else "IR_CORRUPT"
        out.append(
            Diagnostic(
                code,
                severity,
                f"{name}: {component.stem}.xml {component.error}.{consequence}",
                "Check the file's permissions."
                if code == "UNREADABLE"
                else "The file is damaged: re-export the model or copy it again.",
            )
        )
    for issue in component.issues:
        if issue.code == "IR_INCOMPLETE" and component.xml_present != component.bin_present:
            continue  # already said above
        issue_severity: Severity = severity if issue.severity == "error" else "warning"
        out.append(
            Diagnostic(
                issue.code,
                issue_severity,
                f"{name}: {issue.message}.{consequence if issue.severity == 'error' else ''}",
                "Re-export the model or copy the files again; a copy may have been interrupted.",
            )
        )
    return out


def not_a_model(folder: Path, names: set[str]) -> Diagnostic:
    checkpoint = any(n in names for n in CHECKPOINT_FILES)
    if not names:
        message = f"The folder {folder.name} is empty."
    elif checkpoint:
        message = f"{folder.name} holds a Hugging Face checkpoint, not an OpenVINO export."
    else:
        message = f"{folder.name} holds no OpenVINO model files ({len(names)} other files)."
    fix = (
        "Export it with the export wizard first."
        if checkpoint
        else "Choose a folder made by the export wizard or by optimum-cli export openvino."
    )
    return Diagnostic("NOT_A_MODEL", "error", message, fix)


def layout_diagnostics(report: ModelReport) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    if report.layout == "llm":
        out.append(
            Diagnostic(
                "TEXT_ONLY_EXPORT",
                "warning",
                "This is a text-only export (openvino_model.xml). The app's runtime expects "
                "the image-text-to-text layout, and only that export includes the MTP head.",
                REEXPORT_FIX,
            )
        )
        return out
    for key in ("language_model", "text_embeddings"):
        part = report.component(key)
        if part is not None and not part.xml_present and not part.bin_present:
            out.append(
                Diagnostic(
                    "IR_INCOMPLETE",
                    "error",
                    f"{part.label} ({part.stem}.xml/.bin) is missing.",
                    "Re-export the model; an export that was interrupted leaves parts out.",
                )
            )
    vision = [c for c in report.components if c.use == "image"]
    if any(v.present for v in vision) and not all(v.present for v in vision):
        out.append(
            Diagnostic(
                "VISION_INCOMPLETE",
                "warning",
                "Some vision parts are missing: images cannot be used in chats.",
                "Re-export the model to restore image input.",
            )
        )
    return out


def tokenizer_diagnostics(report: ModelReport, names: set[str]) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    parts = [c for c in report.components if c.key in ("tokenizer", "detokenizer")]
    missing = [c.stem for c in parts if not c.xml_present]
    if missing:
        out.append(
            Diagnostic(
                "TOKENIZER_MISSING",
                "error",
                f"The OpenVINO tokenizer is missing ({', '.join(missing)}); the runtime "
                "cannot turn text into tokens without it.",
                "Re-export the model with openvino-tokenizers installed (the export wizard "
                "does this), or convert the tokenizer with convert_tokenizer --with-detokenizer.",
            )
        )
    tokenizer = report.component("tokenizer")
    tokenizer_ir = tokenizer.ir if tokenizer is not None else None
    # Where the runtime finds it (core.prompt.template), so inspect and the engine agree.
    source = None
    if tokenizer_ir is not None:
        source = template_source(report.path, tokenizer_ir.rt_info)
    report.chat_template = source is not None and source.usable
    if source is not None and source.problem is not None:
        out.append(
            Diagnostic(
                "CHAT_TEMPLATE",
                "error",
                f"The chat template cannot be read as the runtime reads it: {source.problem}",
                f"Remove {source.origin} or replace it with the model's original file.",
            )
        )
    if tokenizer_ir is not None and not report.chat_template:
        out.append(
            Diagnostic(
                "NO_CHAT_TEMPLATE",
                "warning",
                "The tokenizer has no chat template, so conversations cannot be formatted the "
                "way the model was trained.",
                "Re-export from a checkpoint whose tokenizer_config.json has a chat_template.",
            )
        )
    return out


def main_component(report: ModelReport) -> ComponentReport | None:
    return report.component("language_model") or report.component("model")


def body_precision(ir: IrInfo | None, vocab_size: int | None) -> str | None:
    """The dominant weight precision, leaving out vocabulary-sized tensors.

    nncf keeps the lm_head / embedding in INT8 whatever the mode asked for, and the MTP head has
    no lm_head of its own, so comparing with it in would skew the comparison.
    """
    if ir is None:
        return None
    totals: dict[str, int] = {}
    for weight in ir.weights:
        if vocab_size is not None and vocab_size in weight.shape:
            continue
        totals[weight.precision] = totals.get(weight.precision, 0) + weight.parameters
    if not totals:
        return ir.dominant_precision
    return max(sorted(totals), key=lambda name: totals[name])


def mtp_diagnostics(report: ModelReport) -> list[Diagnostic]:
    """Fill `report.mtp` and say whether the MTP head is missing, mismatched or damaged."""
    out: list[Diagnostic] = []
    mtp = report.component("mtp")
    main = main_component(report)
    if mtp is None:
        return out
    present = mtp.present and mtp.readable
    vocab = report.geometry.vocab_size if report.geometry is not None else None
    main_precision = body_precision(main.ir if main is not None else None, vocab)
    mtp_precision = body_precision(mtp.ir, vocab)
    like: bool | None = None
    if present and main_precision is not None and mtp_precision is not None:
        like = mtp_precision == main_precision
    report.mtp = MtpSummary(
        present=present,
        bytes=mtp.total_bytes,
        precision=mtp.precision,
        dominant_precision=mtp_precision,
        main_precision=main_precision,
        compressed_like_main=like,
    )
    if report.kind == "other":
        out.append(
            Diagnostic(
                "NOT_QWEN35",
                "warning",
                f"This is not a Qwen3.5 model (model_type {report.model_type}). The app can "
                "only try to run it with plain decoding: MTP speculative decoding needs "
                "Qwen3.5's MTP head.",
                "For the speed-up, export a Qwen3.5 or Qwen3.5-MoE checkpoint.",
            )
        )
    elif not mtp.xml_present and not mtp.bin_present:
        out.append(
            Diagnostic(
                "MTP_MISSING",
                "warning",
                "No MTP head (openvino_mtp_model.xml) in this model: most conversions drop it "
                "(so do the text-only export path and optimum-intel before 2.2). Chat works "
                "without the speed-up.",
                "Add it from the source checkpoint: Models > Add MTP head…, or `qwen-mtp-desktop "
                "models add-mtp DIR --from Qwen/Qwen3.5-…` (reads only its mtp.* tensors, no "
                "export toolkit); or re-export the checkpoint with the export wizard.",
            )
        )
    if like is False:
        out.append(
            Diagnostic(
                "MTP_NOT_COMPRESSED_LIKE_MAIN",
                "warning",
                f"The MTP head is mostly {mtp_precision} but the language model is "
                f"mostly {main_precision}. A heavier draft head costs speed; a lighter one "
                "can lower acceptance.",
                "Re-export with one --weight-format for the whole model (the export wizard "
                "does this).",
            )
        )
    rope = [
        w
        for w in (mtp.ir.weights if mtp.ir is not None else [])
        if ("rotary_emb" in w.name or "inv_freq" in w.name) and w.symmetric is not None
    ]
    if rope:
        # optimum-intel's int8 mode compresses RoPE's inv_freq too (measured: 28 % error).
        out.append(
            Diagnostic(
                "MTP_ROPE_QUANTIZED",
                "warning",
                f"The MTP head's rotary-embedding frequencies are stored as {rope[0].label}: "
                "positions get distorted at long context, which can lower draft acceptance.",
                "Re-export with --weight-format int4 --group-size-fallback ignore (keeps them "
                "in full precision), and compare acceptance in the benchmark.",
            )
        )
    return out
