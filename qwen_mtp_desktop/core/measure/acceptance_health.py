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

Prompt lookup is watched too, but only like with like: its acceptance depends on how much an
answer copies the conversation, which depends on the task far more than on the model. So its
references are kept per workload (the prompt set a `validate --prompt-lookup` or a `bench`
measured it on: code, chat, list, summarise, edit), each chat request is given the workload kind
it reads as (`workload_kind`: rewrite requests are "edit", "summarise this" is "summarise", ...),
and a lookup answer is compared only with the reference of its own kind, when there is one. Its
figure is the share of drafted tokens accepted. The warning says which workload it compared and
offers re-validating prompt lookup on that prompt set.

The reference is kept even when the model files change (that is one of the causes to report);
reading it and describing the model read files, so the chat does both off the GUI thread.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.auto.policy import draft_trials
from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP, DEFAULT_NGRAM, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file
from qwen_mtp_desktop.core.measure.recommendations import model_fingerprint
from qwen_mtp_desktop.core.measure.records import Report
from qwen_mtp_desktop.core.measure.verdicts import row_method

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
    #: The model files then (core.measure.bench.model_fingerprint), the runtime and the MTP
    #: precision.
    fingerprint: list[list[Any]] = field(default_factory=list)
    genai_version: str | None = None
    mtp_precision: str | None = None
    #: What was measured: MTP at a depth, or prompt lookup with its drafts per step and
    #: n-gram size; then `first_draft` is the share of drafted tokens accepted, on the prompt
    #: set `workload`.
    method: DecodingMethod = DEFAULT_MTP
    workload: str | None = None

    @property
    def compares_workloads(self) -> bool:
        """Prompt lookup's acceptance depends on how much answers copy, so it is compared per
        workload only (the module docstring)."""
        return self.method.kind == "lookup"


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
    def method(self) -> DecodingMethod:
        return self.reference.method

    @property
    def workload(self) -> str | None:
        return self.reference.workload

    @property
    def text(self) -> str:
        ref = self.reference
        causes = "; ".join(self.causes)
        if ref.compares_workloads:
            return (
                f"Prompt lookup acceptance dropped: {self.live:.0%} of drafted tokens accepted "
                f"on this chat's {ref.workload} requests, against {ref.first_draft:.0%} when "
                f"{ref.source} measured it on the {ref.workload} prompts ({ref.device}, "
                f"{ref.created[:10]}). Compared like with like only: lookup acceptance depends "
                f"on how much answers copy, which differs by task. Likely causes: {causes}."
            )
        return (
            f"MTP acceptance dropped: {self.live:.0%} of first drafts accepted in this chat, "
            f"against {ref.first_draft:.0%} when {ref.source} measured this model on "
            f"{ref.device} ({ref.created[:10]}). Likely causes: {causes}."
        )


def reference_from_report(report: Report) -> AcceptanceReference | None:
    """The reference a finished report gives: a validation whose output was identical, or a
    benchmark's shallowest MTP depth (reports of prompt lookup give none)."""
    if report["kind"] == "validate":
        summary = report["summary"]
        positions = summary.get("acceptance_by_position") or []
        method = row_method(report["settings"])
        if not method.uses_mtp_head or not summary.get("all_identical"):
            return None
        if not positions:
            return None
        first = positions[0]
        sets: tuple[str, ...] = (report["prompt_set"]["name"],)
    elif report["kind"] == "bench":
        modes = [
            (row_method(m), m)
            for m in report.get("modes", [])
            if row_method(m).uses_mtp_head and m["identical"] and m["acceptance_by_position"]
        ]
        if not modes:
            return None
        method, shallowest = min(modes, key=lambda pair: pair[0].drafts)
        first = shallowest["acceptance_by_position"][0]
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
        method=method.drafting,
    )


def lookup_references_from_report(report: Report) -> list[AcceptanceReference]:
    """Prompt lookup references a finished report gives, one per workload (prompt set): a
    lookup validation whose output was identical, or each prompt set's lookup mode in a
    benchmark (identical output, drafts measured)."""
    found: list[tuple[str, float, DecodingMethod]] = []
    if report["kind"] == "validate":
        summary = report["summary"]
        rate = summary.get("acceptance_rate")
        method = row_method(report["settings"])
        if method.kind == "lookup" and summary.get("all_identical") and rate is not None:
            found.append((report["prompt_set"]["name"], float(rate), method))
    elif report["kind"] == "bench":
        for entry in report.get("per_set", []):
            for mode in entry.get("modes", []):
                rate = mode.get("acceptance_rate")
                method = row_method(mode)
                if method.kind == "lookup" and mode.get("identical") and rate is not None:
                    found.append((entry["prompt_set"], float(rate), method))
    if not found:
        return []
    model = report["model"]
    fingerprint = model_fingerprint(Path(model["path"]))
    return [
        AcceptanceReference(
            model_path=str(Path(model["path"]).expanduser().resolve()),
            device=str(report["device"]).upper(),
            source=str(report["kind"]),
            report_id=str(report["id"]),
            created=str(report["created"]),
            first_draft=rate,
            prompt_sets=(workload,),
            fingerprint=fingerprint,
            genai_version=report.get("versions", {}).get("openvino-genai"),
            mtp_precision=None,
            method=method.drafting,
            workload=workload,
        )
        for workload, rate, method in found
    ]


def reference_file() -> Path:
    return app_paths().data_dir / REFERENCE_FILE


def _key(model_dir: Path, device: str, workload: str | None = None) -> str:
    key = f"{Path(model_dir).expanduser().resolve()}::{device.upper()}"
    return key if workload is None else f"{key}::lookup::{workload}"


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


def save_reference(report: Report) -> AcceptanceReference | None:
    """Keep the report's acceptances as this model and device's references: MTP's, and prompt
    lookup's per workload. Returns the MTP one (None: the report has none)."""
    reference = reference_from_report(report)
    lookups = lookup_references_from_report(report)
    if reference is None and not lookups:
        return None
    with _lock:
        entries = _read_entries()
        if reference is not None:
            entries[_key(Path(reference.model_path), reference.device)] = _as_entry(reference)
        for lookup in lookups:
            key = _key(Path(lookup.model_path), lookup.device, lookup.workload)
            entries[key] = _as_entry(lookup)
        payload = {"schema_version": REFERENCE_SCHEMA, "entries": entries}
        atomic_write_text(reference_file(), json.dumps(payload, indent=2) + "\n")
    return reference


def _as_entry(reference: AcceptanceReference) -> dict[str, Any]:
    entry = asdict(reference)
    entry["method"] = reference.method.to_record()
    return entry


def _as_reference(entry: object, model_dir: Path) -> AcceptanceReference | None:
    """A stored entry (untrusted): this version's, or an older one whose "method" was "mtp"
    (its depth not kept: the first-draft share does not depend on it) or "lookup" with
    "lookup_tokens" and "max_ngram_size" (None in a benchmark's: it ran the default)."""
    if not isinstance(entry, dict):
        return None
    try:
        entry = dict(entry)
        entry["prompt_sets"] = tuple(entry["prompt_sets"])
        drafts, ngram = entry.pop("lookup_tokens", None), entry.pop("max_ngram_size", None)
        stored = entry.get("method", "mtp")
        if stored == "mtp":
            stored = {"kind": "mtp", "drafts": 1}
        elif stored == "lookup":
            stored = {"kind": "lookup", "drafts": drafts, "ngram": ngram or DEFAULT_NGRAM}
        method = DecodingMethod.from_record(stored)
        if method is None:
            raise ValueError(f"not a decoding method: {stored!r}")
        entry["method"] = method
        reference = AcceptanceReference(**entry)
        float(reference.first_draft)
    except (TypeError, ValueError, KeyError):
        log.warning("ignoring a damaged acceptance reference for %s", model_dir)
        return None
    return reference


def load_reference(model_dir: Path, device: str) -> AcceptanceReference | None:
    """The stored MTP reference for this model folder and device (blocking: reads the data
    dir)."""
    with _lock:
        entry = _read_entries().get(_key(model_dir, device))
    return _as_reference(entry, model_dir)


def load_lookup_references(model_dir: Path, device: str) -> dict[str, AcceptanceReference]:
    """The stored prompt lookup references for this model and device, by workload."""
    prefix = _key(model_dir, device, "")
    with _lock:
        entries = _read_entries()
    found = {}
    for key, entry in entries.items():
        if key.startswith(prefix):
            reference = _as_reference(entry, model_dir)
            if reference is not None and reference.workload and reference.compares_workloads:
                found[reference.workload] = reference
    return found


#: Request wording per workload kind, tried in this order (the prompt sets' own tasks).
_WORKLOAD_PATTERNS = (
    (
        "edit",
        r"\b(rewrite|rephrase|reword|edit|proofread|rename|refactor|correct|fix|change|replace"
        r"|modify|update|translate)\b|otherwise unchanged|return the whole",
    ),
    ("summarise", r"\b(summari[sz]e|summary|tl;?dr|key points)\b"),
    (
        "code",
        r"```|\b(python|javascript|typescript|rust|java|c\+\+|go|sql|bash|function|class"
        r"|struct|method|implement|script|code|regex)\b",
    ),
    (
        "list",
        r"\b(list|enumerate|count from|table|bullets?|name \d+|\d+ (things|items|ideas|tips))\b"
        r"|one \w+ per line|\b\d+ to \d+\b|\bfrom \w+ to \w+",
    ),
)


def workload_kind(request: str) -> str:
    """The workload a chat request reads as (the bench's prompt-set names: edit, summarise,
    code, list; anything else is chat), so prompt lookup is compared like with like."""
    text = request.lower()
    for kind, pattern in _WORKLOAD_PATTERNS:
        if re.search(pattern, text):
            return kind
    return "chat"


def current_state(model_dir: Path) -> ModelState:
    """The model's files, runtime and MTP precision now (blocking: reads the IR headers)."""
    from qwen_mtp_desktop.core.measure.measurement import describe_model, installed_versions

    return ModelState(
        fingerprint=model_fingerprint(model_dir),
        genai_version=installed_versions().get("openvino-genai"),
        mtp_precision=describe_model(model_dir).get("mtp_precision"),
    )


def likely_causes(reference: AcceptanceReference, now: ModelState) -> list[str]:
    """What changed since the reference, most specific first, and the content caveat."""
    if reference.compares_workloads:
        return _lookup_causes(reference, now)
    causes = _changed_since(reference, now)
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


def _changed_since(reference: AcceptanceReference, now: ModelState) -> list[str]:
    """What changed under the model since its reference: its files, then openvino-genai."""
    causes = []
    if reference.fingerprint and now.fingerprint != reference.fingerprint:
        causes.append(f"the model files changed since the {reference.source} (a re-export?)")
    if reference.genai_version and now.genai_version != reference.genai_version:
        causes.append(
            f"openvino-genai changed from {reference.genai_version} to "
            f"{now.genai_version or 'an unknown version'}"
        )
    return causes


def _lookup_causes(reference: AcceptanceReference, now: ModelState) -> list[str]:
    """Prompt lookup has no head to quantize: what changed, then the content caveat."""
    causes = _changed_since(reference, now)
    causes.append(
        f"these {reference.workload} requests copy less from the conversation than the "
        f"{reference.workload} prompts it was measured on"
    )
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
class _Evidence:
    """Decayed drafts tried and accepted for one comparison."""

    trials: float = 0.0
    accepted: float = 0.0
    warned: bool = False

    def add(self, trials: float, accepted: float) -> None:
        self.trials = self.trials * DECAY + trials
        self.accepted = self.accepted * DECAY + accepted

    @property
    def live(self) -> float | None:
        return self.accepted / self.trials if self.trials else None

    def dropped(self, reference: float, min_trials: float) -> bool:
        """Whether even the optimistic end of what was seen is far below `reference`."""
        if self.warned or self.trials < min_trials:
            return False
        upper = wilson_upper(self.accepted, self.trials)
        return upper < reference / 2 and reference - upper >= MIN_DROP


#: Drafted tokens (weighted) a workload's lookup answers must have shown before a comparison.
MIN_LOOKUP_DRAFTS = 8


@dataclass
class HealthMonitor:
    """Live acceptance of one chat's answers against the references: MTP's first drafts
    against `reference`, prompt lookup's drafted tokens against `lookup[workload]` for the
    workload each request reads as (`workload_kind`)."""

    reference: AcceptanceReference | None
    now: ModelState
    lookup: dict[str, AcceptanceReference] = field(default_factory=dict)
    _mtp: _Evidence = field(default_factory=_Evidence)
    _lookup: dict[str, _Evidence] = field(default_factory=dict)

    @property
    def live(self) -> float | None:
        return self._mtp.live

    @property
    def warned(self) -> bool:
        return self._mtp.warned

    def observe(self, stats: GenerationStats, request: str = "") -> HealthWarning | None:
        """Take in a finished answer (and the request it answered, for prompt lookup's
        workload); a warning the first time acceptance has dropped."""
        method = stats.method
        if method.kind == "lookup":
            return self._observe_lookup(stats, request)
        if self.reference is None or not method.uses_mtp_head:
            return None
        end = stats.switched_to_plain_at
        sizes = stats.chunk_sizes if end is None else stats.chunk_sizes[:end]
        trials, accepted = draft_trials(sizes, method.drafts)
        if not trials or not trials[0]:
            return None
        evidence = self._mtp
        evidence.add(trials[0], accepted[0])
        live = evidence.live
        if live is None or not evidence.dropped(self.reference.first_draft, MIN_TRIALS):
            return None
        evidence.warned = True
        return HealthWarning(live, self.reference, tuple(likely_causes(self.reference, self.now)))

    def _observe_lookup(self, stats: GenerationStats, request: str) -> HealthWarning | None:
        """A prompt lookup answer, compared only with the reference of its own workload."""
        workload = workload_kind(request)
        reference = self.lookup.get(workload)
        if reference is None or stats.drafted_tokens <= 0:
            return None
        evidence = self._lookup.setdefault(workload, _Evidence())
        evidence.add(stats.drafted_tokens, stats.accepted_tokens)
        live = evidence.live
        if live is None or not evidence.dropped(reference.first_draft, MIN_LOOKUP_DRAFTS):
            return None
        evidence.warned = True
        causes = likely_causes(reference, self.now)
        k, measured_k = stats.method.drafts, reference.method.drafts
        if k != measured_k:
            causes.insert(
                -1,
                f"this chat drafts {k} tokens per step, the reference {measured_k} (more drafts "
                "per step accept a smaller share)",
            )
        return HealthWarning(live, reference, tuple(causes))


__all__ = [
    "AcceptanceReference",
    "HealthMonitor",
    "HealthWarning",
    "ModelState",
    "current_state",
    "likely_causes",
    "load_lookup_references",
    "load_reference",
    "lookup_references_from_report",
    "reference_from_report",
    "save_reference",
    "workload_kind",
]
