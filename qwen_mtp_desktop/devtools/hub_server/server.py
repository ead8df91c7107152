"""`HubServer`: the app served by uvicorn on a background thread, on two ports (the hub and
its "CDN"), with the test-facing controls: faults, the request log, access rules."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Collection
from pathlib import Path
from urllib.parse import quote

import uvicorn

from .app import HubApp, protocol_class
from .faults import Access, Fault, FaultKind, RequestRecord, SharedState
from .repos import LFS_SUFFIXES, LFS_THRESHOLD, RepoState

TREE_PAGE_SIZE = 1000
_STARTUP_TIMEOUT_S = 10.0


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    sock.setblocking(False)
    return sock


class HubServer:
    """The hub stand-in: `with HubServer(root) as hub: hub.url`.

    `url` is the hub endpoint (for `HF_ENDPOINT`), `cdn_url` the second origin LFS files are
    served from. Faults, the request log and access rules may be changed from any thread while
    it serves.
    """

    def __init__(
        self,
        root: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cdn_port: int = 0,
        lfs_suffixes: Collection[str] = LFS_SUFFIXES,
        lfs_threshold: int = LFS_THRESHOLD,
        tree_page_size: int = TREE_PAGE_SIZE,
    ) -> None:
        self.root = Path(root)
        self.host = host
        self.port = port
        self.cdn_port = cdn_port
        self.lfs_suffixes = tuple(s.lower() for s in lfs_suffixes)
        self.lfs_threshold = lfs_threshold
        self.tree_page_size = tree_page_size
        self.url = ""
        self.cdn_url = ""
        self.shared = SharedState()
        self._app = HubApp(self)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sockets: list[socket.socket] = []

    # Life cycle.

    def start(self) -> HubServer:
        if self._thread is not None:
            raise RuntimeError("HubServer already started")
        self._sockets = [_bind(self.host, self.port), _bind(self.host, self.cdn_port)]
        main, cdn = (s.getsockname()[1] for s in self._sockets)
        self.url = f"http://{self.host}:{main}"
        self.cdn_url = f"http://{self.host}:{cdn}"
        config = uvicorn.Config(
            self._app,
            http=protocol_class(self._app.connections),
            loop="asyncio",
            ws="none",
            lifespan="off",
            log_config=None,  # leave the process's logging alone
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        failure: list[BaseException] = []

        def run() -> None:
            assert self._server is not None
            try:
                self._server.run(sockets=self._sockets)
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)

        self._thread = threading.Thread(target=run, name="hub-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while not self._server.started:
            if failure or not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the hub server did not start: {failure[:1]}")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the server thread (idempotent)."""
        if self._server is None or self._thread is None:
            return
        self._app.stopping = True
        self._server.should_exit = True
        self._thread.join(10)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(10)
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._server = None
        self._thread = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Repos.

    def repo_state(self, repo_id: str) -> RepoState:
        state = self._app.state_now(repo_id)
        if state is None:
            raise KeyError(f"no repo folder {self.root / repo_id}")
        return state

    def repo_sha(self, repo_id: str) -> str:
        """The commit id `main` resolves to."""
        return self.repo_state(repo_id).sha

    def file_url(self, repo_id: str, path: str, revision: str = "main") -> str:
        return f"{self.url}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"

    def set_access(
        self,
        repo_id: str,
        *,
        private: bool = False,
        gated: bool = False,
        tokens: Collection[str] = (),
    ) -> None:
        """A private repo is "not found" without one of `tokens`; a gated one lists its files to
        anyone but serves them only with one of `tokens`. Both False: public again."""
        with self.shared.lock:
            if private or gated:
                self.shared.access[repo_id] = Access(private, gated, frozenset(tokens))
            else:
                self.shared.access.pop(repo_id, None)

    # Faults.

    def fault(
        self,
        path: str = "*",
        kind: FaultKind = "status",
        *,
        times: int | None = 1,
        repo: str | None = None,
        methods: Collection[str] | None = None,
        after_bytes: int | None = None,
        status: int = 503,
        retry_after: int | None = None,
        offset: int | None = None,
        extra_bytes: int = 16,
        bytes_per_second: float = 64 * 1024,
    ) -> Fault:
        """Declare a fault; it fires on the next `times` matching requests (None: on all).

        `path` is a glob on the file's path in the repo (resolve and CDN requests), or, when it
        starts with "/", on the request path (any request, e.g. "/api/models/*"). `repo`
        limits it to one repo id. `methods` defaults to GET for the body kinds, to any method
        for the others. The first unspent matching fault fires; one per request.

        Kinds:
        - "drop": send `after_bytes` of the body (default half), then reset the connection.
        - "truncate": announce the full Content-Length, send `after_bytes` (default half),
          then close the connection cleanly.
        - "status": answer `status` (e.g. 500, 502, 503), with `Retry-After` if `retry_after`.
        - "rate_limit": answer 429 with `Retry-After: retry_after` (default 0) and the hub's
          `RateLimit` headers.
        - "flip": serve the byte at file offset `offset` (default: the middle) inverted; fires
          only on a response that contains that byte.
        - "grow": serve the file with `extra_bytes` appended, as if it grew after the HEAD.
        - "slow": trickle the body at `bytes_per_second`.
        """
        fault = Fault(
            path=path,
            kind=kind,
            times=times,
            repo=repo,
            methods=methods,
            after_bytes=after_bytes,
            status=status,
            retry_after=retry_after,
            offset=offset,
            extra_bytes=extra_bytes,
            bytes_per_second=bytes_per_second,
        )  # checks the parameters
        with self.shared.lock:
            fault.id = self.shared.next_fault_id
            self.shared.next_fault_id += 1
            self.shared.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.shared.lock:
            self.shared.faults.clear()

    @property
    def faults(self) -> list[Fault]:
        with self.shared.lock:
            return [dataclasses.replace(f) for f in self.shared.faults]

    # The request log.

    @property
    def requests(self) -> list[RequestRecord]:
        """Every request answered so far (control requests excepted), oldest first."""
        with self.shared.lock:
            return [dataclasses.replace(r) for r in self.shared.log]

    def clear_requests(self) -> None:
        with self.shared.lock:
            self.shared.log.clear()

    def reset(self) -> None:
        """Faults, log and access rules back to none (for a server shared between tests)."""
        with self.shared.lock:
            self.shared.faults.clear()
            self.shared.log.clear()
            self.shared.access.clear()
