"""Every panel and every dialog usable on a small (1024x700) and a large (1600x1000) window, as a
user meets them: a library with a long-named model beside the demo, a benchmark report in the
History, the dialogs opened the way the app opens them. `tests/gui/layout_checks.py` asserts that
nothing is cut (buttons, labels, table cells and headers, combo boxes, sideways scrolling); each
screen is saved under .cache/screenshots (layout-*.png) to be looked at."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QApplication, QDialog, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_checkpoint_dir, demo_model_dir
from qwen_mtp_desktop.core.measure.reports import model_key
from qwen_mtp_desktop.core.remote.endpoints import RemoteEndpoint
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.tools.mcp.config import import_servers
from qwen_mtp_desktop.ui.main_window import PANELS, MainWindow
from tests.gui.layout_checks import layout_problems

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

SIZES = ((1024, 700), (1600, 1000))
#: The conversation column must keep at least this much of the window with Settings open.
MIN_TRANSCRIPT_SHARE = 0.5
#: A model name as exports are named (precision, group size): longer than "Demo model".
LONG_NAME = "Qwen3.5-0.8B-INT4-asym-g64-sym-fallback"


@pytest.fixture(scope="module")
def bench_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real benchmark of the demo model (plain, MTP n=1,2, prompt lookup; one round)."""
    home = tmp_path_factory.mktemp("bench-home")
    env = {**os.environ, "QWEN_MTP_DESKTOP_HOME": str(home)}
    command = [sys.executable, "-m", "qwen_mtp_desktop", "bench", str(demo_model_dir())]
    command += ["--prompts", "demo", "--depths", "1,2", "--runs", "1", "--json"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.fixture
def library(app_home: Path, bench_report: dict[str, Any]) -> Path:
    """The models folder with a copy of the demo model under an export's long name, and the
    benchmark report in the demo model's History."""
    paths = app_paths().ensure()
    copy = paths.models_dir / LONG_NAME
    shutil.copytree(demo_model_dir(), copy)
    reports = paths.data_dir / "reports" / model_key(demo_model_dir())
    reports.mkdir(parents=True)
    (reports / f"{bench_report['id']}.json").write_text(json.dumps(bench_report))
    return copy


def _window(qtbot: QtBot, width: int, height: int) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.chat.store_ready, timeout=10_000)
    qtbot.waitUntil(
        lambda: window.models.scans_done >= 1 and not window.models.busy, timeout=30_000
    )
    assert (window.width(), window.height()) == (width, height)
    return window


def _save(widget: QWidget, screenshot_dir: Path, name: str) -> None:
    QApplication.processEvents()
    assert widget.grab().save(str(screenshot_dir / f"layout-{name}.png"))


def _settle(qtbot: QtBot, ms: int = 150) -> None:
    qtbot.wait(ms)
    QApplication.processEvents()


def _select_model(qtbot: QtBot, window: MainWindow, path: Path) -> None:
    window.models.show_model(path)
    qtbot.waitUntil(lambda: window.models.report(path) is not None, timeout=30_000)
    _settle(qtbot)


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_panels_show_everything(
    qtbot: QtBot, library: Path, screenshot_dir: Path, width: int, height: int
) -> None:
    window = _window(qtbot, width, height)
    size = f"{width}x{height}"
    problems: dict[str, list[str]] = {}
    for name in PANELS:
        window.show_panel(name)
        if name == "Models":
            _select_model(qtbot, window, library)
            # The demo model loads in the chat: the list marks it.
            qtbot.waitUntil(lambda: window.models.loaded_path is not None, timeout=60_000)
        if name == "Benchmark":
            bench = window.bench
            qtbot.waitUntil(lambda b=bench: b.report is not None, timeout=20_000)
        _settle(qtbot)
        _save(window, screenshot_dir, f"{name.lower()}-{size}")
        found = layout_problems(window, window.panel(name))
        if found:
            problems[name] = found
    # The export wizard's Check and Options pages, on the demo checkpoint.
    export = window.export_panel
    window.show_panel("Export")
    export.set_source(str(demo_checkpoint_dir()))
    export.run_check()
    qtbot.waitUntil(lambda: export.check_busy.isHidden(), timeout=60_000)
    for page, title in ((1, "check"), (2, "options")):
        export.show_page(page)
        _settle(qtbot)
        _save(window, screenshot_dir, f"export-{title}-{size}")
        found = layout_problems(window, export)
        if found:
            problems[f"Export {title}"] = found
    assert not problems, json.dumps(problems, indent=1)


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_chat_with_settings_open_keeps_the_conversation_wide(
    qtbot: QtBot, library: Path, screenshot_dir: Path, width: int, height: int
) -> None:
    window = _window(qtbot, width, height)
    window.show_panel("Chat")
    window.chat.settings_toggle.setChecked(True)
    _settle(qtbot)
    assert window.chat.settings_panel.isVisible()
    _save(window, screenshot_dir, f"chat-settings-{width}x{height}")
    transcript = window.chat.transcript
    assert transcript.width() >= MIN_TRANSCRIPT_SHARE * width, (
        f"the conversation is {transcript.width()} px of a {width} px window"
    )
    problems = layout_problems(window, window.chat.settings_panel)
    assert not problems, problems


def test_narrow_chat_opens_one_side_column_at_a_time(qtbot: QtBot, library: Path) -> None:
    window = _window(qtbot, 1024, 700)
    chat = window.chat
    window.show_panel("Chat")
    assert chat.conversations.isVisible() and not chat.settings_panel.isVisible()
    chat.settings_toggle.click()
    assert chat.settings_panel.isVisible() and not chat.conversations.isVisible()
    assert not chat.chats_toggle.isChecked()
    chat.chats_toggle.click()
    assert chat.conversations.isVisible() and not chat.settings_panel.isVisible()
    assert not chat.settings_toggle.isChecked()
    # Wide enough for both: both stay open.
    window.resize(1600, 1000)
    QApplication.processEvents()
    chat.settings_toggle.click()
    assert chat.settings_panel.isVisible() and chat.conversations.isVisible()
    # Narrowing the window with both open closes the chat list.
    window.resize(1024, 700)
    QApplication.processEvents()
    assert chat.settings_panel.isVisible() and not chat.conversations.isVisible()


def _dialogs(qtbot: QtBot, window: MainWindow, library: Path) -> Iterator[tuple[str, QDialog]]:
    """Each dialog, opened as the app opens it, then closed."""
    settings = window.show_settings()
    yield "settings", settings
    settings.close()
    discover = window.show_discover()
    qtbot.waitUntil(lambda: discover.loaded, timeout=10_000)
    yield "discover", discover
    discover.close()
    server = window.show_server_dialog()
    yield "api-server", server
    server.close()
    mcp = window.show_mcp_dialog()  # empty, then with a server and an error shown
    yield "mcp-servers", mcp
    mcp.add_imported(
        import_servers(
            '{"mcpServers": {"files": {"command": "npx", "args": '
            '["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}'
        )
    )
    mcp.name_edit.setText("a/b")
    mcp.save_current()
    yield "mcp-servers-filled", mcp
    mcp.close()
    window.show_panel("Chat")
    window.chat.header.remote_action.emit("action:add-remote")
    remote = window.chat.remote_dialog
    assert isinstance(remote, QDialog)
    yield "remote-server", remote
    remote.reject()
    servers = window.chat.show_remote_servers()  # empty, then with two servers
    yield "remote-servers", servers
    for ident, name, url in (
        ("a1b2c3", "GPU server", "http://192.168.1.20:8000/v1"),
        ("d4e5f6", "OVMS team", "http://ovms.lan:8000/v3"),
    ):
        window.chat.remote_models.save(
            RemoteEndpoint(ident, name, url, "Qwen3.5-9B-int4", False), None, keep_key=True
        )
    yield "remote-servers-filled", servers
    servers.close()
    window.show_panel("Models")
    _select_model(qtbot, window, library)
    ovms = window.models.deploy_selected()
    assert ovms is not None
    yield "ovms-deploy", ovms
    ovms.reject()


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_dialogs_fit_the_window_and_show_everything(
    qtbot: QtBot, library: Path, screenshot_dir: Path, width: int, height: int
) -> None:
    """Settings, Discover, the local API server, MCP servers, a remote server, the remote
    servers list and OVMS deploy,
    opened over the window: each fits inside it and nothing in it is cut."""
    window = _window(qtbot, width, height)
    problems: dict[str, list[str]] = {}
    for name, dialog in _dialogs(qtbot, window, library):
        qtbot.waitExposed(dialog)
        _settle(qtbot)
        frame, outer = dialog.frameGeometry(), window.frameGeometry()
        if not outer.contains(frame):
            problems.setdefault(name, []).append(
                f"{frame.getRect()} is not inside the window {outer.getRect()}"
            )
        _save(dialog, screenshot_dir, f"{name}-{width}x{height}")
        found = layout_problems(dialog, dialog)
        if found:
            problems.setdefault(name, []).extend(found)
    assert not problems, json.dumps(problems, indent=1)
