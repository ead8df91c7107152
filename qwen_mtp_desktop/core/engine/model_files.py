"""Checks on a model folder before OpenVINO sees it: a Qwen3.5 export with its IR files,
tokenizer and (optionally) MTP head, nothing that would block or crash the native loader.
Each problem is a specific EngineError that says what to do."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path

from qwen_mtp_desktop.core.engine.types import EngineError
from qwen_mtp_desktop.core.files.safe_files import FileKind, model_folder_problem, read_json_file

QWEN35_MODEL_TYPES = ("qwen3_5", "qwen3_5_moe")
LANGUAGE_MODEL = "openvino_language_model"
MTP_MODEL = "openvino_mtp_model"
TOKENIZER = "openvino_tokenizer"
DETOKENIZER = "openvino_detokenizer"


@dataclass(frozen=True)
class ModelFiles:
    """What a model folder holds, as far as loading is concerned."""

    model_type: str
    has_mtp: bool
    warnings: tuple[str, ...] = field(default=())


def check_model_dir(model_dir: Path) -> ModelFiles:
    """Check a folder before handing it to OpenVINO, raising a specific EngineError."""
    if not model_dir.exists() and model_dir.is_symlink():
        try:
            model_dir.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # 3.11 raises RuntimeError for a loop
            if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
                raise EngineError(
                    f"{model_dir} is a symbolic link that leads back to itself (a link loop).",
                    "Point the link at the real model folder, or choose that folder instead.",
                    code="SYMLINK_LOOP",
                ) from exc
    if not model_dir.exists():
        raise EngineError(
            f"The model folder {model_dir} does not exist.",
            "Choose an existing model folder in the Models panel.",
            code="MODEL_NOT_FOUND",
        )
    if not model_dir.is_dir():
        raise EngineError(
            f"{model_dir} is a file, not a model folder.",
            "Choose the folder that holds openvino_language_model.xml.",
            code="MODEL_NOT_FOUND",
        )
    try:
        entries = {entry.name for entry in model_dir.iterdir()}
    except OSError as exc:
        raise EngineError(
            f"The model folder {model_dir} cannot be read ({exc.strerror}).",
            "Check the folder's permissions.",
            code="UNREADABLE",
        ) from exc
    if not entries:
        raise EngineError(
            f"The model folder {model_dir} is empty.",
            "Export a Qwen3.5 checkpoint into it with the Export panel.",
            code="EMPTY_DIR",
        )
    _refuse_special_files(model_dir)
    model_type = _model_type(model_dir, entries)
    if model_type not in QWEN35_MODEL_TYPES:
        what = f"a {model_type!r} model" if model_type else "not a Qwen3.5 model"
        raise EngineError(
            f"{model_dir.name} is {what}; this app runs Qwen3.5 and Qwen3.5-MoE models.",
            "Export a Qwen3.5 checkpoint (model_type qwen3_5 or qwen3_5_moe) in the Export panel.",
            code="NOT_QWEN35",
        )
    if f"{LANGUAGE_MODEL}.xml" not in entries:
        raise EngineError(
            f"{model_dir.name} has no {LANGUAGE_MODEL}.xml; it is not a complete OpenVINO export.",
            "Re-export the checkpoint with the Export panel (task image-text-to-text).",
            code="IR_INCOMPLETE",
        )
    for component in (TOKENIZER, DETOKENIZER):
        if f"{component}.xml" not in entries or f"{component}.bin" not in entries:
            raise EngineError(
                f"{model_dir.name} has no {component}.xml/.bin, so text cannot be "
                "turned into tokens and back.",
                "Re-export the model with tokenizer conversion on (the default), or run "
                "`convert_tokenizer --with-detokenizer` from openvino-tokenizers into it.",
                code="TOKENIZER_MISSING",
            )
    for xml_name in sorted(name for name in entries if name.endswith(".xml")):
        if xml_name != f"{MTP_MODEL}.xml":
            _check_ir_pair(model_dir / xml_name)
    warning = _mtp_head_problem(model_dir, entries)
    # A missing or damaged MTP head costs the speed-up, not the chat: the model decodes plain.
    return ModelFiles(model_type, warning is None, (warning,) if warning else ())


def _mtp_head_problem(model_dir: Path, entries: set[str]) -> str | None:
    """Why the MTP head cannot be used, naming the file that is wrong and what to do; None
    when it can. The head is two files: the graph (.xml) and its weights (.bin)."""
    xml, weights = f"{MTP_MODEL}.xml", f"{MTP_MODEL}.bin"
    plain = "so it runs without speculative decoding (MTP)"
    if xml not in entries and weights not in entries:
        return (
            f"This model has no MTP head (no {xml} or {weights}), {plain}. Export the "
            "checkpoint again in the Export panel: it exports the MTP head with the model."
        )
    if weights not in entries:
        return (
            f"This model's MTP head has lost its weights: {weights} is missing beside "
            f"{xml}, {plain}. Copy {weights} back from where the model came from (the "
            "original export or download), or export the model again."
        )
    if xml not in entries:
        return (
            f"This model's MTP head has lost its graph: {xml} is missing beside {weights}, "
            f"{plain}. Copy {xml} back from where the model came from, or export the model "
            "again."
        )
    try:
        _check_ir_pair(model_dir / xml)
    except EngineError as exc:
        return (
            f"This model's MTP head is damaged: {exc.message} It runs without speculative "
            f"decoding (MTP) until the file is replaced. {exc.fix}"
        )
    return None


def _model_type(model_dir: Path, entries: set[str]) -> str:
    if "config.json" not in entries:
        if f"{LANGUAGE_MODEL}.xml" in entries or "openvino_model.xml" in entries:
            return ""
        raise EngineError(
            f"{model_dir.name} holds no model (no config.json and no OpenVINO IR).",
            "Choose a folder exported by the Export panel.",
            code="NOT_A_MODEL",
        )
    try:
        config = read_json_file(model_dir / "config.json", kind=FileKind("config.json", ""))
    except (OSError, ValueError) as exc:
        raise EngineError(
            f"{model_dir.name}/config.json cannot be read ({exc}).",
            "Re-export the model; the config file is damaged.",
            code="IR_CORRUPT",
        ) from exc
    model_type = config.get("model_type", "") if isinstance(config, dict) else ""
    return model_type if isinstance(model_type, str) else ""


def _check_ir_pair(xml_path: Path) -> None:
    """Cheap integrity check: the .bin exists and is as long as the IR's constants need."""
    bin_path = xml_path.with_suffix(".bin")
    if not bin_path.is_file():
        raise EngineError(
            f"{xml_path.name} has no {bin_path.name} beside it.",
            "The export is incomplete; re-export the model.",
            code="IR_INCOMPLETE",
        )
    needed = _bin_bytes_needed(xml_path)
    actual = bin_path.stat().st_size
    if needed > actual:
        raise EngineError(
            f"{bin_path.name} is truncated: {actual:,} bytes where {xml_path.name} needs "
            f"{needed:,}, so a copy or download stopped part way.",
            f"Copy {bin_path.name} again from where the model came from, or re-export the model.",
            code="IR_CORRUPT",
        )


def _bin_bytes_needed(xml_path: Path) -> int:
    """The end of the furthest constant in the .bin, read from the IR's XML."""
    import xml.etree.ElementTree as ElementTree

    needed = 0
    try:
        for _event, element in ElementTree.iterparse(xml_path):
            if element.tag == "data":
                offset, size = element.get("offset"), element.get("size")
                if offset is not None and size is not None:
                    needed = max(needed, int(offset) + int(size))
            elif element.tag == "layer":
                element.clear()
    except (ElementTree.ParseError, ValueError, OSError) as exc:
        raise EngineError(
            f"{xml_path.name} is not a readable OpenVINO IR ({exc}).",
            "The file is damaged or is not an OpenVINO model; re-export the model.",
            code="IR_CORRUPT",
        ) from exc
    return needed


def _refuse_special_files(model_dir: Path) -> None:
    """A FIFO or device in the folder would block the native loader forever, and its JSON
    side files are parsed natively: both are checked first (issue 19, core.files.safe_files)."""
    problem = model_folder_problem(model_dir)
    if problem is not None:
        code, message = problem
        raise EngineError(
            f"{message}; the model was not loaded.",
            "Replace the file with the real one (or remove it), or re-export the model.",
            code=code,
        )


def weight_file_bytes(model_dir: Path) -> int:
    """The language model's and MTP head's weight files together (what the decoder's graphs
    hold); a file that cannot be read counts as very large, so nothing is built on a guess."""
    total = 0
    for name in (f"{LANGUAGE_MODEL}.bin", f"{MTP_MODEL}.bin"):
        try:
            total += (model_dir / name).stat().st_size
        except FileNotFoundError:
            continue
        except OSError:  # a link loop, no permission: unknown
            return 1 << 62
    return total
