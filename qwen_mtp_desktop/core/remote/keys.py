"""API keys of remote endpoints: in the OS keychain through `keyring`, else in memory only.

Keys are never written to the endpoints file, the settings or the log. Without a usable
keychain (a headless Linux without a Secret Service, `keyring` missing or failing) a key is
kept in this process only and forgotten when it ends; `KeyStore.where` says which, in words the
UI shows beside the key field.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

SERVICE = "qwen-mtp-desktop remote endpoint"
#: The keychain service of the hub token (core.models.export.hub.hub_token).
HUB_SERVICE = "qwen-mtp-desktop hub token"
MEMORY_ONLY = (
    "No system keychain was found, so the key is kept only until the app closes "
    "(enter it again next time)."
)


def _keyring_backend() -> Any | None:
    """The keyring backend when it can store secrets, else None."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken backend configuration: no keychain
        log.warning("the keyring backend could not be opened", exc_info=True)
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    return backend


class KeyStore:
    """get/set/delete an endpoint's key by its id. Thread-safe as keyring is."""

    def __init__(
        self, backend: Any | None = None, *, use_keychain: bool = True, service: str = SERVICE
    ) -> None:
        self._backend = (
            backend if backend is not None else (_keyring_backend() if use_keychain else None)
        )
        self._service = service
        self._memory: dict[str, str] = {}

    @property
    def keychain(self) -> bool:
        """Whether keys outlive the app (an OS keychain is in use)."""
        return self._backend is not None

    @property
    def where(self) -> str:
        if self._backend is None:
            return MEMORY_ONLY
        name = getattr(self._backend, "name", type(self._backend).__name__)
        return f"The key is stored in the system keychain ({name})."

    def get(self, endpoint_id: str) -> str | None:
        if endpoint_id in self._memory:
            return self._memory[endpoint_id]
        if self._backend is None:
            return None
        try:
            value = self._backend.get_password(self._service, endpoint_id)
        except Exception as exc:  # a locked or broken keychain: say so, never the key
            log.warning("reading a key from the keychain failed: %s", type(exc).__name__)
            return None
        return value if isinstance(value, str) else None

    def set(self, endpoint_id: str, key: str) -> None:
        """Keep `key`: in the keychain when there is one (else, or if it fails, in memory)."""
        if self._backend is not None:
            try:
                self._backend.set_password(self._service, endpoint_id, key)
                self._memory.pop(endpoint_id, None)
                return
            except Exception as exc:
                log.warning(
                    "the keychain refused the key (%s); keeping it in memory only",
                    type(exc).__name__,
                )
        self._memory[endpoint_id] = key

    def delete(self, endpoint_id: str) -> None:
        self._memory.pop(endpoint_id, None)
        if self._backend is None:
            return
        try:
            self._backend.delete_password(self._service, endpoint_id)
        except Exception:  # not there, or the keychain is locked: nothing more to do
            log.debug("no key to delete from the keychain for an endpoint")
