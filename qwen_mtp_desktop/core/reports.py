"""Validation and benchmark reports: ids, the per-model history under the data dir (model
folders may be read-only, like the bundled demo), and the Markdown pieces both kinds share.

Reports are plain JSON dicts with a stable key set (`validate.VALIDATION_KEYS` /
`bench.BENCH_KEYS`); `report_markdown.report_markdown()` renders any saved report.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.errors import ValidationError
from qwen_mtp_desktop.core.fileio import atomic_write_text
from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.safe_files import FileKind, read_json_file

log = logging.getLogger(__name__)


REPORT_SCHEMA_VERSION = 1


ReportKind = Literal["validate", "bench"]


#: The components whose precision decides speed (the rest stay in the JSON report only).
COMPONENT_LABELS = {
    "language_model": "language model",
    "text_embeddings": "embeddings",
    "mtp": "MTP head",
    "model": "language model",
}


def model_key(model_dir: Path) -> str:
    """A folder-name-safe key for one model folder: readable name plus a hash of its path."""
    resolved = str(Path(model_dir).expanduser().resolve())
    digest = hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(resolved).name).strip("-.")[:40] or "model"
    return f"{slug}-{digest}"


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_report_id(kind: ReportKind) -> str:
    return f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(3)}"


def reports_root() -> Path:
    return app_paths().data_dir / "reports"


def reports_dir(model_dir: Path) -> Path:
    """Where a model's reports live: under the data dir, since model folders may be read-only."""
    return reports_root() / model_key(model_dir)


def save_report(report: dict[str, Any]) -> Path:
    """Write the report into its model's history; returns the file."""
    folder = reports_dir(Path(report["model"]["path"]))
    path = folder / f"{report['id']}.json"
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return path


@dataclass(frozen=True)
class ReportEntry:
    path: Path
    kind: ReportKind
    created: str
    device: str
    #: One line for a history list, e.g. "identical 3/3 · n=1 · 71 % accepted".
    headline: str
    ok: bool


def load_report(path: Path) -> dict[str, Any]:
    try:
        raw = read_json_file(Path(path), kind=FileKind(f"The report {Path(path).name}", ""))
    except (OSError, ValueError) as exc:
        raise ValidationError(
            f"The report {Path(path).name} cannot be read ({exc}).",
            "Delete it from the reports folder; new runs are not affected.",
            code="BAD_REPORT",
        ) from exc
    if not isinstance(raw, dict) or raw.get("kind") not in ("validate", "bench"):
        raise ValidationError(
            f"{Path(path).name} is not a validation or benchmark report.", code="BAD_REPORT"
        )
    if raw.get("schema_version") != REPORT_SCHEMA_VERSION:
        raise ValidationError(
            f"{Path(path).name} was written by another version of the app "
            f"(schema {raw.get('schema_version')}).",
            code="BAD_REPORT",
        )
    return raw


def headline(report: dict[str, Any]) -> tuple[str, bool]:
    if report["kind"] == "validate":
        summary = report["summary"]
        n = report["settings"]["num_assistant_tokens"]
        ok = bool(summary["all_identical"])
        text = f"{'identical' if ok else 'DIFFERENT'} {summary['identical_prompts']}/"
        lookup = report["settings"].get("method") == "lookup"
        text += f"{summary['prompts']} · {'prompt lookup K' if lookup else 'n'}={n}"
        if summary["acceptance_rate"] is not None:
            text += f" · {summary['acceptance_rate']:.0%} accepted"
        return text, ok
    # The overall winner the Benchmark panel's banner and chart name (prompt lookup too).
    from qwen_mtp_desktop.core.verdicts import method_verdict

    overall = method_verdict(report)["overall"]
    best = overall["method"] != "plain"
    text = f"best: {overall['label']}" if best else "best: plain"
    if best and overall.get("speedup") is not None:
        text += f" ({overall['speedup']:.2f}x)"
    base = next((m for m in report["modes"] if m["depth"] is None), None)
    if base is not None and base["decode_tokens_per_s"] is not None:
        text += f" · plain {base['decode_tokens_per_s']['median']:.1f} tok/s"
    return text, best


def list_reports(model_dir: Path) -> list[ReportEntry]:
    """The model's saved reports, newest first (unreadable files are skipped)."""
    folder = reports_dir(model_dir)
    entries: list[ReportEntry] = []
    for path in sorted(folder.glob("*.json"), reverse=True) if folder.is_dir() else []:
        try:
            data = load_report(path)
            text, ok = headline(data)
        except (ValidationError, KeyError, TypeError):
            log.warning("skipping unreadable report %s", path)
            continue
        entries.append(ReportEntry(path, data["kind"], data["created"], data["device"], text, ok))
    return entries


def md_cell(text: object) -> str:
    """A table-cell-safe string."""
    return str(text).replace("|", "\\|").replace("\n", "↵ ")


def fmt(value: float | None, pattern: str = "{:.1f}") -> str:
    return "–" if value is None else pattern.format(value)


def fmt_spread(value: dict[str, float] | None, pattern: str = "{:.1f}", scale: float = 1) -> str:
    if value is None:
        return "–"
    med, low, high = (value[k] * scale for k in ("median", "min", "max"))
    return f"{pattern.format(med)} ({pattern.format(low)}–{pattern.format(high)})"


def header_lines(report: dict[str, Any]) -> Iterator[str]:
    model = report["model"]
    source = model["source_model_id"] or "unknown"
    revision = model["source_revision"] or "not recorded"
    precisions = ", ".join(
        f"{COMPONENT_LABELS[k]} {v}"
        for k, v in model["precisions"].items()
        if v and k in COMPONENT_LABELS
    )
    yield "| | |"
    yield "|---|---|"
    yield f"| Model folder | `{md_cell(model['path'])}` |"
    yield f"| Source model | {md_cell(source)} (revision {md_cell(revision)}) |"
    yield f"| Precisions | {md_cell(precisions or 'unknown')} |"
    machine = report.get("machine", {})
    device = report["device"]
    if machine.get("device_name"):
        device += f" ({machine['device_name']})"
    yield f"| Device | {md_cell(device)} |"
    yield f"| Numerics | {report['numerics']} |"
    yield f"| Prompt set | {md_cell(report_prompt_sets(report))} |"
    yield f"| Date | {report['created']} · app {report['app_version']} |"


def report_prompt_sets(report: dict[str, Any]) -> str:
    sets = report.get("prompt_sets") or [report.get("prompt_set")]
    return ", ".join(s["name"] for s in sets if s)


def version_lines(report: dict[str, Any]) -> Iterator[str]:
    yield "## Versions"
    yield ""
    yield "| Package | Installed | Exported with |"
    yield "|---|---|---|"
    exported = report["model"]["export_versions"]
    for name, version in report["versions"].items():
        yield f"| {name} | {version or 'not installed'} | {exported.get(name, '–')} |"


__all__ = [
    "REPORT_SCHEMA_VERSION",
    "ReportEntry",
    "ReportKind",
    "fmt",
    "fmt_spread",
    "header_lines",
    "headline",
    "list_reports",
    "load_report",
    "md_cell",
    "model_key",
    "new_report_id",
    "now_iso",
    "reports_dir",
    "reports_root",
    "save_report",
    "version_lines",
]
