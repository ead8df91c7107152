"""Simon Willison's `llm` 0.36, with the server as an extra OpenAI-compatible model
(extra-openai-models.yaml): a chat through the `llm` command, and a tool call through its Python
API's chain (the call made, the tool run, its result answered)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import shared

HOME = Path(tempfile.mkdtemp(prefix="llm-home-"))
os.environ["LLM_USER_PATH"] = str(HOME)  # before llm reads it: no user's settings, keys or logs
(HOME / "extra-openai-models.yaml").write_text(
    f"- model_id: {shared.MODEL}\n"
    f"  model_name: {shared.MODEL}\n"
    f"  api_base: {shared.URL}\n"
    "  api_key_name: openai\n"  # the key from OPENAI_API_KEY
    "  supports_tools: true\n"
    "  supports_schema: true\n"
)

import llm  # noqa: E402


def chat() -> dict[str, Any]:
    command = [sys.executable, "-m", "llm", "-m", shared.MODEL, "--no-log", "Hello!"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    return {"returncode": result.returncode, "stdout": result.stdout, "stderr": result.stderr}


def tool_call() -> dict[str, Any]:
    model = llm.get_model(shared.MODEL)
    chain = model.chain("What is the weather in Paris?", tools=[shared.add, shared.get_weather])
    responses = list(chain.responses())  # runs the chain once: the call, then the answer
    return {
        "text": responses[-1].text(),
        "calls": shared.calls(),
        "usage": [
            {"input": usage.input, "output": usage.output}
            for usage in (response.usage() for response in responses)
        ],
    }


CASES = {"llm_chat": chat, "llm_tool_call": tool_call}
