"""The new user's path to a real model in the window (offscreen): Discover's ready export, the
download dialog against a hub-compatible server on loopback (check, download with progress,
pause and resume, cancel), the MTP head added from the source checkpoint in a child process and
checked, then Open in chat; the export toolkit made unimportable in the window's process.
Screenshots at 1024x700 and 1600x1000."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.devtools.hub_server import HubServer
from qwen_mtp_desktop.ui.discover.download_dialog import DownloadDialog
from qwen_mtp_desktop.ui.main_window import MainWindow
from tests.checkpoint_files import sharded_checkpoint
from tests.gui.layout_checks import layout_problems
from tests.hub_repos import hub_env

pytestmark = pytest.mark.gui

HEADLESS = "test-org/Qwen3.5-demo-int8-ov"
WITH_HEAD = "test-org/demo-with-head-ov"
CHECKPOINT = "test-org/demo-checkpoint"
NOT_A_MODEL = "test-org/just-weights"
SIZES = ((1024, 700), (1600, 1000))
TOOLKIT = ("torch", "transformers", "optimum")


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    root = tmp_path / "hub"
    shutil.copytree(demo_model_dir(), root / WITH_HEAD)
    headless = root / HEADLESS
    shutil.copytree(demo_model_dir(), headless)
    for name in ("openvino_mtp_model.xml", "openvino_mtp_model.bin", "qwen_mtp_export.json"):
        (headless / name).unlink()
    checkpoint = sharded_checkpoint(root / CHECKPOINT, shards=3, bf16=True)
    shutil.copytree(checkpoint, root / NOT_A_MODEL)
    with HubServer(root) as server:
        hub_env(monkeypatch, server, cache_dir=tmp_path / "hf-cache")
        yield server


@pytest.fixture
def no_toolkit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the installed app: importing the export toolkit fails in the window's process."""
    for name in TOOLKIT:
        monkeypatch.setitem(sys.modules, name, None)


def _window(qtbot: QtBot, width: int = 1280, height: int = 800) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    return window


def _checked(qtbot: QtBot, dialog: DownloadDialog) -> None:
    qtbot.waitUntil(lambda: dialog.state in ("checked", "failed"), timeout=20_000)
    qtbot.wait(50)  # the deferred refit to the new facts


def _shot(dialog: DownloadDialog, directory: Path, name: str) -> None:
    QApplication.processEvents()
    assert dialog.grab().save(str(directory / name))


@pytest.mark.subprocess
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_from_discover_to_a_chat_with_the_mtp_head(
    qtbot: QtBot,
    hub: HubServer,
    no_toolkit: None,
    screenshot_dir: Path,
    width: int,
    height: int,
) -> None:
    window = _window(qtbot, width, height)
    discover = window.show_discover()
    qtbot.waitUntil(lambda: discover.loaded, timeout=10_000)
    assert discover.select("Qwen/Qwen3.5-2B")
    assert discover.download_button.isEnabled()
    with qtbot.waitSignal(discover.download_requested, timeout=5_000) as asked:
        qtbot.mouseClick(discover.download_button, Qt.MouseButton.LeftButton)
    assert asked.args == ["circulus/Qwen3.5-2B-int4-ov", "Qwen/Qwen3.5-2B"]
    discover.close()

    dialog = window.show_download(HEADLESS, CHECKPOINT)
    _checked(qtbot, dialog)
    assert dialog.state == "checked", dialog.status.text()
    details = dialog.details_text()
    assert "MTP head: not included" in details and "Contents: language model" in details
    # The estimate the Models panel makes, from the repo's config.json (read before download).
    assert "for one chat of 4,096 tokens (weights, KV cache, linear-attention state)" in details
    assert dialog.head_row.isVisible() and dialog.head_box.isChecked()
    assert hub.url in dialog.source_label.text() and "anonymously" in dialog.source_label.text()
    assert layout_problems(dialog, dialog) == []
    _shot(dialog, screenshot_dir, f"download-checked-{width}x{height}.png")

    with qtbot.waitSignal(dialog.model_ready, timeout=180_000) as ready:
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    model = ready.args[0]
    assert model == app_paths().models_dir / "Qwen3.5-demo-int8-ov"
    assert (model / "openvino_mtp_model.xml").is_file()
    assert dialog.outcome is not None and dialog.outcome.graft is not None
    assert dialog.outcome.graft["check"]["equal"] is True
    assert "equals plain decoding" in dialog.status.text()
    assert dialog.open_button.isVisible()
    qtbot.wait(50)
    assert not any(sys.modules.get(name) for name in TOOLKIT)
    assert layout_problems(dialog, dialog) == []
    _shot(dialog, screenshot_dir, f"download-done-{width}x{height}.png")

    qtbot.mouseClick(dialog.open_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.stack.currentWidget() is window.chat, timeout=10_000)
    qtbot.waitUntil(lambda: window.models.select(model), timeout=30_000)


@pytest.mark.subprocess
def test_pause_resume_and_cancel(
    qtbot: QtBot, hub: HubServer, screenshot_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = _window(qtbot, 1024, 700)
    hub.fault("openvino_language_model.bin", "slow", bytes_per_second=120_000, times=None)
    dialog = window.show_download(WITH_HEAD)
    _checked(qtbot, dialog)
    assert "MTP head: included" in dialog.details_text()
    assert not dialog.head_row.isVisible()
    qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.progress.value() > 0, timeout=30_000)
    assert " left" in dialog.status.text() and "/s" in dialog.status.text()
    _shot(dialog, screenshot_dir, "download-progress-1024x700.png")
    qtbot.mouseClick(dialog.pause_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.state == "paused", timeout=30_000)
    assert dialog.download_button.text() == "Resume download"
    staging = app_paths().models_dir / ".demo-with-head-ov.downloading"
    assert staging.is_dir()
    _shot(dialog, screenshot_dir, "download-paused-1024x700.png")

    # Closed, and the window looking again (as it does at start): it offers the resume.
    dialog.close()
    qtbot.waitUntil(lambda: dialog.state == "paused", timeout=5_000)
    window._look_for_interrupted_downloads()
    qtbot.waitUntil(window.resume_action.isVisible, timeout=10_000)
    assert WITH_HEAD in window.resume_action.text()
    assert "was interrupted" in window.statusBar().currentMessage()
    again = window.show_download(WITH_HEAD)
    _checked(qtbot, again)
    assert "already here: Download resumes it" in again.details_text()
    assert again.download_button.text() == "Resume download"
    hub.clear_faults()
    with qtbot.waitSignal(again.model_ready, timeout=60_000):
        qtbot.mouseClick(again.download_button, Qt.MouseButton.LeftButton)
    assert again.outcome is not None and again.outcome.resumed_bytes > 0
    assert "came from the earlier try" in again.status.text()
    assert not staging.exists()

    # Cancel deletes what arrived.
    shutil.rmtree(again.outcome.model_dir)
    hub.fault("openvino_language_model.bin", "slow", bytes_per_second=120_000, times=None)
    third = window.show_download(WITH_HEAD)
    _checked(qtbot, third)
    qtbot.mouseClick(third.download_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: third.progress.value() > 0, timeout=30_000)
    from PySide6.QtWidgets import QMessageBox

    monkeypatch.setattr(QMessageBox, "question", lambda *_a, **_k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(third.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "cancelled" in third.status.text(), timeout=30_000)
    assert not staging.exists()
    assert not (app_paths().models_dir / "demo-with-head-ov").exists()


@pytest.mark.subprocess
def test_a_gated_model_opens_with_a_token(
    qtbot: QtBot, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gated repo says what to do; the token given in the dialog is kept (in memory here:
    the tests have no keychain, and the dialog says so) and the check then passes."""
    from PySide6.QtWidgets import QInputDialog

    hub.set_access(WITH_HEAD, gated=True, tokens=["hf_test_token_123"])
    window = _window(qtbot, 1024, 700)
    dialog = window.show_download(WITH_HEAD)
    _checked(qtbot, dialog)
    assert dialog.state == "checked"  # a gated repo's file list is public; its files are not
    with qtbot.waitSignal(window.threads.fetch.failed, timeout=60_000):
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    assert "gated or private" in dialog.status.text() and "Hub token" in dialog.status.text()
    monkeypatch.setattr(QInputDialog, "getText", lambda *_a, **_k: ("hf_test_token_123", True))
    qtbot.mouseClick(dialog.token_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.state == "checked", timeout=20_000)
    assert "with the token you gave" in dialog.source_label.text()
    assert "hf_test_token_123" not in dialog.source_label.text() + dialog.status.text()
    with qtbot.waitSignal(dialog.model_ready, timeout=60_000):
        qtbot.mouseClick(dialog.download_button, Qt.MouseButton.LeftButton)
    sent = {r.authorization for r in hub.requests if not r.cdn}
    assert "Bearer hf_test_token_123" in sent
    assert not any(r.authorization for r in hub.requests if r.cdn)  # never to the CDN host
    from qwen_mtp_desktop.core.models.export.hub import store_hub_token

    store_hub_token(None)


@pytest.mark.subprocess
def test_what_cannot_be_downloaded(qtbot: QtBot, hub: HubServer) -> None:
    window = _window(qtbot, 1024, 700)
    dialog = window.show_download(NOT_A_MODEL)
    _checked(qtbot, dialog)
    assert "Not an OpenVINO export" in dialog.details_text()
    assert not dialog.download_button.isEnabled()
    dialog.repo_edit.setText("test-org/no-such-repo")
    dialog.check()
    qtbot.waitUntil(lambda: dialog.state == "failed", timeout=20_000)
    assert "not found" in dialog.status.text()
    assert not dialog.download_button.isEnabled()


@pytest.mark.subprocess
def test_add_the_head_from_the_models_panel(
    qtbot: QtBot, hub: HubServer, no_toolkit: None, screenshot_dir: Path
) -> None:
    """A ready export downloaded without its head shows 'Add MTP head…' in Models; the dialog
    rebuilds it from the checkpoint on the hub, and the model then has a usable head."""
    from qwen_mtp_desktop.ui.models.add_head_dialog import AddHeadDialog

    window = _window(qtbot, 1024, 700)
    download = window.show_download(HEADLESS)
    _checked(qtbot, download)
    download.head_box.setChecked(False)
    with qtbot.waitSignal(download.model_ready, timeout=60_000) as ready:
        qtbot.mouseClick(download.download_button, Qt.MouseButton.LeftButton)
    model = ready.args[0]
    assert "No MTP head" in download.status.text()
    download.close()

    window.show_panel("Models")
    panel = window.models
    qtbot.waitUntil(lambda: panel.select(model), timeout=30_000)
    qtbot.waitUntil(lambda: panel.report(model) is not None, timeout=30_000)
    button = panel.details.add_head_button
    qtbot.waitUntil(button.isVisible, timeout=10_000)
    assert not panel.details.validate_button.isEnabled()
    qtbot.wait(150)
    QApplication.processEvents()
    assert window.grab().save(str(screenshot_dir / "models-add-head-1024x700.png"))
    assert layout_problems(window, panel) == []
    with qtbot.waitSignal(panel.add_head_requested, timeout=5_000):
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    dialogs = [w for w in QApplication.topLevelWidgets() if isinstance(w, AddHeadDialog)]
    assert len(dialogs) == 1
    dialog = dialogs[0]
    qtbot.wait(100)
    assert dialog.source_edit.text() == ""  # no catalog name in "Qwen3.5-demo-int8-ov"
    dialog.source_edit.setText(CHECKPOINT)
    with qtbot.waitSignal(dialog.head_added, timeout=180_000):
        qtbot.mouseClick(dialog.add_button, Qt.MouseButton.LeftButton)
    assert "equals plain decoding" in dialog.status.text()
    assert layout_problems(dialog, dialog) == []
    QApplication.processEvents()
    assert dialog.grab().save(str(screenshot_dir / "add-head-done-1024x700.png"))
    dialog.close()
    qtbot.waitUntil(lambda: (r := panel.report(model)) is not None and r.mtp_usable, timeout=60_000)
    qtbot.waitUntil(lambda: not button.isVisible(), timeout=10_000)
    assert panel.details.validate_button.isEnabled()
    assert not any(sys.modules.get(name) for name in TOOLKIT)


def test_the_suggested_source_is_the_longest_catalog_name_in_the_folder_name() -> None:
    from qwen_mtp_desktop.ui.models.add_head_dialog import suggested_source

    ids = ["Qwen/Qwen3.5-2B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-0.8B"]
    assert suggested_source(Path("/m/Qwen3.5-27B-int4-ov"), ids) == "Qwen/Qwen3.5-27B"
    assert suggested_source(Path("/m/qwen3.5-2b-int4-ov"), ids) == "Qwen/Qwen3.5-2B"
    assert suggested_source(Path("/m/my-model"), ids) == ""
