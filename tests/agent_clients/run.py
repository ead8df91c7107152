"""Runs agent-client cases against a `serve` URL in a client environment (tests/client_envs.py)
and prints one JSON report on stdout's last line:
`{case: {"result": ..., "error": "Type: message" | null, "exchanges": [...]}}`.

Usage: python run.py MODULE [MODULE ...], with OPENAI_BASE_URL and OPENAI_API_KEY set (every
client here reads them). Each MODULE (cases_*.py beside this file) has CASES, a dict of
functions returning JSON-able results. Every HTTP exchange a case makes is recorded (the request
body, the status, a JSON answer's body), so the test checks what went over the wire whatever the
client library made of it. Runs outside the app's environment: imports nothing of the app."""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from typing import Any

EXCHANGES: list[dict[str, Any]] = []


def _record(request: Any, response: Any) -> None:
    try:
        body = json.loads(request.content) if request.content else None
    except ValueError:
        body = None
    entry: dict[str, Any] = {
        "method": request.method,
        "path": request.url.path,
        "request": body,
        "status": response.status_code,
        "response": None,
    }
    if "application/json" in response.headers.get("content-type", ""):
        entry["response"] = json.loads(response.content)
    EXCHANGES.append(entry)


def _install_recorder() -> None:
    """Wrap httpx's (and httpx2's, which openai 3.x uses) send: every client library here sends
    through one of them. JSON answers are read whole (small); event streams are left alone."""
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        sync_send, async_send = module.Client.send, module.AsyncClient.send

        def send(self: Any, request: Any, *args: Any, _send: Any = sync_send, **kw: Any) -> Any:
            response = _send(self, request, *args, **kw)
            if "application/json" in response.headers.get("content-type", ""):
                response.read()
            _record(request, response)
            return response

        async def asend(
            self: Any, request: Any, *args: Any, _send: Any = async_send, **kw: Any
        ) -> Any:
            response = await _send(self, request, *args, **kw)
            if "application/json" in response.headers.get("content-type", ""):
                await response.aread()
            _record(request, response)
            return response

        module.Client.send = send
        module.AsyncClient.send = asend


def main(modules: list[str]) -> None:
    _install_recorder()
    report: dict[str, Any] = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        for case, function in module.CASES.items():
            EXCHANGES.clear()
            result, error = None, None
            try:
                result = function()
            except Exception as exc:  # the report says what failed; the test decides
                error = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
            report[case] = {"result": result, "error": error, "exchanges": list(EXCHANGES)}
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
