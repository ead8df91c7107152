"""`models list`, `models inspect` and `models deploy-ovms`: the model library, one model's
report, and an OpenVINO Model Server repository for an export, headless.

`models list [--json]` lists the library: the app's managed folder, the folders in the
settings (`model_folders`) and the bundled demo model. `models inspect DIR [--json]
[--context-length N] [--kv-precision P] [--verify]` describes and diagnoses one folder without
loading it; `--verify` also checks the files against the SHA-256 sums in the export record.

`models deploy-ovms MODEL_DIR OUT [--num-assistant-tokens K] [--device D] [--name NAME] [--json]`
writes an OVMS model repository (graph.pbtxt, config.json, README.md with the docker run line,
kserve.yaml) for the export at OUT; see `qwen_mtp_desktop.core.models.ovms`. Exit status 0 when
written, 1 when the model or OUT is refused (nothing written), 2 on usage errors. `--json` prints
`OvmsDeployment.to_json_dict()` (schema_version 1).

Exit status of `inspect`: 0 when the model is usable (no diagnostic of severity "error"), 1 when
it is not, 2 on usage errors (bad options, DIR missing or not a folder). `list` exits 0.

JSON output (stable; new keys may be added, none removed or renamed):

- `models inspect --json` prints exactly `ModelReport.to_json_dict()` (schema_version 1,
  documented on `qwen_mtp_desktop.core.models.folders.report.ModelReport`): path, name, kind,
  kind_label, layout, source, manifest, versions, components[] (precision, sizes, issues), mtp,
  geometry, chat_template, total_bytes, memory (terms with their arithmetic, verdict), diagnostics[]
  ({code, severity, message, fix}), usable_for_chat, mtp_usable. With `--verify` the checksum
  findings (CHECKSUMS_OK, CHECKSUM_MISMATCH, CHECKSUM_FILE_MISSING, CHECKSUMS_UNAVAILABLE, ...)
  are appended to `diagnostics`.
- `models list --json` prints::

      {"schema_version": 1,
       "folders": [{"path": str, "origin": "managed" | "folder", "exists": bool}],
       "models": [{"path": str, "name": str, "origin": "demo" | "managed" | "folder",
                   "root": str | null, "default": bool,
                   "kind": str, "kind_label": str, "total_bytes": int, "mtp": bool,
                   "usable_for_chat": bool,
                   "worst_severity": "error" | "warning" | "info" | null,
                   "diagnostic_codes": [str]}]}
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from qwen_mtp_desktop.commands import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CommandError,
    bounded_int,
    positive_int,
)

LIST_SCHEMA_VERSION = 1
SEVERITY_TAGS = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}


def _utf8_safe(stream: TextIO) -> None:
    """Never crash on a path the terminal cannot encode (a non-UTF-8 locale, raw bytes)."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="backslashreplace")


def _table(rows: Sequence[Sequence[str]], indent: str = "  ", width: int = 0) -> list[str]:
    """Left-aligned columns, two spaces apart; the last column wraps to `width` (0: never)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        head = indent + "".join(cell + "  " for cell in cells)
        room = width - len(head)
        last = [row[-1]]
        if width and room >= 30 and row[-1]:
            last = textwrap.wrap(row[-1], room, break_on_hyphens=False)
        lines.append((head + last[0]).rstrip())
        lines.extend(" " * len(head) + more for more in last[1:])
    return lines


def _wrap(text: str, first: str, rest: str, width: int) -> list[str]:
    return textwrap.wrap(
        text, width=width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def _terminal_width() -> int:
    return min(max(shutil.get_terminal_size((100, 24)).columns, 60), 120)


def _settings() -> Any:
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore

    store = SettingsStore(app_paths().settings_file)
    if store.notice:
        print(f"warning: {store.notice}", file=sys.stderr)
    return store.settings


# --- models list ---------------------------------------------------------------------------


def _status(diagnostics: Sequence[Any]) -> str:
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings = sum(1 for d in diagnostics if d.severity == "warning")
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors > 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings > 1 else ''}")
    return ", ".join(parts) or "ok"


def _cmd_list(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
    from qwen_mtp_desktop.core.models.library import (
        is_default,
        library_folders,
        scan_library,
        worst_severity,
    )
    from qwen_mtp_desktop.core.units import format_bytes

    _utf8_safe(sys.stdout)
    settings = _settings()
    folders = library_folders(settings)
    entries = scan_library(settings)
    models: list[dict[str, Any]] = []
    for entry in entries:
        report = inspect_model(entry.path)
        models.append(
            {
                **entry.to_json_dict(),
                "default": is_default(settings, entry.path),
                "kind": report.kind,
                "kind_label": report.kind_label,
                "total_bytes": report.total_bytes,
                "mtp": report.mtp.present,
                "usable_for_chat": report.usable_for_chat,
                "worst_severity": worst_severity(report.diagnostics),
                "diagnostic_codes": report.codes(),
                "_status": _status(report.diagnostics),
            }
        )
    if args.json:
        payload = {
            "schema_version": LIST_SCHEMA_VERSION,
            "folders": [folder.to_json_dict() for folder in folders],
            "models": [{k: v for k, v in m.items() if not k.startswith("_")} for m in models],
        }
        print(json.dumps(payload, indent=2))
        return EXIT_OK

    print("Library folders")
    folder_rows = [
        [
            "managed" if folder.origin == "managed" else "added",
            str(folder.path) + ("" if folder.exists else "  (missing)"),
        ]
        for folder in folders
    ]
    for line in _table(folder_rows):
        print(line)
    print()
    if not models:
        print("No models yet. Export one, or add a folder in the Models panel.")
        return EXIT_OK
    rows = [["", "NAME", "KIND", "SIZE", "MTP", "STATUS", "PATH"]]
    for model in models:
        rows.append(
            [
                "*" if model["default"] else "",
                model["name"],
                model["kind_label"],
                format_bytes(model["total_bytes"]),
                "yes" if model["mtp"] else "no",
                model["_status"],
                model["path"],
            ]
        )
    for line in _table(rows, indent=""):
        print(line)
    print()
    count = len(models)
    print(f"{count} model{'s' if count != 1 else ''}; * = opened at start.")
    print("Details: qwen-mtp-desktop models inspect PATH")
    return EXIT_OK


# --- models inspect ------------------------------------------------------------------------


def _print_report(report: Any, verified: bool) -> None:
    from qwen_mtp_desktop.core.models.library import VERDICT_LABELS, kind_text, parts_text
    from qwen_mtp_desktop.core.units import format_bytes

    width = _terminal_width()
    print(report.name)
    source = report.source
    if source.model_id:
        origin = {
            "manifest": "from the export record",
            "config": "from config.json",
            "openvino_config": "from openvino_config.json",
        }.get(source.origin or "", "")
        revision = f"revision {source.revision}" if source.revision else ""
        detail = ", ".join(part for part in (revision, origin) if part)
        source_text = source.model_id + (f" ({detail})" if detail else "")
    else:
        source_text = "unknown"
    overview = [
        ["Path", str(report.path)],
        [
            "Kind",
            kind_text(report) + (f" · model_type {report.model_type}" if report.model_type else ""),
        ],
        ["Parts", parts_text(report)],
        ["Source", source_text],
        [
            "Exported with",
            ", ".join(f"{k} {v}" for k, v in report.versions.items()) or "unknown",
        ],
        ["Size on disk", format_bytes(report.total_bytes)],
        ["Chat template", "yes" if report.chat_template else "no"],
    ]
    for line in _table(overview, width=width):
        print(line)

    present = [c for c in report.components if c.xml_present or c.bin_present]
    if present:
        print()
        print("Components")
        rows = [["COMPONENT", "USE", "XML", "BIN", "PRECISION"]]
        for c in report.components:
            if not (c.xml_present or c.bin_present):
                rows.append([c.label, c.use, "-", "-", "missing"])
                continue
            if not c.xml_present:
                precision = "unknown (.xml missing)"
            else:
                precision = c.precision or ("unreadable" if c.error else "no weights")
            rows.append(
                [
                    c.label,
                    c.use,
                    format_bytes(c.xml_bytes) if c.xml_present else "missing",
                    format_bytes(c.bin_bytes) if c.bin_present else "missing",
                    precision,
                ]
            )
        for line in _table(rows, width=width):
            print(line)

        print()
        mtp = report.mtp
        if mtp.present:
            like = {
                True: f"compressed like the language model ({mtp.main_precision})",
                False: f"NOT compressed like the language model ({mtp.main_precision})",
                None: "compression vs the language model unknown",
            }[mtp.compressed_like_main]
            text = f"present, {format_bytes(mtp.bytes)}, {mtp.precision}; {like}"
        else:
            text = "not usable (missing or damaged); chat works without the speed-up"
        print("\n".join(_wrap(text, "MTP head: ", "          ", width)))

    memory = report.memory
    if memory is not None:
        print()
        print(
            f"Memory at {memory.context_length:,} tokens of context "
            f"(KV cache {memory.kv_precision})"
        )
        available = (
            f"of {format_bytes(memory.available_bytes)} available"
            if memory.available_bytes is not None
            else "(available RAM unknown)"
        )
        share = ""
        if memory.fraction is not None:
            share = " (<1 %)" if memory.fraction < 0.005 else f" ({memory.fraction:.0%})"
        print(
            f"  needs {format_bytes(memory.total_bytes)} {available}: "
            f"{VERDICT_LABELS[memory.verdict].lower()}{share}"
        )
        rows = [[term.label, format_bytes(term.bytes), ""] for term in memory.terms]
        for line, term in zip(_table(rows, indent="    "), memory.terms, strict=True):
            print(line)
            print("\n".join(_wrap(term.formula, "        ", "        ", width)))
        for note in memory.notes:
            print("\n".join(_wrap(note, "    note: ", "          ", width)))

    print()
    title = "Diagnostics" + (" (including the checksum check)" if verified else "")
    print(title)
    if not report.diagnostics:
        print("  No problems found.")
    for d in report.diagnostics:
        print(f"  {SEVERITY_TAGS[d.severity]:<8}  {d.code}")
        print("\n".join(_wrap(d.message, " " * 12, " " * 12, width)))
        if d.fix:
            print("\n".join(_wrap(d.fix, " " * 12 + "fix: ", " " * 17, width)))
    print()
    if report.usable_for_chat:
        verdict = "usable for chat" + (", with MTP" if report.mtp_usable else ", without MTP")
    else:
        verdict = "NOT usable for chat (see the errors above)"
    print(f"Result: {verdict}")


def _progress_printer(stream: TextIO) -> Any:
    last = [-1]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        if percent != last[0]:
            last[0] = percent
            stream.write(f"\rverifying checksums: {percent:3d} %")
            stream.flush()

    return progress


def _cmd_inspect(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
    from qwen_mtp_desktop.core.models.folders.memory import default_kv_precision

    _utf8_safe(sys.stdout)
    _utf8_safe(sys.stderr)
    folder: Path = args.model_dir
    try:
        is_folder = folder.is_dir()
    except OSError:
        is_folder = False
    if not is_folder:
        reason = "is not a folder" if folder.exists() or folder.is_symlink() else "does not exist"
        print(f"error: {folder} {reason}", file=sys.stderr)
        return EXIT_USAGE
    kv = args.kv_precision or default_kv_precision(_settings().device)
    try:
        report = inspect_model(
            folder.absolute(), context_length=args.context_length, kv_precision=kv
        )
        if args.verify:
            interactive = sys.stderr.isatty() and not args.json
            progress = _progress_printer(sys.stderr) if interactive else None
            findings = verify_checksums(folder, progress=progress)
            if interactive:
                sys.stderr.write("\n")
            report.diagnostics.extend(findings)
    except (OSError, ValueError) as exc:  # inspect_model reports bad folders; this is the rest
        raise CommandError(f"{folder} could not be inspected ({exc})") from exc
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2))
    else:
        _print_report(report, args.verify)
    return EXIT_OK if report.usable_for_chat else EXIT_FAILED


# --- models deploy-ovms --------------------------------------------------------------------


def _cmd_deploy_ovms(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.models.ovms import OvmsDeployError, OvmsOptions, deploy_ovms
    from qwen_mtp_desktop.core.units import format_bytes

    _utf8_safe(sys.stdout)
    _utf8_safe(sys.stderr)
    folder: Path = args.model_dir
    if not folder.is_dir():
        reason = "is not a folder" if folder.exists() or folder.is_symlink() else "does not exist"
        print(f"error: {folder} {reason}", file=sys.stderr)
        return EXIT_USAGE
    options = OvmsOptions(
        num_assistant_tokens=args.num_assistant_tokens, device=args.device, name=args.name
    )
    try:
        result = deploy_ovms(folder, args.out, options)
    except OvmsDeployError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(result.to_json_dict(), indent=2))
        return EXIT_OK
    width = _terminal_width()
    print(f"OVMS repository written: {result.out}")
    rows = [
        ["Model name", result.name],
        [
            "Model",
            f"{result.kind_label} ({result.layout.upper()}, OVMS pipeline "
            f"{result.pipeline_type}) on {result.device}",
        ],
        [
            "MTP",
            f"on, num_assistant_tokens {result.num_assistant_tokens}"
            if result.mtp
            else "off (no usable MTP head)",
        ],
        [
            "Files",
            f"{result.linked_files} hard-linked, {result.copied_files} copied "
            f"({format_bytes(result.total_bytes)})",
        ],
    ]
    for line in _table(rows, width=width):
        print(line)
    print()
    print("Start it (not run here):")
    print(f"  {result.docker_command}")
    print("Ask it:")
    print(f"  {result.curl_command}")
    print()
    print("Not run here:")
    for line in result.not_run:
        print("\n".join(_wrap(line, "  - ", "    ", width)))
    print("Not confirmed from OVMS's sources:")
    for line in result.unconfirmed:
        print("\n".join(_wrap(line, "  - ", "    ", width)))
    print(f"Details: {result.out / 'README.md'}")
    return EXIT_OK


def register(commands: Any) -> None:
    models = commands.add_parser("models", help="list the model library, inspect a model folder")
    actions = models.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list", help="the library: managed folder, your folders and the demo model"
    )
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.set_defaults(func=_cmd_list)

    inspect = actions.add_parser(
        "inspect",
        help="describe and diagnose a model folder (exit 1 when it has errors)",
    )
    inspect.add_argument("model_dir", type=Path, metavar="DIR", help="the model folder")
    inspect.add_argument("--json", action="store_true", help="print ModelReport as JSON")
    inspect.add_argument(
        "--context-length",
        type=positive_int,
        default=4096,
        metavar="N",
        help="tokens of context for the memory estimate (default 4096)",
    )
    inspect.add_argument(
        "--kv-precision",
        choices=["u8", "u4", "f16", "bf16", "f32"],
        help="KV-cache precision for the estimate (default: the device's, u8 on CPU)",
    )
    inspect.add_argument(
        "--verify",
        action="store_true",
        help="also check every file against the export record's SHA-256 sums",
    )
    inspect.set_defaults(func=_cmd_inspect)

    from qwen_mtp_desktop.core.models.ovms import (
        DEFAULT_ASSISTANT_TOKENS,
        DEVICES,
        MAX_ASSISTANT_TOKENS,
    )

    deploy = actions.add_parser(
        "deploy-ovms",
        help="write an OpenVINO Model Server repository for an export (exit 1 when refused)",
    )
    deploy.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="the exported model")
    deploy.add_argument(
        "out", type=Path, metavar="OUT", help="a new (or empty) folder for the repository"
    )
    deploy.add_argument(
        "--num-assistant-tokens",
        type=bounded_int(1, MAX_ASSISTANT_TOKENS),
        default=DEFAULT_ASSISTANT_TOKENS,
        metavar="K",
        help=f"MTP draft tokens per step, the server default (default {DEFAULT_ASSISTANT_TOKENS})",
    )
    deploy.add_argument(
        "--device", choices=DEVICES, default="CPU", help="OVMS device (default CPU)"
    )
    deploy.add_argument(
        "--name", help="the model name clients send (default: from the folder name)"
    )
    deploy.add_argument("--json", action="store_true", help="print the result as JSON")
    deploy.set_defaults(func=_cmd_deploy_ovms)

    from qwen_mtp_desktop.commands import model_sources

    model_sources.register(actions)
