"""Verifying a model folder's files against the checksums its manifest recorded."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    NotRegularFileError,
    UnsafeFileError,
    open_regular_file,
)
from qwen_mtp_desktop.core.models.folders.manifest import read_manifest
from qwen_mtp_desktop.core.models.folders.report import Diagnostic, Severity

_HASH_CHUNK = 1 << 20
_REPAIR = "Copy the file from the original export, or re-export the model."


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _safe_relative(name: str) -> bool:
    path = Path(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def _damage_weight(name: str) -> tuple[Severity, str]:
    """How bad a damaged `name` is, as the inspector says it (component_diagnostics): a broken
    MTP head or vision part costs the speed-up or images, not the chat, so it is a warning."""
    stem = Path(name).name.split(".", 1)[0]
    if stem == "openvino_mtp_model":
        return "warning", " Chat still works, without speculative decoding."
    if stem.startswith("openvino_vision_embeddings"):
        return "warning", " Chat still works, without image input."
    return "error", ""


def verify_checksums(
    model_dir: Path,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> list[Diagnostic]:
    """Check every file in the manifest's `files` map against its SHA-256, streaming.

    `progress(done_bytes, total_bytes)` is called after each chunk; `cancel()` is polled as
    often, and a True answer stops the check with a CHECKSUMS_CANCELLED diagnostic. All good
    gives one CHECKSUMS_OK info.
    """
    folder = Path(model_dir)
    try:
        manifest = read_manifest(folder)
    except ValueError as exc:
        return [Diagnostic("MANIFEST_INVALID", "warning", f"{exc}.", "")]
    if manifest is None or not manifest.files:
        return [
            Diagnostic(
                "CHECKSUMS_UNAVAILABLE",
                "info",
                "This folder has no export record with checksums (exports made outside the "
                "app have none), so its files cannot be verified.",
                "",
            )
        ]
    out: list[Diagnostic] = []
    plan: list[tuple[str, str, Path, int]] = []
    for name, listed in sorted(manifest.files.items()):
        if not _safe_relative(name) or not _SHA256.match(listed.lower()):
            out.append(
                Diagnostic(
                    "MANIFEST_INVALID",
                    "warning",
                    f"The export record lists an invalid entry ({name!r}); it was skipped.",
                    "",
                )
            )
            continue
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            severity, consequence = _damage_weight(name)
            out.append(
                Diagnostic(
                    "CHECKSUM_FILE_MISSING",
                    severity,
                    f"{name} is listed in the export record but missing.{consequence}",
                    "Copy the file from the original export, or re-export the model.",
                )
            )
            continue
        except OSError as exc:
            out.append(Diagnostic("UNREADABLE", "error", f"{name} cannot be read ({exc}).", ""))
            continue
        plan.append((name, listed.lower(), path, size))
    total = sum(item[3] for item in plan)
    done = 0
    checked = 0
    for name, expected, path, size in plan:
        digest = hashlib.sha256()
        read = 0
        try:
            # Non-blocking and regular files only: a FIFO or a device among the listed files
            # would otherwise block the open or stream forever (issue 29).
            with open_regular_file(path, kind=FileKind(name, _REPAIR)) as handle:
                # Never past the size stat gave (plus one chunk to notice growth): a file
                # that keeps growing is damaged, not a reason to read forever.
                while read <= size and (chunk := handle.read(_HASH_CHUNK)):
                    read += len(chunk)
                    if cancel is not None and cancel():
                        out.append(
                            Diagnostic(
                                "CHECKSUMS_CANCELLED",
                                "info",
                                f"Verification was cancelled after {checked} of {len(plan)} files.",
                                "",
                            )
                        )
                        return out
                    digest.update(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        except NotRegularFileError as exc:
            severity, consequence = _damage_weight(name)
            out.append(Diagnostic("NOT_REGULAR", severity, exc.message + consequence, _REPAIR))
            continue
        except UnsafeFileError as exc:
            out.append(Diagnostic("UNREADABLE", "error", exc.message, _REPAIR))
            continue
        except OSError as exc:
            out.append(Diagnostic("UNREADABLE", "error", f"{name} cannot be read ({exc}).", ""))
            continue
        checked += 1
        if read != size or digest.hexdigest() != expected:
            severity, consequence = _damage_weight(name)
            out.append(
                Diagnostic(
                    "CHECKSUM_MISMATCH",
                    severity,
                    f"{name} differs from the file the export wrote (SHA-256 mismatch): it is "
                    f"damaged or was replaced.{consequence}",
                    "Re-export the model or copy it again from a good source.",
                )
            )
    if not out:
        out.append(
            Diagnostic(
                "CHECKSUMS_OK",
                "info",
                f"All {checked} files match the export record.",
                "",
            )
        )
    return out
