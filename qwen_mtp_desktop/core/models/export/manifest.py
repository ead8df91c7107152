"""The manifest an export writes: checksums of every file and the versions it ran with."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.models.export.options import ExportCancelledError, ExportOptions
from qwen_mtp_desktop.core.system.environment import package_version

#: Packages whose versions go into the manifest.
MANIFEST_PACKAGES = (
    "optimum-intel",
    "optimum",
    "transformers",
    "nncf",
    "torch",
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
    "huggingface_hub",
)


_HASH_CHUNK = 1 << 20


def sha256_file(path: Path, cancel: threading.Event | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            if cancel is not None and cancel.is_set():
                raise ExportCancelledError()
            digest.update(chunk)
    return digest.hexdigest()


def manifest_versions() -> dict[str, str]:
    versions = {"qwen-mtp-desktop": __version__, "python": sys.version.split()[0]}
    for name in MANIFEST_PACKAGES:
        version = package_version(name)
        if version:
            versions[name] = version
    return versions


def write_manifest(
    model_dir: Path,
    *,
    source: str,
    revision: str | None,
    options: ExportOptions,
    duration_s: float,
    peak_rss_bytes: int,
    extra: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Write `model_folders.manifest.MANIFEST_NAME` with checksums of every file; returns what
    was written."""
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, ExportManifest

    files = {}
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        name = path.relative_to(model_dir).as_posix()
        if name != MANIFEST_NAME:
            files[name] = sha256_file(path, cancel)
    manifest = ExportManifest(
        source=source,
        revision=revision,
        options=options.to_json_dict(),
        versions=manifest_versions(),
        files=files,
        duration_s=round(duration_s, 2),
        peak_rss_bytes=peak_rss_bytes,
    )
    data = manifest.to_json_dict()
    data.update({"schema_version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    data.update(extra or {})
    atomic_write_text(model_dir / MANIFEST_NAME, json.dumps(data, indent=2) + "\n")
    return data
