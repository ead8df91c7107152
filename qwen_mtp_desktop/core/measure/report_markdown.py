"""Any saved report as Markdown or JSON: the renderer of each kind lives with its run."""

from __future__ import annotations

import json
from pathlib import Path

from qwen_mtp_desktop.core.files.fileio import write_user_file
from qwen_mtp_desktop.core.measure.bench import bench_markdown
from qwen_mtp_desktop.core.measure.records import Report
from qwen_mtp_desktop.core.measure.validate import validation_markdown


def report_markdown(report: Report) -> str:
    if report["kind"] == "bench":
        return bench_markdown(report)
    return validation_markdown(report)


def export_report(report: Report, path: Path) -> Path:
    """Write the report as Markdown (.md) or JSON (anything else)."""
    path = Path(path)
    if path.suffix.lower() in (".md", ".markdown"):
        write_user_file(path, report_markdown(report))
    else:
        write_user_file(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return path
