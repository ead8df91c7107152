"""The Benchmark panel measures the chat's model by default, keeps its History out of the
results' way on a small window, and its chart titles are never cut (issue 28)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QRect, QRectF, Qt
from PySide6.QtGui import QFontMetricsF
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.bench import BenchPanel
from qwen_mtp_desktop.ui.bench.charts import AcceptanceChart, ThroughputChart, WorkloadChart
from qwen_mtp_desktop.ui.main_window import MainWindow
from qwen_mtp_desktop.ui.widgets.style import stylesheet

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


@pytest.fixture
def saved_runs(app_home: Path) -> int:
    """Four saved reports of the demo model in the test's own data folder."""
    import json

    from qwen_mtp_desktop.core.measure.reports import reports_dir

    folder = reports_dir(demo_model_dir())
    folder.mkdir(parents=True, exist_ok=True)
    data = Path(__file__).parents[1] / "unit" / "data" / "main_records"
    names = ("bench_two_sets", "bench_exact_compare", "validate_mtp", "validate_lookup")
    for name in names:
        report = json.loads((data / f"{name}.json").read_text())
        report["model"]["path"] = str(demo_model_dir().resolve())
        (folder / f"{report['id']}.json").write_text(json.dumps(report))
    return len(names)


@pytest.fixture
def app_style() -> Iterator[None]:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    app.setStyleSheet(stylesheet(False))  # as in the app
    yield
    app.setStyleSheet("")


def _mean_lightness(widget: QWidget) -> float:
    """As seen: cut from the window's painting (a transparent widget grabbed alone is black)."""
    window = widget.window()
    image = window.grab(QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())).toImage()
    values = [
        image.pixelColor(x, y).lightnessF()
        for x in range(2, image.width() - 2, 2)
        for y in range(2, image.height() - 2, 2)
    ]
    return sum(values) / len(values)


# The panel's size in a 1024x700, 1280x800 and 1600x1000 window (the sidebar is 150 px).
@pytest.mark.parametrize("size", [(874, 650), (1130, 750), (1450, 950)])
def test_history_and_results_both_have_room(
    qtbot: QtBot, saved_runs: int, panel: BenchPanel, app_style: None, size: tuple[int, int]
) -> None:
    """Issue 44, minor 16: on a small window the History stacked above the results showed 1.5
    rows and left the results a ~230 px pane. Now the narrow panel has a one-line History
    picker and the results keep the height; a wider one lists every run beside them."""
    panel.resize(*size)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: panel.history_list.count() == saved_runs, timeout=10_000)
    qtbot.waitUntil(lambda: panel.report is not None, timeout=10_000)
    QApplication.processEvents()
    history = panel.history_view
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    assert panel.grab().save(str(shots / f"bench_history_{size[0]}.png"))
    if size[0] < 1000:
        assert history.bar.isVisible() and not history.frame.isVisible()
        assert history.combo.count() == saved_runs and history.combo.currentIndex() == 0
        assert panel.results.height() > 0.5 * size[1]
        assert panel.results.width() > 0.9 * (panel.width() - 48)
        # Picking a run in the one-line History shows it.
        with qtbot.waitSignal(panel.report_shown, timeout=10_000) as shown:
            history.combo.activated.emit(2)
        assert panel.history_list.currentRow() == 2
        assert shown.args[0]["id"] in panel.history_list.item(2).toolTip()
    else:
        assert history.frame.isVisible() and not history.bar.isVisible()
        viewport = panel.history_list.viewport().rect()
        for row in range(saved_runs):  # every run in view, none cut
            rect = panel.history_list.visualItemRect(panel.history_list.item(row))
            assert viewport.contains(rect), (row, rect, viewport)
        assert panel.results.width() > 800  # the two charts side by side


def test_new_tokens_reads_as_words_and_a_running_panel_looks_it(
    qtbot: QtBot, panel: BenchPanel, app_style: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44, minor 16: "New tokens: set default" named nothing; Validate, the filled
    button, stayed filled (grey) while a benchmark ran, so it looked enabled."""
    assert panel.tokens_spin.value() == 0
    assert panel.tokens_spin.text() == "per prompt set"
    panel.resize(874, 650)
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.tokens_spin.width() >= panel.tokens_spin.sizeHint().width()
    monkeypatch.setattr(type(panel.job), "running", property(lambda _job: True))
    panel._on_busy(True)
    QApplication.processEvents()
    assert not panel.validate_button.isEnabled() and not panel.bench_button.isEnabled()
    # Disabled, Validate looks as the other disabled buttons do, not as a filled one.
    assert abs(_mean_lightness(panel.validate_button) - _mean_lightness(panel.bench_button)) < 0.03
    assert panel.grab().save("/tmp/shots/bench_running_874.png")
    monkeypatch.undo()
    panel._on_busy(False)
    assert panel.validate_button.isEnabled()


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
    # A copy of the demo (issue 44, minor 15): its own name, said to be the demo's kind.
    assert window.bench.model_combo.currentText() == f"{exported.name} (counts and repeats)"
    # The chat loads the demo next: the panel follows (the user has not picked one there).
    window._on_engine_loaded(
        replace(window.engine_process.loaded_model, model_dir=demo_model_dir())
    )
    assert window.bench.model_dir == demo_model_dir()
