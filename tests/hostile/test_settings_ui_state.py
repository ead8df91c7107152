"""Class 12 (issue 29): every stored UI value is validated like the other settings.

A settings file whose window geometry was a non-ASCII string aborted the window at every
start (SIGABRT). Hypothesis writes the UI's values (`ui_state`): the window geometry as
non-ASCII text, random text, base64 of random bytes, base64 of a real Qt geometry with its
integers replaced by extremes (INT_MIN, INT_MAX, 0, -1, a million), truncated or padded
base64, other JSON types; the Drafts toggle, a new chat's settings and the hidden-models list
as random text, deep or huge JSON, wrong types; unknown keys. Properties, in process
(`load_settings`): nothing raises, every value kept passes its check, every damaged value is
named in the notice and falls back alone (the valid ones are kept). Through real window
starts (the app's entry point in a subprocess, offscreen): the app starts, paints and exits 0
with no traceback, the window has a sane size, and a damaged file is kept aside.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO_ROOT
from tests.reliability import figures

LOAD_EXAMPLES = 400
START_EXAMPLES = 24

_EXTREMES = [-(2**31), 2**31 - 1, 0, -1, 1, 1_000_000, -1_000_000, 65535]
_GEOMETRY_KEY = "main_window_geometry"
_OTHER_KEYS = ["chat_show_drafts", "chat_new_settings", "model_library.hidden"]


def real_geometry() -> bytes:
    """Qt's saveGeometry() of a real window (offscreen), what the app writes."""
    from PySide6.QtWidgets import QApplication, QWidget

    app = QApplication.instance() or QApplication([])
    widget = QWidget()
    widget.resize(900, 640)
    widget.show()
    app.processEvents()
    data = bytes(widget.saveGeometry().data())
    widget.close()
    return data


@st.composite
def geometry_value(draw: st.DrawFn, real: bytes) -> Any:
    kind = draw(st.sampled_from(["non_ascii", "text", "random_b64", "mutated", "truncated",
                                 "padded", "type", "huge", "valid"]))  # fmt: skip
    if kind == "non_ascii":
        return draw(st.text(min_size=1, max_size=80).filter(lambda t: not t.isascii()))
    if kind == "text":
        return draw(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    if kind == "random_b64":
        return base64.b64encode(draw(st.binary(max_size=200))).decode()
    if kind == "mutated":
        blob = bytearray(real)
        for _ in range(draw(st.integers(1, 6))):
            offset = draw(st.integers(8, max(8, len(blob) - 4)))
            blob[offset : offset + 4] = struct.pack(">i", draw(st.sampled_from(_EXTREMES)))
        return base64.b64encode(bytes(blob)).decode()
    encoded = base64.b64encode(real).decode()
    if kind == "truncated":
        return encoded[: draw(st.integers(1, len(encoded) - 1))]
    if kind == "padded":
        return encoded + draw(st.sampled_from(["=", "==", "A", "\n", " ", "é"]))
    if kind == "type":
        return draw(st.sampled_from([None, 3, 2.5, True, [], {}, ["x"], {"a": "b"}]))
    if kind == "huge":
        return "QUFB" * draw(st.integers(3000, 40000))
    return encoded


_json_junk = st.one_of(
    st.text(max_size=40),
    st.sampled_from([
        "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000, "1" * 500, "NaN",
        '{"temperature": "hot", "num_assistant_tokens": -4, "max_new_tokens": 1e999}',
        '{"temperature": 0.2}', '["/a", "/b"]', '["/a", 5]', "[" + '"x",' * 300 + '"x"]',
        "{}", "[]", "null", "0", "1",
    ]),
    st.sampled_from([None, 1, [], {}, True]),
)  # fmt: skip


@st.composite
def ui_state(draw: st.DrawFn, real: bytes) -> dict[str, Any]:
    state: dict[str, Any] = {}
    if draw(st.booleans()):
        state[_GEOMETRY_KEY] = draw(geometry_value(real))
    for key in _OTHER_KEYS:
        if draw(st.booleans()):
            state[key] = draw(_json_junk)
    for _ in range(draw(st.integers(0, 2))):
        state[draw(st.text(max_size=12))] = draw(_json_junk)
    return state


class TestUiStateValues:
    def test_every_ui_value_is_checked_and_falls_back_alone(self, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.settings.store import _UI_VALIDATORS, load_settings

        real = real_geometry()
        counts = {"tried": 0, "damaged": 0, "kept": 0}

        @settings(
            max_examples=LOAD_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(state=ui_state(real), device=st.sampled_from(["CPU", 7]))
        def case(state: dict[str, Any], device: Any) -> None:
            counts["tried"] += 1
            path = tmp_path / f"settings-{counts['tried']}.json"
            path.write_text(json.dumps({"device": device, "ui_state": state}), encoding="utf-8")
            loaded = load_settings(path)
            kept = loaded.settings.ui_state
            assert loaded.settings.device == "CPU"
            for key, value in kept.items():
                check = _UI_VALIDATORS.get(key)
                assert check is None or check(value) == value, (key, value)
                assert state[key] == value  # kept values are kept as they were
            dropped = set(state) - set(kept)
            counts["damaged"] += len(dropped)
            counts["kept"] += len(kept)
            if dropped or device != "CPU":
                assert loaded.notice is not None and "damaged" in loaded.notice
                assert list(tmp_path.glob(path.name + ".damaged-*")), "no backup kept"
            else:
                assert loaded.notice is None
            if _GEOMETRY_KEY in dropped:
                assert "window size and position" in (loaded.notice or "")

        case()
        assert counts["damaged"] > 0 and counts["kept"] > 0, counts
        figures.record(
            "hostile",
            ui_state_inputs=counts["tried"],
            ui_state_damaged_values=counts["damaged"],
            ui_state_kept_values=counts["kept"],
        )

    @pytest.mark.subprocess
    @pytest.mark.gui
    @pytest.mark.timeout(300)  # starts the real app once per generated settings file (~80 s here)
    def test_real_window_starts_with_generated_settings(self, tmp_path: Path) -> None:
        from PySide6.QtGui import QImage

        real = real_geometry()
        counts = {"starts": 0, "damaged": 0}

        @settings(
            max_examples=START_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(state=ui_state(real))
        @example(state={_GEOMETRY_KEY: "ÄÖÜ window"})  # the reported case: SIGABRT at start
        def case(state: dict[str, Any]) -> None:
            counts["starts"] += 1
            home = tmp_path / f"home-{counts['starts']}"
            config = home / "config"
            config.mkdir(parents=True)
            (config / "settings.json").write_text(json.dumps({"ui_state": state}))
            shot = home / "shot.png"
            done = subprocess.run(
                [sys.executable, "-m", "qwen_mtp_desktop", "--screenshot", str(shot)],
                capture_output=True,
                text=True,
                timeout=180,
                env={**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home),
                     "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO_ROOT)},
            )  # fmt: skip
            tail = done.stderr[-3000:]
            assert done.returncode == 0, (state, done.returncode, tail)
            assert "Traceback" not in done.stderr, (state, tail)
            image = QImage(str(shot))
            assert not image.isNull(), state
            assert 200 <= image.width() <= 8192 and 200 <= image.height() <= 8192, (
                state,
                image.size(),
            )
            if list(config.glob("settings.json.damaged-*")):
                counts["damaged"] += 1

        case()
        assert counts["damaged"] > 0, counts
        figures.record(
            "hostile",
            ui_state_window_starts=counts["starts"],
            ui_state_window_starts_damaged=counts["damaged"],
            ui_state_window_crashes=0,
        )

    def test_the_reported_case_non_ascii_geometry(self, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.settings.store import load_settings

        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"ui_state": {_GEOMETRY_KEY: "ÄÖÜ window", "x": "kept"}}))
        loaded = load_settings(path)
        assert loaded.settings.ui_state == {"x": "kept"}
        assert loaded.notice is not None and "window size and position" in loaded.notice
