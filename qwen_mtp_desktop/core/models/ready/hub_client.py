"""The app's own hub client: a repository's file list at one commit, and files or byte ranges
of it, over HTTP (httpx), with the retries and messages a desktop app needs.

Why not huggingface_hub here: its 1.x downloads write to a per-process temporary file that is
deleted when a download fails (its PR #4228), so a download cut by a lost network, a crash or
a killed app starts again from byte 0, and it does not check content against the SHA-256 the
hub lists. The app's downloader (core.models.ready.download) keeps its own partial files and
checks every file; the range reader (core.models.ready.tensor_source) reads single tensors. Both
speak the hub's public HTTP API, so `HF_ENDPOINT` mirrors work as they do for other tools.

Answers are hostile until checked: JSON bounded in size and nesting, commits and sizes
validated, file names limited to plain relative paths inside the repository.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import parse_json_text

#: A model's file list is KBs; a bound keeps a hostile server from filling memory.
JSON_LIMIT = 32 * 1024 * 1024
RETRIES = 6
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._ +=@,-]{0,200}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class HubError(UserFacingError):
    """The hub (or a mirror) could not answer as needed; the message says what to do."""

    code = "HUB_FAILED"


def valid_repo_id(repo_id: str) -> bool:
    return bool(_REPO_ID.match(repo_id)) and ".." not in repo_id


def safe_repo_path(name: str) -> bool:
    """A relative path inside a repository: segments of ordinary characters, no '..'."""
    parts = name.split("/")
    return 0 < len(parts) <= 8 and all(_SEGMENT.match(p) and p not in (".", "..") for p in parts)


@dataclass(frozen=True)
class RepoFile:
    name: str
    size: int
    #: The LFS SHA-256 (large files); None for files kept in git.
    sha256: str | None
    #: The git blob id (SHA-1 of "blob SIZE\0" + content) of a file kept in git.
    blob_id: str | None


@dataclass(frozen=True)
class RepoInfo:
    repo_id: str
    commit: str
    files: tuple[RepoFile, ...]


def _retry_after(value: str | None, attempt: int) -> float:
    try:
        seconds = float(value) if value is not None else 2.0**attempt
    except ValueError:
        seconds = 2.0**attempt
    return max(0.0, min(seconds, 30.0))


class HubClient:
    """One connection pool to a hub endpoint (`HF_ENDPOINT` by default) with an optional
    token. Connection failures, 429 and 5xx are retried with backoff (Retry-After
    honoured); `sleep` is injectable so tests need not wait."""

    def __init__(
        self,
        endpoint: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        retries: int = RETRIES,
    ) -> None:
        import httpx

        from qwen_mtp_desktop.core.models.export.hub import hub_endpoint, offline

        if offline():
            raise HubError(
                "Offline mode is on (HF_HUB_OFFLINE), so the hub is not asked.",
                "Unset HF_HUB_OFFLINE and connect to the internet, or use a folder on this "
                "computer.",
                code="OFFLINE",
            )
        self.endpoint = (endpoint or hub_endpoint()).rstrip("/")
        self._sleep = sleep
        self._retries = max(1, retries)
        headers = {"User-Agent": "qwen-mtp-desktop"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        # Redirects are followed (the hub sends large files from its CDN); httpx drops the
        # Authorization header when a redirect changes the origin, as the hub's CDN needs.
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
            follow_redirects=True,
            trust_env=True,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def backoff(self, attempt: int) -> None:
        """Wait before retrying a transfer that broke off (1, 2, 4 ... 30 s)."""
        self._sleep(min(2.0 ** max(0, attempt - 1), 30.0))

    def file_url(self, repo_id: str, commit: str, name: str) -> str:
        from urllib.parse import quote

        if not safe_repo_path(name):
            raise HubError(
                f"{repo_id} lists a file with an unsafe name ({name[:80]!r}).",
                "The repository (or the server answering for it) is damaged or hostile.",
            )
        return f"{self.endpoint}/{repo_id}/resolve/{commit}/{quote(name)}"

    def get(self, url: str, repo_id: str, headers: Mapping[str, str] | None = None) -> Any:
        """A whole (small) response, retried; HubError for an answer that is an error."""
        with self.stream(url, repo_id, headers) as response:
            response.read()
            return response

    @contextmanager
    def stream(
        self, url: str, repo_id: str, headers: Mapping[str, str] | None = None
    ) -> Iterator[Any]:
        """A streaming GET whose status is a success (retried until it is, or HubError)."""
        import httpx

        last = "no answer"
        for attempt in range(self._retries):
            yielded = False
            try:
                with self._client.stream("GET", url, headers=dict(headers or {})) as response:
                    status = response.status_code
                    if status == 429 or status >= 500:
                        last = f"answered {status}"
                        wait = _retry_after(response.headers.get("Retry-After"), attempt)
                    else:
                        raise_for_status(response, repo_id)
                        yielded = True
                        yield response
                        return
            except httpx.TransportError as exc:
                if yielded:
                    raise  # mid-body: the caller knows how much arrived and resumes
                last = type(exc).__name__
                wait = min(2.0**attempt, 30.0)
            if attempt < self._retries - 1:
                self._sleep(wait)
        raise HubError(
            f"The hub ({self.endpoint}) could not be reached for {repo_id} ({last}).",
            "Check the internet connection (and HF_ENDPOINT), then try again.",
            code="NETWORK",
        )

    def repo_info(self, repo_id: str, revision: str | None = None) -> RepoInfo:
        """The repo's files (sizes, LFS SHA-256, blob ids) at `revision`, resolved to a commit."""
        from urllib.parse import quote

        if not valid_repo_id(repo_id):
            raise HubError(
                f"{repo_id[:120]!r} is not a hub repository id.",
                "Give it as ORGANISATION/NAME, e.g. Qwen/Qwen3.5-0.8B.",
                code="BAD_REPO_ID",
            )
        rev = quote(revision or "main", safe="")
        response = self.get(
            f"{self.endpoint}/api/models/{repo_id}/revision/{rev}?blobs=true", repo_id
        )
        body = response.content
        if len(body) > JSON_LIMIT:
            raise HubError(f"The hub's answer for {repo_id} is implausibly large.", "")
        try:
            raw = parse_json_text(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise HubError(
                f"The hub's answer for {repo_id} is not valid JSON.",
                "Check HF_ENDPOINT: it must point at a Hugging Face hub or a mirror of it.",
            ) from exc
        sha = raw.get("sha") if isinstance(raw, dict) else None
        if not isinstance(sha, str) or not _COMMIT.match(sha):
            raise HubError(
                f"The hub's answer for {repo_id} names no commit.",
                "Check HF_ENDPOINT: it must point at a Hugging Face hub or a mirror of it.",
            )
        files: list[RepoFile] = []
        siblings = raw.get("siblings")
        for sibling in siblings if isinstance(siblings, list) else []:
            if not isinstance(sibling, dict):
                continue
            name, size = sibling.get("rfilename"), sibling.get("size")
            if not isinstance(name, str) or not safe_repo_path(name):
                continue  # never fetched: a name that could leave the model folder
            lfs_raw = sibling.get("lfs")
            lfs: dict[str, Any] = lfs_raw if isinstance(lfs_raw, dict) else {}
            sha256 = lfs.get("sha256") if isinstance(lfs.get("sha256"), str) else None
            blob = sibling.get("blobId")
            files.append(
                RepoFile(
                    name=name,
                    size=size if isinstance(size, int) and 0 <= size < 1 << 50 else -1,
                    sha256=sha256.lower() if sha256 and _SHA256.match(sha256.lower()) else None,
                    blob_id=blob if isinstance(blob, str) and len(blob) == 40 else None,
                )
            )
        return RepoInfo(repo_id, sha, tuple(files))


def raise_for_status(response: Any, repo_id: str) -> None:
    """HubError with the hub's meaning of an error answer (X-Error-Code first)."""
    status = response.status_code
    if status < 400:
        return
    code = response.headers.get("X-Error-Code", "")
    if code == "GatedRepo" or status == 403:
        raise HubError(
            f"{repo_id} is gated or private: this account may not read it.",
            "Accept the model's licence on its hub page, then give an access token (Hub "
            "token… in the download dialog, HF_TOKEN, or `hf auth login`).",
            code="HUB_FORBIDDEN",
        )
    if code == "RepoNotFound" or status == 401:
        raise HubError(
            f"{repo_id} was not found on the hub (or it is private).",
            "Check the spelling (e.g. Qwen/Qwen3.5-0.8B); for a private model, log in.",
            code="HUB_NOT_FOUND",
        )
    if code == "RevisionNotFound":
        raise HubError(
            f"{repo_id} has no such revision.",
            "Leave the revision empty for the latest one, or copy a branch, tag or commit.",
            code="HUB_NOT_FOUND",
        )
    if code == "EntryNotFound" or status == 404:
        raise HubError(
            f"A file of {repo_id} is missing on the hub.",
            "The repository changed or is incomplete; try again later.",
            code="HUB_NOT_FOUND",
        )
    if status == 416:
        raise HubError(
            f"A file of {repo_id} is shorter than expected.",
            "The file changed on the hub; start the download again.",
            code="HUB_CHANGED",
        )
    raise HubError(f"The hub answered {status} for {repo_id}.", "Try again later.")
