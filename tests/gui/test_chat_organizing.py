"""Keeping chats in order, as LM Studio / Jan users expect (issue 28): presets (a system prompt
with sampling settings, saved, applied, renamed, deleted, and the one new chats start from),
pinned chats at the top of the list and each chat's last-used date. The real window offscreen
on the demo model, the real chat store and settings file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QMessageBox
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.presets import ChatPreset
from qwen_mtp_desktop.core.settings.store import SettingsStore, load_settings
from qwen_mtp_desktop.ui.chat.conversations.list import last_used
from qwen_mtp_desktop.ui.chat.options.presets import PresetOptions
from qwen_mtp_desktop.ui.chat.panel import ChatPanel
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

LONG_WAIT = 180_000
PRECISE = {
    "name": "Precise",
    "system_prompt": "Answer in one sentence.",
    "settings": {"temperature": 0.0, "max_new_tokens": 256, "model_sampling": False},
}


def _open(qtbot: QtBot) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready and chat._loaded is not None, timeout=LONG_WAIT)
    qtbot.waitUntil(lambda: chat._runner.pending == 0, timeout=LONG_WAIT)
    return window


@pytest.fixture
def window(qtbot: QtBot) -> Iterator[MainWindow]:
    window = _open(qtbot)
    yield window
    window.close()


def _name_it(qtbot: QtBot, presets: PresetOptions, name: str) -> None:
    """Type `name` into the open name dialog and press OK."""
    dialog = presets.name_dialog
    assert dialog is not None
    qtbot.waitUntil(dialog.isVisible)
    dialog.setTextValue(name)
    dialog.accept()


def _stored_presets() -> tuple[list[str], str | None]:
    saved = load_settings(app_paths().settings_file).settings
    return [p["name"] for p in saved.chat_presets], saved.default_chat_preset


def _open_with_default_preset(qtbot: QtBot) -> MainWindow:
    """The window on a profile whose settings hold PRECISE as the default chat preset."""
    app_paths().ensure().settings_file.write_text(
        json.dumps({"chat_presets": [PRECISE], "default_chat_preset": "Precise"}),
        encoding="utf-8",
    )
    return _open(qtbot)


def _idle(qtbot: QtBot, chat: ChatPanel) -> None:
    qtbot.waitUntil(lambda: not chat.generating and chat._runner.pending == 0, timeout=LONG_WAIT)


def test_presets_save_apply_rename_delete_and_start_new_chats(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    window = _open_with_default_preset(qtbot)
    chat, panel = window.chat, window.chat.settings_panel
    presets = chat.presets
    chat.settings_toggle.setChecked(True)
    # The stored default preset: a new chat starts from its prompt and settings.
    assert presets.combo.currentText() == "Precise" and presets.default_check.isChecked()
    assert panel.system_prompt.toPlainText() == "Answer in one sentence."
    assert panel.settings.max_new_tokens == 256 and panel.settings.temperature == 0

    # Save the chat's own choice as a preset.
    panel.model_default_check.setChecked(False)
    panel.temperature_spin.setValue(0.8)
    panel.top_p_spin.setValue(0.9)
    panel.max_tokens_spin.setValue(700)
    panel.system_prompt.setPlainText("Tell a story.")
    qtbot.mouseClick(presets.save_button, Qt.MouseButton.LeftButton)
    _name_it(qtbot, presets, "  Creative  ")
    assert [p.name for p in presets.presets] == ["Precise", "Creative"]
    assert presets.combo.currentText() == "Creative"
    assert presets.status.text() == "Saved “Creative”."
    assert _stored_presets() == (["Precise", "Creative"], "Precise")  # written at once
    creative = presets.selected()
    assert creative is not None and creative.system_prompt == "Tell a story."
    assert creative.values["temperature"] == 0.8 and creative.values["max_new_tokens"] == 700

    # Bad names say what to do and change nothing.
    qtbot.mouseClick(presets.save_button, Qt.MouseButton.LeftButton)
    _name_it(qtbot, presets, "   ")
    assert "A preset needs a name." in presets.status.text()
    qtbot.mouseClick(presets.rename_button, Qt.MouseButton.LeftButton)
    _name_it(qtbot, presets, "precise")
    assert presets.status.text() == "There is a preset named “Precise” already."
    qtbot.mouseClick(presets.rename_button, Qt.MouseButton.LeftButton)
    _name_it(qtbot, presets, "x" * 61)
    assert "at most 60 characters" in presets.status.text()
    assert _stored_presets() == (["Precise", "Creative"], "Precise")

    # A new chat starts from the default; applying "Creative" gives it that preset's values,
    # and the chat stores them with its first message (the model and method stay).
    chat.new_chat()
    assert panel.system_prompt.toPlainText() == "Answer in one sentence."
    mtp_before = panel.settings.mtp
    presets.combo.setCurrentIndex(presets.combo.findData("Creative"))
    assert not presets.default_check.isChecked()
    qtbot.mouseClick(presets.apply_button, Qt.MouseButton.LeftButton)
    assert panel.system_prompt.toPlainText() == "Tell a story."
    assert panel.temperature_spin.value() == pytest.approx(0.8)
    assert panel.max_tokens_spin.value() == 700 and panel.settings.mtp == mtp_before
    assert presets.status.text() == "This chat now uses “Creative”."
    chat.composer.set_text("Once upon a time")
    qtbot.keyClick(chat.composer.editor, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(chat.transcript.messages) == 2, timeout=LONG_WAIT)
    _idle(qtbot, chat)
    conversation = chat.conversation
    assert conversation is not None
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        stored = store.get_conversation(conversation.id)
    assert stored.system_prompt == "Tell a story."
    assert stored.settings.temperature == 0.8 and stored.settings.max_new_tokens == 700

    # Rename follows into the default; "New chats start with" moves it.
    qtbot.mouseClick(presets.rename_button, Qt.MouseButton.LeftButton)
    _name_it(qtbot, presets, "Story")
    presets.default_check.setChecked(True)
    assert _stored_presets() == (["Precise", "Story"], "Story")
    chat.new_chat()
    assert panel.system_prompt.toPlainText() == "Tell a story."

    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        chat.settings_toggle.setChecked(True)
        QApplication.processEvents()
        assert presets.isVisible()
        assert window.grab().save(str(screenshot_dir / f"chat-presets-{width}x{height}.png"))
        for button in (presets.save_button, presets.rename_button, presets.delete_button):
            assert button.width() >= button.minimumSizeHint().width(), button.text()
        assert presets.default_check.width() >= presets.default_check.minimumSizeHint().width()

    # Delete asks; Cancel keeps it, Delete removes it and the default with it.
    qtbot.mouseClick(presets.delete_button, Qt.MouseButton.LeftButton)
    box = presets.confirm
    assert box is not None and "Delete the preset “Story”?" in box.text()
    box.button(QMessageBox.StandardButton.Cancel).click()
    assert [p.name for p in presets.presets] == ["Precise", "Story"]
    qtbot.mouseClick(presets.delete_button, Qt.MouseButton.LeftButton)
    box = presets.confirm
    assert box is not None
    delete = next(b for b in box.buttons() if b.text() == "Delete")
    delete.click()
    assert [p.name for p in presets.presets] == ["Precise"]
    assert _stored_presets() == (["Precise"], None)
    chat.new_chat()
    assert panel.system_prompt.toPlainText() == ""  # no default preset any more
    window.close()

    # Kept for the next start.
    window = _open(qtbot)
    assert [p.name for p in window.chat.presets.presets] == ["Precise"]
    assert window.chat.presets.default_preset() is None
    window.close()


def test_a_damaged_preset_is_named_at_start_and_the_others_are_offered(qtbot: QtBot) -> None:
    settings_file = app_paths().ensure().settings_file
    broken = {"name": "Broken", "settings": {"top_p": 7}}
    settings_file.write_text(json.dumps({"chat_presets": [broken, PRECISE]}), encoding="utf-8")
    window = _open(qtbot)
    assert [p.name for p in window.chat.presets.presets] == ["Precise"]
    notice = window._store.notice or ""
    assert "the chat preset “Broken”" in notice
    window.close()


def test_presets_without_any_offer_only_save(window: MainWindow) -> None:
    presets = window.chat.presets
    assert presets.presets == [] and presets.combo.currentText() == "No presets yet"
    for button in (presets.apply_button, presets.rename_button, presets.delete_button):
        assert not button.isEnabled()
    assert presets.save_button.isEnabled() and not presets.default_check.isEnabled()
    assert ChatPreset.of_chat("x", window.chat.settings_panel.settings, "").name == "x"


# ------------------------------------------------------------------ pinned and dated chats


def _seed_chats() -> dict[str, int]:
    """Chats last used at different times, as a user's history has them."""
    now = time.time()
    day = 86_400.0
    ages = {
        "Trip to Lisbon": 300.0,
        "Tax questions": day * 1.2,
        "Python prime checker": day * 3,
        "Recipe ideas": day * 40,
        "Thesis outline": day * 400,
    }
    ids: dict[str, int] = {}
    with ChatStore(app_paths().ensure().data_dir / "chats.sqlite3") as store:
        for title, age in sorted(ages.items(), key=lambda item: -item[1]):
            store._now = lambda age=age: now - age  # type: ignore[method-assign]
            chat = store.create_conversation(title)
            store.add_message(chat.id, "user", f"About {title.lower()}")
            ids[title] = chat.id
        store.set_pinned(ids["Thesis outline"], True)
    return ids


def _rows(chat: ChatPanel) -> list[tuple[str, bool]]:
    items = [chat.conversations.list.item(row) for row in range(chat.conversations.list.count())]
    return [(item.text().split("\n")[0], not item.icon().isNull()) for item in items]


def test_pinned_chats_stay_on_top_and_each_says_when_it_was_used(
    qtbot: QtBot, screenshot_dir: Path
) -> None:
    ids = _seed_chats()
    window = _open(qtbot)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.conversations.list.count() == 5)
    assert _rows(chat) == [
        ("Thesis outline", True),
        ("Trip to Lisbon", False),
        ("Tax questions", False),
        ("Python prime checker", False),
        ("Recipe ideas", False),
    ]
    # The chat used last opens at start, not the pinned one above it.
    assert chat.conversation is not None and chat.conversation.id == ids["Trip to Lisbon"]
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        times = {s.title: s.updated_at for s in store.list_conversations()}
    for row in range(5):
        item = chat.conversations.list.item(row)
        title, second = item.text().split("\n")
        assert second.startswith(f"{last_used(times[title])} · About "), second
    thesis = chat.conversations.list.item(0).text()
    assert f"{last_used(times['Thesis outline'])} · " in thesis and "20" in thesis  # a year
    assert "Pinned" in chat.conversations.list.item(0).toolTip()

    # Pin and Unpin from the context menu's entries.
    recipe = ids["Recipe ideas"]
    assert chat.conversations.menu_entries(recipe)[0] == ("pin", "Pin to top")
    chat._on_conversation_action("pin", recipe)
    # Pinned chats among themselves: the one used last first.
    qtbot.waitUntil(
        lambda: _rows(chat)[:2] == [("Recipe ideas", True), ("Thesis outline", True)],
        timeout=30_000,
    )
    assert chat.conversations.menu_entries(recipe)[0] == ("unpin", "Unpin")
    _idle(qtbot, chat)
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        chat.chats_toggle.setChecked(True)
        QApplication.processEvents()
        assert chat.conversations.isVisible()
        assert window.grab().save(str(screenshot_dir / f"chat-list-pinned-{width}x{height}.png"))
    chat._on_conversation_action("unpin", ids["Thesis outline"])
    qtbot.waitUntil(lambda: _rows(chat)[-1] == ("Thesis outline", False), timeout=30_000)
    assert _rows(chat)[0] == ("Recipe ideas", True)  # Thesis is back in its place by date
    _idle(qtbot, chat)
    window.close()
    with ChatStore(app_paths().data_dir / "chats.sqlite3") as store:
        pins = {s.title: s.pinned for s in store.list_conversations()}
    assert pins == {title: title == "Recipe ideas" for title in ids}
