"""What the API's routes share: the engine service, the served model's id, the turn defaults,
the memory budget, the request counters (`Activity`) and Auto's state.

`create_app` (server.app) builds one `ServerState`; the route modules (server.model_routes,
chat_route, completions_route, responses_routes) read it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.chat.generation_defaults import read_generation_defaults
from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.hosting.service import EngineService
from qwen_mtp_desktop.core.models.library import is_demo_model
from qwen_mtp_desktop.core.prompt.context_limit import context_length
from qwen_mtp_desktop.server.examples import model_id_for
from qwen_mtp_desktop.server.generation.turns import AutoState, TurnDefaults, TurnJob
from qwen_mtp_desktop.server.http.errors import NOT_FOUND, SERVER_ERROR, ApiError
from qwen_mtp_desktop.server.http.request_budget import MemoryBudget


@dataclass
class Activity:
    """What the server has done, for `/health` and for tests (thread-safe)."""

    completed: int = 0
    cancelled: int = 0
    failed: int = 0
    rejected: int = 0
    #: (request id, finish reason, completion tokens) of the latest requests.
    recent: deque[tuple[str, str, int]] = field(default_factory=lambda: deque(maxlen=64))
    jobs: set[TurnJob] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(self, request_id: str, reason: str, tokens: int) -> None:
        with self.lock:
            if reason == "cancelled":
                self.cancelled += 1
            else:
                self.completed += 1
            self.recent.append((request_id, reason, tokens))

    def count(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {
                "completed": self.completed,
                "cancelled": self.cancelled,
                "failed": self.failed,
                "rejected": self.rejected,
            }

    def cancel_all(self) -> None:
        """Stop every running and waiting turn (the server is stopping)."""
        with self.lock:
            jobs = list(self.jobs)
        for job in jobs:
            job.cancel()


@dataclass
class ServerState:
    """One app's shared state (server.app.create_app builds it)."""

    service: EngineService
    #: The id clients use; None follows the loaded model folder (examples.model_id_for).
    model_id: str | None
    defaults: TurnDefaults
    max_body_bytes: int
    stream_interval_s: float
    budget: MemoryBudget
    activity: Activity = field(default_factory=Activity)
    auto: AutoState = field(default_factory=AutoState)
    created: int = field(default_factory=lambda: int(time.time()))
    # Read once per model folder (the files do not change while it is served).
    _limits: dict[Path, int | None] = field(default_factory=dict)
    _sampling: dict[Path, Sampling | None] = field(default_factory=dict)

    def context_limit(self, model_dir: Path) -> int | None:
        if model_dir not in self._limits:
            self._limits[model_dir] = context_length(model_dir)
        return self._limits[model_dir]

    def model_sampling(self, model_dir: Path) -> Sampling | None:
        if model_dir not in self._sampling:
            self._sampling[model_dir] = (
                read_generation_defaults(model_dir).sampling
                if self.defaults.model_sampling
                else None
            )
        return self._sampling[model_dir]

    def current_model(self) -> tuple[str, Path] | None:
        loaded = self.service.engine.loaded
        if loaded is None:
            return None
        return (self.model_id or model_id_for(loaded.model_dir)), loaded.model_dir

    def model_object(self, name: str) -> dict[str, Any]:
        loaded = self.service.engine.loaded
        return {
            "id": name,
            "object": "model",
            "created": self.created,
            "owned_by": "local",
            "mtp": loaded.mtp if loaded is not None else False,
            "device": loaded.device if loaded is not None else None,
            # The demo model reads only the latest message (examples.demo_single_turn).
            "single_turn": loaded is not None and is_demo_model(loaded.model_dir),
        }

    def served(self, requested: str) -> tuple[str, Path]:
        """The served model's (id, folder), when `requested` names it."""
        current = self.current_model()
        if current is None:
            raise ApiError(503, "No model is loaded.", type=SERVER_ERROR, code="model_not_loaded")
        if requested != current[0]:
            raise unknown_model(requested, current)
        return current


def unknown_model(name: str, current: tuple[str, Path] | None) -> ApiError:
    shown = name if len(name) <= 80 else name[:77] + "..."
    served = f"this server serves {current[0]!r}" if current else "no model is loaded"
    return ApiError(
        404,
        f"The model {shown!r} does not exist here; {served} (see GET /v1/models).",
        type=NOT_FOUND,
        code="model_not_found",
        param="model",
    )
