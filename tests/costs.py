"""What a test costs, said with markers, so a tier can leave the costly tests out.

- `model`: loads a real model in the test's own process (an `Engine`, the app's decoder, an
  OpenVINO IR read from disk). A child process that loads one is `subprocess`.
- `subprocess`: starts a child Python process (`serve`, the engine host, the exporter, the app,
  a stand-in server). A `git` or `uname` that a library runs is not counted.
- `export`: needs the export toolkit (torch, optimum-intel): builds or exports a checkpoint.
- `soak`: long repeated runs (kill and crash loops, long sessions, repeated faulted exports).
- `slow`: over ~5 s of work in the test's own process that no other marker names (many
  generated inputs, a long state machine).
- `gui`: real Qt widgets (offscreen); cheap enough for the fast tier.

A test gets them three ways: from its module's `pytestmark` or its own `@pytest.mark...`; from
the fixtures it uses, when a fixture is declared with `@costs(...)` (every test that uses it,
directly or through another fixture, is marked); and from the fixture names in `FIXTURE_COSTS`
(pytest-qt's `qtbot` means `gui`).

`make check` runs `-m FAST_TIER`. So that it stays fast, every test the fast tier would run is
watched while it runs (setup and call): if it loads a model, starts a child Python process or
builds a checkpoint (tests/models.py), it fails and names the marker it lacks. Tests marked
costly are not watched. To find what unmarked tests cost, run them with
`QWEN_MTP_COST_DISCOVER=costs.jsonl`: each stops at its first cost, written down as a JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

import pytest

#: Registered in pyproject.toml too (`--strict-markers`); these are the ones a tier leaves out.
COSTLY = ("model", "subprocess", "export", "soak", "slow")
FAST_TIER = " and ".join(f"not {name}" for name in COSTLY)

#: Fixtures defined outside this repository (or too widely shared to decorate) and what they cost.
FIXTURE_COSTS: dict[str, tuple[str, ...]] = {
    "qtbot": ("gui",),
    "qapp": ("gui",),
}

F = TypeVar("F", bound=Callable[..., Any])


def costs(*names: str) -> Callable[[F], F]:
    """Declare what a fixture costs; every test that uses it (even through other fixtures) gets
    these markers. Put it under `@pytest.fixture`."""
    unknown = set(names) - {*COSTLY, "gui"}
    assert not unknown, f"unknown costs {unknown}"

    def declare(function: F) -> F:
        function.__test_costs__ = (*getattr(function, "__test_costs__", ()), *names)  # type: ignore[attr-defined]
        return function

    return declare


def _fixture_costs(item: pytest.Item) -> set[str]:
    found: set[str] = set()
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        found.update(FIXTURE_COSTS.get(name, ()))
        definitions = info.name2fixturedefs.get(name, ()) if info is not None else ()
        for definition in definitions[-1:]:  # the one in force (a closer one overrides)
            function = getattr(definition.func, "__func__", definition.func)
            found.update(getattr(function, "__test_costs__", ()))
    return found


def mark(items: list[pytest.Item]) -> None:
    """Add the markers the fixtures of each test say it costs."""
    for item in items:
        have = {m.name for m in item.iter_markers()}
        for name in sorted(_fixture_costs(item) - have):
            item.add_marker(name)


# --- the audit: a test the fast tier runs must not pay what it is not marked with -------------

_lock = threading.Lock()
_seen: dict[str, str] | None = None  # cost -> what did it, while a fast-tier test runs
_current: str = ""  # the node id of the test being watched

#: `QWEN_MTP_COST_DISCOVER=costs.jsonl pytest ...` watches every test, stops it at its first cost
#: and writes one line per test and cost: how to find what an unmarked test costs, in minutes.
DISCOVER = os.environ.get("QWEN_MTP_COST_DISCOVER")


class CostFoundError(Exception):
    """Stops a test at its first cost in discovery mode. (Not a BaseException: pytest and its
    plugins expect a failed shared fixture to have raised an Exception. Code under test that
    swallows it only lets the test run on, and each cost it pays is still written down.)"""


def note(cost: str, what: str) -> None:
    """Record that the running test paid `cost` (tests/models.py calls this when it builds)."""
    with _lock:
        if _seen is None:
            return
        _seen.setdefault(cost, what)
        if DISCOVER:
            with Path(DISCOVER).open("a", encoding="utf-8") as out:
                out.write(json.dumps({"test": _current, "cost": cost, "what": what}) + "\n")
    if DISCOVER and threading.current_thread() is threading.main_thread():
        raise CostFoundError(f"{cost}: {what}")  # (a worker thread runs on: its test waits for it)


def _runs_python(args: Any, executable: Any) -> bool:
    """A child that runs Python (the app, `serve`, a host, a stand-in server) costs seconds; a
    `git` or `uname` a library starts costs nothing worth a marker."""
    program = executable or (args if isinstance(args, str | PathLike) else next(iter(args), ""))
    name = Path(str(program).split()[0] if isinstance(program, str) else program).name
    return str(program) == sys.executable or "python" in name or "qwen-mtp-desktop" in name


def _is_path(value: object) -> bool:
    return isinstance(value, str | PathLike)


def _install_probes() -> None:
    """Wrap the few doors every costly thing goes through. Idempotent."""
    if getattr(subprocess.Popen, "__cost_probe__", False):
        return
    popen_init = subprocess.Popen.__init__

    def probed_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        if _runs_python(args, kw.get("executable")):
            note("subprocess", f"subprocess.Popen({args!r:.120})")
        popen_init(self, args, *rest, **kw)

    subprocess.Popen.__init__ = probed_popen  # type: ignore[method-assign]
    subprocess.Popen.__cost_probe__ = True  # type: ignore[attr-defined]

    try:
        from openvino._ov_api import Core
    except ImportError:  # pragma: no cover - the runtime is a dependency
        pass
    else:
        read_model = Core.read_model

        def probed_read(self: Any, model: Any, *rest: Any, **kw: Any) -> Any:
            if _is_path(model):
                note("model", f"openvino Core.read_model({str(model)!r:.120})")
            return read_model(self, model, *rest, **kw)

        Core.read_model = probed_read  # type: ignore[method-assign]

    from qwen_mtp_desktop.core.engine.runtime import Engine

    engine_load = Engine.load

    def probed_load(self: Any, model_dir: Any, *rest: Any, **kw: Any) -> Any:
        note("model", f"Engine.load({str(model_dir)!r:.120})")
        return engine_load(self, model_dir, *rest, **kw)

    Engine.load = probed_load  # type: ignore[method-assign]


def in_fast_tier(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in COSTLY)


def start(item: pytest.Item) -> None:
    """Watch a fast-tier test from its setup on. Costly tests are not watched: their
    fixtures' threads and children may outlive them and would be counted against others."""
    global _seen, _current
    if not (DISCOVER or in_fast_tier(item)):
        return
    _install_probes()
    with _lock:
        _seen = {}
        _current = item.nodeid


def stop() -> dict[str, str]:
    global _seen
    with _lock:
        seen, _seen = _seen, None
    return seen or {}


def judge(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """After each phase: in discovery mode write down a test stopped by a cost (its own, or a
    shared fixture's that failed before and is raised again); after a fast-tier test's call,
    fail it if it paid a cost it is not marked with."""
    if DISCOVER and call.excinfo is not None and call.excinfo.errisinstance(CostFoundError):
        cost, _, what = str(call.excinfo.value).partition(": ")
        with Path(DISCOVER).open("a", encoding="utf-8") as out:
            out.write(json.dumps({"test": item.nodeid, "cost": cost, "what": what}) + "\n")
    if call.when == "setup" and report.passed:
        return  # still watching: the call comes next
    seen = stop()
    if seen and not DISCOVER and call.when == "call" and report.passed:
        paid = "; ".join(f"`{cost}` ({what})" for cost, what in sorted(seen.items()))
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid}: this test is not marked with what it costs: {paid}. Mark it (or "
            "declare its fixture with tests.costs.costs(...)), so `make check` leaves it out."
        )
