"""The local OpenAI-compatible API server (FastAPI + uvicorn) over `core.hosting.service`.

- `create_app(service, ...)`: the ASGI app (app.py);
- `start_server_thread(service, config) -> ServerHandle` (`.url`, `.stop()`), for a process that
  has its own main loop (the app's engine host); `run_server(service, config)` blocks until
  Ctrl+C, for `qwen-mtp-desktop serve` (runner.py);
- request bodies (schema.py), OpenAI-style errors (errors.py), image parts (images.py), one
  request's turn on its own thread and the `mtp` statistics object (turns.py);
- the curl example the banner and the app show (examples.py: no web stack).

It imports core only; core knows nothing of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qwen_mtp_desktop.server.app import create_app
    from qwen_mtp_desktop.server.examples import model_id_for
    from qwen_mtp_desktop.server.runner import (
        ServerConfig,
        ServerConfigError,
        ServerHandle,
        check_config,
        is_loopback,
        run_server,
        start_server_thread,
    )
    from qwen_mtp_desktop.server.turns import TurnDefaults

#: Loaded on first use, so `server.examples` (the window's curl example) needs no web stack.
_EXPORTS = {
    "create_app": "app",
    "model_id_for": "examples",
    "ServerConfig": "runner",
    "ServerConfigError": "runner",
    "ServerHandle": "runner",
    "check_config": "runner",
    "is_loopback": "runner",
    "run_server": "runner",
    "start_server_thread": "runner",
    "TurnDefaults": "turns",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "ServerConfig",
    "ServerConfigError",
    "ServerHandle",
    "TurnDefaults",
    "check_config",
    "create_app",
    "is_loopback",
    "model_id_for",
    "run_server",
    "start_server_thread",
]
