"""Which model wrote each answer (issue 44, minor 14): a chat whose model changed midway names
the other model on its answers, from what each answer stored, so it survives a restart. The
real window offscreen, the real engine host on the demo model and a renamed copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.models.library import display_name
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_organizing import LONG_WAIT, _open
from tests.gui.test_chat_panel import _send

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]


def _figures(window: MainWindow) -> list[str]:
    return [w.stats_label.text() for w in window.chat.transcript.messages if w.role == "assistant"]


def test_an_answer_by_another_model_names_it_even_after_a_restart(
    qtbot: QtBot, tmp_path: Path
) -> None:
    other = tmp_path / "Qwen3.5-tiny-copy"
    shutil.copytree(demo_model_dir(), other)
    demo = display_name(demo_model_dir())
    window = _open(qtbot)
    chat = window.chat
    _send(qtbot, chat, "Count from 1 to 5.")
    (first,) = _figures(window)
    assert not first.startswith(demo)  # the chat's own model: not named
    chat._on_model_changed(other)
    qtbot.waitUntil(
        lambda: chat._loaded is not None and chat._loaded.model_dir == other, timeout=LONG_WAIT
    )
    _send(qtbot, chat, "Count from 1 to 3.")
    by_demo, by_copy = _figures(window)
    assert by_demo.startswith(f"{demo}  ·  ")
    assert not by_copy.startswith(other.name)
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    for size in ((1024, 700), (1600, 1000)):
        window.resize(*size)
        qtbot.wait(200)
        assert window.grab().save(str(shots / f"chat_answer_models_{size[0]}.png"))
    window.close()

    # A restart: the stored answers still say it.
    window = _open(qtbot)
    qtbot.waitUntil(lambda: len(_figures(window)) == 2, timeout=LONG_WAIT)
    by_demo, by_copy = _figures(window)
    assert by_demo.startswith(f"{demo}  ·  ") and not by_copy.startswith(other.name)
    window.close()
