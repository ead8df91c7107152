"""The ASGI app: the hub's routes, its headers and errors, ranges, and the faults applied to
each response."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, quote, unquote, urlencode

from starlette.types import Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from .faults import Access, Fault, RequestRecord, SharedState, take_fault
from .repos import RepoState, build_state, scan

CHUNK = 64 * 1024


class HubControls(Protocol):
    """What the app needs of the server that runs it (`HubServer`)."""

    root: Path
    lfs_suffixes: tuple[str, ...]
    lfs_threshold: int
    tree_page_size: int
    cdn_url: str
    shared: SharedState

    def fault(self, *args: Any, **kwargs: Any) -> Fault: ...
    def clear_faults(self) -> None: ...
    def clear_requests(self) -> None: ...
    @property
    def faults(self) -> list[Fault]: ...
    @property
    def requests(self) -> list[RequestRecord]: ...


class _RangeNotSatisfiableError(Exception):
    pass


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """Inclusive (start, end) of a single `bytes=` range, None to send the whole body (no range,
    or one this server ignores, as RFC 9110 allows); raises _RangeNotSatisfiableError for a 416."""
    if header is None:
        return None
    match = _RANGE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            raise _RangeNotSatisfiableError
        return max(0, size - n), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        raise _RangeNotSatisfiableError
    return start, min(end, size - 1)


class _Source:
    """Bytes to serve: a file on disk or bytes in memory, optionally grown at its end."""

    def __init__(self, data: bytes | None = None, disk: Path | None = None, size: int = 0) -> None:
        self.data = data
        self.disk = disk
        self.size = len(data) if data is not None else size
        self.extra = b""

    def grow(self, extra: int) -> None:
        pattern = b"grown-after-HEAD;"
        self.extra = (pattern * (extra // len(pattern) + 1))[:extra]

    @property
    def total(self) -> int:
        return self.size + len(self.extra)

    @contextlib.contextmanager
    def reader(self) -> Iterator[Callable[[int, int], bytes]]:
        fh = self.disk.open("rb") if self.disk is not None else None
        try:

            def read(offset: int, n: int) -> bytes:
                out = b""
                if offset < self.size:
                    take = min(n, self.size - offset)
                    if fh is not None:
                        fh.seek(offset)
                        out = fh.read(take)
                    else:
                        assert self.data is not None
                        out = self.data[offset : offset + take]
                if len(out) < n:
                    grown = offset + len(out) - self.size
                    out += self.extra[grown : grown + n - len(out)]
                return out

            yield read
        finally:
            if fh is not None:
                fh.close()


@dataclass
class _Request:
    method: str
    segments: list[str]
    query: dict[str, list[str]]
    headers: dict[str, str]
    client: tuple[str, int] | None
    record: RequestRecord
    path: str
    #: The file a resolve/CDN request is about: (repo id, path in repo).
    file: tuple[str, str] | None = None
    repo: str | None = None

    def flag(self, name: str) -> bool:
        return self.query.get(name, ["false"])[-1].lower() in ("1", "true")

    @property
    def token(self) -> str | None:
        auth = self.headers.get("authorization", "")
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None


def protocol_class(connections: dict[tuple[str, int], asyncio.Transport]) -> type[H11Protocol]:
    """uvicorn's h11 protocol, remembering each connection's transport by client address: ASGI
    gives an app no way to cut a connection mid-body, which the drop and truncate faults do."""

    class _Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if self.client:
                connections[(self.client[0], self.client[1])] = transport

        def connection_lost(self, exc: Exception | None) -> None:
            if self.client:
                connections.pop((self.client[0], self.client[1]), None)
            super().connection_lost(exc)

    return _Protocol


# --- the ASGI app -----------------------------------------------------------------------------


class HubApp:
    def __init__(self, server: HubControls) -> None:
        self.server = server
        self.connections: dict[tuple[str, int], asyncio.Transport] = {}
        self.stopping = False

    # The repo folder, its commit (re-hashed when a file changed), and access rules.

    def _cached(self, repo_id: str) -> tuple[RepoState | None, Path | None]:
        """(the cached commit if still current, else None; the repo folder, None if none)."""
        parts = repo_id.split("/")
        if len(parts) != 2 or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
            return None, None
        folder = self.server.root / repo_id
        if not folder.is_dir():
            return None, None
        signature = tuple((rel, size, mtime) for rel, _p, size, mtime in scan(folder))
        with self.server.shared.lock:
            cached = self.server.shared.repos.get(repo_id)
        return (cached if cached is not None and cached.signature == signature else None), folder

    def _build(self, repo_id: str, folder: Path) -> RepoState:
        state = build_state(
            repo_id,
            folder,
            lfs_suffixes=self.server.lfs_suffixes,
            lfs_threshold=self.server.lfs_threshold,
        )
        with self.server.shared.lock:
            self.server.shared.repos[repo_id] = state
        return state

    def state_now(self, repo_id: str) -> RepoState | None:
        cached, folder = self._cached(repo_id)
        if cached is not None or folder is None:
            return cached
        return self._build(repo_id, folder)

    async def state(self, repo_id: str) -> RepoState | None:
        cached, folder = self._cached(repo_id)
        if cached is not None or folder is None:
            return cached
        # Hashing a real checkpoint takes seconds: not on the event loop. A daemon thread of
        # its own, not asyncio's executor, whose idle non-daemon workers would outlive a test.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RepoState] = loop.create_future()

        def settle(result: RepoState | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                assert result is not None
                future.set_result(result)

        def work() -> None:
            result: RepoState | None = None
            error: BaseException | None = None
            try:
                result = self._build(repo_id, folder)
            except BaseException as exc:  # handed to the request that waits for it
                error = exc
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=work, name="hub-hash", daemon=True).start()
        return await future

    def access(self, repo_id: str) -> Access | None:
        with self.server.shared.lock:
            return self.server.shared.access.get(repo_id)

    def take_fault(
        self, req: _Request, *, body: bool, span: tuple[int, int] | None = None, size: int = 0
    ) -> Fault | None:
        file = req.file[1] if req.file is not None else None
        fault = take_fault(
            self.server.shared,
            method=req.method,
            path=req.path,
            repo=req.repo,
            file=file,
            body=body,
            span=span,
            size=size,
        )
        if fault is not None:
            req.record.fault = fault.kind
        return fault

    # Entry point.

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = scope.get("raw_path") or scope["path"].encode()
        raw_path, _, _ = raw.partition(b"?")
        segments = [unquote(s.decode("latin-1")) for s in raw_path.split(b"/")[1:]]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query_string = scope.get("query_string", b"").decode("latin-1")
        client = scope.get("client")
        record = RequestRecord(
            method=scope["method"],
            path=scope["path"],
            query=query_string,
            host=headers.get("host"),
            range=headers.get("range"),
            authorization=headers.get("authorization"),
        )
        req = _Request(
            method=scope["method"],
            segments=segments,
            query=parse_qs(query_string, keep_blank_values=True),
            headers=headers,
            client=(client[0], client[1]) if client else None,
            record=record,
            path=scope["path"],
        )
        if segments and segments[0] in ("_faults", "_log"):
            await self.control(req, receive, send)
            return
        self._classify(req)
        fault = self.take_fault(req, body=False)
        if fault is not None:
            await self.fault_status(req, send, fault)
            return
        await self.route(req, receive, send)

    def _classify(self, req: _Request) -> None:
        """Which repo and file a request is about, for fault matching."""
        s = req.segments
        if len(s) >= 4 and s[0] == "api":
            req.repo = f"{s[2]}/{s[3]}"
        elif len(s) >= 5 and s[2] == "resolve":
            req.repo = f"{s[0]}/{s[1]}"
            req.file = (req.repo, "/".join(s[4:]))
        elif len(s) >= 5 and s[0] == "cdn":
            req.repo = f"{s[1]}/{s[2]}"
            req.file = (req.repo, "/".join(s[4:]))

    async def route(self, req: _Request, receive: Receive, send: Send) -> None:
        s = req.segments
        other_type = (len(s) >= 4 and s[0] == "api" and s[1] != "models") or (
            len(s) >= 6 and s[0] in ("datasets", "spaces", "kernels") and s[3] == "resolve"
        )
        if s == ["api", "agent-harnesses"]:
            # huggingface_hub fetches this registry once per process; empty: no agent detected.
            await self.json(req, send, {"standardEnvVars": [], "harnesses": {}})
        elif other_type:  # only model repos are served
            await self.error(req, send, 404, "RepoNotFound", "Repository not found")
        elif len(s) >= 4 and s[0] == "api" and s[1] == "models":
            await self.api(req, receive, send)
        elif len(s) >= 5 and s[2] == "resolve" and req.method in ("GET", "HEAD"):
            await self.resolve(req, send)
        elif len(s) >= 5 and s[0] == "cdn" and req.method in ("GET", "HEAD"):
            await self.cdn(req, send)
        else:
            await self.error(req, send, 404, None, "Not Found")

    # Repo API.

    async def api(self, req: _Request, receive: Receive, send: Send) -> None:
        assert req.repo is not None
        rest = req.segments[4:]
        state = await self.state(req.repo)
        if state is None:
            await self.repo_not_found(req, send)
            return
        if not await self.check_access(req, send, state, files=False):
            return
        if not rest and req.method == "GET":
            await self.model_info(req, send, state)
        elif len(rest) == 2 and rest[0] == "revision" and req.method == "GET":
            if await self.check_revision(req, send, state, rest[1]):
                await self.model_info(req, send, state)
        elif len(rest) >= 2 and rest[0] == "tree" and req.method == "GET":
            if await self.check_revision(req, send, state, rest[1]):
                await self.tree(req, send, state, "/".join(rest[2:]).strip("/"))
        elif len(rest) == 2 and rest[0] == "paths-info" and req.method == "POST":
            if await self.check_revision(req, send, state, rest[1]):
                await self.paths_info(req, receive, send, state)
        elif rest == ["refs"] and req.method == "GET":
            ref = {"name": "main", "ref": "refs/heads/main", "targetCommit": state.sha}
            await self.json(req, send, {"branches": [ref], "converts": [], "tags": []})
        else:
            await self.error(req, send, 404, None, "Not Found")

    def model_info_json(self, req: _Request, state: RepoState) -> dict[str, Any]:
        access = self.access(state.repo_id)
        blobs = req.flag("blobs")
        siblings = []
        for file in state.files.values():
            sibling: dict[str, Any] = {"rfilename": file.path}
            if blobs:
                sibling.update(size=file.size, blobId=file.blob_id)
                if file.lfs:
                    sibling["lfs"] = {
                        "sha256": file.sha256,
                        "size": file.size,
                        "pointerSize": file.pointer_size,
                    }
            siblings.append(sibling)
        org = state.repo_id.split("/")[0]
        tags = [t for t, s in (("safetensors", ".safetensors"), ("gguf", ".gguf"))
                if any(p.endswith(s) for p in state.files)]  # fmt: skip
        info: dict[str, Any] = {
            "_id": state.sha[:24],
            "id": state.repo_id,
            "modelId": state.repo_id,
            "author": org,
            "sha": state.sha,
            "lastModified": state.last_modified,
            "createdAt": state.last_modified,
            "private": bool(access and access.private),
            "gated": "manual" if access and access.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": tags,
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(f.size for f in state.files.values()),
        }
        if state.config is not None:
            info["config"] = state.config
            info["library_name"] = "transformers"
        if state.safetensors is not None:
            info["safetensors"] = state.safetensors
        if req.flag("securityStatus"):
            info["securityRepoStatus"] = {"scansDone": True, "filesWithIssues": []}
        # `expand` (sent as `expand=` by huggingface_hub, `expand[]=` by the web client): the
        # hub then returns only the listed properties.
        expand = req.query.get("expand", []) + req.query.get("expand[]", [])
        if expand:
            info = {k: v for k, v in info.items() if k in {"_id", "id", *expand}}
        return info

    async def model_info(self, req: _Request, send: Send, state: RepoState) -> None:
        await self.json(req, send, self.model_info_json(req, state))

    def entry(self, state: RepoState, path: str, expand: bool) -> dict[str, Any]:
        file = state.files.get(path)
        item: dict[str, Any]
        if file is not None:
            item = {"type": "file", "oid": file.blob_id, "size": file.size, "path": path}
            if file.lfs:
                item["lfs"] = {
                    "oid": file.sha256,
                    "size": file.size,
                    "pointerSize": file.pointer_size,
                }
            if expand:
                item["securityFileStatus"] = {
                    "status": "safe",
                    "avScan": {"virusFound": False, "virusNames": None},
                    "pickleImportScan": None,
                }
        else:
            item = {"type": "directory", "oid": state.dirs[path], "size": 0, "path": path}
        if expand:
            item["lastCommit"] = {"id": state.sha, "title": "Upload", "date": state.last_modified}
        return item

    async def tree(self, req: _Request, send: Send, state: RepoState, base: str) -> None:
        if base and base not in state.dirs:
            await self.error(
                req, send, 404, "EntryNotFound", f"{base} does not exist on main", commit=state.sha
            )
            return
        prefix = f"{base}/" if base else ""
        recursive = req.flag("recursive")
        names = [p for p in (*state.dirs, *state.files) if p.startswith(prefix)]
        if not recursive:
            names = [p for p in names if "/" not in p[len(prefix) :]]
        names.sort(key=lambda p: (p not in state.dirs, p))  # folders first, as on the hub
        given = req.query.get("cursor", ["0"])[-1]
        cursor = int(given) if given.isdigit() else 0
        size = self.server.tree_page_size
        page = names[cursor : cursor + size]
        extra: list[tuple[str, str]] = []
        if cursor + size < len(names):
            query = {k: v[-1] for k, v in req.query.items()} | {"cursor": str(cursor + size)}
            host = req.headers.get("host", "")
            extra.append(("Link", f'<http://{host}{req.path}?{urlencode(query)}>; rel="next"'))
        items = [self.entry(state, p, req.flag("expand")) for p in page]
        await self.json(req, send, items, extra)

    async def paths_info(
        self, req: _Request, receive: Receive, send: Send, state: RepoState
    ) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if req.headers.get("content-type", "").startswith("application/json"):
            sent = json.loads(body or b"{}")  # what newer clients may send
            form = {"paths": list(sent.get("paths", [])), "expand": [str(sent.get("expand"))]}
        else:  # huggingface_hub 1.21: a form, `paths` repeated
            form = parse_qs(body.decode(), keep_blank_values=True)
        expand = form.get("expand", [""])[-1].lower() == "true"
        paths = [p.strip("/") for p in form.get("paths", [])]
        found = [p for p in paths if p in state.files or p in state.dirs]
        await self.json(req, send, [self.entry(state, p, expand) for p in found])

    # Files.

    async def resolve(self, req: _Request, send: Send) -> None:
        assert req.file is not None
        repo_id, path = req.file
        state = await self.state(repo_id)
        if state is None:
            await self.repo_not_found(req, send)
            return
        if not await self.check_access(req, send, state, files=True):
            return
        if not await self.check_revision(req, send, state, req.segments[3]):
            return
        file = state.files.get(path)
        if file is None:
            await self.error(req, send, 404, "EntryNotFound", "Entry not found", commit=state.sha)
            return
        headers = [
            ("X-Repo-Commit", state.sha),
            ("ETag", file.etag),
            ("Accept-Ranges", "bytes"),
        ]
        if file.lfs:
            location = f"{self.server.cdn_url}/cdn/{repo_id}/{file.sha256}/{quote(path)}"
            headers += [
                ("X-Linked-Etag", file.etag),
                ("X-Linked-Size", str(file.size)),
                ("Location", location),
            ]
            body = f"Found. Redirecting to {location}".encode()
            await self.plain(req, send, 302, body, headers, content_type="text/plain")
            return
        await self.serve(req, send, _Source(disk=file.disk, size=file.size), headers)

    async def cdn(self, req: _Request, send: Send) -> None:
        # Like the hub's signed CDN URLs: content-addressed (sha256 in the path), no token
        # needed; a blob that is no longer the file's content is gone.
        assert req.file is not None
        repo_id, path = req.file
        state = await self.state(repo_id)
        file = state.files.get(path) if state is not None else None
        if file is None or file.sha256 != req.segments[3]:
            await self.plain(req, send, 404, b"NoSuchKey", [], content_type="text/plain")
            return
        name = path.rsplit("/", 1)[-1]
        headers = [
            ("ETag", f'"{file.sha256}"'),
            ("Accept-Ranges", "bytes"),
            (
                "Content-Disposition",
                f"inline; filename*=UTF-8''{quote(name)}; filename=\"{name}\";",
            ),
        ]
        await self.serve(req, send, _Source(disk=file.disk, size=file.size), headers)

    # Checks that answer the request themselves when they fail.

    async def check_revision(
        self, req: _Request, send: Send, state: RepoState, revision: str
    ) -> bool:
        if revision in ("main", state.sha):
            return True
        await self.error(req, send, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return False

    async def check_access(
        self, req: _Request, send: Send, state: RepoState, *, files: bool
    ) -> bool:
        access = self.access(state.repo_id)
        if access is None or req.token in access.tokens:
            return True
        if access.private:
            await self.repo_not_found(req, send)
            return False
        if access.gated and files:
            if req.token is None:
                message = (
                    f"Access to model {state.repo_id} is restricted. You must have access to it "
                    "and be authenticated to access it. Please log in."
                )
                await self.error(req, send, 401, "GatedRepo", message)
            else:
                message = (
                    f"Access to model {state.repo_id} is restricted and you are not in the "
                    "authorized list."
                )
                await self.error(req, send, 403, "GatedRepo", message)
            return False
        return True

    async def repo_not_found(self, req: _Request, send: Send) -> None:
        # The hub answers 401 to an anonymous request and 404 to an authenticated one, so that
        # a private repo and a missing one look the same.
        status = 404 if req.token else 401
        await self.error(req, send, status, "RepoNotFound", "Repository not found")

    # Responses.

    async def start(
        self, req: _Request, send: Send, status: int, headers: list[tuple[str, str]]
    ) -> None:
        req.record.status = status
        with self.server.shared.lock:
            self.server.shared.log.append(req.record)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.lower().encode(), v.encode("latin-1")) for k, v in headers],
            }
        )

    async def plain(
        self,
        req: _Request,
        send: Send,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]],
        *,
        content_type: str,
    ) -> None:
        headers = [*headers, ("Content-Type", content_type), ("Content-Length", str(len(body)))]
        await self.start(req, send, status, headers)
        if req.method != "HEAD":
            req.record.bytes_sent = len(body)
        await send({"type": "http.response.body", "body": body, "more_body": False})

    async def error(
        self,
        req: _Request,
        send: Send,
        status: int,
        code: str | None,
        message: str,
        *,
        commit: str | None = None,
    ) -> None:
        headers = [("X-Error-Message", message)]
        if code is not None:
            headers.append(("X-Error-Code", code))
        if commit is not None:
            headers.append(("X-Repo-Commit", commit))
        body = json.dumps({"error": message}).encode()
        await self.plain(req, send, status, body, headers, content_type="application/json")

    async def json(
        self,
        req: _Request,
        send: Send,
        payload: Any,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        headers = [*(headers or []), ("Content-Type", "application/json; charset=utf-8")]
        await self.serve(req, send, _Source(data=data), headers)

    async def serve(
        self, req: _Request, send: Send, source: _Source, headers: list[tuple[str, str]]
    ) -> None:
        """A body, honouring Range and the body faults."""
        header = req.headers.get("range") if req.method == "GET" else None
        try:
            span = parse_range(header, source.size)
        except _RangeNotSatisfiableError:
            headers = [*headers, ("Content-Range", f"bytes */{source.size}")]
            await self.plain(req, send, 416, b"", headers, content_type="text/plain")
            return
        fault = None
        if req.method == "GET":
            whole = span or (0, source.size - 1)
            fault = self.take_fault(req, body=True, span=whole, size=source.size)
        if fault is not None and fault.kind == "grow":
            source.grow(fault.extra_bytes)
            span = parse_range(header, source.total)  # the grown file's ranges
        total = source.total
        start, end = span if span is not None else (0, total - 1)
        length = end - start + 1
        status = 206 if span is not None else 200
        if span is not None:
            headers = [*headers, ("Content-Range", f"bytes {start}-{end}/{total}")]
        headers = [*headers, ("Content-Length", str(length))]
        if not any(k.lower() == "content-type" for k, _ in headers):
            headers.append(("Content-Type", "application/octet-stream"))
        await self.start(req, send, status, headers)
        if req.method == "HEAD":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self.stream(req, send, source, start, length, fault)

    async def stream(
        self,
        req: _Request,
        send: Send,
        source: _Source,
        start: int,
        length: int,
        fault: Fault | None,
    ) -> None:
        kind = fault.kind if fault is not None else None
        limit = length
        if fault is not None and kind in ("drop", "truncate"):
            cut = fault.after_bytes if fault.after_bytes is not None else length // 2
            limit = max(0, min(cut, length))
        chunk = CHUNK
        if fault is not None and kind == "slow":
            chunk = max(1, int(fault.bytes_per_second / 20))
        flip_at = None
        if fault is not None and kind == "flip":
            flip_at = fault.offset if fault.offset is not None else source.size // 2
        transport = self.connections.get(req.client) if req.client else None
        sent = 0
        with source.reader() as read:
            while sent < limit:
                if transport is not None and transport.is_closing():
                    return  # the client went away
                if self.stopping:  # a trickle must not hold the server's shutdown up
                    await self.cut(req, transport, reset=False)
                    return
                n = min(chunk, limit - sent)
                data = read(start + sent, n)
                if flip_at is not None and start + sent <= flip_at < start + sent + n:
                    i = flip_at - start - sent
                    data = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
                # Counted before the send, so a test that got the bytes sees them logged.
                req.record.bytes_sent += len(data)
                await send({"type": "http.response.body", "body": data, "more_body": True})
                sent += n
                if fault is not None and kind == "slow":
                    await asyncio.sleep(n / fault.bytes_per_second)
        if kind in ("drop", "truncate"):
            await self.cut(req, transport, reset=kind == "drop")
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def cut(self, req: _Request, transport: asyncio.Transport | None, *, reset: bool) -> None:
        """End the connection mid-body: with a TCP reset (drop: the client reads "connection
        reset") or a clean close (truncate: the client reads fewer bytes than announced)."""
        if transport is None:
            raise ConnectionAbortedError("no transport for this connection")
        deadline = time.monotonic() + 5
        while transport.get_write_buffer_size() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)  # the bytes before the cut reach the client first
        if reset:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        else:
            transport.close()
        # Wait for uvicorn to see the connection gone, so it does not log an unfinished answer.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(5):
                while True:
                    await asyncio.sleep(0.005)
                    if transport.is_closing() and req.client not in self.connections:
                        break

    async def fault_status(self, req: _Request, send: Send, fault: Fault) -> None:
        if fault.kind == "rate_limit":
            wait = fault.retry_after if fault.retry_after is not None else 0
            # The hub sends the IETF draft headers; huggingface_hub waits `t` (+1 s) from them.
            headers = [
                ("Retry-After", str(wait)),
                ("RateLimit", f'"resolvers";r=0;t={wait}'),
                ("RateLimit-Policy", '"fixed window";"resolvers";q=3000;w=300'),
            ]
            body = b"Too Many Requests"
            await self.plain(req, send, 429, body, headers, content_type="text/plain")
            return
        headers = []
        if fault.retry_after is not None:
            headers.append(("Retry-After", str(fault.retry_after)))
        body = f"Injected fault: HTTP {fault.status}".encode()
        await self.plain(req, send, fault.status, body, headers, content_type="text/plain")

    # Control endpoints, for other processes.

    async def control(self, req: _Request, receive: Receive, send: Send) -> None:
        hub = self.server
        payload: Any = None
        if req.segments == ["_faults"] and req.method == "POST":
            body = b""
            while True:
                message: Message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                specs = json.loads(body)
                specs = specs if isinstance(specs, list) else [specs]
                payload = [hub.fault(**spec).to_json() for spec in specs]
            except (ValueError, TypeError) as exc:
                await self.control_reply(send, 400, {"error": str(exc)})
                return
        elif req.segments == ["_faults"] and req.method == "GET":
            payload = [f.to_json() for f in hub.faults]
        elif req.segments == ["_faults"] and req.method == "DELETE":
            hub.clear_faults()
            payload = []
        elif req.segments == ["_log"] and req.method == "GET":
            payload = [dataclasses.asdict(r) for r in hub.requests]
        elif req.segments == ["_log"] and req.method == "DELETE":
            hub.clear_requests()
            payload = []
        else:
            await self.control_reply(send, 404, {"error": "Not Found"})
            return
        await self.control_reply(send, 200, payload)

    @staticmethod
    async def control_reply(send: Send, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data, "more_body": False})
