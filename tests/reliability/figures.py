"""The figures this suite measures, kept in `.cache/reliability/figures.json`."""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

from tests.conftest import REPO_ROOT

FIGURES_FILE = REPO_ROOT / ".cache" / "reliability" / "figures.json"


def record(section: str, **values: Any) -> None:
    """Merge `values` into `section` of the figures file and print them (pytest -s, -rA)."""
    FIGURES_FILE.parent.mkdir(parents=True, exist_ok=True)
    lock = FIGURES_FILE.with_suffix(".lock")
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            data: dict[str, Any] = json.loads(FIGURES_FILE.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        data.setdefault(section, {}).update(values)
        tmp = FIGURES_FILE.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(FIGURES_FILE)
    print(f"\nMEASURE {section}: " + ", ".join(f"{k}={v}" for k, v in values.items()))


def read_all() -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(Path(FIGURES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data
