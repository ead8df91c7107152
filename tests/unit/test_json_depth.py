"""JSON nesting depth counted without numpy for small texts (the settings file read at start-up,
issue 28), and the same answer as the numpy path for any text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.files import safe_files
from qwen_mtp_desktop.core.files.safe_files import SMALL_BRACKET_COUNT, json_nesting_depth

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab[]{}\\"', max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet="k[{", max_size=3), children, max_size=4)
    ),
    max_leaves=40,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@settings(max_examples=300)
@given(json_values)
def test_the_depth_of_real_json(value: object) -> None:
    assert json_nesting_depth(json.dumps(value)) == _depth(value)


@settings(max_examples=200, deadline=None)  # the first example imports numpy
@given(st.text(alphabet='[]{}"\\ax', max_size=200))
def test_small_and_large_paths_agree(text: str) -> None:
    """Any text, brackets balanced or not: the Python count equals the numpy one."""
    small = json_nesting_depth(text)
    original = safe_files.SMALL_BRACKET_COUNT
    safe_files.SMALL_BRACKET_COUNT = -1  # force the numpy path
    try:
        assert json_nesting_depth(text) == small
    finally:
        safe_files.SMALL_BRACKET_COUNT = original


def test_a_deep_text_goes_through_numpy() -> None:
    text = "[" * (SMALL_BRACKET_COUNT + 10) + "]" * (SMALL_BRACKET_COUNT + 10)
    assert json_nesting_depth(text) == SMALL_BRACKET_COUNT + 10


@pytest.mark.subprocess
def test_reading_the_settings_at_start_imports_no_numpy(tmp_path: Path) -> None:
    """A restored profile's settings file is read before the window: without numpy."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 1, "theme": "dark", "ui_state": {"a": "b" * 500}}))
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from qwen_mtp_desktop.core.settings.store import SettingsStore\n"
        f"store = SettingsStore(Path({str(path)!r}))\n"
        "assert store.settings.theme == 'dark', store.settings\n"
        "print('numpy' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False", result.stdout + result.stderr
