"""The benchmark's verdict kept per model folder and device (`mtp_depth.json` in the data folder):
the recommended draft depth (or plain decoding), the winner per workload and the measured
acceptance. The chat's Auto and the acceptance health check read it; a re-export of the model
(its IR files' sizes and times change) makes the entry stale."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.engine import (
    LANGUAGE_MODEL,
    MTP_MODEL,
)
from qwen_mtp_desktop.core.fileio import atomic_write_text
from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.safe_files import FileKind, read_json_file

log = logging.getLogger(__name__)


#: What "auto" uses for a model/device that was never benchmarked: one draft per step is the
#: depth validated on every model so far and the cheapest when drafts are rejected.
DEFAULT_AUTO_DEPTH = 1


RECOMMENDATIONS_FILE = "mtp_depth.json"


RECOMMENDATIONS_SCHEMA = 1


_store_lock = threading.Lock()


@dataclass(frozen=True)
class DepthRecommendation:
    model_path: str
    device: str
    #: Draft tokens per step; None means plain decoding is faster on this model and device.
    depth: int | None
    label: str
    speedup: float | None
    acceptance_rate: float | None
    created: str
    report_id: str
    #: Prompt set (workload) -> the method that won it: {"method", "depth", "label",
    #: "speedup", ...} (see `workload_winner`); empty for entries from before prompt lookup.
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Measured per-draft acceptance, {"mtp": {"1": 0.9, ...}, "lookup": 0.4}: what the
    #: chat's acceptance health check (core.acceptance_health) compares live turns with.
    acceptance: dict[str, Any] = field(default_factory=dict)


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


def save_recommendation(report: dict[str, Any]) -> DepthRecommendation:
    """Store a benchmark's recommendation for its model folder and device."""
    rec = report["recommendation"]
    model_path = report["model"]["path"]
    entry = {
        "model_path": model_path,
        "device": report["device"].upper(),
        "depth": rec["depth"],
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


def measured_acceptance(modes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-draft acceptance by method (MTP per depth, prompt lookup) from a report's modes."""
    mtp = {
        str(m["depth"]): m["acceptance_rate"]
        for m in modes
        if m["mode"] == "mtp" and m["acceptance_rate"] is not None
    }
    lookup = [m["acceptance_rate"] for m in modes if m["mode"] == "lookup"]
    return {"mtp": mtp, "lookup": lookup[0] if lookup else None}


def _as_recommendation(entry: dict[str, Any]) -> DepthRecommendation:
    workloads = entry.get("workloads")
    acceptance = entry.get("acceptance")
    return DepthRecommendation(
        model_path=entry["model_path"],
        device=entry["device"],
        depth=entry["depth"],
        label=entry["label"],
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
    except KeyError:
        return None


def recommended_depth(model_dir: Path, device: str) -> int | None:
    """What the chat's "auto" draft depth means for this model and device.

    Returns the benchmarked best depth; None when the benchmark found MTP slower than plain
    decoding (run without MTP); DEFAULT_AUTO_DEPTH (1) when the model was never benchmarked on
    this device (use `depth_recommendation()` to tell that case apart).
    """
    found = depth_recommendation(model_dir, device)
    if found is None:
        return DEFAULT_AUTO_DEPTH
    return found.depth
