"""The local OpenAI-compatible API server (FastAPI + uvicorn) over `core.engine_service`.

- `create_app(service, ...)`: the ASGI app (app.py);
- `start_server_thread(service, config) -> ServerHandle` (`.url`, `.stop()`), for a process that
  has its own main loop (the app's engine host); `run_server(service, config)` blocks until
  Ctrl+C, for `qwen-mtp-desktop serve` (runner.py);
- request bodies (schema.py), OpenAI-style errors (errors.py), image parts (images.py), one
  request's turn on its own thread and the `mtp` statistics object (turns.py).

It imports core only; core knows nothing of it.
"""

from __future__ import annotations

from qwen_mtp_desktop.server.app import create_app, model_id_for
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
