"""The API server's example request asks what the model answers well (issue 44, minor 13)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from qwen_mtp_desktop.core.chat.turns import DEMO_EXAMPLES, GENERAL_EXAMPLES
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.server.examples import curl_example, model_id_for


def _asked(model_id: str) -> str:
    words = shlex.split(curl_example("http://127.0.0.1:8000", model_id, None).replace("\\\n", " "))
    body = json.loads(words[words.index("-d") + 1])
    assert body["model"] == model_id
    (message,) = body["messages"]
    assert message["role"] == "user"
    return str(message["content"])


def test_the_example_is_the_demo_models_own_or_an_everyday_task() -> None:
    demo = model_id_for(demo_model_dir())
    assert _asked(demo) == DEMO_EXAMPLES[0]  # it only counts and repeats
    real = model_id_for(Path("/models/Qwen3.5-0.8B/openvino"))
    assert real == "Qwen3.5-0.8B" and _asked(real) == GENERAL_EXAMPLES[0]
    assert _asked("MODEL") == GENERAL_EXAMPLES[0]  # no model loaded yet
