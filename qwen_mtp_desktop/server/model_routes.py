"""`GET /health` (liveness, the queue and the request counters; served without the API key,
it tells nothing private), `GET /v1/models` and `GET /v1/models/{id}` (the loaded model)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from qwen_mtp_desktop.server.generation.state import ServerState, unknown_model


def add_model_routes(app: FastAPI, state: ServerState) -> None:
    @app.get("/health")
    async def health() -> dict[str, Any]:
        current = state.current_model()
        return {
            "status": "ok",
            "model": current[0] if current else None,
            "busy": state.service.busy,
            "waiting": state.service.waiting,
            **state.activity.snapshot(),
        }

    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        current = state.current_model()
        return {"object": "list", "data": [state.model_object(current[0])] if current else []}

    @app.get("/v1/models/{name:path}")
    async def get_model(name: str) -> dict[str, Any]:
        current = state.current_model()
        if current is None or name != current[0]:
            raise unknown_model(name, current)
        return state.model_object(name)
