"""The chat's remote models: the saved endpoints (servers on other machines) and their keys.

`RemoteModels` keeps the endpoint list (read and written on the chat store's thread, with the
keychain, whose calls can block on D-Bus) and lists a server's models on a thread of its own;
`is_remote` tells a model path naming an endpoint (core.remote.endpoints.remote_ref) from a
local folder. Turns to a remote model run through `workers.model_router.ModelRouter`. The GUI
thread never touches the network or the keychain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from qwen_mtp_desktop.core.engine import EngineError
from qwen_mtp_desktop.core.errors import as_user_error
from qwen_mtp_desktop.core.remote.endpoints import (
    RemoteEndpoint,
    endpoint_id,
    load_endpoints,
    save_endpoints,
)
from qwen_mtp_desktop.core.remote.keys import KeyStore
from qwen_mtp_desktop.workers.tasks import TaskRunner


def is_remote(model_dir: Path | str) -> bool:
    return endpoint_id(model_dir) is not None


class RemoteModels(QObject):
    """The saved remote endpoints. Signals:
    changed(): the list was loaded or changed (`endpoints`).
    problem(str): the saved list was damaged (what was skipped), or a save failed.
    """

    changed = Signal()
    problem = Signal(str)

    def __init__(self, io: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._io = io
        self._probe: TaskRunner | None = None
        self.endpoints: list[RemoteEndpoint] = []
        self.loaded = False
        #: Opened on first use, off the GUI thread (the keychain may answer over D-Bus), so a
        #: user who never adds a server never touches it.
        self._keys: KeyStore | None = None
        self._keys_lock = threading.Lock()
        self._io.submit(self._open, self._on_opened, self._on_failed)

    @staticmethod
    def _open() -> tuple[list[RemoteEndpoint], list[str]]:
        loaded = load_endpoints()
        return loaded.endpoints, loaded.problems

    def _on_opened(self, opened: tuple[list[RemoteEndpoint], list[str]]) -> None:
        self.endpoints, problems = opened
        self.loaded = True
        self.changed.emit()
        for text in problems:
            self.problem.emit(text)

    def _on_failed(self, exc: Exception) -> None:
        self.loaded = True
        self.problem.emit(str(as_user_error(exc, EngineError)))
        self.changed.emit()

    def find(self, ident: str) -> RemoteEndpoint | None:
        return next((e for e in self.endpoints if e.id == ident), None)

    def key_store(self) -> KeyStore:
        """The API key store, opened on first use. Blocking: call it off the GUI thread."""
        with self._keys_lock:
            if self._keys is None:
                self._keys = KeyStore()
            return self._keys

    @property
    def key_note(self) -> str:
        """Where keys are kept, for the dialog (empty until the key store was opened)."""
        keys = self._keys
        return keys.where if keys is not None else ""

    def probe_keys(self, done: Callable[[str], None]) -> None:
        """Open the key store off the GUI thread, then `done(where keys are kept)`."""
        self._io.submit(lambda: self.key_store().where, done)

    def save(self, endpoint: RemoteEndpoint, key: str | None, *, keep_key: bool) -> None:
        """Add or replace `endpoint`. `key`: the new API key (None: none); `keep_key`: leave the
        stored key as it is."""
        has_key = endpoint.has_key if keep_key else bool(key)
        saved = RemoteEndpoint(
            endpoint.id, endpoint.name, endpoint.base_url, endpoint.model, has_key
        )
        others = [e for e in self.endpoints if e.id != saved.id]
        position = next((i for i, e in enumerate(self.endpoints) if e.id == saved.id), None)
        new = others[:]
        new.insert(len(others) if position is None else position, saved)
        self.endpoints = new
        self.changed.emit()

        def write() -> None:
            if not keep_key:
                if key:
                    self.key_store().set(saved.id, key)
                else:
                    self.key_store().delete(saved.id)
            save_endpoints(new)

        self._io.submit(write, None, self._on_save_failed)

    def remove(self, ident: str) -> None:
        self.endpoints = [e for e in self.endpoints if e.id != ident]
        remaining = list(self.endpoints)
        self.changed.emit()

        def write() -> None:
            self.key_store().delete(ident)
            save_endpoints(remaining)

        self._io.submit(write, None, self._on_save_failed)

    def _on_save_failed(self, exc: Exception) -> None:
        self.problem.emit(f"The remote servers could not be saved: {exc}")

    def fetch_models(
        self,
        endpoint: RemoteEndpoint,
        key: str | None,
        on_done: Callable[[list[str]], None],
        on_error: Callable[[Exception], None],
        *,
        stored_key: bool = False,
    ) -> None:
        """The server's models (GET /models), off the GUI thread. `stored_key`: use the key
        kept for `endpoint` instead of `key`."""
        if self._probe is None:
            self._probe = TaskRunner("remote-probe", self)

        def fetch() -> list[str]:
            from qwen_mtp_desktop.core.remote.client import list_models

            use = self.key_store().get(endpoint.id) if stored_key else key
            return list_models(endpoint, use)

        self._probe.submit(fetch, on_done, on_error)

    def shutdown(self, timeout_ms: int = 15_000) -> bool:
        return self._probe.shutdown(timeout_ms) if self._probe is not None else True
