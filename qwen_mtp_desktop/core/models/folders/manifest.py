"""The export manifest (`MANIFEST_NAME`): our own record of an export, beside the IR."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.files.safe_files import FileKind, UnsafeFileError, read_json_file

#: Our own record of an export, written next to the IR by the export job.
MANIFEST_NAME = "qwen_mtp_export.json"


@dataclass(frozen=True)
class ExportManifest:
    """`qwen_mtp_export.json`: what the export job recorded about how this folder was made.

    JSON object: {"source": str, "revision": str | null, "options": {...},
    "versions": {package: version}, "files": {relative name: sha256 hex},
    "duration_s": float | null, "peak_rss_bytes": int | null}.
    """

    source: str | None = None
    revision: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    duration_s: float | None = None
    peak_rss_bytes: int | None = None

    @classmethod
    def from_json_dict(cls, raw: object) -> ExportManifest:
        """Validate a decoded manifest; ValueError names the first field that is wrong."""
        if not isinstance(raw, dict):
            raise ValueError("the manifest is not a JSON object")

        def optional(name: str, kinds: tuple[type, ...]) -> Any:
            value = raw.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                raise ValueError(f"manifest field {name!r} has the wrong type")
            return value

        def mapping(name: str, value_kind: type) -> dict[str, Any]:
            value = raw.get(name) or {}
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, value_kind) for k, v in value.items()
            ):
                raise ValueError(f"manifest field {name!r} has the wrong type")
            return dict(value)

        duration = optional("duration_s", (int, float))
        return cls(
            source=optional("source", (str,)),
            revision=optional("revision", (str,)),
            options=mapping("options", object),
            versions=mapping("versions", str),
            files=mapping("files", str),
            duration_s=float(duration) if duration is not None else None,
            peak_rss_bytes=optional("peak_rss_bytes", (int,)),
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "revision": self.revision,
            "options": dict(self.options),
            "versions": dict(self.versions),
            "files": dict(self.files),
            "duration_s": self.duration_s,
            "peak_rss_bytes": self.peak_rss_bytes,
        }


def read_manifest(model_dir: Path) -> ExportManifest | None:
    """The folder's export manifest; None if absent. ValueError if present but unusable."""
    path = Path(model_dir) / MANIFEST_NAME
    try:
        raw = read_json_file(path, kind=FileKind(MANIFEST_NAME, ""))
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:
        raise ValueError(exc.message) from exc
    return ExportManifest.from_json_dict(raw)
