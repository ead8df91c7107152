"""Acceptance health: is MTP still accepting drafts as well as when it was measured?

Acceptance can collapse silently: a re-export, a quantized MTP head or a runtime update, and
nothing tells the user; decoding just gets slower. `validate` and `bench` measure acceptance
with known prompts, so each keeps a reference per model folder and device
(`save_reference`). The chat feeds every MTP answer to a `HealthMonitor`, which compares the
live first-draft acceptance (share of steps whose first draft was accepted: comparable across
depths, unlike the overall rate) with the reference and warns once when it dropped markedly:
even the optimistic end of what the drafts seen allow (a one-sided 95 % Wilson upper bound,
so a few drafts must all have failed, more may fail mostly) is below half the reference and at
least MIN_DROP below it. Few drafts are enough on purpose: Auto stops drafting after four
rejected steps, which is the very case to report. The warning names the likely causes it can
check (model files changed since, another openvino-genai version, a quantized MTP head) and,
always, the one it cannot: a conversation unlike the prompts the reference was measured on.

The reference is kept even when the model files change (that is one of the causes to report);
reading it and describing the model read files, so the chat does both off the GUI thread.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.adaptive import draft_trials
from qwen_mtp_desktop.core.bench import model_fingerprint
from qwen_mtp_desktop.core.decoding import GenerationStats
from qwen_mtp_desktop.core.fileio import atomic_write_text
from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.safe_files import FileKind, read_json_file

log = logging.getLogger(__name__)

REFERENCE_FILE = "acceptance_reference.json"
REFERENCE_SCHEMA = 1
#: First drafts (weighted, see DECAY) a chat must have shown before it is compared.
MIN_TRIALS = 4
#: One-sided 95 % normal quantile for the Wilson bound.
Z = 1.645
#: A marked drop: below half the reference and at least this far below it.
MIN_DROP = 0.2
#: Older turns' evidence keeps this weight per turn: the check follows the recent answers.
DECAY = 0.8

_lock = threading.Lock()


@dataclass(frozen=True)
class AcceptanceReference:
    """What `validate` or `bench` measured for one model folder and device."""

    model_path: str
    device: str
    #: "validate" or "bench", its report id and time.
    source: str
    report_id: str
    created: str
    #: Share of decode steps whose first MTP draft was accepted.
    first_draft: float
    prompt_sets: tuple[str, ...]
    #: The model files then (core.bench.model_fingerprint), the runtime and the MTP precision.
    fingerprint: list[list[Any]] = field(default_factory=list)
    genai_version: str | None = None
    mtp_precision: str | None = None


@dataclass(frozen=True)
class ModelState:
    """The same facts about the model as it is now (see `current_state`)."""

    fingerprint: list[list[Any]]
    genai_version: str | None
    mtp_precision: str | None


@dataclass(frozen=True)
class HealthWarning:
    live: float
    reference: AcceptanceReference
    causes: tuple[str, ...]

    @property
    def text(self) -> str:
        ref = self.reference
        return (
            f"MTP acceptance dropped: {self.live:.0%} of first drafts accepted in this chat, "
            f"against {ref.first_draft:.0%} when {ref.source} measured this model on "
            f"{ref.device} ({ref.created[:10]}). Likely causes: " + "; ".join(self.causes) + "."
        )


def reference_from_report(report: dict[str, Any]) -> AcceptanceReference | None:
    """The reference a finished report gives: a validation whose output was identical, or a
    benchmark's shallowest MTP depth (reports of prompt lookup give none)."""
    settings = report.get("settings", {})
    if report.get("kind") == "validate":
        summary = report["summary"]
        positions = summary.get("acceptance_by_position") or []
        if settings.get("method", "mtp") != "mtp" or not summary.get("all_identical"):
            return None
        if not positions:
            return None
        first = positions[0]
        sets = (report["prompt_set"]["name"],)
    elif report.get("kind") == "bench":
        modes = [m for m in report.get("modes", []) if m.get("mode") == "mtp" and m["identical"]]
        measured = [m for m in modes if m["acceptance_by_position"]]
        if not measured:
            return None
        first = min(measured, key=lambda m: m["depth"])["acceptance_by_position"][0]
        sets = tuple(p["name"] for p in report.get("prompt_sets", []))
    else:
        return None
    model = report["model"]
    return AcceptanceReference(
        model_path=str(Path(model["path"]).expanduser().resolve()),
        device=str(report["device"]).upper(),
        source=str(report["kind"]),
        report_id=str(report["id"]),
        created=str(report["created"]),
        first_draft=float(first),
        prompt_sets=sets,
        fingerprint=model_fingerprint(Path(model["path"])),
        genai_version=report.get("versions", {}).get("openvino-genai"),
        mtp_precision=model.get("mtp_precision"),
    )


def reference_file() -> Path:
    return app_paths().data_dir / REFERENCE_FILE


def _key(model_dir: Path, device: str) -> str:
    return f"{Path(model_dir).expanduser().resolve()}::{device.upper()}"


def _read_entries() -> dict[str, Any]:
    try:
        raw = read_json_file(reference_file(), kind=FileKind("acceptance references", ""))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        log.warning("ignoring unreadable %s", reference_file(), exc_info=True)
        return {}
    if not isinstance(raw, dict) or raw.get("schema_version") != REFERENCE_SCHEMA:
        return {}
    entries = raw.get("entries")
    return entries if isinstance(entries, dict) else {}


def save_reference(report: dict[str, Any]) -> AcceptanceReference | None:
    """Keep the report's acceptance as this model and device's reference (None: it has none)."""
    reference = reference_from_report(report)
    if reference is None:
        return None
    with _lock:
        entries = _read_entries()
        entries[_key(Path(reference.model_path), reference.device)] = asdict(reference)
        payload = {"schema_version": REFERENCE_SCHEMA, "entries": entries}
        atomic_write_text(reference_file(), json.dumps(payload, indent=2) + "\n")
    return reference


def load_reference(model_dir: Path, device: str) -> AcceptanceReference | None:
    """The stored reference for this model folder and device (blocking: reads the data dir)."""
    with _lock:
        entry = _read_entries().get(_key(model_dir, device))
    if not isinstance(entry, dict):
        return None
    try:
        entry["prompt_sets"] = tuple(entry["prompt_sets"])
        reference = AcceptanceReference(**entry)
        float(reference.first_draft)
    except (TypeError, ValueError, KeyError):
        log.warning("ignoring a damaged acceptance reference for %s", model_dir)
        return None
    return reference


def current_state(model_dir: Path) -> ModelState:
    """The model's files, runtime and MTP precision now (blocking: reads the IR headers)."""
    from qwen_mtp_desktop.core.validate import describe_model, installed_versions

    return ModelState(
        fingerprint=model_fingerprint(model_dir),
        genai_version=installed_versions().get("openvino-genai"),
        mtp_precision=describe_model(model_dir).get("mtp_precision"),
    )


def likely_causes(reference: AcceptanceReference, now: ModelState) -> list[str]:
    """What changed since the reference, most specific first, and the content caveat."""
    causes = []
    if reference.fingerprint and now.fingerprint != reference.fingerprint:
        causes.append(f"the model files changed since the {reference.source} (a re-export?)")
    if reference.genai_version and now.genai_version != reference.genai_version:
        causes.append(
            f"openvino-genai changed from {reference.genai_version} to "
            f"{now.genai_version or 'an unknown version'}"
        )
    precision = now.mtp_precision or ""
    if precision and precision != reference.mtp_precision:
        causes.append(
            f"the MTP head is now {precision} (it was {reference.mtp_precision or 'unknown'})"
        )
    elif any(kind in precision.upper() for kind in ("INT4", "INT8", "NF4")):
        causes.append(f"the MTP head is quantized ({precision})")
    sets = ", ".join(reference.prompt_sets) or "its"
    causes.append(f"this conversation is unlike the {sets} prompts it was measured on")
    return causes


def wilson_upper(accepted: float, trials: float, z: float = Z) -> float:
    """The upper end of the Wilson score interval for a share of `accepted` in `trials`."""
    if trials <= 0:
        return 1.0
    share = accepted / trials
    z2 = z * z
    centre = share + z2 / (2 * trials)
    spread = z * math.sqrt(share * (1 - share) / trials + z2 / (4 * trials * trials))
    return min((centre + spread) / (1 + z2 / trials), 1.0)


@dataclass
class HealthMonitor:
    """Live first-draft acceptance of one chat's MTP answers against the reference."""

    reference: AcceptanceReference
    now: ModelState
    _trials: float = 0.0
    _accepted: float = 0.0
    warned: bool = False

    @property
    def live(self) -> float | None:
        return self._accepted / self._trials if self._trials else None

    def observe(self, stats: GenerationStats) -> HealthWarning | None:
        """Take in a finished answer; a warning the first time acceptance has dropped."""
        if stats.mode != "mtp" or stats.num_assistant_tokens < 1:
            return None
        end = stats.switched_to_plain_at
        sizes = stats.chunk_sizes if end is None else stats.chunk_sizes[:end]
        trials, accepted = draft_trials(sizes, stats.num_assistant_tokens)
        if not trials or not trials[0]:
            return None
        self._trials = self._trials * DECAY + trials[0]
        self._accepted = self._accepted * DECAY + accepted[0]
        live = self.live
        if self.warned or live is None or self._trials < MIN_TRIALS:
            return None
        ref = self.reference.first_draft
        upper = wilson_upper(self._accepted, self._trials)
        if upper < ref / 2 and ref - upper >= MIN_DROP:
            self.warned = True
            return HealthWarning(
                live, self.reference, tuple(likely_causes(self.reference, self.now))
            )
        return None


__all__ = [
    "AcceptanceReference",
    "HealthMonitor",
    "HealthWarning",
    "ModelState",
    "current_state",
    "likely_causes",
    "load_reference",
    "reference_from_report",
    "save_reference",
]
