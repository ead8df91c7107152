"""Verification of an export: files, the precision of every component, MTP == plain output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.models.export.options import ExportOptions, missing_components
from qwen_mtp_desktop.core.models.export.progress import PART_LABELS
from qwen_mtp_desktop.core.models.ir import WeightInfo


@dataclass(frozen=True)
class VerifyItem:
    key: str
    status: Literal["pass", "warn", "fail"]
    message: str
    fix: str = ""

    def to_json_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Verification:
    items: list[VerifyItem] = field(default_factory=list)
    precisions: dict[str, str] = field(default_factory=dict)
    generation: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not any(item.status == "fail" for item in self.items)

    @property
    def files_ok(self) -> bool:
        """False for failures that make the folder unusable (missing or unreadable IR).

        A wrong precision or an MTP/plain mismatch keeps the model but fails verification.
        """
        return not any(item.status == "fail" and item.key in ("files", "ir") for item in self.items)

    def summary(self) -> str:
        failed = [item.message for item in self.items if item.status == "fail"]
        return failed[0] if failed else "All checks passed."

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "items": [item.to_json_dict() for item in self.items],
            "precisions": dict(self.precisions),
            "generation": self.generation,
        }


def _expected_precision(fmt: str | None) -> str:
    return {"int4": "INT4", "int8": "INT8", "fp16": "FP16", "fp32": "FP32"}.get(fmt or "", "FP32")


def expected_mtp_format(options: ExportOptions) -> str:
    main = options.weight_format or "fp32"
    choice = options.mtp_weight_format
    if choice in ("default", "same"):
        return main  # optimum-intel 2.2 gives the MTP head the main model's config
    if choice == "none":
        return "fp16"
    return choice


#: The precision asked for must hold at least this share of a component's weights: INT4 exports
#: keep vocabulary-sized tables (and, with ratio < 1, some layers) in INT8.
MIN_PRECISION_SHARE = 0.25


def precision_share(weights: Sequence[WeightInfo], precision: str) -> float:
    total = sum(w.parameters for w in weights)
    if not total:
        return 0.0
    return sum(w.parameters for w in weights if w.precision == precision) / total


def verify_precisions(model_dir: Path, options: ExportOptions) -> Verification:
    """Files present and each component stored in the precision that was asked for."""
    from qwen_mtp_desktop.core.models.ir import IrError, read_ir

    result = Verification()
    missing = missing_components(model_dir)
    if missing:
        result.items.append(
            VerifyItem(
                "files",
                "fail",
                f"The export is incomplete: {', '.join(missing)} missing.",
                "An MTP head is only exported for Qwen3.5 checkpoints with mtp.* weights.",
            )
        )
        return result
    result.items.append(VerifyItem("files", "pass", "openvino_mtp_model.xml/.bin and all parts."))
    checks = (
        ("language_model", "openvino_language_model", _expected_precision(options.weight_format)),
        ("mtp", "openvino_mtp_model", _expected_precision(expected_mtp_format(options))),
    )
    for key, stem, expected in checks:
        try:
            info = read_ir(model_dir / f"{stem}.xml")
        except IrError as exc:
            result.items.append(VerifyItem("ir", "fail", f"{stem}.xml {exc.reason}."))
            continue
        result.precisions[key] = info.precision_summary
        label = PART_LABELS.get(key, key)
        share = precision_share(info.weights, expected)
        if share < MIN_PRECISION_SHARE:
            result.items.append(
                VerifyItem(
                    f"precision:{key}",
                    "fail",
                    f"The {label} is stored as {info.precision_summary or 'nothing readable'}, "
                    f"but {expected} was asked for.",
                    "Check the group size (it must divide the layer sizes) and re-export; if it "
                    "happens again, report it with the export log.",
                )
            )
        else:
            result.items.append(
                VerifyItem(
                    f"precision:{key}",
                    "pass",
                    f"{label[:1].upper()}{label[1:]}: {info.precision_summary}.",
                )
            )
        if key == "mtp":
            rope = [
                w
                for w in info.weights
                if ("rotary_emb" in w.name or "inv_freq" in w.name) and w.symmetric is not None
            ]
            if rope:
                result.items.append(
                    VerifyItem(
                        "mtp_rope",
                        "warn",
                        f"The MTP head's RoPE frequencies are stored as {rope[0].label}, which "
                        "distorts positions at long context and can lower acceptance.",
                        "Choose MTP compression INT8 or INT4 (they keep RoPE in full "
                        "precision), or main format INT4 with group-size fallback 'ignore'.",
                    )
                )
    return result


def generation_item(result: dict[str, Any]) -> VerifyItem:
    item = _generation_outcome(result)
    first_run = result.get("first_run")
    if not first_run:
        return item
    # The check crashed once and ran again: show both outcomes, and never as a clean pass.
    return VerifyItem(
        item.key,
        "warn" if item.status == "pass" else item.status,
        f"The check's first run was {first_run} (a crash inside the OpenVINO runtime), so it "
        f"ran again. Second run: {item.message}",
        item.fix or "If this happens again with this model, report it with the log.",
    )


def _generation_outcome(result: dict[str, Any]) -> VerifyItem:
    if result.get("error"):
        return VerifyItem(
            "generation",
            "fail",
            f"The exported model could not be run with its MTP head: {result['error']}",
            "Check it in the Models panel; if its files are fine, report this with the log.",
        )
    n = result.get("num_assistant_tokens")
    if result.get("equal"):
        rate = result.get("acceptance_rate")
        accepted = f", {rate:.0%} of drafts accepted" if isinstance(rate, float) else ""
        return VerifyItem(
            "generation",
            "pass",
            f"Loads with its MTP head; greedy MTP output (n={n}) equals plain decoding over "
            f"{result.get('tokens')} tokens{accepted}.",
        )
    first = result.get("first_difference")
    base = result.get("baseline_tokens") or []
    mtp = result.get("mtp_tokens") or []
    at = ""
    if isinstance(first, int):
        b = base[first] if first < len(base) else "end"
        m = mtp[first] if first < len(mtp) else "end"
        at = f" at token {first} (plain {b}, MTP {m})"
    return VerifyItem(
        "generation",
        "fail",
        f"Greedy MTP output differs from plain decoding{at}.",
        "Run the Benchmark panel's correctness check; a difference at a near-tie logit is "
        "numerical, an early and repeated one points at a faulty MTP head.",
    )
