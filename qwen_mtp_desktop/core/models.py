"""Which model the app opens, and what we can say about it without loading it."""

from __future__ import annotations

from pathlib import Path

from qwen_mtp_desktop.core.paths import demo_model_dir
from qwen_mtp_desktop.core.settings import Settings

DEMO_MODEL_NAME = "Demo model"
DEMO_MODEL_NOTE = (
    "A tiny model built and trained by this project so the app works offline. It only counts "
    "and repeats phrases. For real answers, export a Qwen3.5 checkpoint in the Export panel."
)


def is_demo_model(model_dir: Path) -> bool:
    try:
        return model_dir.resolve() == demo_model_dir().resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on Python 3.11
        return False


def selected_model(settings: Settings) -> Path:
    """The model to open: the user's default if it still exists, else the bundled demo."""
    if settings.default_model:
        chosen = Path(settings.default_model)
        if chosen.is_dir():
            return chosen
    return demo_model_dir()


def display_name(model_dir: Path) -> str:
    return DEMO_MODEL_NAME if is_demo_model(model_dir) else model_dir.name
