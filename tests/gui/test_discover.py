"""Discover (offscreen): the Qwen3.5 list sized for this computer, found from the Models panel and
from an empty chat, opening the export wizard pre-filled; without a network the wizard's check
says the computer is offline. Screenshots at 1024x700 and 1600x1000."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.discover.dialog import COLUMNS, DiscoverDialog
from qwen_mtp_desktop.ui.main_window import MainWindow
from qwen_mtp_desktop.workers.tasks import TaskRunner

pytestmark = pytest.mark.gui

GB = 10**9  # format_bytes counts in powers of ten
SIZES = ((1024, 700), (1600, 1000))


@pytest.fixture
def runner() -> Iterator[TaskRunner]:
    runner = TaskRunner("test-discover")
    yield runner
    runner.shutdown()


def make_dialog(qtbot: QtBot, runner: TaskRunner, free: int, total: int) -> DiscoverDialog:
    dialog = DiscoverDialog(runner, "CPU", memory_probe=lambda: (free, total))
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitUntil(lambda: dialog.loaded, timeout=10_000)
    assert dialog.error is None
    return dialog


def shown_bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]


def row_of(dialog: DiscoverDialog, hub_id: str) -> int:
    names = [dialog.table.item(row, 0).text() for row in range(dialog.table.rowCount())]
    return names.index(hub_id.split("/")[1])


def test_list_shows_every_size_with_memory_per_precision_for_this_computer(
    qtbot: QtBot, runner: TaskRunner
) -> None:
    dialog = make_dialog(qtbot, runner, 16 * GB, 32 * GB)
    table = dialog.table
    assert table.rowCount() == 8
    assert [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())] == list(
        COLUMNS
    )
    assert "16.0 GB of memory free of 32.0 GB" in dialog.summary.text()
    small = row_of(dialog, "Qwen/Qwen3.5-0.8B")
    assert table.item(small, 2).text() == "1.60 GB"  # 0.8 B parameters in bf16
    assert table.item(small, 7).text() == "yes"
    assert table.item(small, 8).text() == "INT8"
    int4, int8, fp16 = (shown_bytes(table.item(small, c).text()) for c in (4, 5, 6))
    assert int4 < int8 < fp16
    moe = row_of(dialog, "Qwen/Qwen3.5-35B-A3B")
    assert table.item(moe, 1).text() == "35B (MoE, 3B active)"
    flagship = row_of(dialog, "Qwen/Qwen3.5-397B-A17B")
    assert table.item(flagship, 8).text() == "too large"
    table.selectRow(flagship)
    assert not dialog.export_button.isEnabled()
    assert "Too large" in dialog.detail_text.text()
    assert "more than this computer's 32.0 GB" in dialog.detail_text.text()
    # Choosing a model asks for the wizard with the recommended precision.
    wanted: list[tuple[str, str]] = []
    dialog.export_requested.connect(lambda hub_id, fmt: wanted.append((hub_id, fmt)))
    assert dialog.select("Qwen/Qwen3.5-4B")
    assert dialog.export_button.text() == "Export as INT4…"
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    assert wanted == [("Qwen/Qwen3.5-4B", "int4")]
    assert not dialog.isVisible()


def test_less_memory_changes_the_recommendation(
    qtbot: QtBot, runner: TaskRunner, screenshot_dir: Path
) -> None:
    dialog = make_dialog(qtbot, runner, int(1.2 * GB), 4 * GB)
    table = dialog.table
    assert table.item(row_of(dialog, "Qwen/Qwen3.5-4B"), 8).text() == "too large"
    # The 0.8B export peaks at about 6.6 GB: more than a 4 GB computer has.
    assert table.item(row_of(dialog, "Qwen/Qwen3.5-0.8B"), 8).text() == "INT4, export elsewhere"
    # Without the export toolkit (an installed bundle), Export says so before it is pressed.
    bundle = DiscoverDialog(
        runner,
        "CPU",
        memory_probe=lambda: (16 * GB, 32 * GB),
        export_probe=lambda: "Exporting needs a source install with the export toolkit.",
    )
    qtbot.addWidget(bundle)
    bundle.show()
    qtbot.waitUntil(lambda: bundle.loaded, timeout=10_000)
    assert bundle.select("Qwen/Qwen3.5-2B")
    assert bundle.export_button.text() == "Export as INT8 (needs the toolkit)…"
    assert "source install" in bundle.detail_text.text()
    assert bundle.download_button.text() == "Download INT4 ready…"
    bundle.resize(1024 - 80, 700 - 80)
    QApplication.processEvents()
    assert bundle.grab().save(str(screenshot_dir / "discover-bundle-944x620.png"))
    # Where a ready export is listed, downloading it needs no export RAM.
    dialog = make_dialog(qtbot, runner, 6 * GB, 8 * GB)
    assert dialog.table.item(row_of(dialog, "Qwen/Qwen3.5-2B"), 8).text() == "INT8, or INT4 ready"
    assert dialog.table.item(row_of(dialog, "Qwen/Qwen3.5-9B"), 8).text() == "INT4, download ready"
    assert dialog.select("Qwen/Qwen3.5-2B")
    assert dialog.download_button.isEnabled()
    assert dialog.download_button.text() == "Download INT4 ready…"
    assert dialog.select("Qwen/Qwen3.5-0.8B")
    assert not dialog.download_button.isEnabled()


def _window(qtbot: QtBot, width: int = 1280, height: int = 800) -> MainWindow:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.resize(width, height)
    window.show()
    qtbot.waitExposed(window)
    return window


@pytest.mark.subprocess
def test_found_from_models_and_from_an_empty_chat_then_opens_the_wizard_prefilled(
    qtbot: QtBot,
) -> None:
    window = _window(qtbot)
    qtbot.waitUntil(lambda: window.chat.store_ready, timeout=10_000)
    # An empty chat offers it.
    button = window.chat.examples.discover_button
    assert button.isVisible()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    dialog = window.show_discover()
    assert dialog.isVisible()
    dialog.close()
    # So does the Models panel.
    window.show_panel("Models")
    qtbot.mouseClick(window.models.discover_button, Qt.MouseButton.LeftButton)
    assert dialog.isVisible()
    qtbot.waitUntil(lambda: dialog.loaded, timeout=10_000)
    assert dialog.select("Qwen/Qwen3.5-0.8B")
    recommended = dialog.selected_fit()
    assert recommended is not None and recommended.recommended is not None
    qtbot.mouseClick(dialog.export_button, Qt.MouseButton.LeftButton)
    panel = window.export_panel
    assert window.stack.currentWidget() is panel
    assert panel.pages.currentIndex() == 0
    assert panel.hub_radio.isChecked() and panel.hub_edit.text() == "Qwen/Qwen3.5-0.8B"
    assert panel.format_radios[recommended.recommended].isChecked()
    assert panel.prefill_note.isVisible() and "internet" in panel.prefill_note.text()
    # No network here (the tests run with HF_HUB_OFFLINE=1): starting says so, clearly.
    panel.run_check()
    qtbot.waitUntil(lambda: panel.check_busy.isHidden(), timeout=30_000)
    assert panel.pages.currentIndex() == 1
    assert panel.report is not None
    failures = {item.key: item for item in panel.report.failures}
    assert set(failures) == {"source"}
    assert "offline" in failures["source"].message
    assert "Connect to the internet" in failures["source"].fix
    assert "must be fixed" in panel.check_summary.text()
    assert not panel.options_button.isEnabled()


@pytest.mark.subprocess
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_screenshot(qtbot: QtBot, screenshot_dir: Path, width: int, height: int) -> None:
    window = _window(qtbot, width, height)
    dialog = window.show_discover()
    qtbot.waitUntil(lambda: dialog.loaded, timeout=10_000)
    dialog.resize(min(1200, width - 80), min(780, height - 80))
    QApplication.processEvents()
    # Every row's text fits its column (nothing elided) at both sizes.
    table = dialog.table
    metrics = table.fontMetrics()
    for column in range(1, table.columnCount()):
        for row in range(table.rowCount()):
            text = table.item(row, column).text()
            assert metrics.horizontalAdvance(text) <= table.columnWidth(column), (row, text)
    assert dialog.grab().save(str(screenshot_dir / f"discover-{width}x{height}.png"))


def _cut_cells(dialog: DiscoverDialog) -> list[tuple[int, str]]:
    """Cells (and headers) whose text is wider than their column."""
    table = dialog.table
    metrics, header = table.fontMetrics(), table.horizontalHeader()
    cut = []
    for column in range(table.columnCount()):
        width = table.columnWidth(column)
        if header.sectionSizeHint(column) > width:
            cut.append((column, COLUMNS[column]))
        for row in range(table.rowCount()):
            text = table.item(row, column).text()
            if metrics.horizontalAdvance(text) + 6 > width:  # the cell's padding
                cut.append((column, text))
    return cut


@pytest.mark.subprocess
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_dialog_resizes_and_the_name_column_takes_the_room(
    qtbot: QtBot, screenshot_dir: Path, width: int, height: int
) -> None:
    """Sized to its table on opening, within the window; resizable (a size grip); a wider
    dialog widens the Model column only, and no column is ever narrower than its text."""
    window = _window(qtbot, width, height)
    dialog = window.show_discover()
    qtbot.waitUntil(lambda: dialog.loaded, timeout=10_000)
    QApplication.processEvents()
    table = dialog.table
    assert dialog.isSizeGripEnabled()
    assert dialog.minimumWidth() < dialog.maximumWidth()  # not a fixed size
    assert not _cut_cells(dialog), _cut_cells(dialog)
    opened = [table.columnWidth(c) for c in range(table.columnCount())]
    # The columns fill the table: no empty strip at the right.
    assert sum(opened) >= table.viewport().width() - 1
    dialog.resize(dialog.width() + 300, dialog.height() + 100)
    QApplication.processEvents()
    widened = [table.columnWidth(c) for c in range(table.columnCount())]
    assert widened[0] >= opened[0] + 250, (opened, widened)  # the name column took the room
    assert widened[1:] == opened[1:]
    assert sum(widened) >= table.viewport().width() - 1
    assert dialog.grab().save(str(screenshot_dir / f"discover-wide-{width}x{height}.png"))
    # Narrower than its table wants: the table scrolls sideways, nothing is cut.
    dialog.resize(dialog.minimumWidth(), dialog.height())
    QApplication.processEvents()
    assert not _cut_cells(dialog), _cut_cells(dialog)
    assert table.columnWidth(0) >= table.sizeHintForColumn(0)
