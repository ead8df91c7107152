"""The Benchmark panel measures the chat's model by default, keeps its History out of the
results' way on a small window, and its chart titles are never cut (issue 28)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.bench import BenchPanel
from qwen_mtp_desktop.ui.bench.charts import AcceptanceChart, ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = pytest.mark.gui


@pytest.fixture
def other_model(tmp_path: Path) -> Path:
    copy = tmp_path / "Qwen3.5-0.8B-int8"
    shutil.copytree(demo_model_dir(), copy)
    return copy


@pytest.fixture
def panel(qtbot: QtBot, other_model: Path) -> Iterator[BenchPanel]:
    widget = BenchPanel(demo_model_dir(), models=[other_model])
    qtbot.addWidget(widget)
    yield widget
    widget.shutdown()


def test_it_follows_the_chat_s_model_until_the_user_picks_one(
    panel: BenchPanel, other_model: Path
) -> None:
    assert panel.model_dir == demo_model_dir()
    panel.follow_chat_model(other_model)  # the chat loaded another model
    assert panel.model_dir == other_model
    panel.follow_chat_model(demo_model_dir())
    assert panel.model_dir == demo_model_dir()
    # The user chooses one here: it stays, whatever the chat loads next.
    index = panel.model_combo.findData(str(other_model), Qt.ItemDataRole.UserRole)
    panel.model_combo.setCurrentIndex(index)
    panel.model_combo.activated.emit(index)
    panel.follow_chat_model(demo_model_dir())
    assert panel.model_dir == other_model


def test_the_history_goes_above_the_results_on_a_small_window(
    qtbot: QtBot, panel: BenchPanel
) -> None:
    panel.resize(874, 650)  # the panel on a 1024 px window
    panel.show()
    qtbot.waitExposed(panel)
    QApplication.processEvents()
    assert panel._splitter.orientation() == Qt.Orientation.Vertical
    assert panel.results.width() > 0.9 * (panel.width() - 48)
    panel.resize(1450, 900)  # on a 1600 px window: side by side
    QApplication.processEvents()
    assert panel._splitter.orientation() == Qt.Orientation.Horizontal


@pytest.mark.parametrize("chart_type", [ThroughputChart, AcceptanceChart, WorkloadChart])
@pytest.mark.parametrize("width", [320, 460, 900])
def test_a_chart_reserves_room_for_its_whole_title(
    qtbot: QtBot, chart_type: type[ThroughputChart], width: int
) -> None:
    chart = chart_type()
    qtbot.addWidget(chart)
    font = chart._font(10.5, bold=True)
    box = QFontMetricsF(font).boundingRect(
        QRectF(0, 0, width - 16, 1000), int(Qt.TextFlag.TextWordWrap), chart.title
    )
    assert box.width() <= width - 16 + 1
    assert box.height() <= chart.title_height(width)
    if QFontMetricsF(font).horizontalAdvance(chart.title) > width - 16:
        assert chart.title_height(width) > chart.title_height(4000)  # it wraps, not cut


@pytest.mark.subprocess
def test_in_the_window_it_measures_the_model_the_chat_opened(
    qtbot: QtBot, app_home: Path, tmp_path: Path
) -> None:
    """The real window, whose chat opens another model than the demo at start: the Benchmark
    panel offers that model, not the demo, and follows the chat's next load too."""
    exported = tmp_path / "Qwen3.5-0.8B-int8"
    shutil.copytree(demo_model_dir(), exported)
    paths = app_paths().ensure()
    store = SettingsStore(paths.settings_file)
    store.settings.default_model = str(exported)
    store.save()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    qtbot.waitUntil(lambda: window.models.loaded_path is not None, timeout=60_000)
    assert window.models.loaded_path == exported.resolve()
    window.show_panel("Benchmark")
    assert window.bench.model_dir == exported
    assert window.bench.model_combo.currentText() == exported.name
    # The chat loads the demo next: the panel follows (the user has not picked one there).
    window._on_engine_loaded(
        replace(window.engine_process.loaded_model, model_dir=demo_model_dir())
    )
    assert window.bench.model_dir == demo_model_dir()
