"""Copyable examples of using the local API server, for `serve`'s banner and the app's settings.

Plain strings only: importing this module loads no web stack, so the window can show the
example without fastapi or uvicorn in its process.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from qwen_mtp_desktop.core.model_library import is_demo_model

#: Read by `serve` when --api-key is not given, so the key need not show in the process list.
API_KEY_ENV = "QWEN_MTP_API_KEY"


def model_id_for(model_dir: Path) -> str:
    """The id clients use for a model folder: its name ("demo-model" for the bundled demo)."""
    return "demo-model" if is_demo_model(model_dir) else model_dir.name


def curl_example(url: str, model_id: str, api_key: str | None) -> str:
    """A request that works against the server at `url` (no trailing /v1), as a shell command.
    `api_key` goes in double quotes, so "$VARIABLE" works as well as the key itself."""
    body = json.dumps(
        {"model": model_id, "messages": [{"role": "user", "content": "Count from 1 to 10."}]}
    )
    lines = [f"curl {url}/v1/chat/completions", "-H 'Content-Type: application/json'"]
    if api_key:
        lines.append(f'-H "Authorization: Bearer {api_key}"')
    lines.append(f"-d {shlex.quote(body)}")
    return " \\\n  ".join(lines)
