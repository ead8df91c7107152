"""The Settings dialog (offscreen): Ctrl+, opens it; the theme applies at once (read back from the
palette) and is remembered; the default model is the one opened at start; the API server
settings are one click away; data folders open, and changing the models folder moves nothing.
Screenshots light and dark at 1024x700 and 1600x1000."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.models.library import selected_model
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.dialogs.settings import SettingsDialog, SettingsDialogs
from qwen_mtp_desktop.ui.main_window import MainWindow
from qwen_mtp_desktop.ui.widgets.style import apply_theme

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SIZES = ((1024, 700), (1600, 1000))


def window_lightness() -> int:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    return app.palette().color(QPalette.ColorRole.Window).lightness()


@pytest.fixture(autouse=True)
def system_theme_after() -> Iterator[None]:
    """The palette is the application's: put the system one back for the tests after."""
    yield
    app = QApplication.instance()
    if isinstance(app, QApplication):
        apply_theme(app, "system")


def _window(qtbot: QtBot, width: int = 1280, height: int = 800) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    return window


class Dialogs:
    def __init__(self) -> None:
        self.folder: Path | None = None
        self.answers: list[bool] = []
        self.asked: list[str] = []

    def build(self) -> SettingsDialogs:
        return SettingsDialogs(
            choose_folder=lambda _parent, _title, _start: self.folder,
            confirm=self._confirm,
        )

    def _confirm(self, _parent: object, title: str, text: str, _action: str) -> bool:
        self.asked.append(text)
        return self.answers.pop(0) if self.answers else False


def saved() -> dict[str, object]:
    data = json.loads(app_paths().settings_file.read_text())
    assert isinstance(data, dict)
    return data


def test_ctrl_comma_opens_settings_and_the_theme_switches_live(qtbot: QtBot) -> None:
    window = _window(qtbot)
    system = window_lightness()
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5_000)
    target = QApplication.focusWidget() or window
    qtbot.keyClick(target, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    dialog = window._settings_dialog
    assert isinstance(dialog, SettingsDialog) and dialog.isVisible()
    before = window.styleSheet()
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("dark"))
    assert window_lightness() < 100
    assert window.dark and window.styleSheet() != before  # the app stylesheet follows
    assert saved()["theme"] == "dark"
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("light"))
    assert window_lightness() > 200 and not window.dark
    assert saved()["theme"] == "light"
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("system"))
    assert window_lightness() == system
    assert saved()["theme"] == "system"


def test_the_theme_is_remembered_at_the_next_start(qtbot: QtBot) -> None:
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.theme = "dark"
    store.save()
    window = _window(qtbot)
    assert window_lightness() < 100 and window.dark
    dialog = window.show_settings()
    assert dialog.theme_combo.currentData() == "dark"


def test_default_model_is_the_one_opened_at_start(qtbot: QtBot, tmp_path: Path) -> None:
    window = _window(qtbot)
    exported = tmp_path / "Qwen3.5-0.8B-int8"
    exported.mkdir()
    window._on_models_changed([exported])
    dialog = window.show_settings()
    combo = dialog.default_combo
    assert combo.count() == 2 and combo.currentData() is None  # the demo by default
    combo.setCurrentIndex(combo.findData(str(exported)))
    assert saved()["default_model"] == str(exported)
    restarted = SettingsStore(app_paths().settings_file).settings
    assert selected_model(restarted) == exported
    # Gone at the next scan: listed as not found, and the demo opens instead.
    window._on_models_changed([])
    assert combo.currentText().endswith("(not found)")
    exported.rmdir()
    assert "demo model opens instead" in dialog.default_note.text()
    assert selected_model(SettingsStore(app_paths().settings_file).settings) == demo_model_dir()


def test_server_settings_and_data_folders(qtbot: QtBot) -> None:
    window = _window(qtbot)
    opened: list[QUrl] = []
    window.open_url = opened.append
    dialog = window.show_settings()
    assert dialog.server_status.text().startswith("Off")
    qtbot.mouseClick(dialog.server_button, Qt.MouseButton.LeftButton)
    assert window._server_dialog is not None and window._server_dialog.isVisible()
    paths = app_paths()
    assert dialog.folder_labels["models"].text() == str(paths.models_dir)
    assert dialog.folder_labels["chats"].text() == str(paths.data_dir / "chats.sqlite3")
    assert dialog.folder_labels["logs"].text() == str(paths.log_dir)
    for key in ("models", "chats", "logs"):
        qtbot.mouseClick(dialog.open_buttons[key], Qt.MouseButton.LeftButton)
    assert [url.toLocalFile() for url in opened] == [
        str(paths.models_dir),
        str(paths.data_dir),
        str(paths.log_dir),
    ]


def test_changing_the_models_folder_moves_nothing_and_says_so(qtbot: QtBot, tmp_path: Path) -> None:
    window = _window(qtbot)
    paths = app_paths()
    old = paths.models_dir
    (old / "my-model").mkdir(parents=True)
    (old / "my-model" / "openvino_language_model.bin").write_bytes(b"weights")
    dialogs = Dialogs()
    dialog = window.show_settings()
    dialog._dialogs = dialogs.build()
    # Refused: the settings folder. Nothing asked, nothing saved.
    dialog.change_models_folder(str(paths.config_dir))
    qtbot.waitUntil(lambda: not dialog.checking_folder, timeout=10_000)
    assert dialog.folder_message.startswith("Not changed:") and "settings folder" in (
        dialog.folder_message
    )
    assert dialogs.asked == []
    # Accepted after the user confirms; the question says nothing is moved.
    new = tmp_path / "disk" / "models"
    dialogs.folder = new
    dialogs.answers = [True]
    qtbot.mouseClick(dialog.change_models_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.checking_folder, timeout=10_000)
    assert len(dialogs.asked) == 1 and "not moved, copied or deleted" in dialogs.asked[0]
    assert "nothing is moved" in dialog.folder_message
    # tmp_path is inside the system's temp folder: asked and told (issue 29).
    assert "Warning:" in dialogs.asked[0] and "temporary folder" in dialogs.asked[0]
    assert "Note:" in dialog.folder_message and "can disappear" in dialog.folder_message
    data = saved()
    assert data["models_dir"] == str(new)
    assert data["model_folders"] == [str(old)]
    assert (old / "my-model" / "openvino_language_model.bin").read_bytes() == b"weights"
    assert "from the next start" in dialog.folder_labels["models"].text()


@pytest.mark.parametrize(("width", "height"), SIZES)
@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshot(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int, theme: str
) -> None:
    from tests.gui.layout_checks import layout_problems

    window = _window(qtbot, width, height)
    dialog = window.show_settings()
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData(theme))
    QApplication.processEvents()
    assert not layout_problems(dialog, dialog)
    assert dialog.grab().save(str(screenshot_dir / f"settings-{theme}-{width}x{height}.png"))
