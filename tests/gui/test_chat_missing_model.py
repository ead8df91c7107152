"""Issue 28: the chat's model folder moved or renamed while the app runs. The real window
(offscreen), the real engine process and the demo model copied into the app's model folder;
the folder is renamed on disk and the real file watcher notices."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui

WAIT = 60_000


@pytest.mark.subprocess
def test_a_renamed_model_folder_is_named_and_can_be_located(
    qtbot: QtBot, caplog: pytest.LogCaptureFixture, screenshot_dir: Path
) -> None:
    caplog.set_level(logging.INFO)
    paths = app_paths().ensure()
    model = paths.models_dir / "My model"
    renamed = paths.models_dir / "My model (moved)"
    shutil.copytree(demo_model_dir(), model)
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    chat = window.chat
    qtbot.waitUntil(lambda: chat.store_ready, timeout=10_000)
    asked: list[Path] = []

    def choose(_parent: QWidget, _title: str, start: Path) -> Path:
        asked.append(start)
        return renamed

    chat.missing.choose_folder = choose
    window.build_panels()
    models = window._models
    assert models is not None
    qtbot.waitUntil(lambda: model in [e.path for e in models.entries], timeout=WAIT)
    window._open_in_chat(model)
    qtbot.waitUntil(
        lambda: chat.model.loaded is not None and chat.model.loaded.model_dir == model,
        timeout=WAIT,
    )
    assert chat.missing.followed == model
    assert not chat.missing.banner.isVisible()
    chat.model.eject()  # the next turn has to load it from its folder again

    model.rename(renamed)

    # At once: the banner names the folder, the log says so, Models drops it.
    qtbot.waitUntil(lambda: chat.missing.banner.isVisible(), timeout=5_000)
    shown = chat.missing.banner.text.text()
    assert "“My model”" in shown and str(model) in shown
    assert chat.missing.banner.locate_button.isVisible()
    assert chat.missing.banner.choose_button.isVisible()
    assert chat.model_status.text() == "folder missing"
    # The status bar says the same once the eject lands, not "ejected".
    gone = "No model loaded: the folder “My model” is gone"
    qtbot.waitUntil(lambda: window.model_label.text() == gone, timeout=5_000)
    assert any(
        r.levelno == logging.WARNING and str(model) in r.getMessage() for r in caplog.records
    )
    qtbot.waitUntil(
        lambda: [e.path for e in models.entries if e.path.parent == paths.models_dir] == [renamed],
        timeout=5_000,
    )
    assert any("gone" in r.getMessage() and str(model) in r.getMessage() for r in caplog.records)
    window.show_panel("Chat")
    qtbot.wait(200)
    assert window.grab().save(str(screenshot_dir / "chat_model_folder_gone_1024x700.png"))
    window.resize(1600, 1000)
    qtbot.wait(200)
    assert window.grab().save(str(screenshot_dir / "chat_model_folder_gone_1600x1000.png"))

    # A turn now says which folder is gone, not "No model is loaded".
    chat.send("Count from 1 to 5.")
    qtbot.waitUntil(lambda: not chat.generating and chat.transcript.messages != [], timeout=WAIT)
    qtbot.waitUntil(lambda: chat.transcript.messages[-1].error_label.isVisible(), timeout=WAIT)
    error = chat.transcript.messages[-1].error_label.text()
    assert "“My model” is gone" in error and "Locate folder" in error
    assert "No model is loaded" not in error

    # Locate it: the chat switches to the folder's new place and answers again.
    qtbot.mouseClick(chat.missing.banner.locate_button, Qt.MouseButton.LeftButton)
    assert asked == [paths.models_dir]
    qtbot.waitUntil(
        lambda: chat.model.loaded is not None and chat.model.loaded.model_dir == renamed,
        timeout=WAIT,
    )
    assert not chat.missing.banner.isVisible()
    assert chat.missing.followed == renamed
    assert chat.model_status.text() != "folder missing"
    assert window.model_label.text().startswith("Model: My model (moved)")
    chat.send("Count from 1 to 5.")
    qtbot.waitUntil(lambda: not chat.generating, timeout=WAIT)
    qtbot.waitUntil(lambda: chat.transcript.messages[-1].content != "", timeout=WAIT)
    assert not chat.transcript.messages[-1].error_label.isVisible()
    window.shutdown()


def test_deleted_restored_and_missing_at_start(
    qtbot: QtBot, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The watcher alone: a folder deleted (not renamed), put back, and one already missing
    when the chat opens it; a remote model has no folder to watch."""
    from qwen_mtp_desktop.core.engine import EngineError
    from qwen_mtp_desktop.core.remote.endpoints import remote_ref
    from qwen_mtp_desktop.ui.chat.missing_model import MissingModel

    parent = QWidget()
    qtbot.addWidget(parent)
    missing = MissingModel(parent)
    gone: list[Path] = []
    missing.vanished.connect(gone.append)
    model = tmp_path / "models" / "Qwen3.5 ünïcode name"
    shutil.copytree(demo_model_dir(), model)
    missing.follow(model)
    assert missing.gone is None and not missing.banner.isVisibleTo(parent)
    unrelated = EngineError("No model is loaded.", "Load a model first.", code="NOT_LOADED")
    assert missing.explain(unrelated) is unrelated  # the folder is there: not its error

    shutil.rmtree(model)
    qtbot.waitUntil(lambda: gone == [model], timeout=5_000)
    assert missing.banner.isVisibleTo(parent)
    assert str(model) in missing.banner.text.text()
    explained = missing.explain(unrelated)
    assert explained.code == "MODEL_NOT_FOUND" and "“Qwen3.5 ünïcode name” is gone" in (
        explained.message
    )
    other = EngineError("Generation failed.", code="GENERATION_FAILED")
    assert missing.explain(other) is other  # other failures are not blamed on the folder

    shutil.copytree(demo_model_dir(), model)  # put back: the next look at the header clears it
    missing.follow(model)
    assert missing.gone is None and not missing.banner.isVisibleTo(parent)

    never = tmp_path / "never existed"
    missing.follow(never)
    assert missing.gone == never and gone[-1] == never
    assert missing.banner.isVisibleTo(parent)

    missing.follow(remote_ref("abc123"))  # a remote model: no folder
    assert missing.gone is None and missing.followed is None
    assert sum("is gone" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.subprocess
def test_a_located_folder_joins_the_library_and_new_chats_open_it(
    qtbot: QtBot, tmp_path: Path, screenshot_dir: Path
) -> None:
    """Issue 44, minor 2: after Locate folder, Ctrl+N opens the located model (not the gone
    path, which unloaded the working model), and the located folder is in the library."""
    paths = app_paths().ensure()
    model = tmp_path / "models" / "My model"
    elsewhere = tmp_path / "elsewhere" / "My model"
    shutil.copytree(demo_model_dir(), model)
    store = SettingsStore(paths.settings_file)
    store.update(lambda settings: setattr(settings, "default_model", str(model)))
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(1024, 700)
    window.show()
    chat = window.chat
    qtbot.waitUntil(
        lambda: chat.store_ready and chat.model.loaded is not None
        and chat.model.loaded.model_dir == model,
        timeout=WAIT,
    )  # fmt: skip
    chat.send("Count from 1 to 3.")
    qtbot.waitUntil(lambda: not chat.generating and chat.conversation is not None, timeout=WAIT)
    chat.missing.choose_folder = lambda _parent, _title, _start: elsewhere
    elsewhere.parent.mkdir()
    model.rename(elsewhere)
    qtbot.waitUntil(lambda: chat.missing.banner.isVisible(), timeout=WAIT)
    qtbot.mouseClick(chat.missing.banner.locate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(
        lambda: chat.model.loaded is not None and chat.model.loaded.model_dir == elsewhere,
        timeout=WAIT,
    )
    # The library and the start model follow the folder (read back from the file).
    saved = SettingsStore(paths.settings_file).settings
    assert str(elsewhere) in saved.model_folders
    assert saved.default_model is not None and Path(saved.default_model) == elsewhere
    # Ctrl+N: a new chat on the located model, which stays loaded.
    unloads: list[object] = []
    window.engine_process.unloaded.connect(lambda *args: unloads.append(args))
    chat.new_chat()
    assert chat.current_model_dir() == elsewhere
    qtbot.wait(500)
    assert unloads == []
    assert chat.model.loaded is not None and chat.model.loaded.model_dir == elsewhere
    assert not chat.missing.banner.isVisible()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(100)
        assert window.grab().save(
            str(screenshot_dir / f"chat-located-new-chat-{width}x{height}.png")
        )
    window.shutdown()
