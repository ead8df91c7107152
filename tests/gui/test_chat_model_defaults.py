"""A model's default chat settings (issue 44, "what LM Studio users reach for" 2): Chat options ›
"Save as this model's defaults" keeps the chat's system prompt, sampling, thinking and its
budget, max new tokens and "When too long"; new chats of that model start with them, before the
default preset, and say so; another model (another export put in a folder) never takes them;
Clear forgets them. The real window offscreen on the demo model, the real settings file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME
from qwen_mtp_desktop.core.settings.store import load_settings
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.gui.test_chat_organizing import _open, _open_with_default_preset

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000
SHOTS = Path("/tmp/shots")


def _shots(window: MainWindow, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        for _ in range(3):  # a resize's layout requests post more of their own
            QApplication.processEvents()
        assert window.grab().save(str(SHOTS / f"{name}-{width}x{height}.png"))


def _stored() -> list[dict[str, object]]:
    return load_settings(app_paths().settings_file).settings.model_defaults


def _known(qtbot: QtBot, chat: ChatPanel) -> None:
    """The chat's model is read (its key known), nothing queued."""
    qtbot.waitUntil(lambda: chat.model.model_key() is not None, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)


def test_new_chats_of_a_model_start_with_its_saved_defaults(qtbot: QtBot, tmp_path: Path) -> None:
    # A default preset too: the model's defaults come first, and say so.
    window = _open_with_default_preset(qtbot)
    chat, panel = window.chat, window.chat.settings_panel
    options = chat.model_defaults
    chat.settings_toggle.setChecked(True)
    _known(qtbot, chat)
    assert panel.sampling_source.text() == "New chat: the default preset “Precise”"
    assert options.status.text() == (
        "None saved: new chats of Demo model start with the default preset “Precise”."
    )
    assert not options.clear_button.isEnabled() and options.save_button.isEnabled()
    assert "this model's defaults" in panel.sampling_source.toolTip()

    # The chat's own choices, saved as the demo's defaults.
    panel.model_default_check.setChecked(False)
    panel.temperature_spin.setValue(0.4)
    panel.max_tokens_spin.setValue(300)
    panel.thinking_check.setChecked(True)
    panel.thinking_budget_spin.setValue(512)
    panel.overflow_combo.setCurrentIndex(panel.overflow_combo.findData("truncate_middle"))
    panel.system_prompt.setPlainText("Be terse.")
    qtbot.mouseClick(options.save_button, Qt.MouseButton.LeftButton)
    [entry] = _stored()  # written at once, keyed by the demo's weights, not its folder
    assert str(entry["model"]).startswith("weights:") and entry["system_prompt"] == "Be terse."
    assert entry["settings"] == {
        **entry["settings"],  # type: ignore[dict-item]
        "temperature": 0.4,
        "max_new_tokens": 300,
        "thinking": True,
        "thinking_budget": 512,
        "context_overflow": "truncate_middle",
        "model_sampling": False,
    }
    assert options.status.text() == (
        "New chats of Demo model start with: temperature 0.4, top-p 0.9, top-k 20 · up to "
        "300 tokens · thinking up to 512 tokens · when too long: skip the middle · prompt "
        "“Be terse.”"
    )
    assert options.clear_button.isEnabled()

    # A new chat of the demo starts with them, before the default preset.
    chat.new_chat()
    fresh = panel.settings
    assert (fresh.temperature, fresh.max_new_tokens, fresh.thinking_budget) == (0.4, 300, 512)
    assert fresh.context_overflow == "truncate_middle" and not fresh.model_sampling
    assert panel.system_prompt.toPlainText() == "Be terse."
    assert panel.sampling_source.text() == "New chat: this model's defaults"
    _shots(window, "chat-options-model-defaults")

    # Another export put in a folder of its own is another model: it does not take them.
    other = tmp_path / "other-export"
    shutil.copytree(demo_model_dir(), other)
    record = json.loads((other / MANIFEST_NAME).read_text())
    record["files"]["openvino_language_model.bin"] = "0" * 64
    (other / MANIFEST_NAME).write_text(json.dumps(record))
    chat.use_model(other)
    qtbot.waitUntil(
        lambda: panel.sampling_source.text() == "New chat: the default preset “Precise”",
        timeout=LONG_WAIT,
    )
    _known(qtbot, chat)
    assert panel.system_prompt.toPlainText() == "Answer in one sentence."
    assert panel.settings.max_new_tokens == 256 and not options.clear_button.isEnabled()
    assert options.status.text().startswith("None saved: new chats of other-export")

    # Back on the demo, then Clear: new chats follow the default preset again.
    chat.use_model(demo_model_dir())
    qtbot.waitUntil(
        lambda: panel.sampling_source.text() == "New chat: this model's defaults",
        timeout=LONG_WAIT,
    )
    qtbot.mouseClick(options.clear_button, Qt.MouseButton.LeftButton)
    assert _stored() == []
    chat.new_chat()
    assert panel.sampling_source.text() == "New chat: the default preset “Precise”"
    assert panel.system_prompt.toPlainText() == "Answer in one sentence."
    window.close()


def test_a_chat_changed_before_its_model_is_read_keeps_its_changes(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """The defaults arrive with the model's facts (read off the GUI thread); a new chat the
    user already changed is not overwritten when they do."""
    window = _open(qtbot)
    chat, panel = window.chat, window.chat.settings_panel
    _known(qtbot, chat)
    panel.max_tokens_spin.setValue(333)
    qtbot.mouseClick(chat.model_defaults.save_button, Qt.MouseButton.LeftButton)
    copy = tmp_path / "demo-copy"  # the same weights under another name: the same model
    shutil.copytree(demo_model_dir(), copy)
    chat.new_chat()
    panel.max_tokens_spin.setValue(100)  # the demo's defaults gave 333
    chat.use_model(copy)  # the copy's key is read after this
    _known(qtbot, chat)
    assert chat.model.model_key() == _stored()[0]["model"]
    assert panel.settings.max_new_tokens == 100
    chat.new_chat()
    assert panel.settings.max_new_tokens == 333  # a renamed copy of the weights keeps them
    window.close()
