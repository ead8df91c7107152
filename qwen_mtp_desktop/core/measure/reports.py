"""Validation and benchmark reports: ids, the per-model history under the data dir (model
folders may be read-only, like the bundled demo), and the Markdown pieces both kinds share.

Reports are plain JSON dicts with a stable key set (`validate.VALIDATION_KEYS` /
`bench.BENCH_KEYS`), typed as `records.Report`; `report_markdown.report_markdown()` renders any
saved report. Every row that measured a method names it as a `DecodingMethod` record under
"method" (`row_method` reads it). Reports from before that (schema 1: "mode" "baseline" | "mtp" |
"lookup" with a "depth") and from before the app's decoder was named "app" (schema 2: "fast")
are read by `load_report` (`checked_report`), which turns them into the current shape: the one
place that knows the old ones.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from qwen_mtp_desktop.core.decoding.method import DEFAULT_NGRAM, PLAIN, DecodingMethod
from qwen_mtp_desktop.core.errors import MeasurementError
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file
from qwen_mtp_desktop.core.measure.records import Report, ReportKind, Spread
from qwen_mtp_desktop.core.measure.verdicts import method_verdict, row_method

log = logging.getLogger(__name__)


#: 3: the app's decoder is named "app". 2 (read, upgraded): it was "fast"; methods as
#: DecodingMethod records. 1 (read, upgraded): "mode" and "depth".
REPORT_SCHEMA_VERSION = 3


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


def save_report(report: Report) -> Path:
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


def load_report(path: Path) -> Report:
    try:
        raw = read_json_file(Path(path), kind=FileKind(f"The report {Path(path).name}", ""))
    except (OSError, ValueError) as exc:
        raise MeasurementError(
            f"The report {Path(path).name} cannot be read ({exc}).",
            "Delete it from the reports folder; new runs are not affected.",
            code="BAD_REPORT",
        ) from exc
    return checked_report(raw, Path(path).name)


def checked_report(raw: object, name: str) -> Report:
    """`raw` (a report as read from its file, or as the engine host sent it) as a report of the
    current schema; MeasurementError BAD_REPORT, naming `name`, when it is none. The one place
    where an untyped dict becomes a `Report`: its kind and schema are checked, an older schema
    is upgraded, and every row that names a method is read (`row_method`)."""
    if not isinstance(raw, dict) or raw.get("kind") not in ("validate", "bench"):
        raise MeasurementError(
            f"{name} is not a validation or benchmark report.", code="BAD_REPORT"
        )
    if raw.get("schema_version") not in (1, 2, REPORT_SCHEMA_VERSION):
        raise MeasurementError(
            f"{name} was written by another version of the app "
            f"(schema {raw.get('schema_version')}).",
            code="BAD_REPORT",
        )
    try:
        report = _upgraded(raw) if raw["schema_version"] == 1 else raw
        if raw["schema_version"] < REPORT_SCHEMA_VERSION:
            report = _decoder_renamed(report)
        for row in _method_rows(report):
            row_method(row)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise MeasurementError(
            f"{name} is damaged: {exc!r} where a measured method was expected.",
            "Delete it from the reports folder; new runs are not affected.",
            code="BAD_REPORT",
        ) from exc
    # Checked above, and upgraded to the current shape: what records.Report describes.
    return cast(Report, report)


def _method_rows(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every dict in a report that names a method: runs, modes, winners, the recommendation,
    a validation's settings and its runs."""
    if report["kind"] == "validate":
        yield report["settings"]
        for result in report["results"]:
            yield result["baseline"]
            yield result["mtp"]
            if result.get("timing"):
                yield result["timing"]["baseline"]
                yield result["timing"]["mtp"]
        return
    yield from report["runs"]
    yield from report["modes"]
    yield from report.get("comparison") or []
    for entry in report.get("per_set", []):
        yield from entry["modes"]
        if entry.get("winner"):
            yield entry["winner"]
    yield report["recommendation"]


def _old_method(mode: object, drafts: object, ngram: object) -> dict[str, Any]:
    """A schema-1 row's "mode" ("baseline" was plain decoding) and "depth" (MTP's depth or
    prompt lookup's drafts per step) as a method record."""
    method = DecodingMethod.from_record(
        {"mode": mode, "num_assistant_tokens": drafts or 0, "max_ngram_size": ngram}
    )
    if method is None:
        raise ValueError(f"not a decoding method: mode {mode!r}, depth {drafts!r}")
    return method.to_record()


def _decoder_renamed(report: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 report with the app's decoder under its current name ("fast" was "app")."""
    report = copy.deepcopy(report)

    def renamed(value: Any) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("decoder", "mtp_decoder") and item == "fast":
                    value[key] = "app"
                elif key == "decoders" and isinstance(item, dict):
                    value[key] = {k: "app" if v == "fast" else v for k, v in item.items()}
                else:
                    renamed(item)
        elif isinstance(value, list):
            for item in value:
                renamed(item)
        return value

    renamed(report)
    report["schema_version"] = REPORT_SCHEMA_VERSION
    return report


def _upgraded(report: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 report in the current shape (see the module docstring)."""
    report = copy.deepcopy(report)
    settings = report["settings"]
    if report["kind"] == "validate":
        ngram = settings.pop("max_ngram_size", None) or DEFAULT_NGRAM
        drafts = settings.pop("num_assistant_tokens")
        settings["method"] = _old_method(settings.get("method", "mtp"), drafts, ngram)
        for row in list(_method_rows(report))[1:]:
            row["method"] = _old_method(row.pop("mode"), row.pop("depth", None), ngram)
    else:
        ngram = settings.pop("max_ngram_size", None) or DEFAULT_NGRAM
        drafts = settings.pop("lookup_tokens", None)
        settings["lookup"] = _old_method("lookup", drafts, ngram) if drafts else None
        rec = report["recommendation"]
        depth = rec.pop("depth")
        rec["method"] = _old_method("mtp" if depth else "baseline", depth, 0)
        rec["label"] = row_method(rec).short_label  # was "baseline" or "n=2"
        for row in _method_rows(report):
            if row is rec:
                continue
            # Rows said "mode", winners "method" ("plain" | "mtp" | "lookup"); prompt lookup's
            # rows had the decoder "lookup" (it runs on openvino-genai's pipeline).
            mode = row.pop("mode") if "mode" in row else row.pop("method")
            row["method"] = _old_method(mode, row.pop("depth", None), ngram)
            if row.get("decoder") == "lookup":
                row["decoder"] = "genai"
    report["schema_version"] = REPORT_SCHEMA_VERSION
    return report


def headline(report: Report) -> tuple[str, bool]:
    if report["kind"] == "validate":
        summary = report["summary"]
        ok = bool(summary["all_identical"])
        text = f"{'identical' if ok else 'DIFFERENT'} {summary['identical_prompts']}/"
        text += f"{summary['prompts']} · {row_method(report['settings']).short_label}"
        if summary["acceptance_rate"] is not None:
            text += f" · {summary['acceptance_rate']:.0%} accepted"
        return text, ok
    # The overall winner the Benchmark panel's banner and chart name (prompt lookup too).
    overall = method_verdict(report)["overall"]
    best = not row_method(overall).is_plain
    text = f"best: {overall['label']}" if best else f"best: {PLAIN.short_label}"
    if best and overall.get("speedup") is not None:
        text += f" ({overall['speedup']:.2f}x)"
    base = next((m for m in report["modes"] if row_method(m).is_plain), None)
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
        except (MeasurementError, KeyError, TypeError):
            log.warning("skipping unreadable report %s", path)
            continue
        entries.append(ReportEntry(path, data["kind"], data["created"], data["device"], text, ok))
    return entries


def md_cell(text: object) -> str:
    """A table-cell-safe string."""
    return str(text).replace("|", "\\|").replace("\n", "↵ ")


def fmt(value: float | None, pattern: str = "{:.1f}") -> str:
    return "–" if value is None else pattern.format(value)


def fmt_spread(value: Spread | None, pattern: str = "{:.1f}", scale: float = 1) -> str:
    if value is None:
        return "–"
    med, low, high = (value[k] * scale for k in ("median", "min", "max"))
    return f"{pattern.format(med)} ({pattern.format(low)}–{pattern.format(high)})"


def header_lines(report: Report) -> Iterator[str]:
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


def report_prompt_sets(report: Report) -> str:
    sets = report["prompt_sets"] if report["kind"] == "bench" else [report["prompt_set"]]
    return ", ".join(s["name"] for s in sets)


def version_lines(report: Report) -> Iterator[str]:
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
    "checked_report",
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
