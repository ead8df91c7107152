"""Downloading a ready OpenVINO model from the hub into the model library.

`describe_repo` reads a repository's file list (sizes, LFS SHA-256 sums, git blob ids) and
tells from it what the repo holds: the IR parts of a Qwen3.5 export (language model,
embeddings, vision parts, MTP head, tokenizer and detokenizer IR) and how large it is, before a
byte of weights moves. `download_model` then fetches the files into a hidden folder beside the
destination (`.NAME.downloading/`: the files so far, `.part` files for the one under way, and
`download.json` saying what is being fetched), resuming every file where it stopped: after a
dropped connection in the same run, and after a crash, a killed app or a lost network in the
next one. Each file is checked against the hub's SHA-256 (or git blob id) before it counts as
done, and the folder is renamed into place only when all are: nothing half-downloaded ever
looks like a model. The copy records where it came from in the export manifest.

The app's own client does this (core.models.ready.hub_client), not huggingface_hub, whose 1.x
downloads delete a partial file when they fail. The revision is resolved to a commit once, so
every file comes from the same snapshot even if the branch moves during the download; a resume
of another commit's download starts afresh.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.export.manifest import sha256_file
from qwen_mtp_desktop.core.models.ready.hub_client import HubClient, HubError, RepoFile

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


@dataclass
class RepoLayout:
    """What a hub repository holds, from its file list alone."""

    repo_id: str
    commit: str
    files: list[RepoFile] = field(default_factory=list)
    parts: dict[str, bool] = field(default_factory=dict)
    #: "INT4", "INT8", "FP16"...: what its openvino_config.json records, else what its name
    #: says; None: unknown.
    weight_format: str | None = None
    #: The repo's config.json when it was read (for the memory estimate), else None.
    config: dict[str, Any] | None = None

    @property
    def weight_bytes(self) -> int:
        """Bytes of the IR weights (the .bin files): what loading the model reads."""
        return sum(f.size for f in self.wanted if f.name.endswith(".bin") and f.size > 0)

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


DOWNLOADING = ".downloading"
STATE_FILE = "download.json"
LOCK_FILE = "lock.json"
PART = ".part"
_CHUNK = 1 << 20
#: errno values that mean "no room": ENOSPC, EFBIG (a file size limit), EDQUOT (a quota).
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
#: Consecutive attempts at one file that add no byte before the download gives up.
STALLED_ATTEMPTS = 6


class DownloadCancelledError(UserFacingError):
    """Stopped on request; the partial files stay for a resume."""

    code = "CANCELLED"


def _weight_format(repo_id: str) -> str | None:
    name = repo_id.lower()
    for token, label in (("int4", "INT4"), ("int8", "INT8"), ("fp16", "FP16"), ("bf16", "BF16")):
        if token in name:
            return label
    return None


def _layout(info: Any) -> RepoLayout:
    layout = RepoLayout(
        info.repo_id, info.commit, list(info.files), {}, _weight_format(info.repo_id)
    )
    names = {f.name for f in layout.files}
    for part, stem in IR_PARTS.items():
        layout.parts[part] = f"{stem}.xml" in names and f"{stem}.bin" in names
    return layout


def describe_repo(
    repo_id: str, revision: str | None = None, token: str | None = None
) -> RepoLayout:
    """The repo's layout at `revision` (a commit, branch or tag; default main), with its
    config.json when it has a plausible one (the model's shape, for the memory estimate)."""
    try:
        with HubClient(token=token) as client:
            layout = _layout(client.repo_info(repo_id, revision))
            layout.config = _read_json(client, layout, "config.json")
            stated = _stated_format(_read_json(client, layout, "openvino_config.json"))
            layout.weight_format = stated or layout.weight_format
            return layout
    except HubError as exc:
        raise DownloadError(exc.message, exc.fix, code=exc.code) from exc


def _stated_format(config: dict[str, Any] | None) -> str | None:
    """The weight format optimum-intel records in openvino_config.json, if it says one."""
    quantization = config.get("quantization_config") if config else None
    if isinstance(quantization, dict):
        bits = quantization.get("bits")
        if bits in (4, 8):
            return f"INT{bits}"
    dtype = config.get("dtype") if config else None
    return dtype.upper() if dtype in ("fp16", "bf16", "fp32", "int4", "int8") else None


def _read_json(client: HubClient, layout: RepoLayout, name: str) -> dict[str, Any] | None:
    """A small JSON file of the repo, or None (absent, too large, not an object)."""
    from qwen_mtp_desktop.core.files.safe_files import SMALL_JSON_BYTES, parse_json_text

    entry = next((f for f in layout.files if f.name == name), None)
    if entry is None or not 0 < entry.size <= SMALL_JSON_BYTES:
        return None
    url = client.file_url(layout.repo_id, layout.commit, name)
    try:
        body = client.get(url, layout.repo_id).content
        raw = parse_json_text(body[:SMALL_JSON_BYTES].decode("utf-8"))
    except (HubError, UnicodeDecodeError, ValueError, RecursionError, OSError):
        return None  # no estimate is better than a failed check
    return raw if isinstance(raw, dict) else None


def memory_estimate(layout: RepoLayout, available_bytes: int | None, device: str = "CPU") -> Any:
    """One chat's memory on `device` for the repo's model (core.models.folders.memory, as the
    Models panel and Discover estimate it), or None without a usable config."""
    from qwen_mtp_desktop.core.models.folders.memory import (
        default_kv_precision,
        estimate_memory,
        geometry_from_config,
    )

    geometry = geometry_from_config(layout.config) if layout.config else None
    if geometry is None or layout.weight_bytes <= 0:
        return None
    return estimate_memory(
        {"model": layout.weight_bytes},
        geometry,
        kv_precision=default_kv_precision(device),
        include_mtp=layout.has_mtp,
        available_bytes=available_bytes,
    )


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
    #: Bytes fetched in this run (a resume fetches only what was missing).
    fetched_bytes: int
    #: Bytes that were already there from an interrupted run.
    resumed_bytes: int


@dataclass(frozen=True)
class PendingDownload:
    """An interrupted download found in a models folder (for the UI and the next run)."""

    destination: Path
    repo_id: str
    commit: str
    done_bytes: int
    total_bytes: int


def staging_dir(destination: Path) -> Path:
    return destination.parent / f".{destination.name}{DOWNLOADING}"


def pending_downloads(models_dir: Path) -> list[PendingDownload]:
    found = []
    with contextlib.suppress(OSError):
        for folder in sorted(models_dir.glob(f".*{DOWNLOADING}")):
            state = _read_state(folder)
            if state is None:
                continue
            files = state["files"]
            done = sum(_have(folder / "files" / name, size) for name, size in files.items())
            destination = models_dir / folder.name[1 : -len(DOWNLOADING)]
            total = sum(files.values())
            found.append(
                PendingDownload(destination, state["repo_id"], state["commit"], done, total)
            )
    return found


def discard_download(destination: Path) -> None:
    """Forget an interrupted download (its partial files)."""
    shutil.rmtree(staging_dir(destination), ignore_errors=True)


def _have(path: Path, size: int) -> int:
    for candidate in (path, path.with_name(path.name + PART)):
        with contextlib.suppress(OSError):
            return min(candidate.stat().st_size, size)
    return 0


def _read_state(folder: Path) -> dict[str, Any] | None:
    from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_object

    try:
        state = read_json_object(folder / STATE_FILE, kind=FileKind(STATE_FILE, ""))
    except (OSError, UserFacingError):
        return None
    files = state.get("files")
    if (
        not isinstance(state.get("repo_id"), str)
        or not isinstance(state.get("commit"), str)
        or not isinstance(files, dict)
        or not all(isinstance(k, str) and isinstance(v, int) for k, v in files.items())
    ):
        return None
    return state


def _lock(staging: Path) -> Path:
    """Claim the staging folder for this process (created exclusively, so two starts at once
    cannot both win); DownloadError if another live process holds it. A lock whose process
    is gone (a crash, a kill) is taken over."""
    import psutil

    lock = staging / LOCK_FILE
    me = psutil.Process()
    mine = json.dumps({"pid": me.pid, "create_time": me.create_time()}).encode()
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = _lock_owner(lock)
            if owner is not None and owner != me.pid:
                raise DownloadError(
                    f"This model is already being downloaded (process {owner}).",
                    "Wait for that download to finish, or stop it first.",
                    code="DOWNLOAD_BUSY",
                ) from None
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()  # left by a process that is gone (or by this one)
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(mine)
        return lock
    raise DownloadError(
        "Another download of this model keeps starting at the same time.",
        "Try again in a moment.",
        code="DOWNLOAD_BUSY",
    )


def _lock_owner(lock: Path) -> int | None:
    """The live process that holds `lock`, or None (gone, or an unreadable lock)."""
    import psutil

    from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_object

    try:
        owner = read_json_object(lock, kind=FileKind(LOCK_FILE, ""))
    except (OSError, UserFacingError):
        return None
    pid, created = owner.get("pid"), owner.get("create_time")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    try:
        process = psutil.Process(pid)
        if isinstance(created, int | float) and abs(process.create_time() - created) >= 1:
            return None  # the pid was reused by another program
    except psutil.Error:
        return None
    return pid


def _verify(path: Path, item: RepoFile) -> bool:
    if item.sha256:
        digest = hashlib.sha256()
    elif item.blob_id:
        digest = hashlib.sha1(usedforsecurity=False)
        digest.update(f"blob {path.stat().st_size}\0".encode())
    else:
        return path.stat().st_size == item.size or item.size < 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest() == (item.sha256 or item.blob_id)


def download_model(
    repo_id: str,
    destination: Path,
    *,
    revision: str | None = None,
    token: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    cancel: Callable[[], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> DownloadResult:
    """Download `repo_id` to `destination` (a new folder), resuming an interrupted run."""
    started = time.monotonic()
    destination = Path(destination)
    try:
        client = HubClient(token=token, sleep=sleep)
    except HubError as exc:
        raise DownloadError(exc.message, exc.fix, code=exc.code) from exc
    with client:
        try:
            layout = _layout(client.repo_info(repo_id, revision))
        except HubError as exc:
            raise DownloadError(exc.message, exc.fix, code=exc.code) from exc
        if layout.missing_parts:
            raise not_a_model_error(layout)
        if destination.exists():
            raise DownloadError(
                f"{destination} already exists.",
                "Choose another folder name, or remove the old folder first.",
                code="DESTINATION_EXISTS",
            )
        staging = staging_dir(destination)
        files_dir = staging / "files"
        try:
            staging.mkdir(parents=True, exist_ok=True)
            lock = _lock(staging)
        except OSError as exc:
            raise DownloadError(
                f"Cannot write in {destination.parent} ({exc.strerror or exc}).",
                "Choose a models folder you can write to (Settings).",
                code="DESTINATION_UNWRITABLE",
            ) from exc
        try:
            return _download(client, layout, destination, staging, progress, cancel, started)
        finally:
            with contextlib.suppress(OSError):
                lock.unlink()
            if not files_dir.exists() and not (staging / STATE_FILE).exists():
                shutil.rmtree(staging, ignore_errors=True)


def _download(
    client: HubClient,
    layout: RepoLayout,
    destination: Path,
    staging: Path,
    progress: Callable[[int, int], None] | None,
    cancel: Callable[[], bool] | None,
    started: float,
) -> DownloadResult:
    from qwen_mtp_desktop.core.files.fileio import atomic_write_text

    files_dir = staging / "files"
    wanted = {f.name: f.size for f in layout.wanted}
    state = _read_state(staging)
    if state is not None and (state["commit"] != layout.commit or state["files"] != wanted):
        shutil.rmtree(files_dir, ignore_errors=True)  # another revision's parts: start afresh
    state = {"repo_id": layout.repo_id, "commit": layout.commit, "files": wanted}
    atomic_write_text(staging / STATE_FILE, json.dumps(state, indent=2))
    total = layout.download_bytes
    resumed = sum(_have(files_dir / item.name, item.size) for item in layout.wanted)
    free = shutil.disk_usage(staging).free
    if free < total - resumed:
        raise DownloadError(
            f"{destination.parent} has {free / 1e9:.1f} GB free; the rest of the model needs "
            f"{(total - resumed) / 1e9:.1f} GB.",
            "Free some space or choose another models folder (Settings); what was downloaded "
            "is kept.",
            code="DISK_FULL",
        )
    counter = {"done": resumed}

    def advance(count: int) -> None:
        counter["done"] += count
        if progress is not None:
            progress(counter["done"], total)

    if progress is not None:
        progress(resumed, total)
    try:
        for item in layout.wanted:
            _fetch_file(client, layout, item, files_dir / item.name, advance, cancel)
        sums = {
            item.name: item.sha256 or sha256_file(files_dir / item.name) for item in layout.wanted
        }
        _write_manifest(files_dir, layout, sums)
        files_dir.rename(destination)
    except OSError as exc:
        full = getattr(exc, "errno", None) in _FULL_ERRNOS
        if full:
            raise DownloadError(
                f"The disk holding {destination.parent} is full (or a size limit was hit: "
                f"{exc.strerror or exc}). What arrived is kept.",
                "Free some disk space and download again: it resumes where it stopped.",
                code="DISK_FULL",
            ) from exc
        raise DownloadError(
            f"Writing the model in {destination.parent} failed ({exc.strerror or exc}).",
            "Check the models folder (Settings) and download again: it resumes where it stopped.",
            code="DESTINATION_UNWRITABLE",
        ) from exc
    shutil.rmtree(staging, ignore_errors=True)
    return DownloadResult(destination, layout, time.monotonic() - started, total - resumed, resumed)


def _fetch_file(
    client: HubClient,
    layout: RepoLayout,
    item: RepoFile,
    target: Path,
    advance: Callable[[int], None],
    cancel: Callable[[], bool] | None,
) -> None:
    """Fetch one file into `target`, resuming its `.part`; checked before it counts."""
    import httpx

    if target.is_file() and (target.stat().st_size == item.size or item.size < 0):
        return  # done and checked in an earlier run
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + PART)
    url = client.file_url(layout.repo_id, layout.commit, item.name)
    stalled = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        if item.size >= 0 and have > item.size:
            part.unlink()
            have = 0
        if item.size >= 0 and have == item.size:
            break
        before = have
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with client.stream(url, layout.repo_id, headers) as response:
                if have and response.status_code != 206:
                    advance(-have)  # the server ignored the range: start this file again
                    have = 0
                with part.open("r+b" if have else "wb") as out:
                    out.seek(have)
                    out.truncate()
                    # As received: a fixed chunk size would buffer, and lose, what arrived
                    # before a connection broke off.
                    for chunk in response.iter_bytes():
                        if cancel is not None and cancel():
                            raise DownloadCancelledError(
                                "The download was paused.", "Download again to resume it."
                            )
                        if item.size >= 0 and have + len(chunk) > item.size:
                            raise _changed(layout, item, part)
                        out.write(chunk)
                        have += len(chunk)
                        advance(len(chunk))
            if item.size < 0 or have == item.size:
                break
        except (httpx.ReadError, httpx.RemoteProtocolError, httpx.TimeoutException):
            pass  # the connection broke off mid-file: resume from what arrived
        except HubError as exc:
            raise DownloadError(exc.message, exc.fix, code=exc.code) from exc
        stalled = 0 if have > before else stalled + 1
        if stalled >= STALLED_ATTEMPTS:
            raise DownloadError(
                f"The connection to the hub keeps breaking off while downloading {item.name}.",
                "Check the internet connection and download again: it resumes where it stopped.",
                code="NETWORK",
            )
        if stalled:  # a break that delivered bytes resumes at once; a stall waits longer
            client.backoff(stalled)
    if not _verify(part, item):
        part.unlink()
        raise DownloadError(
            f"{item.name} from {layout.repo_id} does not match the checksum the hub lists.",
            "The damaged file was removed: download again (the other files are kept).",
            code="CHECKSUM_MISMATCH",
        )
    part.replace(target)


def _changed(layout: RepoLayout, item: RepoFile, part: Path) -> DownloadError:
    with contextlib.suppress(OSError):
        part.unlink()
    return DownloadError(
        f"{item.name} of {layout.repo_id} is larger than the hub's file list says: it changed "
        "during the download.",
        "Download again; the file is fetched anew.",
        code="HUB_CHANGED",
    )


def _write_manifest(model_dir: Path, layout: RepoLayout, sums: dict[str, str]) -> None:
    from qwen_mtp_desktop.core.files.fileio import atomic_write_text
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME

    if MANIFEST_NAME in sums:  # the repo's own export record: keep it as it is
        return
    manifest = {
        "source": f"hub:{layout.repo_id}",
        "revision": layout.commit,
        "options": {"downloaded": True, "weight_format": layout.weight_format},
        "versions": {},
        "files": sums,
    }
    atomic_write_text(model_dir / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")


def library_folder_name(repo_id: str) -> str:
    """A folder name for a downloaded repo: its name part, made safe."""
    name = repo_id.rsplit("/", 1)[-1]
    safe = "".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip(".-")
    return safe or "model"
