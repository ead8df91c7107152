"""Hugging Face hub sources: find a model in the local cache, describe it, download it.

The standard cache (HF_HUB_CACHE, or HF_HOME/hub, or ~/.cache/huggingface/hub) is used, so a model
downloaded by other tools is found and one downloaded here is shared with them. The cache layout
(`models--org--name/refs/<rev>` -> `snapshots/<commit>/`) is read with the standard library, so
looking for a cached model works even without huggingface_hub; describing a model that is not
cached (config.json + safetensors headers over HTTP, never the weights) and downloading need
huggingface_hub, which ships with the export toolkit.

The download runs in a subprocess (`python -m qwen_mtp_desktop.core.models.export.hub download
REPO`), like the exporter, so it is cancelled by signals and leaves the app's memory alone. It
prints `[qmtp] {"event": "download", "done": ..., "total": ...}` lines and, at the end, the snapshot
folder. Interrupted downloads resume: huggingface_hub keeps `.incomplete` blobs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.models.export.preflight.checklist import CheckItem
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import (
    CheckpointInfo,
    inspect_checkpoint_folder,
    summarize_headers,
)

if TYPE_CHECKING:
    from qwen_mtp_desktop.core.remote.keys import KeyStore

#: Files an export never needs; skipping them saves gigabytes on repos that ship other formats.
IGNORE_PATTERNS = (
    "*.gguf",
    "*.onnx",
    "*.onnx_data",
    "*.pt",
    "*.pth",
    "*.ckpt",
    "*.msgpack",
    "*.h5",
    "pytorch_model*.bin",
    "original/*",
    "onnx/*",
)
_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_TRUE = {"1", "ON", "YES", "TRUE"}


def hf_home() -> Path:
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface"


def hub_cache_dir() -> Path:
    """The hub cache, read from the environment at call time (tests move HF_HOME)."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    return hf_home() / "hub"


def hub_endpoint() -> str:
    """The hub's address: `HF_ENDPOINT` (a mirror, or a test's server) or huggingface.co."""
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or "https://huggingface.co"


#: Where the app keeps a hub token in the system keychain (Settings > Hugging Face token).
HUB_TOKEN_KEY = "huggingface.co"


def hub_token() -> str | None:
    """The hub token, and where it came from is `hub_token_source()`: `HF_TOKEN`, else the
    app's own in the system keychain, else the one `hf auth login` stored ($HF_HOME/token).
    None: anonymous, which public models need."""
    return _hub_token()[0]


def hub_token_source() -> str | None:
    """Where the hub token comes from: "HF_TOKEN", "keychain", "memory" (given in this run,
    no keychain), "token file" or None (the UI shows where, never what)."""
    return _hub_token()[1]


_hub_keys: KeyStore | None = None


def _hub_key_store() -> KeyStore:
    """One store for the process: without a keychain it keeps the token in memory, which
    must outlive a single call."""
    global _hub_keys
    if _hub_keys is None:
        from qwen_mtp_desktop.core.remote.keys import HUB_SERVICE, KeyStore

        _hub_keys = KeyStore(service=HUB_SERVICE)
    return _hub_keys


def store_hub_token(token: str | None) -> str:
    """Keep `token` in the system keychain (None or "": forget it); where it is kept, in
    words (without a keychain it lasts until the app closes)."""
    store = _hub_key_store()
    if token and token.strip():
        store.set(HUB_TOKEN_KEY, token.strip())
    else:
        store.delete(HUB_TOKEN_KEY)
    return store.where


def _hub_token() -> tuple[str | None, str | None]:
    token = os.environ.get("HF_TOKEN", "").strip()
    if token:
        return token, "HF_TOKEN"
    store = _hub_key_store()
    stored = store.get(HUB_TOKEN_KEY)
    if stored:
        return stored.strip(), "keychain" if store.keychain else "memory"
    path = Path(os.environ.get("HF_TOKEN_PATH", "") or hf_home() / "token")
    try:
        with path.open("rb") as handle:
            raw = handle.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None, None
    if raw and raw.isascii() and raw.isprintable() and " " not in raw:
        return raw, "token file"
    return None, None


def hub_source_words(token_source: str | None = None, *, known: bool = True) -> str:
    """Where files come from and as whom, in words (never the token itself). `known` False:
    the token has not been looked up yet (the keychain is read off the GUI thread)."""
    endpoint = hub_endpoint()
    mirror = "" if endpoint == "https://huggingface.co" else " (HF_ENDPOINT)"
    who = {
        "HF_TOKEN": "with the token in HF_TOKEN",
        "keychain": "with your token from the system keychain",
        "memory": "with the token you gave (no keychain: kept until the app closes)",
        "token file": "with the token saved by `hf auth login`",
    }.get(token_source or "", "anonymously (public models only)")
    line = f"From {endpoint}{mirror}, {who}." if known else f"From {endpoint}{mirror}."
    if offline():
        line += " Offline mode is on (HF_HUB_OFFLINE): nothing can be downloaded."
    return line


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").upper() in _TRUE


def hub_available() -> bool:
    return importlib.util.find_spec("huggingface_hub") is not None


def repo_folder(repo_id: str, cache: Path | None = None) -> Path:
    """The repo's folder in the cache; separators in the id cannot lead out of it."""
    name = repo_id.replace("/", "--").replace("\\", "--")
    return (cache or hub_cache_dir()) / f"models--{name}"


def _safe_ref(revision: str) -> bool:
    """A branch or tag name as the cache stores it under refs/ ("main", "refs/pr/1")."""
    parts = revision.split("/")
    return (
        "\\" not in revision
        and "\x00" not in revision
        and all(part not in ("", ".", "..") for part in parts)
        and not re.match(r"^[A-Za-z]:", revision)
    )


def cached_snapshot(
    repo_id: str, revision: str | None = None, cache: Path | None = None
) -> tuple[Path, str] | None:
    """(snapshot folder, commit) of a cached model, or None if that revision is not cached."""
    folder = repo_folder(repo_id, cache)
    rev = revision or "main"
    if _COMMIT_RE.match(rev):
        commit: str | None = rev
    elif not _safe_ref(rev):
        return None  # "../../x" must not read (or point at) anything outside the cache
    else:
        try:
            commit = (folder / "refs" / rev).read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            commit = None
    if not commit or not _COMMIT_RE.match(commit):
        return None
    snapshot = folder / "snapshots" / commit
    return (snapshot, commit) if snapshot.is_dir() else None


def _problem(key: str, message: str, fix: str) -> CheckItem:
    return CheckItem(key, "fail", "Source", message, fix)


def inspect_hub_checkpoint(repo_id: str, revision: str | None = None) -> CheckpointInfo:
    """Describe a hub model: from the cache if it is there, else from the hub's metadata."""
    cached = cached_snapshot(repo_id, revision)
    if cached is not None:
        info = inspect_checkpoint_folder(cached[0], source=repo_id, kind="hub")
        info.revision = cached[1]
        # Online, the download step still checks for missing files (and resumes them).
        return info
    info = CheckpointInfo(source=repo_id, kind="hub", revision=revision)
    if offline():
        info.problems.append(
            _problem(
                "source",
                f"{repo_id} is not in the Hugging Face cache ({hub_cache_dir()}) and offline "
                "mode is on (HF_HUB_OFFLINE).",
                "Connect to the internet and unset HF_HUB_OFFLINE, or choose a local "
                "checkpoint folder.",
            )
        )
        return info
    if not hub_available():
        info.problems.append(
            _problem(
                "source",
                "Downloading from the Hugging Face hub needs the export toolkit, which is not "
                "installed (huggingface_hub is missing).",
                "Install the export toolkit, or choose a local checkpoint folder.",
            )
        )
        return info
    try:
        _fill_from_hub(info, repo_id, revision)
    except Exception as exc:  # every hub failure becomes one actionable line
        message, fix = describe_hub_error(exc, repo_id)
        info.problems.append(_problem("source", message, fix))
    return info


def _fill_from_hub(info: CheckpointInfo, repo_id: str, revision: str | None) -> None:
    from fnmatch import fnmatch

    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi()
    model = api.model_info(repo_id, revision=revision, files_metadata=True)
    info.revision = model.sha
    siblings = model.siblings or []
    info.download_bytes = sum(
        int(s.size or 0)
        for s in siblings
        if not any(fnmatch(s.rfilename, pattern) for pattern in IGNORE_PATTERNS)
    )
    names = {s.rfilename for s in siblings}
    info.tokenizer_bytes = sum(
        int(s.size or 0) for s in siblings if s.rfilename in ("tokenizer.json", "vocab.json")
    )
    if "config.json" not in names:
        info.problems.append(
            _problem(
                "config",
                f"{repo_id} has no config.json, so it is not a transformers checkpoint.",
                "Choose a Qwen3.5 model repository (e.g. Qwen/Qwen3.5-0.8B).",
            )
        )
        return
    config_path = hf_hub_download(
        repo_id, "config.json", revision=model.sha, cache_dir=hub_cache_dir()
    )
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    info.config = config if isinstance(config, dict) else None
    if not any(name.endswith(".safetensors") for name in names):
        info.problems.append(
            _problem(
                "weights",
                f"{repo_id} has no .safetensors weights.",
                "The exporter reads the MTP head from safetensors files; choose a repository "
                "that has model.safetensors.",
            )
        )
        return
    metadata = api.get_safetensors_metadata(repo_id, revision=model.sha)
    headers = {
        filename: {
            name: {
                "dtype": tensor.dtype,
                "shape": list(tensor.shape),
                "data_offsets": list(tensor.data_offsets),
            }
            for name, tensor in file_metadata.tensors.items()
        }
        for filename, file_metadata in metadata.files_metadata.items()
    }
    info.tensors = summarize_headers(headers)


def describe_hub_error(exc: BaseException, repo_id: str) -> tuple[str, str]:
    """(message, fix) for a huggingface_hub failure."""
    name = type(exc).__name__
    if name == "GatedRepoError":
        return (
            f"{repo_id} is gated: its licence must be accepted before downloading.",
            "Accept it on the model's hub page, then log in here with `hf auth login`.",
        )
    if name == "RepositoryNotFoundError":
        return (
            f"{repo_id} was not found on the Hugging Face hub (or it is private).",
            "Check the spelling (e.g. Qwen/Qwen3.5-0.8B); for a private model, log in with "
            "`hf auth login`.",
        )
    if name == "RevisionNotFoundError":
        return (
            f"{repo_id} has no such revision.",
            "Leave the revision empty for the latest one, or copy a branch, tag or commit "
            "from the model's page.",
        )
    if name in ("LocalEntryNotFoundError", "OfflineModeIsEnabled"):
        return (
            f"{repo_id} is not in the local cache and the hub cannot be reached.",
            "Connect to the internet (and unset HF_HUB_OFFLINE), or choose a local folder.",
        )
    if _broke_off(exc):
        return (
            f"The connection to the hub broke off while downloading {repo_id}.",
            "Check the internet connection and try again; files that arrived whole are kept.",
        )
    if _is_network_error(exc):
        return (
            f"The Hugging Face hub could not be reached: this computer seems to be offline "
            f"(or huggingface.co is blocked), and {repo_id} is not in the local cache.",
            "Connect to the internet and press Check again, or choose a checkpoint folder "
            "that is already on this computer.",
        )
    if isinstance(exc, OSError) and getattr(exc, "errno", None) == 28:
        return ("The disk filled up during the download.", "Free some space and try again.")
    text = str(exc).splitlines()[0][:200] if str(exc) else name
    return (
        f"The Hugging Face hub could not be reached for {repo_id} ({text}).",
        "Check the internet connection and try again; downloads resume where they stopped.",
    )


#: Exception classes (from httpx, requests, urllib3 and the standard library) that mean the
#: hub could not be reached at all, as opposed to an answer the hub gave.
_NETWORK_ERRORS = {
    "ConnectError",
    "ConnectTimeout",
    "ConnectionError",
    "NameResolutionError",
    "NewConnectionError",
    "MaxRetryError",
    "gaierror",
    "ConnectionRefusedError",
    "NetworkError",
    "ProxyError",
}


#: A connection that was made and then lost mid-transfer (httpx, urllib3, the standard library).
_BROKEN_OFF = {"ReadError", "RemoteProtocolError", "ReadTimeout", "IncompleteRead",
               "ProtocolError", "ChunkedEncodingError", "ConnectionResetError"}  # fmt: skip


def _broke_off(exc: BaseException) -> bool:
    return _caused_by(exc, _BROKEN_OFF)


def _is_network_error(exc: BaseException) -> bool:
    return _caused_by(exc, _NETWORK_ERRORS)


def _caused_by(exc: BaseException, names: set[str]) -> bool:
    """Whether `exc` or an exception in its cause chain (bounded) is of a class named in
    `names` (by name: httpx, requests and urllib3 need not be importable here)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if any(cls.__name__ in names for cls in type(seen).__mro__):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def download_command(
    repo_id: str, revision: str | None = None, *, python: str | None = None
) -> list[str]:
    module = "qwen_mtp_desktop.core.models.export.hub"
    command = [python or sys.executable, "-m", module, "download", repo_id]
    if revision:
        command += ["--revision", revision]
    return command


def make_marker_tqdm(min_seconds: float = 0.5) -> type[Any]:
    """A tqdm class for snapshot_download that prints download markers instead of a bar."""
    from tqdm.std import tqdm as base_tqdm

    from qwen_mtp_desktop.core.models.export.optimum_cli import emit

    lock = threading.Lock()

    class MarkerTqdm(base_tqdm):  # type: ignore[misc]
        last = 0.0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("name", None)
            kwargs["file"] = Path(os.devnull).open("w")  # noqa: SIM115 (closed in close())
            kwargs["disable"] = False
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            result: bool | None = super().update(n)
            if self.unit == "B":
                now = time.monotonic()
                with lock:
                    done = self.total and self.n >= self.total
                    if done or now - MarkerTqdm.last >= min_seconds:
                        MarkerTqdm.last = now
                        emit("download", done=int(self.n), total=int(self.total or 0))
            return result

        def close(self) -> None:
            handle = self.fp
            super().close()
            if handle is not None and not handle.closed:
                handle.close()

    return MarkerTqdm


def _download(repo_id: str, revision: str | None) -> int:
    from qwen_mtp_desktop.core.models.export.optimum_cli import emit

    emit("stage", stage="downloading")
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=hub_cache_dir(),
            ignore_patterns=list(IGNORE_PATTERNS),
            tqdm_class=make_marker_tqdm(),
        )
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        message, fix = describe_hub_error(exc, repo_id)
        emit("error", message=message, fix=fix, code="DOWNLOAD_FAILED")
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    snapshot = Path(path)
    emit("snapshot", path=str(snapshot), revision=snapshot.name)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from qwen_mtp_desktop.core.models.export.optimum_cli import die_with_parent

    if argv is None:  # run as the download subprocess
        die_with_parent()

    parser = argparse.ArgumentParser(prog="python -m qwen_mtp_desktop.core.models.export.hub")
    commands = parser.add_subparsers(dest="command", required=True)
    download = commands.add_parser("download", help="download a model into the HF cache")
    download.add_argument("repo_id")
    download.add_argument("--revision")
    args = parser.parse_args(argv)
    return _download(args.repo_id, args.revision)


if __name__ == "__main__":
    sys.exit(main())
