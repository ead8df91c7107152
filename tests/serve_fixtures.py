"""What the `serve` tests share: the demo model's copy they serve, and the tool definitions they
offer. The servers themselves are session fixtures in tests/integration/conftest.py (one process
per model and flags for the whole run), the clients `tests.remote_server.client_of`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME

#: The name the demo model's copy is served under (`serve` names a model by its folder).
CHAT_MODEL = "chat-model"


def copy_model(model: Path, parent: Path, name: str = CHAT_MODEL) -> Path:
    """`model` copied to `parent/name` without its build record, so the server treats the demo
    model as a full-size one of its own name and sends it the whole conversation (the demo,
    which a copy with the record still is, reads one request at a time)."""
    target = parent / name
    shutil.copytree(model, target, ignore=shutil.ignore_patterns(MANIFEST_NAME))
    return target


#: get_time(zone), zone one of two values: every forced call is short.
TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {
            "type": "object",
            "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
            "required": ["zone"],
        },
    },
}

#: get_weather(city, days) with bounded parameters, so every forced call fits a token budget.
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 12},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
        },
    },
}


def described(tool: dict[str, Any], description: str) -> dict[str, Any]:
    """`tool` with a description (placed before its parameters, as a client writes it)."""
    function = tool["function"]
    return {
        "type": "function",
        "function": {"name": function["name"], "description": description, **function},
    }


def flat(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions tool in the Responses API's flat shape."""
    return {"type": "function", **tool["function"]}
