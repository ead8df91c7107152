"""Where the app keeps its files.

Everything the app writes lives under four folders. `QWEN_MTP_DESKTOP_HOME` moves all of them
under one root: tests use it so they never touch a real profile, and portable installs can too.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import platformdirs

from qwen_mtp_desktop import APP_ID
from qwen_mtp_desktop.core.files.private_files import make_tree_private, private_folder

HOME_ENV = "QWEN_MTP_DESKTOP_HOME"
RESOURCES_ENV = "QWEN_MTP_DESKTOP_RESOURCES"


@dataclass(frozen=True)
class AppPaths:
    data_dir: Path
    config_dir: Path
    cache_dir: Path
    log_dir: Path
    #: The models folder the user chose in Settings (None: the one under `data_dir`).
    models_override: Path | None = None

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "app.log"

    @property
    def models_dir(self) -> Path:
        """The managed model library folder (exports land here by default)."""
        return self.models_override or self.default_models_dir

    @property
    def default_models_dir(self) -> Path:
        return self.data_dir / "models"

    @property
    def chats_db(self) -> Path:
        return self.data_dir / "chats.sqlite3"

    def with_models_dir(self, folder: str | Path | None) -> AppPaths:
        """These folders with the models folder the settings name (None: the default)."""
        return replace(self, models_override=Path(folder) if folder else None)

    @property
    def compile_cache_dir(self) -> Path:
        """OpenVINO's compiled-model cache."""
        return self.cache_dir / "ov-cache"

    def ensure(self) -> AppPaths:
        """Create the folders, owner-only on POSIX, and tighten what an older version left
        readable by others (chats, logs, settings; only permission bits change). The models
        folder is not touched: exports are not private and may be served from there."""
        for folder in (self.data_dir, self.config_dir, self.cache_dir, self.log_dir):
            private_folder(folder)
        models = (self.default_models_dir, self.models_dir)
        for folder in (self.data_dir, self.config_dir, self.log_dir):
            make_tree_private(folder, skip=models)
        return self


def app_paths() -> AppPaths:
    """The app's folders, honouring the `QWEN_MTP_DESKTOP_HOME` override."""
    home = os.environ.get(HOME_ENV)
    if home:
        root = Path(home).expanduser().resolve()
        return AppPaths(root / "data", root / "config", root / "cache", root / "logs")
    return AppPaths(
        data_dir=Path(platformdirs.user_data_dir(APP_ID, appauthor=False)),
        config_dir=Path(platformdirs.user_config_dir(APP_ID, appauthor=False)),
        cache_dir=Path(platformdirs.user_cache_dir(APP_ID, appauthor=False)),
        log_dir=Path(platformdirs.user_log_dir(APP_ID, appauthor=False)),
    )


def resources_dir() -> Path:
    """The read-only resources shipped with the app (icons, demo model, prompt sets)."""
    override = os.environ.get(RESOURCES_ENV)
    if override:
        return Path(override)
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root is not None:  # a PyInstaller bundle unpacks data files here
        return Path(frozen_root) / "resources"
    return Path(__file__).resolve().parents[3] / "resources"


def demo_model_dir() -> Path:
    """The bundled demo model, exported to OpenVINO with its MTP head."""
    return resources_dir() / "demo-model" / "openvino"


def demo_checkpoint_dir() -> Path:
    """The bundled demo model's Hugging Face checkpoint (source form, for trying the exporter)."""
    return resources_dir() / "demo-model" / "checkpoint"
