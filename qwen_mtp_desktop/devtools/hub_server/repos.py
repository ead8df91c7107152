"""Repo folders as hub repos: each file's size, git blob id, sha256 and LFS pointer, and the
repo's one commit (a sha1 of its file names and contents)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import struct
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: What the hub stores with git-lfs here: these suffixes, or anything over LFS_THRESHOLD.
LFS_SUFFIXES = (".bin", ".safetensors", ".gguf", ".onnx")
LFS_THRESHOLD = 1 << 20
#: huggingface_hub's own limit on a safetensors header.
SAFETENSORS_MAX_HEADER = 25_000_000
_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S.000Z"


@dataclass(frozen=True)
class HubFile:
    """One file of a repo as the hub describes it."""

    path: str
    size: int
    sha256: str
    #: The git blob id: of the content for a small file, of the LFS pointer for an LFS file.
    blob_id: str
    lfs: bool
    pointer_size: int | None
    disk: Path

    @property
    def etag(self) -> str:
        return f'"{self.sha256}"' if self.lfs else f'"{self.blob_id}"'


@dataclass(frozen=True)
class RepoState:
    """A repo's single commit."""

    repo_id: str
    sha: str
    files: dict[str, HubFile]
    dirs: dict[str, str]  # folder path -> tree id
    last_modified: str
    safetensors: dict[str, Any] | None
    config: dict[str, Any] | None
    signature: tuple[tuple[str, int, int], ...]


def _hash_file(path: Path, size: int) -> tuple[str, str]:
    """(git blob sha1, sha256) of a file, in one read."""
    git = hashlib.sha1(b"blob %d\0" % size)
    sha256 = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            git.update(chunk)
            sha256.update(chunk)
    return git.hexdigest(), sha256.hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file the hub stores in git for an LFS file."""
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


def _safetensors_parameters(paths: list[Path]) -> dict[str, Any] | None:
    """The hub's `safetensors` field: parameter counts per dtype, from the files' headers."""
    counts: dict[str, int] = {}
    for path in paths:
        try:
            with path.open("rb") as fh:
                (length,) = struct.unpack("<Q", fh.read(8))
                if length > min(SAFETENSORS_MAX_HEADER, path.stat().st_size - 8):
                    return None  # not a safetensors file after all
                header = json.loads(fh.read(length))
        except (OSError, ValueError, struct.error):
            return None
        if not isinstance(header, dict):
            return None
        for name, entry in header.items():
            if name == "__metadata__" or not isinstance(entry, dict):
                continue
            count = 1
            for dim in entry.get("shape", []):
                count *= int(dim)
            counts[entry.get("dtype", "?")] = counts.get(entry.get("dtype", "?"), 0) + count
    if not counts:
        return None
    return {"parameters": counts, "total": sum(counts.values())}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime(_DATE_FORMAT)


def scan(folder: Path) -> list[tuple[str, Path, int, int]]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            stat = path.stat()
            found.append(
                (path.relative_to(folder).as_posix(), path, stat.st_size, stat.st_mtime_ns)
            )
    return sorted(found)


def build_state(
    repo_id: str,
    folder: Path,
    *,
    lfs_suffixes: Collection[str] = LFS_SUFFIXES,
    lfs_threshold: int = LFS_THRESHOLD,
) -> RepoState:
    """Hash a repo folder into its commit (files, blob ids, sha256s, commit id)."""
    scanned = scan(folder)
    files: dict[str, HubFile] = {}
    commit = hashlib.sha1()
    for rel, path, size, _mtime in scanned:
        blob, sha256 = _hash_file(path, size)
        lfs = path.suffix.lower() in lfs_suffixes or size > lfs_threshold
        pointer = lfs_pointer(sha256, size) if lfs else None
        if pointer is not None:
            blob = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
        files[rel] = HubFile(
            rel, size, sha256, blob, lfs, len(pointer) if pointer else None, path.resolve()
        )
        commit.update(f"{rel}\0{sha256}\n".encode())
    dirs: dict[str, str] = {}
    for rel in files:
        parts = rel.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            dirs.setdefault("/".join(parts[:depth]), "")
    for name in dirs:
        tree = hashlib.sha1()
        for rel, file in files.items():
            if rel.startswith(name + "/"):
                tree.update(f"{rel}\0{file.sha256}\n".encode())
        dirs[name] = tree.hexdigest()
    config: dict[str, Any] | None = None
    if "config.json" in files:
        with contextlib.suppress(OSError, ValueError):
            raw = json.loads(files["config.json"].disk.read_text(encoding="utf-8"))
            if isinstance(raw, dict):
                config = {k: raw[k] for k in ("architectures", "model_type") if k in raw}
    weights = [f.disk for r, f in files.items() if "/" not in r and r.endswith(".safetensors")]
    mtimes = [mtime for *_rest, mtime in scanned]
    return RepoState(
        repo_id=repo_id,
        sha=commit.hexdigest(),
        files=files,
        dirs=dirs,
        last_modified=_iso(max(mtimes) / 1e9 if mtimes else 0.0),
        safetensors=_safetensors_parameters(weights),
        config=config,
        signature=tuple((rel, size, mtime) for rel, _p, size, mtime in scanned),
    )
