"""Real models for integration tests: the bundled demo model and cached tiny fixtures; and the
`serve` processes the API tests share, one per model and flags for the whole run (a start loads
the model in an engine process: seconds each, paid once instead of once per module)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from qwen_mtp_desktop.core.files.paths import demo_model_dir
from tests.costs import costs
from tests.models import TOOL_MODEL, cached_checkpoint, cached_export
from tests.remote_server import KEY, client_of, serving
from tests.serve_fixtures import copy_model


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


@pytest.fixture(scope="session")
def chat_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo model as `serve` serves a full-size one (tests.serve_fixtures.copy_model)."""
    return copy_model(demo_model, tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
@costs("subprocess")
def demo_url(demo_model: Path) -> Iterator[str]:
    """`serve` on the bundled demo model itself (served as the demo: one request at a time)."""
    with serving(demo_model) as (_, url):
        yield url


@pytest.fixture(scope="session")
@costs("subprocess")
def chat_url(chat_model: Path) -> Iterator[str]:
    """`serve` on `chat_model`, MTP on: its /v1 URL."""
    with serving(chat_model) as (_, url):
        yield url


@pytest.fixture(scope="session")
def chat_client(chat_url: str) -> openai.OpenAI:
    return client_of(chat_url)


@pytest.fixture(scope="session")
@costs("subprocess")
def plain_chat_client(chat_model: Path) -> Iterator[openai.OpenAI]:
    """`serve --no-mtp` on `chat_model`: plain decoding's answers, to compare MTP's with."""
    with serving(chat_model, KEY, "--no-mtp") as (_, url):
        yield client_of(url)


@pytest.fixture(scope="session")
@costs("subprocess")
def tool_model_url() -> Iterator[str]:
    """`serve` on the tool model (tests/tool-model), MTP on: its /v1 URL."""
    with serving(TOOL_MODEL) as (_, url):
        yield url


@pytest.fixture(scope="session")
def tool_model_client(tool_model_url: str) -> openai.OpenAI:
    return client_of(tool_model_url)
