"""Faults on demand and the request log: what a test declares, which request a fault hits, and
the state the server thread shares with the test (all under one lock)."""

from __future__ import annotations

import dataclasses
import fnmatch
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    from .repos import RepoState

FaultKind = Literal["drop", "truncate", "status", "rate_limit", "flip", "grow", "slow"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
#: Kinds that change a response's body; they fire only on a GET that sends file (or JSON) bytes.
BODY_KINDS = frozenset({"drop", "truncate", "flip", "grow", "slow"})


@dataclass
class Fault:
    """One declared fault (see `HubServer.fault`). `fired` counts the requests it has hit."""

    path: str
    kind: FaultKind
    times: int | None = 1
    repo: str | None = None
    methods: Collection[str] | None = None
    after_bytes: int | None = None
    status: int = 503
    retry_after: int | None = None
    offset: int | None = None
    extra_bytes: int = 16
    bytes_per_second: float = 64 * 1024
    id: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            kinds = ", ".join(FAULT_KINDS)
            raise ValueError(f"unknown fault kind {self.kind!r}; kinds: {kinds}")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be at least 1 (or None for always)")
        if self.kind == "status" and not 400 <= self.status <= 599:
            raise ValueError(f"status fault needs an HTTP error status, got {self.status}")
        if self.kind == "slow" and self.bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be positive")
        if self.after_bytes is not None and self.after_bytes < 0:
            raise ValueError("after_bytes must not be negative")
        if self.methods is None and self.kind in BODY_KINDS:
            self.methods = {"GET"}  # HEAD has no body to break
        if self.methods is not None:
            self.methods = frozenset(m.upper() for m in self.methods)

    @property
    def spent(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["methods"] = sorted(self.methods) if self.methods is not None else None
        return data


@dataclass
class RequestRecord:
    """One request as the server saw and answered it."""

    method: str
    path: str
    query: str
    host: str | None
    range: str | None
    authorization: str | None
    status: int = 0
    bytes_sent: int = 0
    fault: str | None = None

    @property
    def cdn(self) -> bool:
        return self.path.startswith("/cdn/")


@dataclass
class Access:
    private: bool
    gated: bool
    tokens: frozenset[str]


@dataclass
class SharedState:
    """What the server thread and the test share; every field under `lock`."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    faults: list[Fault] = field(default_factory=list)
    log: list[RequestRecord] = field(default_factory=list)
    access: dict[str, Access] = field(default_factory=dict)
    repos: dict[str, RepoState] = field(default_factory=dict)
    next_fault_id: int = 1


def covers(span: tuple[int, int] | None, offset: int) -> bool:
    """Whether a body that spans `span` (None: unknown) holds file offset `offset`."""
    return span is None or span[0] <= offset <= span[1]


def take_fault(
    shared: SharedState,
    *,
    method: str,
    path: str,
    repo: str | None,
    file: str | None,
    body: bool,
    span: tuple[int, int] | None = None,
    size: int = 0,
) -> Fault | None:
    """The fault a request gets (a body fault: for body bytes `span` of `size`), counted as
    fired. `path` is the request path, `file` the path in the repo it is about (if any)."""
    with shared.lock:
        for fault in shared.faults:
            if fault.spent or (fault.kind in BODY_KINDS) != body:
                continue
            if fault.methods is not None and method not in fault.methods:
                continue
            if fault.repo is not None and fault.repo != repo:
                continue
            subject = path if fault.path.startswith("/") else file
            if subject is None or not fnmatch.fnmatchcase(subject, fault.path):
                continue
            offset = fault.offset if fault.offset is not None else size // 2
            if fault.kind == "flip" and not covers(span, offset):
                continue
            fault.fired += 1
            return fault
    return None
