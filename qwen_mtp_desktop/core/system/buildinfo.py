"""What this copy of the app is: version, git revision, how it was built, runtime versions.

The git revision comes from one of three places:

- a bundle (PyInstaller, `sys._MEIPASS`) reads `build_info.json`, which the spec writes at build
  time (`write_build_info`) and ships at the bundle's root;
- a source checkout asks `git` at run time (read-only: `GIT_OPTIONAL_LOCKS=0`);
- anything else (an installed wheel, a copy without `.git`) says "unknown".

Runtime versions come from package metadata (the bundle ships the dist-info folders of its
runtime packages), falling back to what the bundle recorded at build time.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from qwen_mtp_desktop import APP_ID, __version__
from qwen_mtp_desktop.core.system.environment import RUNTIME_PACKAGES, package_version

BUILD_INFO_FILE = "build_info.json"
BUILD_INFO_SCHEMA_VERSION = 1
UNKNOWN = "unknown"
#: The packages whose versions `--version` and the About dialog show, in this order.
VERSION_PACKAGES = (*RUNTIME_PACKAGES, "PySide6", "numpy")


def bundle_root() -> Path | None:
    """The folder a PyInstaller bundle unpacks into, or None when running from source."""
    root = getattr(sys, "_MEIPASS", None)
    return Path(root) if root is not None else None


def source_root() -> Path:
    """The folder that holds the `qwen_mtp_desktop` package (a checkout's root)."""
    return Path(__file__).resolve().parents[3]


def git_revision(root: Path | None = None) -> str | None:
    """`git rev-parse --short=12 HEAD` of a checkout (+ "-dirty" with uncommitted changes to
    tracked files); None when `root` is not a git checkout or git is not installed."""
    root = root or source_root()
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return None
    # Never take git's index lock: other git commands may run in the same tree.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}

    def git_output(*args: str) -> str:
        return subprocess.run(
            [git, "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            env=env,
        ).stdout.strip()

    try:
        revision = git_output("rev-parse", "--short=12", "HEAD")
        status = git_output("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    if not revision:
        return None
    return f"{revision}-dirty" if status else revision


@dataclass(frozen=True)
class BuildInfo:
    app_version: str
    #: Short git revision, "-dirty" when built from uncommitted changes, or "unknown".
    revision: str
    #: "bundle" (PyInstaller) or "source".
    kind: str
    #: When the bundle was built (UTC, ISO 8601); None from source.
    built_at: str | None
    python: str
    platform: str
    versions: dict[str, str | None] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def headline(self) -> str:
        """'qwen-mtp-desktop 0.1.0 (git 1a2b3c4d5e6f, source)'."""
        where = self.kind if self.built_at is None else f"{self.kind} built {self.built_at}"
        return f"{APP_ID} {self.app_version} (git {self.revision}, {where})"

    def version_text(self) -> str:
        """What `--version` prints: the headline, Python and platform, runtime versions."""
        runtime = " · ".join(
            f"{name} {version or 'not installed'}" for name, version in self.versions.items()
        )
        return f"{self.headline}\nPython {self.python} on {self.platform}\n{runtime}"


def read_build_info_file(path: Path) -> dict[str, Any] | None:
    """The recorded build info, or None when the file is missing or unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return raw if isinstance(raw, dict) else None


def _versions(recorded: dict[str, Any]) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in VERSION_PACKAGES:
        fallback = recorded.get(name)
        versions[name] = package_version(name) or (fallback if isinstance(fallback, str) else None)
    return versions


def build_info() -> BuildInfo:
    """This copy's version and build information (cheap: no heavy import, git at most twice)."""
    root = bundle_root()
    python = platform.python_version()
    system = platform.platform(terse=True)
    if root is not None:
        recorded = read_build_info_file(root / BUILD_INFO_FILE) or {}
        revision = recorded.get("revision")
        built_at = recorded.get("built_at")
        versions = recorded.get("versions")
        return BuildInfo(
            app_version=__version__,
            revision=revision if isinstance(revision, str) and revision else UNKNOWN,
            kind="bundle",
            built_at=built_at if isinstance(built_at, str) else UNKNOWN,
            python=python,
            platform=system,
            versions=_versions(versions if isinstance(versions, dict) else {}),
        )
    return BuildInfo(
        app_version=__version__,
        revision=git_revision() or UNKNOWN,
        kind="source",
        built_at=None,
        python=python,
        platform=system,
        versions=_versions({}),
    )


def write_build_info(path: Path, root: Path | None = None) -> dict[str, Any]:
    """Record this build's revision, time and package versions (called by the PyInstaller
    spec; `root` is the checkout to ask git about)."""
    record: dict[str, Any] = {
        "schema_version": BUILD_INFO_SCHEMA_VERSION,
        "app_version": __version__,
        "revision": git_revision(root) or UNKNOWN,
        "built_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "versions": {name: package_version(name) for name in VERSION_PACKAGES},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
