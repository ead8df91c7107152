"""Hostile-input suite (issue 19): one property-based test class per class of hostile input.

Cases that could hang or allocate without bound run in a child process under a memory and a
time limit (tests/hostile/isolation.py). Every test records its figures with
`tests.reliability.figures.record("hostile", ...)`: inputs tried, crashes, hangs, and user
files outside the app's folders that changed (a decoy folder of user files is checked).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import demo_copy, demo_model  # noqa: F401 (fixtures)


def snapshot(folder: Path) -> dict[str, str]:
    """Relative path -> sha256 (or the link target / "dir") of everything under `folder`."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        key = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[key] = "link:" + str(path.readlink())
        elif path.is_dir():
            found[key] = "dir"
        elif path.is_file():
            found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def touched(before: dict[str, str], after: dict[str, str]) -> int:
    return sum(1 for key in before.keys() | after.keys() if before.get(key) != after.get(key))


@pytest.fixture
def decoy(tmp_path: Path) -> Iterator[Path]:
    """A folder of the user's own files (outside the app's folders) that hostile inputs point
    at; the test asserts none of it changed."""
    home = tmp_path / "user-files"
    (home / "Documents").mkdir(parents=True)
    (home / "Documents" / "thesis.txt").write_text("my thesis\n")
    (home / "Pictures").mkdir()
    (home / "Pictures" / "secret.png").write_bytes(_tiny_png())
    (home / "notes.md").write_text("# notes\n")
    yield home


def _tiny_png() -> bytes:
    import base64

    return base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
