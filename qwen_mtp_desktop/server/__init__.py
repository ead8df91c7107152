"""The local OpenAI-compatible API server (FastAPI + uvicorn) over `core.hosting.service`.

- `create_app(service, ...)`: the ASGI app (app.py);
- `start_server_thread(service, config) -> ServerHandle` (`.url`, `.stop()`), for a process that
  has its own main loop (the app's engine host); `run_server(service, config)` blocks until
  Ctrl+C, for `qwen-mtp-desktop serve` (runner.py);
- one package per endpoint: chat/ (`/v1/chat/completions`), completions/ (`/v1/completions`),
  responses/ (`/v1/responses`), each with its route and its answer's shape; model_routes.py for
  `/health` and `/v1/models`;
- generation/: what the generating endpoints share (request models, planning, the turn on its
  thread, the POST flow, streaming); http/: the plumbing no endpoint knows (errors in OpenAI's
  shape, the guard, connections, the memory budget, the request log);
- the curl example the banner and the app show (examples.py: no web stack).

It imports core only; core knows nothing of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qwen_mtp_desktop.server.app import create_app
    from qwen_mtp_desktop.server.examples import model_id_for
    from qwen_mtp_desktop.server.generation.turns import TurnDefaults
    from qwen_mtp_desktop.server.runner import (
        ServerConfig,
        ServerConfigError,
        ServerHandle,
        check_config,
        is_loopback,
        run_server,
        start_server_thread,
    )

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
    "TurnDefaults": "generation.turns",
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
