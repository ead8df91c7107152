"""The Models panel's "Deploy to OVMS…" action with real widgets, a real worker thread and the
real demo export: the files are written off the GUI thread, the result says what was not run
here, a refused output folder shows a plain error and loses nothing."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QPushButton, QWidget
from pytestqt.qtbot import QtBot

import qwen_mtp_desktop.ui.models.ovms_dialog as ovms_dialog
import tests.gui.test_models_panel as panel_tests
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.ui.models.ovms_dialog import NOT_RUN_HERE, OvmsDeployDialog
from tests.gui.test_models_panel import PanelFactory, wait_idle

pytestmark = pytest.mark.gui

WAIT = 30_000
# The Models panel tests' fixtures, shared by name.
app_style = panel_tests.app_style
fake = panel_tests.fake
make_panel = panel_tests.make_panel
resources = panel_tests.resources
#: The main window's sizes less its 150 px sidebar and status bar: what the panel gets.
#: The bundled demo export (read before the panel tests point the resources folder elsewhere).
DEMO = demo_model_dir()
SIZES = {"1024x700": (874, 676), "1600x1000": (1450, 976)}


def shoot(widget: QWidget, name: str, screenshot_dir: Path, qtbot: QtBot) -> None:
    qtbot.wait(150)
    path = screenshot_dir / f"ovms_{name}.png"
    assert widget.grab().save(str(path))


def test_deploy_from_the_models_panel(
    make_panel: PanelFactory,
    qtbot: QtBot,
    tmp_path: Path,
    screenshot_dir: Path,
    app_style: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    library = tmp_path / "library"
    model = library / "Qwen3.5 demo export"
    shutil.copytree(DEMO, model)
    panel = make_panel([library])
    assert panel.select(model)
    wait_idle(qtbot, panel)
    button = panel.details.deploy_button
    assert button.isEnabled() and button.text() == "Deploy to OVMS…"
    for size, (width, height) in SIZES.items():
        panel.resize(width, height)
        wait_idle(qtbot, panel)
        # Every action is inside the visible panel (the flow wraps instead of cutting off).
        for action in panel.details.findChildren(QPushButton):
            if action.isVisible() and action.parent() is panel.details.deploy_button.parent():
                right = action.mapTo(panel, QPoint(action.width(), 0)).x()
                assert right <= panel.width() - 12, action.text()
        shoot(panel, f"panel_{size}", screenshot_dir, qtbot)

    # Where the writing runs: the real function, recorded.
    threads: list[threading.Thread] = []
    real = ovms_dialog.deploy_ovms

    def recording(*args: object, **kwargs: object) -> object:
        threads.append(threading.current_thread())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ovms_dialog, "deploy_ovms", recording)

    button.click()
    dialog = panel.ovms_dialog
    assert isinstance(dialog, OvmsDeployDialog)
    qtbot.waitUntil(dialog.isVisible, timeout=WAIT)
    assert dialog.not_run_label.text() == NOT_RUN_HERE
    assert dialog.name_edit.text() == "Qwen3.5-demo-export"
    out = tmp_path / "ovms out"
    dialog.out_edit.setText(str(out))
    dialog.tokens_spin.setValue(2)
    dialog.resize(720, 420)
    shoot(dialog, "dialog_form", screenshot_dir, qtbot)

    dialog.write_button.click()
    assert dialog.running and not dialog.close_button.isEnabled()
    qtbot.waitUntil(lambda: dialog.deployment is not None, timeout=WAIT)
    assert threads and threads[0] is not threading.main_thread()
    result = dialog.deployment
    assert result is not None and result.out == out and result.num_assistant_tokens == 2
    text = dialog.result_view.toPlainText()
    assert "Not run here:" in text and "cannot run on this machine" in text
    assert result.docker_command in text and "/v3/chat/completions" in text
    assert "Not confirmed from OVMS's sources:" in text
    generation = json.loads((out / result.name / "generation_config.json").read_text())
    assert generation["num_assistant_tokens"] == 2
    assert f"OVMS repository written to {out}" in panel.status_label.text()
    assert not dialog.write_button.isEnabled() and dialog.close_button.isEnabled()
    dialog.copy_button.click()
    assert QApplication.clipboard().text() == result.docker_command
    dialog.reveal_button.click()
    dialog.resize(720, 640)
    shoot(dialog, "dialog_result", screenshot_dir, qtbot)
    dialog.close()

    # The same folder again: refused in plain words; the repository is untouched.
    before = sorted(p.name for p in out.rglob("*"))
    button.click()
    again = panel.ovms_dialog
    assert isinstance(again, OvmsDeployDialog) and again is not dialog
    again.out_edit.setText(str(out))
    again.write_button.click()
    qtbot.waitUntil(lambda: again.error is not None, timeout=WAIT)
    assert again.error_label.isVisible()
    assert "is not empty; nothing was written or deleted" in again.error_label.text()
    assert again.write_button.isEnabled() and again.close_button.isEnabled()
    assert sorted(p.name for p in out.rglob("*")) == before
    again.resize(720, 460)
    shoot(again, "dialog_error", screenshot_dir, qtbot)
    again.close()
    wait_idle(qtbot, panel)


def test_deploy_is_offered_only_for_usable_models(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    library = tmp_path / "library"
    broken = library / "broken"
    shutil.copytree(DEMO, broken)
    for suffix in (".xml", ".bin"):
        (broken / f"openvino_tokenizer{suffix}").unlink()
    panel = make_panel([library])
    assert panel.select(broken)
    wait_idle(qtbot, panel)
    assert not panel.details.deploy_button.isEnabled()
    assert "errors" in panel.details.deploy_button.toolTip()
