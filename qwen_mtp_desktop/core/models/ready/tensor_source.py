"""Reading chosen tensors of a safetensors checkpoint without downloading it: a local folder,
or a hub repository read with HTTP range requests.

Adding an MTP head to a ready OpenVINO model needs only the checkpoint's `mtp.*` tensors: a
few percent of its bytes. `model.safetensors.index.json` says which shard holds each; a
shard's first 8 bytes give its JSON header's length and the header gives every tensor's byte
range. So a graft reads the index, one header per shard that matters and the head's byte
ranges, nothing else.

Everything read is hostile until checked: the index and headers are bounded in size and
nesting, shard names must be plain file names of the repository, and a tensor's dtype, shape
and byte range must agree with each other, with the file's size and with the shape the
caller expects before a single weight byte is read, so a lying header can never make the app
allocate or download more than the head it describes.
"""

from __future__ import annotations

import math
import re
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import parse_json_text

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
#: A real index is tens of KB to a few MB (one line per tensor).
INDEX_LIMIT = 32 * 1024 * 1024
#: A real header is KBs to a few MB.
HEADER_LIMIT = 64 * 1024 * 1024
#: Ranges closer than this are read as one request (fewer round trips, little waste).
COALESCE_GAP = 1024 * 1024
_RETRIES = 6
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
_SHARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.safetensors$")

#: safetensors dtype -> (numpy dtype string, bytes per element) for the dtypes a head can use.
FLOAT_DTYPES: dict[str, tuple[str, int]] = {
    "F32": ("<f4", 4),
    "F16": ("<f2", 2),
    "BF16": ("<u2", 2),
}


class SourceError(UserFacingError):
    """The checkpoint cannot be read, or what it says cannot be true; the message says which."""

    code = "CHECKPOINT_SOURCE"


class TensorSource(Protocol):
    """Where checkpoint files are read from. `label` names it in messages."""

    label: str

    def exists(self, name: str) -> bool: ...

    def size(self, name: str) -> int: ...

    def read(self, name: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of file `name`, exactly (SourceError otherwise)."""
        ...


@dataclass
class ReadCounter:
    """Bytes read from a source, for the user and the benchmark (at most the head's bytes
    plus headers and the index)."""

    bytes: int = 0
    requests: int = 0


class FolderSource:
    """A checkpoint folder on this computer."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.label = str(self.folder)
        self.counter = ReadCounter()

    def _path(self, name: str) -> Path:
        if not plain_name(name):
            raise SourceError(
                f"The checkpoint names a file outside its folder ({name[:80]!r}).",
                "The index file is damaged or hostile: use the original checkpoint.",
            )
        return self.folder / name

    def exists(self, name: str) -> bool:
        return self._path(name).is_file()

    def size(self, name: str) -> int:
        try:
            return self._path(name).stat().st_size
        except OSError as exc:
            raise SourceError(
                f"{name} cannot be read in {self.folder} ({exc.strerror or exc}).",
                "Check that the checkpoint folder is complete and readable.",
            ) from exc

    def read(self, name: str, start: int, end: int) -> bytes:
        try:
            with self._path(name).open("rb") as handle:
                handle.seek(start)
                data = handle.read(end - start)
        except OSError as exc:
            raise SourceError(
                f"{name} cannot be read in {self.folder} ({exc.strerror or exc}).",
                "Check that the checkpoint folder is complete and readable.",
            ) from exc
        if len(data) != end - start:
            raise SourceError(
                f"{name} in {self.folder} is shorter than its header says.",
                "The file is damaged or partly copied: copy the checkpoint again.",
            )
        self.counter.bytes += len(data)
        self.counter.requests += 1
        return data


def plain_name(name: str) -> bool:
    """A file name at the top of a repository: no folders, no '..', no drive, no control
    characters (the names a checkpoint's index may point at)."""
    return bool(_PLAIN_NAME.match(name)) and ".." not in name


class HubSource:
    """A hub repository at one commit, read with HTTP range requests (core.models.ready.hub_client:
    `HF_ENDPOINT` honoured, 429 and 5xx retried). The revision is resolved to a commit once,
    so every range comes from the same files even if the branch moves meanwhile; a short body
    is an error, never silently accepted."""

    def __init__(
        self,
        repo_id: str,
        revision: str | None = None,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from qwen_mtp_desktop.core.models.ready.hub_client import HubClient, HubError

        try:
            self._client = HubClient(endpoint, token, sleep=sleep)
            info = self._client.repo_info(repo_id, revision)
        except HubError as exc:
            raise SourceError(exc.message, exc.fix, code=exc.code) from exc
        self.repo_id = repo_id
        self.label = f"{repo_id} on {self._client.endpoint}"
        self.counter = ReadCounter()
        self.commit = info.commit
        self._sizes = {f.name: f.size for f in info.files}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HubSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, name: str, start: int, end: int) -> Any:
        import httpx

        from qwen_mtp_desktop.core.models.ready.hub_client import HubError

        if not plain_name(name):
            raise SourceError(
                f"The checkpoint names a file outside its repository ({name[:80]!r}).",
                "The index file is damaged or hostile: use the original checkpoint.",
            )
        url = self._client.file_url(self.repo_id, self.commit, name)
        try:
            return self._client.get(url, self.repo_id, {"Range": f"bytes={start}-{end - 1}"})
        except HubError as exc:
            raise SourceError(exc.message, exc.fix, code=exc.code) from exc
        except httpx.HTTPError as exc:
            raise SourceError(
                f"The connection to {self.label} broke off ({type(exc).__name__}).",
                "Check the internet connection and try again.",
                code="NETWORK",
            ) from exc

    def exists(self, name: str) -> bool:
        return name in self._sizes

    def size(self, name: str) -> int:
        known = self._sizes.get(name)
        if known is None:
            raise SourceError(
                f"{self.repo_id} has no file {name}.",
                "The index names a shard the repository lacks: it is damaged or incomplete.",
            )
        if known >= 0:
            return known
        response = self._get(name, 0, 1)
        total = _content_range_total(response.headers.get("Content-Range"))
        if total is None:
            raise SourceError(f"The hub did not say how large {name} is.", "")
        self._sizes[name] = total
        return total

    def read(self, name: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        response = self._get(name, start, end)
        data: bytes = response.content
        if response.status_code == 200 and len(data) >= end:
            data = data[start:end]  # a server that ignores Range sent the whole file
        if len(data) != end - start:
            raise SourceError(
                f"{name} from {self.label}: asked for {end - start:,} bytes, got {len(data):,}.",
                "The connection was cut or the file changed: try again.",
                code="NETWORK",
            )
        self.counter.bytes += len(data)
        self.counter.requests += 1
        return data


def _content_range_total(value: str | None) -> int | None:
    match = re.fullmatch(r"bytes \d+-\d+/(\d+)", (value or "").strip())
    return int(match.group(1)) if match else None


# --- the checkpoint's layout ------------------------------------------------------------------


@dataclass(frozen=True)
class TensorEntry:
    file: str
    dtype: str
    shape: tuple[int, ...]
    #: Absolute byte range in the file (header included).
    start: int
    end: int


@dataclass
class CheckpointLayout:
    """Which file holds each wanted tensor, and where (from the index and the headers)."""

    entries: dict[str, TensorEntry] = field(default_factory=dict)
    #: Every tensor name the checkpoint has with the wanted prefix (for messages).
    names: list[str] = field(default_factory=list)


def _parse_json_bytes(raw: bytes, what: str, fix: str) -> Any:
    try:
        return parse_json_text(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SourceError(f"{what} is not valid JSON ({str(exc)[:120]}).", fix) from exc


def weight_map(source: TensorSource) -> dict[str, str] | None:
    """The index's {tensor: shard} map, or None for a single-file checkpoint."""
    fix = "The index file is damaged: use the original checkpoint."
    if not source.exists(INDEX_NAME):
        return None
    size = source.size(INDEX_NAME)
    if size > INDEX_LIMIT:
        raise SourceError(
            f"{INDEX_NAME} of {source.label} is {size:,} bytes: far larger than any real index.",
            fix,
        )
    raw = _parse_json_bytes(source.read(INDEX_NAME, 0, size), INDEX_NAME, fix)
    mapping = raw.get("weight_map") if isinstance(raw, dict) else None
    if not isinstance(mapping, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise SourceError(f"{INDEX_NAME} of {source.label} has no valid weight_map.", fix)
    for shard in set(mapping.values()):
        if not _SHARD_NAME.match(shard):
            raise SourceError(
                f"{INDEX_NAME} of {source.label} points at {shard[:80]!r}, which is not a "
                "safetensors file of the checkpoint.",
                fix,
            )
    return dict(mapping)


def read_header(source: TensorSource, name: str) -> tuple[dict[str, Any], int, int]:
    """(header, data start, file size) of one safetensors file; every entry checked."""
    fix = "The file is damaged or only partly downloaded: use an intact copy of the checkpoint."
    size = source.size(name)
    if size < 8:
        raise SourceError(f"{name} of {source.label} is too short to be a safetensors file.", fix)
    (length,) = struct.unpack("<Q", source.read(name, 0, 8))
    if length < 2 or length > HEADER_LIMIT or 8 + length > size:
        raise SourceError(
            f"{name} of {source.label} declares a {length:,}-byte header in a {size:,}-byte file.",
            fix,
        )
    header = _parse_json_bytes(source.read(name, 8, 8 + length), f"The header of {name}", fix)
    if not isinstance(header, dict):
        raise SourceError(f"The header of {name} is not a JSON object.", fix)
    data_start = 8 + length
    for tensor, entry in header.items():
        if tensor == "__metadata__":
            continue
        if not _entry_ok(entry, size - data_start):
            raise SourceError(
                f"The header of {name} describes tensor {tensor[:80]!r} impossibly (its dtype, "
                "shape and byte range disagree, or it lies past the end of the file).",
                fix,
            )
    return header, data_start, size


def _entry_ok(entry: object, data_size: int) -> bool:
    if not isinstance(entry, dict):
        return False
    offsets, shape, dtype = entry.get("data_offsets"), entry.get("shape"), entry.get("dtype")
    if not (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in offsets)
        and isinstance(shape, list)
        and len(shape) <= 8
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in shape)
        and isinstance(dtype, str)
        and 0 <= offsets[0] <= offsets[1] <= data_size
    ):
        return False
    width = FLOAT_DTYPES.get(dtype, ("", 0))[1]
    # Only dtypes a head can hold are checked for length; others are never read.
    return width == 0 or offsets[1] - offsets[0] == width * math.prod(shape)


def locate(source: TensorSource, prefix: str) -> CheckpointLayout:
    """Where the tensors whose names start with `prefix` are, reading only the headers of
    the shards that hold them."""
    mapping = weight_map(source)
    if mapping is None:
        if not source.exists(SINGLE_NAME):
            raise SourceError(
                f"{source.label} has neither {INDEX_NAME} nor {SINGLE_NAME}.",
                "Choose the original Qwen3.5 checkpoint (its safetensors weights), not an "
                "export or a GGUF/MLX conversion.",
                code="NO_SAFETENSORS",
            )
        shards = [SINGLE_NAME]
    else:
        shards = sorted({shard for tensor, shard in mapping.items() if tensor.startswith(prefix)})
    layout = CheckpointLayout()
    for shard in shards:
        header, data_start, _ = read_header(source, shard)
        for tensor, entry in header.items():
            if tensor == "__metadata__" or not tensor.startswith(prefix):
                continue
            if mapping is not None and mapping.get(tensor) != shard:
                raise SourceError(
                    f"{INDEX_NAME} of {source.label} says {tensor} is in "
                    f"{mapping.get(tensor)}, but {shard} holds it.",
                    "The index does not match the shards: use the original checkpoint.",
                )
            start, end = entry["data_offsets"]
            layout.entries[tensor] = TensorEntry(
                shard, entry["dtype"], tuple(entry["shape"]), data_start + start, data_start + end
            )
    if mapping is not None:
        missing = sorted(t for t in mapping if t.startswith(prefix) and t not in layout.entries)
        if missing:
            raise SourceError(
                f"{INDEX_NAME} of {source.label} lists {missing[0]}, but its shard lacks it.",
                "The index does not match the shards: use the original checkpoint.",
            )
    layout.names = sorted(layout.entries)
    return layout


def read_tensors(
    source: TensorSource,
    entries: Mapping[str, TensorEntry],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, npt.NDArray[np.float32]]:
    """The tensors as float32 arrays (BF16 and F16 widened exactly). Nearby ranges of a file
    are read in one request. The caller has checked the shapes it expects."""
    import numpy as np

    for tensor, entry in entries.items():
        if entry.dtype not in FLOAT_DTYPES:
            raise SourceError(
                f"{tensor} is stored as {entry.dtype}; a head is read from F32, F16 or BF16.",
                "Use the original (unquantized) checkpoint.",
            )
    total = sum(e.end - e.start for e in entries.values())
    done = 0
    out: dict[str, npt.NDArray[np.float32]] = {}
    for file, group in _coalesced(entries.items()):
        first, last = group[0][1].start, max(e.end for _, e in group)
        blob = source.read(file, first, last)
        for tensor, entry in group:
            dtype, _ = FLOAT_DTYPES[entry.dtype]
            raw = np.frombuffer(
                blob, dtype=dtype, count=math.prod(entry.shape), offset=entry.start - first
            )
            if entry.dtype == "BF16":
                values = (raw.astype(np.uint32) << 16).view(np.float32)
            else:
                values = raw.astype(np.float32)
            out[tensor] = values.reshape(entry.shape)
            done += entry.end - entry.start
        if progress is not None:
            progress(done, total)
    return out


def _coalesced(
    items: Iterable[tuple[str, TensorEntry]],
) -> list[tuple[str, list[tuple[str, TensorEntry]]]]:
    groups: list[tuple[str, list[tuple[str, TensorEntry]]]] = []
    for tensor, entry in sorted(items, key=lambda item: (item[1].file, item[1].start)):
        if groups and groups[-1][0] == entry.file:
            last_end = max(e.end for _, e in groups[-1][1])
            if entry.start - last_end <= COALESCE_GAP:
                groups[-1][1].append((tensor, entry))
                continue
        groups.append((entry.file, [(tensor, entry)]))
    return groups


def source_for(
    spec: str, revision: str | None = None, token: str | None = None
) -> FolderSource | HubSource:
    """A folder if `spec` is one on this computer, else a hub repository id."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return FolderSource(path)
    from qwen_mtp_desktop.core.models.ready.hub_client import valid_repo_id

    if not valid_repo_id(spec):
        raise SourceError(
            f"{spec[:120]!r} is neither a folder on this computer nor a hub repository id.",
            "Give a checkpoint folder, or a repository id such as Qwen/Qwen3.5-0.8B.",
            code="BAD_SOURCE",
        )
    return HubSource(spec, revision, token=token)
