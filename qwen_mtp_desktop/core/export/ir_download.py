"""Downloading a ready OpenVINO model from the hub into the model library.

`describe_repo` reads a repository's file list (with sizes and LFS SHA-256 sums) and tells
from it what the repo holds: the IR parts of a Qwen3.5 export (language model, embeddings,
vision parts, MTP head, tokenizer and detokenizer IR) and how large it is, before a byte of
weights moves. `download_model` then fetches the files with huggingface_hub into the standard
hub cache (so an interrupted download resumes where it stopped, in this app or the next
start, and a model other tools downloaded is not fetched twice), checks every LFS file
against the SHA-256 the hub listed, and only then places a copy in the library through the
same staging folder and rename an export uses: nothing half-downloaded ever looks like a
model. The copy records where it came from in the export manifest, with the checksums.

The revision is resolved to a commit once, so every file comes from the same snapshot even
if the branch moves during the download.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError

#: The IR parts of a Qwen3.5 export: part -> file stem.
IR_PARTS: dict[str, str] = {
    "language model": "openvino_language_model",
    "text embeddings": "openvino_text_embeddings_model",
    "vision": "openvino_vision_embeddings_model",
    "MTP head": "openvino_mtp_model",
    "tokenizer": "openvino_tokenizer",
    "detokenizer": "openvino_detokenizer",
}
#: Parts without which the chat cannot run.
REQUIRED_PARTS = ("language model", "text embeddings", "tokenizer", "detokenizer")
#: What a model folder needs besides its IR; everything else in a repo is left on the hub.
ALLOW_PATTERNS = (
    "openvino_*.xml",
    "openvino_*.bin",
    "*.json",
    "*.jinja",
    "*.txt",
    "*.model",
    "README.md",
    "LICENSE*",
)
_HASH_CHUNK = 1 << 20


class DownloadError(UserFacingError):
    code = "DOWNLOAD_FAILED"


@dataclass(frozen=True)
class RepoFile:
    name: str
    size: int
    #: The LFS SHA-256 the hub lists (None for small files kept in git).
    sha256: str | None


@dataclass
class RepoLayout:
    """What a hub repository holds, from its file list alone."""

    repo_id: str
    commit: str
    files: list[RepoFile] = field(default_factory=list)
    parts: dict[str, bool] = field(default_factory=dict)
    #: "INT4", "INT8", "FP16"... from the repo's name or its openvino_config; None: unknown.
    weight_format: str | None = None

    @property
    def wanted(self) -> list[RepoFile]:
        return [f for f in self.files if any(fnmatch.fnmatch(f.name, p) for p in ALLOW_PATTERNS)]

    @property
    def download_bytes(self) -> int:
        return sum(f.size for f in self.wanted)

    @property
    def missing_parts(self) -> list[str]:
        return [part for part in REQUIRED_PARTS if not self.parts.get(part)]

    @property
    def has_mtp(self) -> bool:
        return bool(self.parts.get("MTP head"))

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "commit": self.commit,
            "parts": dict(self.parts),
            "mtp": self.has_mtp,
            "weight_format": self.weight_format,
            "download_bytes": self.download_bytes,
            "files": len(self.wanted),
            "missing_parts": self.missing_parts,
        }


def _weight_format(repo_id: str) -> str | None:
    name = repo_id.lower()
    for token, label in (("int4", "INT4"), ("int8", "INT8"), ("fp16", "FP16"), ("bf16", "BF16")):
        if token in name:
            return label
    return None


def describe_repo(
    repo_id: str, revision: str | None = None, token: str | None = None
) -> RepoLayout:
    """The repo's layout at `revision` (a commit, branch or tag; default main)."""
    from huggingface_hub import HfApi

    from qwen_mtp_desktop.core.export.hub import describe_hub_error, hub_endpoint

    try:
        info = HfApi(endpoint=hub_endpoint(), token=token).model_info(
            repo_id, revision=revision, files_metadata=True
        )
    except Exception as exc:  # every hub failure becomes one actionable line
        message, fix = describe_hub_error(exc, repo_id)
        raise DownloadError(message, fix) from exc
    if not isinstance(info.sha, str) or len(info.sha) != 40:
        raise DownloadError(f"The hub's answer for {repo_id} names no commit.", "Try again.")
    layout = RepoLayout(repo_id, info.sha, weight_format=_weight_format(repo_id))
    for sibling in info.siblings or []:
        lfs = getattr(sibling, "lfs", None)
        sha = getattr(lfs, "sha256", None) if lfs is not None else None
        size = sibling.size if isinstance(sibling.size, int) else 0
        layout.files.append(
            RepoFile(sibling.rfilename, size, sha if isinstance(sha, str) else None)
        )
    names = {f.name for f in layout.files}
    for part, stem in IR_PARTS.items():
        layout.parts[part] = f"{stem}.xml" in names and f"{stem}.bin" in names
    return layout


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def not_a_model_error(layout: RepoLayout) -> DownloadError:
    return DownloadError(
        f"{layout.repo_id} is not an OpenVINO export of a Qwen3.5 model (it has no "
        f"{', '.join(layout.missing_parts)} IR).",
        "Choose a repository with openvino_language_model.xml and the other openvino_*.xml "
        "files, or download the source checkpoint and export it.",
        code="NOT_AN_OPENVINO_MODEL",
    )


@dataclass(frozen=True)
class DownloadResult:
    model_dir: Path
    layout: RepoLayout
    seconds: float
    #: Bytes fetched this time (files already in the hub cache are not fetched again).
    fetched_bytes: int


def download_model(
    repo_id: str,
    destination: Path,
    *,
    revision: str | None = None,
    token: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    overwrite: bool = False,
) -> DownloadResult:
    """Download `repo_id` and place it at `destination` (a new folder in the library)."""
    from qwen_mtp_desktop.core.export.staging import Staging, move_into_place

    started = time.monotonic()
    layout = describe_repo(repo_id, revision, token)
    if layout.missing_parts:
        raise not_a_model_error(layout)
    destination = Path(destination)
    if destination.exists() and not overwrite:
        raise DownloadError(
            f"{destination} already exists.",
            "Choose another folder name, or remove the old folder first.",
            code="DESTINATION_EXISTS",
        )
    parent = destination.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(parent).free
    except OSError as exc:
        raise DownloadError(
            f"The models folder {parent} cannot be used ({exc.strerror or exc}).",
            "Choose a models folder you can write to (Settings).",
            code="DESTINATION_UNWRITABLE",
        ) from exc
    snapshot, fetched = _fetch(layout, token, progress)
    bad = [
        f.name for f in layout.wanted if f.sha256 and _sha256(snapshot / f.name) != f.sha256.lower()
    ]
    if bad:
        for name in bad:  # never keep a damaged blob where the next attempt would reuse it
            with contextlib.suppress(OSError):
                (snapshot / name).resolve().unlink()
        raise DownloadError(
            f"{bad[0]} from {repo_id} does not match the checksum the hub lists"
            + (f" (and {len(bad) - 1} more)." if len(bad) > 1 else "."),
            "The damaged file was removed: download again (the rest is kept).",
            code="CHECKSUM_MISMATCH",
        )
    if free < layout.download_bytes and not _same_filesystem(snapshot, parent):
        raise DownloadError(
            f"{parent} has {free:,} bytes free; the model needs {layout.download_bytes:,}.",
            "Free some space or choose another models folder (Settings).",
            code="DISK_FULL",
        )
    try:
        staging = Staging.create(destination)
    except OSError as exc:
        raise DownloadError(
            f"Cannot write in {parent} ({exc.strerror or exc}).",
            "Choose a models folder you can write to (Settings).",
            code="DESTINATION_UNWRITABLE",
        ) from exc
    try:
        sums = _place(snapshot, layout, staging.model_dir)
        _write_manifest(staging.model_dir, layout, sums)
        move_into_place(staging.model_dir, destination, overwrite=overwrite)
    except OSError as exc:
        raise DownloadError(
            f"Placing the model in {parent} failed ({exc.strerror or exc}).",
            "Free some disk space (or make the folder writable) and try again; the download "
            "itself is kept.",
            code="DISK_FULL" if getattr(exc, "errno", None) == 28 else "DESTINATION_UNWRITABLE",
        ) from exc
    finally:
        staging.remove()
    return DownloadResult(destination, layout, time.monotonic() - started, fetched)


def _same_filesystem(a: Path, b: Path) -> bool:
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return False


def _fetch(
    layout: RepoLayout, token: str | None, progress: Callable[[int, int], None] | None
) -> tuple[Path, int]:
    """The snapshot folder in the hub cache holding every wanted file, and the bytes fetched."""
    from huggingface_hub import snapshot_download

    from qwen_mtp_desktop.core.export.hub import describe_hub_error, hub_cache_dir, hub_endpoint

    total = layout.download_bytes
    cache = hub_cache_dir()
    before = _cached_bytes(cache, layout)
    tqdm_class = _byte_counter(total, before, progress) if progress else None
    try:
        path = snapshot_download(
            layout.repo_id,
            revision=layout.commit,
            cache_dir=cache,
            allow_patterns=list(ALLOW_PATTERNS),
            endpoint=hub_endpoint(),
            token=token,
            tqdm_class=tqdm_class,
        )
    except Exception as exc:
        message, fix = describe_hub_error(exc, layout.repo_id)
        raise DownloadError(message, fix) from exc
    if progress is not None:
        progress(total, total)
    return Path(path), max(0, total - before)


def _cached_bytes(cache: Path, layout: RepoLayout) -> int:
    from qwen_mtp_desktop.core.export.hub import repo_folder

    snapshot = repo_folder(layout.repo_id, cache) / "snapshots" / layout.commit
    done = 0
    for item in layout.wanted:
        with contextlib.suppress(OSError):
            if (snapshot / item.name).stat().st_size == item.size:
                done += item.size
    return done


def _byte_counter(total: int, already: int, progress: Callable[[int, int], None]) -> type[Any]:
    """A tqdm class that reports the bytes of every file's bar as one running total."""
    import threading

    from tqdm.std import tqdm as base_tqdm

    lock = threading.Lock()
    state = {"done": already}

    class ByteCounter(base_tqdm):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("name", None)
            kwargs["disable"] = False
            kwargs["file"] = open(os.devnull, "w")  # noqa: SIM115, PTH123 (closed in close())
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            result: bool | None = super().update(n)
            if self.unit == "B" and n:
                with lock:
                    state["done"] = min(total, state["done"] + int(n))
                    done = state["done"]
                progress(done, total)
            return result

        def close(self) -> None:
            handle = self.fp
            super().close()
            if handle is not None and not handle.closed:
                handle.close()

    return ByteCounter


def _place(snapshot: Path, layout: RepoLayout, target: Path) -> dict[str, str]:
    """Hard-link (or copy) every wanted file into `target`; their SHA-256 sums."""
    sums: dict[str, str] = {}
    for item in layout.wanted:
        source = (snapshot / item.name).resolve()
        placed = target / item.name
        placed.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, placed)
        except OSError:
            shutil.copyfile(source, placed)
        sums[item.name] = item.sha256.lower() if item.sha256 else _sha256(placed)
    return sums


def _write_manifest(model_dir: Path, layout: RepoLayout, sums: dict[str, str]) -> None:
    import json

    from qwen_mtp_desktop.core.fileio import atomic_write_text
    from qwen_mtp_desktop.core.model_folders.manifest import MANIFEST_NAME

    manifest = {
        "source": f"hub:{layout.repo_id}",
        "revision": layout.commit,
        "options": {"downloaded": True, "weight_format": layout.weight_format},
        "versions": {},
        "files": sums,
    }
    if MANIFEST_NAME in sums:  # the repo's own record: keep it, add ours beside it
        return
    atomic_write_text(model_dir / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")


def library_folder_name(repo_id: str) -> str:
    """A folder name for a downloaded repo: its name part, made safe."""
    name = repo_id.rsplit("/", 1)[-1]
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip(".-")
    return safe or "model"
