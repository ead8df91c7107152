"""The benchmark's verdict kept per model folder and device (`mtp_depth.json` in the data folder):
where Auto starts (an MTP depth, or plain decoding), the winner per workload and the measured
acceptance. The chat's Auto reads it; a re-export of the model (its IR files' sizes and times
change) makes the entry stale. Entries written before `DecodingMethod` say "depth" (None for
plain decoding) instead of "method"; `_as_recommendation` reads both."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.engine import (
    LANGUAGE_MODEL,
    MTP_MODEL,
)
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file
from qwen_mtp_desktop.core.measure.records import BenchReport, MethodRecord, ModeSummary, Winner
from qwen_mtp_desktop.core.measure.verdicts import row_method

log = logging.getLogger(__name__)


RECOMMENDATIONS_FILE = "mtp_depth.json"


RECOMMENDATIONS_SCHEMA = 1


_store_lock = threading.Lock()


@dataclass(frozen=True)
class DepthRecommendation:
    model_path: str
    device: str
    #: Where Auto starts: MTP at the fastest depth, or plain decoding when MTP is slower here.
    start: DecodingMethod
    speedup: float | None
    acceptance_rate: float | None
    created: str
    report_id: str
    #: Prompt set (workload) -> the method that won it: {"method", "label", "speedup", ...}
    #: (see `workload_winner`); empty for entries from before prompt lookup.
    workloads: dict[str, Winner] = field(default_factory=dict)
    #: Measured per-draft acceptance, {"mtp": {"1": 0.9, ...}, "lookup": 0.4}: what the
    #: chat's acceptance health check (core.measure.acceptance_health) compares live turns with.
    acceptance: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.start.short_label


def recommendations_file() -> Path:
    return app_paths().data_dir / RECOMMENDATIONS_FILE


def _entry_key(model_dir: Path, device: str) -> str:
    return f"{Path(model_dir).expanduser().resolve()}::{device.upper()}"


def model_fingerprint(model_dir: Path) -> list[list[Any]]:
    """Sizes and mtimes of the IR files speed depends on: a re-export invalidates the entry."""
    out: list[list[Any]] = []
    for stem in (LANGUAGE_MODEL, MTP_MODEL):
        for suffix in (".xml", ".bin"):
            path = Path(model_dir) / f"{stem}{suffix}"
            try:
                info = path.stat()
                out.append([path.name, info.st_size, info.st_mtime_ns])
            except OSError:
                out.append([path.name, None, None])
    return out


def _read_store() -> dict[str, Any]:
    try:
        raw = read_json_file(recommendations_file(), kind=FileKind("recommendations", ""))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        log.warning("ignoring unreadable %s", recommendations_file(), exc_info=True)
        return {}
    if not isinstance(raw, dict) or raw.get("schema_version") != RECOMMENDATIONS_SCHEMA:
        return {}
    entries = raw.get("entries")
    return entries if isinstance(entries, dict) else {}


class StoredRecommendation(TypedDict):
    """An entry of the store as `save_recommendation` writes it (entries written before
    `DecodingMethod` say "depth" instead of "method" and "label"; `_as_recommendation` reads
    those too)."""

    model_path: str
    device: str
    method: MethodRecord
    label: str
    speedup: float | None
    acceptance_rate: float | None
    created: str
    report_id: str
    fingerprint: list[list[Any]]
    workloads: dict[str, Winner]
    acceptance: dict[str, float]


def save_recommendation(report: BenchReport) -> DepthRecommendation:
    """Store a benchmark's recommendation for its model folder and device."""
    rec = report["recommendation"]
    model_path = report["model"]["path"]
    entry: StoredRecommendation = {
        "model_path": model_path,
        "device": report["device"].upper(),
        "method": rec["method"],
        "label": rec["label"],
        "speedup": rec["speedup"],
        "acceptance_rate": rec["acceptance_rate"],
        "created": report["created"],
        "report_id": report["id"],
        "fingerprint": model_fingerprint(Path(model_path)),
        "workloads": {
            e["prompt_set"]: e["winner"] for e in report.get("per_set", []) if "winner" in e
        },
        "acceptance": measured_acceptance(report.get("modes", [])),
    }
    with _store_lock:
        entries = _read_store()
        entries[_entry_key(Path(model_path), report["device"])] = entry
        payload = {"schema_version": RECOMMENDATIONS_SCHEMA, "entries": entries}
        atomic_write_text(recommendations_file(), json.dumps(payload, indent=2) + "\n")
    return _as_recommendation(entry)


def measured_acceptance(modes: Sequence[ModeSummary]) -> dict[str, float]:
    """Acceptance by method (its label: "MTP n=1", "prompt lookup K=4, n-gram 3") from a
    report's modes."""
    found = {}
    for mode in modes:
        method = row_method(mode)
        if not method.is_plain and mode["acceptance_rate"] is not None:
            found[method.label] = mode["acceptance_rate"]
    return found


def _as_recommendation(entry: Mapping[str, Any]) -> DepthRecommendation:
    """An entry as stored (KeyError or ValueError when it is damaged)."""
    workloads = entry.get("workloads")
    acceptance = entry.get("acceptance")
    if "method" in entry:
        start = DecodingMethod.from_record(entry["method"])
    else:  # written before DecodingMethod: "depth", None for plain decoding
        depth = entry["depth"]
        start = (
            PLAIN if depth is None else DecodingMethod.from_record({"kind": "mtp", "drafts": depth})
        )
    if start is None or not (start.is_plain or start.uses_mtp_head):
        raise ValueError(f"Auto cannot start from {entry.get('method', entry.get('depth'))!r}")
    return DepthRecommendation(
        model_path=entry["model_path"],
        device=entry["device"],
        start=start.drafting,
        speedup=entry["speedup"],
        acceptance_rate=entry["acceptance_rate"],
        created=entry["created"],
        report_id=entry["report_id"],
        workloads=workloads if isinstance(workloads, dict) else {},
        acceptance=acceptance if isinstance(acceptance, dict) else {},
    )


def depth_recommendation(model_dir: Path, device: str) -> DepthRecommendation | None:
    """The stored benchmark verdict for this model folder and device; None if it was never
    benchmarked there, or the model files changed since."""
    with _store_lock:
        entry = _read_store().get(_entry_key(model_dir, device))
    if not isinstance(entry, dict):
        return None
    if entry.get("fingerprint") != model_fingerprint(Path(model_dir)):
        return None
    try:
        return _as_recommendation(entry)
    except (KeyError, ValueError):
        log.warning("ignoring a damaged recommendation for %s", model_dir)
        return None
