"""`models download` and `models add-mtp`: a ready OpenVINO model from the hub, and its MTP
head from the source checkpoint, headless.

`models download REPO_ID [--revision R] [--to DIR] [--json]` downloads a ready OpenVINO export
into the model library (default: the managed models folder, a folder named after the repo).
It first says what the repo holds (IR parts, MTP head or not, size); the download resumes where
an interrupted one stopped (the hub cache keeps partial files), every LFS file is checked
against the hub's SHA-256, and the folder appears only when complete. Exit status 0 when
placed, 1 when refused or failed, 2 on usage errors.

`models add-mtp MODEL_DIR --from SOURCE [--revision R] [--weight-format auto|fp16|int8|fp32]
[--replace] [--no-check] [--json]` reads only the `mtp.*` tensors of SOURCE (a checkpoint
folder, or a hub repository id read by HTTP range requests; `HF_ENDPOINT` and `HF_TOKEN` are
honoured), checks they fit the model, writes `openvino_mtp_model.xml/.bin` into MODEL_DIR and
then runs the MTP == plain check (greedy, exact numerics, in a child process) before any speed
is reported. No export toolkit is needed: it works in the installed app.

Exit status: 0 when the head was added and the check passed, 1 when the head could not be
added or the check failed (the message says why and what to do), 2 on usage errors.
`--json` prints {"schema_version": 1, "model_dir", "source", "commit", "weight_format",
"bytes_read", "requests", "seconds", "head_bytes", "check": {...} | null}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE

SCHEMA_VERSION = 1


def run_generation_check(model_dir: Path, timeout: float = 600.0) -> dict[str, Any]:
    """The export's MTP == plain check in a child process (a native crash stays there)."""
    from qwen_mtp_desktop.core.models.export.command import generation_check_command
    from qwen_mtp_desktop.core.models.export.progress import read_markers

    try:
        done = subprocess.run(
            generation_check_command(model_dir),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"equal": False, "error": f"the check did not finish in {timeout:.0f} s"}
    markers = read_markers(done.stdout.splitlines())
    results = [m.get("result") for m in markers if m.get("event") == "generation"]
    if results and isinstance(results[-1], dict):
        return results[-1]
    errors = [m for m in markers if m.get("event") == "error"]
    message = str(errors[-1].get("message")) if errors else f"exit status {done.returncode}"
    return {"equal": False, "error": message}


def _cmd_add_mtp(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.models.export.hub import hub_token
    from qwen_mtp_desktop.core.models.export.verify import generation_item
    from qwen_mtp_desktop.core.models.ready.mtp_graft import graft
    from qwen_mtp_desktop.core.models.ready.tensor_source import source_for
    from qwen_mtp_desktop.core.units import format_bytes

    folder: Path = args.model_dir
    if not folder.is_dir():
        reason = "is not a folder" if folder.exists() else "does not exist"
        print(f"error: {folder} {reason}", file=sys.stderr)
        return EXIT_USAGE
    interactive = sys.stderr.isatty() and not args.json

    def progress(stage: str, done: int, total: int) -> None:
        if interactive:
            figure = f" {format_bytes(done)} of {format_bytes(total)}" if total else ""
            sys.stderr.write(f"\r{stage}{figure}\x1b[K")
            sys.stderr.flush()

    source = None
    try:
        source = source_for(args.source, args.revision, hub_token())
        result = graft(
            folder,
            source,
            weight_format=args.weight_format,
            replace=args.replace,
            progress=progress,
        )
    except UserFacingError as exc:
        if interactive:
            sys.stderr.write("\n")
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    if interactive:
        sys.stderr.write("\n")
    check = None if args.no_check else run_generation_check(folder)
    item = generation_item(check) if check is not None else None
    if args.json:
        payload = {
            "schema_version": SCHEMA_VERSION,
            "model_dir": str(folder),
            "source": result.source,
            "commit": result.commit,
            "weight_format": result.weight_format,
            "bytes_read": result.bytes_read,
            "requests": result.requests,
            "seconds": round(result.seconds, 3),
            "head_bytes": result.head_bytes,
            "check": check,
        }
        print(json.dumps(payload, indent=2))
    else:
        print(f"MTP head added to {folder}")
        print(f"  from:    {result.source}" + (f" @ {result.commit}" if result.commit else ""))
        print(
            f"  read:    {format_bytes(result.bytes_read)} in {result.requests} request(s), "
            f"{result.seconds:.1f} s"
        )
        print(f"  weights: {result.weight_format} ({format_bytes(result.head_bytes)})")
        if item is not None:
            print(f"  check:   {item.status}: {item.message}")
            if item.fix:
                print(f"           {item.fix}")
    return EXIT_OK if item is None or item.status == "pass" else EXIT_FAILED


def _cmd_download(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.models.export.hub import hub_endpoint, hub_token
    from qwen_mtp_desktop.core.models.ready.download import download_model, library_folder_name
    from qwen_mtp_desktop.core.units import format_bytes

    destination: Path = args.to or app_paths().models_dir / library_folder_name(args.repo_id)
    interactive = sys.stderr.isatty() and not args.json
    started = [0.0]

    def progress(done: int, total: int) -> None:
        import time

        if not interactive:
            return
        now = time.monotonic()
        started[0] = started[0] or now
        rate = done / max(now - started[0], 1e-3)
        left = f", {(total - done) / rate:.0f} s left" if rate > 0 and done < total else ""
        sys.stderr.write(
            f"\rdownloading {format_bytes(done)} of {format_bytes(total)} "
            f"({format_bytes(int(rate))}/s{left})\x1b[K"
        )
        sys.stderr.flush()

    if interactive:
        print(f"from {args.repo_id} on {hub_endpoint()}", file=sys.stderr)
    try:
        result = download_model(
            args.repo_id,
            destination,
            revision=args.revision,
            token=hub_token(),
            progress=progress,
        )
    except UserFacingError as exc:
        if interactive:
            sys.stderr.write("\n")
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if interactive:
        sys.stderr.write("\n")
    layout = result.layout
    if args.json:
        payload = {
            "schema_version": SCHEMA_VERSION,
            "model_dir": str(result.model_dir),
            "seconds": round(result.seconds, 3),
            "fetched_bytes": result.fetched_bytes,
            "resumed_bytes": result.resumed_bytes,
            **layout.to_json_dict(),
        }
        print(json.dumps(payload, indent=2))
        return EXIT_OK
    parts = ", ".join(part for part, present in layout.parts.items() if present)
    print(f"Downloaded {args.repo_id} @ {layout.commit[:12]} to {result.model_dir}")
    resumed = (
        f" ({format_bytes(result.resumed_bytes)} of it from an interrupted download)"
        if result.resumed_bytes
        else ""
    )
    print(f"  {format_bytes(layout.download_bytes)}{resumed}, checksums verified; parts: {parts}")
    if not layout.has_mtp:
        print(
            "  No MTP head: add it from the source checkpoint with\n"
            f"    qwen-mtp-desktop models add-mtp {result.model_dir} --from ORG/SOURCE-CHECKPOINT"
        )
    return EXIT_OK


def register(actions: Any) -> None:
    from qwen_mtp_desktop.core.models.ready.mtp_graft import WEIGHT_FORMATS

    download = actions.add_parser(
        "download", help="download a ready OpenVINO model from the hub into the library"
    )
    download.add_argument("repo_id", metavar="REPO_ID", help="e.g. OpenVINO/Qwen3.5-0.8B-int4-ov")
    download.add_argument("--revision", help="branch, tag or commit (default main)")
    download.add_argument(
        "--to", type=Path, metavar="DIR", help="the new model folder (default: in the library)"
    )
    download.add_argument("--json", action="store_true", help="print the result as JSON")
    download.set_defaults(func=_cmd_download)

    add = actions.add_parser(
        "add-mtp",
        help="add the MTP head to a model from its source checkpoint (no export toolkit)",
    )
    add.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="the OpenVINO model")
    add.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="SOURCE",
        help="the checkpoint: a folder, or a hub repository id (only its mtp.* tensors are read)",
    )
    add.add_argument("--revision", help="with a hub id: branch, tag or commit (default main)")
    add.add_argument(
        "--weight-format",
        choices=WEIGHT_FORMATS,
        default="auto",
        help="the head's weights (default auto: int8 for a compressed model, else fp16)",
    )
    add.add_argument(
        "--replace", action="store_true", help="replace an existing head (kept beside it)"
    )
    add.add_argument(
        "--no-check", action="store_true", help="skip the MTP == plain check afterwards"
    )
    add.add_argument("--json", action="store_true", help="print the result as JSON")
    add.set_defaults(func=_cmd_add_mtp)
