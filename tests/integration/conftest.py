"""Real models for integration tests: the bundled demo model and cached tiny fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qwen_mtp_desktop.core.files.paths import demo_model_dir
from tests.costs import costs
from tests.models import cached_checkpoint, cached_export


@pytest.fixture(scope="session")
def demo_model() -> Path:
    path = demo_model_dir()
    assert (path / "openvino_mtp_model.xml").is_file(), "the bundled demo model is missing"
    return path


@pytest.fixture(scope="session")
@costs("export")  # built with torch on a fresh clone
def moe_checkpoint() -> Path:
    return cached_checkpoint(moe=True)


@pytest.fixture(scope="session")
@costs("export")  # built with torch on a fresh clone
def moe_model(moe_checkpoint: Path) -> Path:
    return cached_export(moe_checkpoint, "fp16")


@pytest.fixture
def demo_copy(demo_model: Path, tmp_path: Path) -> Path:
    """A private copy of the demo model that a test may damage."""
    target = tmp_path / "demo copy"
    shutil.copytree(demo_model, target)
    return target
