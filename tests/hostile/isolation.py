"""Run a hostile-input case in a child process under a memory limit and a time limit, so a
regression fails the test (non-zero exit, MemoryError, timeout) instead of exhausting the
machine or hanging the suite.

    python -m tests.hostile.isolation MODULE:FUNCTION JSON_ARGS

The child sets its limit with resource.setrlimit before importing the case, runs
FUNCTION(**args) and prints its JSON result on the last line after RESULT_MARK.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

RESULT_MARK = "HOSTILE-RESULT "


@dataclass(frozen=True)
class ChildOutcome:
    result: dict[str, Any]
    seconds: float


def run_isolated(
    target: str,
    *,
    timeout_s: float,
    memory_mb: int,
    limit: str = "data",
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """The case's result; AssertionError with the child's output for a crash, a hang
    (timeout) or a failed property. `limit`: "as" (address space, for pure Python) or "data"
    (heap: Qt and OpenVINO reserve large address ranges they never use)."""
    child_env = {**os.environ, **(env or {}), "PYTHONPATH": str(REPO_ROOT)}
    command = [
        sys.executable,
        "-m",
        "tests.hostile.isolation",
        target,
        json.dumps(kwargs),
        str(memory_mb),
        limit,
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=child_env,
            cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"HANG: {target} ran longer than {timeout_s} s\n{exc.stdout}\n{exc.stderr}"
        ) from None
    tail = f"\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-6000:]}"
    if done.returncode < 0:
        raise AssertionError(f"CRASH: {target} died of signal {-done.returncode}{tail}")
    assert done.returncode == 0, f"{target} failed (exit {done.returncode}){tail}"
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    assert lines, f"{target} printed no result{tail}"
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    return result


def _child(target: str, args: str, memory_mb: str, limit: str) -> None:
    which = resource.RLIMIT_AS if limit == "as" else resource.RLIMIT_DATA
    cap = int(memory_mb) * 1024 * 1024
    resource.setrlimit(which, (cap, cap))
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import importlib

    module_name, function_name = target.split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    result = function(**json.loads(args))
    print(RESULT_MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    _child(*sys.argv[1:5])
