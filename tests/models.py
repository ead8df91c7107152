"""Build-once, cache-by-version tiny models for the integration tests, and the committed tool
model.

The cache key is the builder's version plus the build arguments, so changing the builder
rebuilds everything and nothing stale is ever reused.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import CACHE_ROOT
from tests.costs import note

#: The tool model: a tiny Qwen3.5 + MTP trained to call `add` and `get_weather` (the tools of
#: `tests/mcp_server.py --tools add,get_weather`), exported; committed, rebuilt by
#: `make tool-model`. Tests use it as it is and never train.
TOOL_MODEL = Path(__file__).resolve().parent / "tool-model"


def short_context_copy(model: Path, folder: Path, context: int) -> Path:
    """`model` at `folder` with max_position_embeddings `context` in its config.json (where the
    app reads the context length) and every other file linked, not copied."""
    folder.mkdir()
    for item in model.iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((model / "config.json").read_text())
    for section in (config, config.get("text_config") or {}):
        if "max_position_embeddings" in section:
            section["max_position_embeddings"] = context
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    with (CACHE_ROOT / f".{name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def cached_checkpoint(*, moe: bool, train_steps: int = 0, seed: int = 0) -> Path:
    from qwen_mtp_desktop.devtools.tiny_model import BUILDER_VERSION, build_checkpoint

    note("export", f"cached_checkpoint(moe={moe})")  # a torch build on a fresh clone
    name = f"ckpt-v{BUILDER_VERSION}-{'moe' if moe else 'dense'}-t{train_steps}-s{seed}"
    target = CACHE_ROOT / name
    with _locked(name):
        if not (target / "config.json").is_file():
            shutil.rmtree(target, ignore_errors=True)
            build_checkpoint(target, moe=moe, train_steps=train_steps, seed=seed)
    return target


def cached_export(checkpoint: Path, weight_format: str | None) -> Path:
    from qwen_mtp_desktop.core.models.export.job import run_export
    from qwen_mtp_desktop.core.models.export.options import ExportOptions, missing_components

    note("export", f"cached_export({checkpoint.name}, {weight_format})")
    fmt = weight_format or "default"
    name = f"{checkpoint.name}-ov-{fmt}"
    target = CACHE_ROOT / name
    with _locked(name):
        if missing_components(target) if target.exists() else True:
            shutil.rmtree(target, ignore_errors=True)
            options = ExportOptions(
                weight_format=weight_format,  # type: ignore[arg-type]
                group_size=16 if weight_format == "int4" else None,
                group_size_fallback="ignore" if weight_format == "int4" else None,
            )
            run_export(str(checkpoint), target, options)
    return target
