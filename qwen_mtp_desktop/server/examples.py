"""Copyable examples of using the local API server, for `serve`'s banner and the app's settings.

Plain strings only: importing this module loads no web stack, so the window can show the
example without fastapi or uvicorn in its process.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from qwen_mtp_desktop.core.chat.turns import DEMO_SINGLE_TURN_NOTE, example_prompts, single_turn
from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.core.models.library import is_demo_model

#: Read by `serve` when --api-key is not given, so the key need not show in the process list.
API_KEY_ENV = "QWEN_MTP_API_KEY"


#: Folder names that say how a model is stored, not which model it is ("demo-model/openvino",
#: "Qwen3.5-0.8B/ov"): the model's own name is its parent folder's.
GENERIC_FOLDER_NAMES = frozenset(
    {"openvino", "ov", "ir", "model", "models", "export", "exported", "output", "out"}
)
DEMO_MODEL_ID = "demo-model"
#: On an answer from the demo model that left earlier messages out.
SINGLE_TURN_HEADER = "X-Single-Turn"
#: What `serve` says at start for the demo model.
SINGLE_TURN_BANNER = (
    "The demo model answers each request's last user message on its own (with the system "
    "prompt): it was trained on single requests, so earlier turns are left out, as the app's "
    f'chat does; such answers carry the header {SINGLE_TURN_HEADER}: 1 and a "notice".'
)


def single_turn_notice(left_out: int) -> str:
    """The `notice` of an answer for which the demo model read only the latest message."""
    what = (
        f"{left_out} earlier message was" if left_out == 1 else f"{left_out} earlier messages were"
    )
    return f"{DEMO_SINGLE_TURN_NOTE} {what} left out of this request."


def demo_single_turn(model_dir: Path, messages: list[Message]) -> tuple[list[Message], str | None]:
    """What the model reads, and the notice to send with the answer: the demo model reads the
    system prompt and the latest user message only, as the app's chat sends them (it was
    trained on single requests); any other model reads everything (notice None)."""
    if not is_demo_model(model_dir):
        return messages, None
    kept = single_turn(messages)
    if len(kept) == len(messages):
        return messages, None
    return kept, single_turn_notice(len(messages) - len(kept))


def model_id_for(model_dir: Path) -> str:
    """The id clients use for a model folder: the model's own name, "demo-model" for the
    bundled demo (wherever it is installed or copied, it sits in "demo-model/openvino"), the
    parent folder's name for a folder named after its format ("openvino", "ov", ...), else
    the folder's name."""
    if is_demo_model(model_dir):
        return DEMO_MODEL_ID
    path = Path(model_dir)
    name = path.name
    if name.lower() in GENERIC_FOLDER_NAMES and path.parent.name:
        return path.parent.name
    return name or "model"


def example_request(model_id: str) -> str:
    """A message the model answers well: the demo model's first example (it only counts and
    repeats), else an everyday task, as the chat's example chips offer (core.chat.turns)."""
    return example_prompts(model_id == DEMO_MODEL_ID)[0]


def curl_example(url: str, model_id: str, api_key: str | None) -> str:
    """A request that works against the server at `url` (no trailing /v1), as a shell command,
    asking what this model answers well (`example_request`). `api_key` goes in double quotes,
    so "$VARIABLE" works as well as the key itself."""
    message = {"role": "user", "content": example_request(model_id)}
    body = json.dumps({"model": model_id, "messages": [message]})
    lines = [f"curl {url}/v1/chat/completions", "-H 'Content-Type: application/json'"]
    if api_key:
        lines.append(f'-H "Authorization: Bearer {api_key}"')
    lines.append(f"-d {shlex.quote(body)}")
    return " \\\n  ".join(lines)
