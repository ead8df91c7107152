"""A renamed copy of the demo model is the demo (issue 44, minor 15): it was recognised by its
folder, so a copy got the general example chips and was sent earlier turns, which the demo
answers badly. Now its build record (the export manifest's weight sums) says what it is. The
real window offscreen and the real engine host on the copy."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME
from qwen_mtp_desktop.core.models.library import display_name, is_demo_model
from qwen_mtp_desktop.core.settings.store import SettingsStore
from tests.gui.test_chat_organizing import _open
from tests.gui.test_chat_panel import _send

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


def test_a_renamed_copy_of_the_demo_is_treated_as_the_demo(qtbot: QtBot, tmp_path: Path) -> None:
    copy = tmp_path / "my-tiny-model"
    shutil.copytree(demo_model_dir(), copy)
    # Another export (different weights in its record) is not the demo.
    other = tmp_path / "other-export"
    shutil.copytree(demo_model_dir(), other)
    record = json.loads((other / MANIFEST_NAME).read_text())
    record["files"]["openvino_language_model.bin"] = "0" * 64
    (other / MANIFEST_NAME).write_text(json.dumps(record))
    assert is_demo_model(copy) and not is_demo_model(other)
    assert display_name(copy) == "my-tiny-model"  # its own name, told apart from the demo's

    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.default_model = str(copy)
    store.save()
    window = _open(qtbot)
    chat = window.chat
    assert chat.current_model_dir() == copy
    assert chat.examples.title.text() == "Try what the demo model can do:"
    assert chat.banner_wrap.isVisibleTo(chat)
    _send(qtbot, chat, "Count from 1 to 5.")
    _send(qtbot, chat, "Count from 1 to 3.")
    first, second = [w._stats for w in chat.transcript.messages if w.role == "assistant"]
    assert first is not None and second is not None
    # Only the last message is sent, as to the demo: the second prompt is no longer.
    assert abs(second["prompt_tokens"] - first["prompt_tokens"]) <= 2
    assert chat.demo_turn_note.isVisibleTo(chat)
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    for size in ((1024, 700), (1600, 1000)):
        window.resize(*size)
        qtbot.wait(200)
        assert window.grab().save(str(shots / f"chat_demo_copy_{size[0]}.png"))
    window.close()
