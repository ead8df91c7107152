"""Serving the API with uvicorn: in a background thread (`start_server_thread`, for the app's
engine host) or in the foreground until Ctrl+C (`run_server`, for `qwen-mtp-desktop serve`).

The socket is bound here, before uvicorn starts, so a port that is taken fails at once with a
clear message, and port 0 (any free port) gives the real URL back. Binding to anything but
loopback needs an API key: a server reachable from the network without one would hand the
model (and the machine's CPU) to anyone on it. Connections are served by
`server.http.connections`' guarded protocol: slow headers and bodies time out, and the number of
connections stays within what the file-descriptor limit allows.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.hosting.protocol import ApiRequest
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.server.app import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_STREAM_INTERVAL_S,
    LOOPBACK_NAMES,
    create_app,
)
from qwen_mtp_desktop.server.generation.state import Activity
from qwen_mtp_desktop.server.generation.turns import TurnDefaults
from qwen_mtp_desktop.server.http.connections import (
    BACKLOG,
    ConnectionLimits,
    connection_limit,
    guarded_protocol,
)
from qwen_mtp_desktop.server.http.request_budget import DEFAULT_BUDGET_BYTES

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Seconds a stopping server waits for open connections after cancelling their turns.
GRACEFUL_SHUTDOWN_S = 3.0
STARTUP_TIMEOUT_S = 30.0


class ServerConfigError(UserFacingError):
    """The server cannot start as configured (non-loopback without a key, port taken...)."""

    code = "SERVER_CONFIG"


@dataclass(frozen=True)
class ServerConfig:
    host: str = DEFAULT_HOST
    #: 0 picks a free port (the handle's `url` tells which).
    port: int = DEFAULT_PORT
    api_key: str | None = None
    #: The id clients use; None follows the loaded model folder (server.app.model_id_for).
    model_id: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    defaults: TurnDefaults = field(default_factory=TurnDefaults)
    stream_interval_s: float = DEFAULT_STREAM_INTERVAL_S
    #: uvicorn's access log (one line per request) on the app's logger.
    access_log: bool = False
    #: Request bodies arriving and requests waiting for the engine hold at most this much.
    memory_budget_bytes: int = DEFAULT_BUDGET_BYTES
    #: Header and body timeouts; None: the defaults, with as many connections as the
    #: file-descriptor limit allows (server.http.connections.connection_limit).
    connection_limits: ConnectionLimits | None = None
    #: Called (on the server's thread) with a record of each answered request.
    on_request: Callable[[ApiRequest], None] | None = field(default=None, compare=False)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_config(config: ServerConfig) -> None:
    """Raise ServerConfigError for a configuration that must not start."""
    if not is_loopback(config.host) and not config.api_key:
        raise ServerConfigError(
            f"Refusing to listen on {config.host} without an API key: anyone who can reach "
            "this machine could use the model.",
            "Pass --api-key KEY (clients send 'Authorization: Bearer KEY'), or keep the "
            "default host 127.0.0.1.",
            code="NEEDS_API_KEY",
        )
    if config.api_key is not None and (
        not config.api_key.strip() or config.api_key != config.api_key.strip()
    ):
        raise ServerConfigError(
            "The API key must not be empty or begin or end with spaces.", code="BAD_API_KEY"
        )
    if not 0 <= config.port <= 65535:
        raise ServerConfigError(f"Port {config.port} is not in 0-65535.", code="BAD_PORT")


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port; ServerConfigError with the reason when it fails."""
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_NUMERICSERV
        )
    except socket.gaierror as exc:
        raise ServerConfigError(
            f"Cannot listen on {host}: {exc.strerror}.",
            "Give an IP address of this machine, or localhost.",
            code="BAD_HOST",
        ) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServerConfigError(
                f"Port {port} on {host} is already in use (another server is running there).",
                "Choose another port with --port, or 0 for any free one.",
                code="PORT_IN_USE",
            ) from exc
        raise ServerConfigError(
            f"Cannot listen on {host}:{port}: {exc.strerror or exc}.",
            "Choose another host or port (ports below 1024 need administrator rights).",
            code="BIND_FAILED",
        ) from exc
    sock.set_inheritable(True)
    return sock


def _http_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def url_of(sock: socket.socket) -> str:
    """The URL a client on this machine connects to (a wildcard bind is reached on loopback)."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return _http_url(host, port)


def network_urls(sock: socket.socket) -> list[str]:
    """The URLs other machines use, when the socket listens on every address (0.0.0.0 or ::):
    one per non-loopback address of this machine's interfaces; empty otherwise."""
    host, port = sock.getsockname()[:2]
    if host not in ("0.0.0.0", "::"):
        return []
    import psutil

    family = socket.AF_INET if host == "0.0.0.0" else socket.AF_INET6
    urls = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            ip = address.address.split("%")[0]
            if address.family != family or is_loopback(ip):
                continue
            if family == socket.AF_INET6 and ipaddress.ip_address(ip).is_link_local:
                continue
            urls.append(_http_url(ip, port))
    return sorted(set(urls))


def build_app(service: EngineService, config: ServerConfig) -> FastAPI:
    check_config(config)
    hosts = None
    if is_loopback(config.host):
        hosts = [*LOOPBACK_NAMES, config.host.strip("[]")]
    return create_app(
        service,
        config.model_id,
        api_key=config.api_key,
        max_body_bytes=config.max_body_bytes,
        defaults=config.defaults,
        stream_interval_s=config.stream_interval_s,
        allowed_hosts=hosts,
        memory_budget_bytes=config.memory_budget_bytes,
        on_request=config.on_request,
    )


def _uvicorn_server(app: FastAPI, config: ServerConfig) -> uvicorn.Server:
    limits = config.connection_limits or ConnectionLimits(max_connections=connection_limit())
    log.info("API server: at most %d connections", limits.max_connections)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            http=guarded_protocol(limits),
            backlog=BACKLOG,
            log_config=None,  # keep the app's logging set-up
            access_log=config.access_log,
            timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
            lifespan="off",
            server_header=False,
        )
    )


class ServerHandle:
    """A server running on a background thread: `url`, `stop()`."""

    def __init__(
        self, server: uvicorn.Server, thread: threading.Thread, sock: socket.socket, app: FastAPI
    ) -> None:
        self._server = server
        self._thread = thread
        self._sock = sock
        self.app = app
        self.url = url_of(sock)
        #: For a server listening on every address: where other machines reach it.
        self.network_urls = network_urls(sock)

    @property
    def activity(self) -> Activity:
        activity: Activity = self.app.state.activity
        return activity

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel every turn, close the connections and wait for the thread (idempotent)."""
        self.activity.cancel_all()
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        with contextlib.suppress(OSError):
            self._sock.close()


def start_server_thread(service: EngineService, config: ServerConfig) -> ServerHandle:
    """Serve on a daemon thread; returns once the server accepts connections."""
    app = build_app(service, config)
    sock = bind_socket(config.host, config.port)
    server = _uvicorn_server(app, config)
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported to start_server_thread's caller
            log.exception("the API server stopped with an error")
            failure.append(exc)

    thread = threading.Thread(target=serve, name="api-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(5)
            sock.close()
            reason = f": {failure[0]}" if failure else ""
            raise ServerConfigError(f"The API server did not start{reason}.", code="NO_START")
        time.sleep(0.01)
    log.info("API server listening on %s", url_of(sock))
    return ServerHandle(server, thread, sock, app)


def run_server(
    service: EngineService, config: ServerConfig, sock: socket.socket | None = None
) -> None:
    """Serve in the foreground until Ctrl+C (or SIGTERM); turns in flight are cancelled.
    `sock`: already bound by the caller (to print the URL first); else bound here."""
    app = build_app(service, config)
    sock = sock or bind_socket(config.host, config.port)
    server = _uvicorn_server(app, config)
    activity: Activity = app.state.activity

    original = server.handle_exit

    def handle_exit(sig: int, frame: object) -> None:
        # A long answer must not hold Ctrl+C up. Not here: this runs as a signal handler on
        # the loop's thread, which may hold the activity lock.
        threading.Thread(target=activity.cancel_all, name="api-stop", daemon=True).start()
        original(sig, frame)  # type: ignore[arg-type]

    server.handle_exit = handle_exit  # type: ignore[method-assign]
    try:
        server.run(sockets=[sock])
    finally:
        activity.cancel_all()
        sock.close()
