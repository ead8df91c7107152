"""The Benchmark panel with real runs: validate, benchmark, cancel, charts, history, export."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QSize
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.measure.reports import REPORT_SCHEMA_VERSION
from qwen_mtp_desktop.ui.bench import BenchDialogs, BenchPanel
from qwen_mtp_desktop.ui.bench.panel import OTHER_FILE
from qwen_mtp_desktop.ui.widgets.style import stylesheet
from tests.integration.test_validate import small_set

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

RUN_TIMEOUT_MS = 180_000


@pytest.fixture
def exports(tmp_path: Path) -> Path:
    folder = tmp_path / "exports"
    folder.mkdir()
    return folder


@pytest.fixture
def panel(qtbot: QtBot, tmp_path: Path, exports: Path) -> Iterator[BenchPanel]:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    previous = app.styleSheet()
    app.setStyleSheet(stylesheet(False))  # look as in the app
    model = demo_model_dir()
    assert (model / "openvino_mtp_model.xml").is_file(), "the bundled demo model is missing"
    prompts = small_set(tmp_path, 24)
    dialogs = BenchDialogs(
        choose_model_dir=lambda parent: model,
        choose_prompt_file=lambda parent: prompts,
        choose_save_path=lambda parent, title, suggested, filters: exports / suggested.name,
    )
    widget = BenchPanel(model, dialogs=dialogs)
    qtbot.addWidget(widget)
    widget.resize(1130, 800)
    widget.show()
    qtbot.waitExposed(widget)
    qtbot.waitUntil(lambda: widget.set_combo.count() > 2, timeout=10_000)
    # The small test prompt file, chosen through the "Prompt file…" entry.
    index = widget.set_combo.findData(OTHER_FILE)
    widget.set_combo.setCurrentIndex(index)
    widget.set_combo.activated.emit(index)
    assert widget.set_combo.currentData() == str(prompts)
    for check in widget.depth_checks[2:]:
        check.setChecked(False)
    widget.tokens_spin.setValue(24)
    yield widget
    assert widget.shutdown()
    app.setStyleSheet(previous)


def _save(widget: QWidget, name: str, screenshot_dir: Path) -> Path:
    path = screenshot_dir / name
    assert widget.grab().save(str(path))
    return path


def _colours(image: QImage) -> int:
    step = 7
    return len(
        {
            image.pixel(x, y)
            for x in range(0, image.width(), step)
            for y in range(0, image.height(), step)
        }
    )


def test_validate_shows_the_verdict_charts_history_and_exports(
    qtbot: QtBot, panel: BenchPanel, exports: Path, screenshot_dir: Path
) -> None:
    model = panel.model_dir
    assert model is not None
    with qtbot.waitSignal(panel.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert panel.validate_model(model)
        assert not panel.validate_button.isEnabled() and panel.cancel_button.isEnabled()
        assert not panel.validate_model(model)  # one run at a time
    report = finished.args[0]
    assert report["kind"] == "validate" and report["summary"]["all_identical"]
    # The deepest selected depth.
    assert report["settings"]["method"] == DecodingMethod.mtp(2).to_record()
    qtbot.waitUntil(lambda: panel.history_list.count() == 1, timeout=10_000)
    assert panel.validate_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert "passed" in panel.banner_title.text()
    assert [bar.label for bar in panel.throughput_chart.bars] == ["plain", "MTP n=2"]
    assert panel.acceptance_chart.series[0].label == "n=2"
    assert panel.table.rowCount() == 2
    chart = panel.throughput_chart.grab().toImage()
    assert _colours(chart) > 10  # bars, whiskers and labels were drawn
    _save(panel, "bench_validate.png", screenshot_dir)

    for button, suffix in (
        (panel.export_md_button, "md"),
        (panel.export_json_button, "json"),
        (panel.export_png_button, "png"),
    ):
        button.click()
        qtbot.waitUntil(lambda s=suffix: any(exports.glob(f"*.{s}")), timeout=10_000)
    md = next(exports.glob("*.md")).read_text()
    assert md.startswith("# MTP validation") and "**PASS" in md
    png = QImage(str(next(exports.glob("*.png"))))
    assert png.width() > 1000 and _colours(png) > 10
    assert png.save(str(screenshot_dir / "bench_charts_export.png"))


def test_benchmark_run_and_history(qtbot: QtBot, panel: BenchPanel, screenshot_dir: Path) -> None:
    model = panel.model_dir
    assert model is not None
    panel.runs_spin.setValue(1)
    recommendations: list[tuple[object, ...]] = []
    panel.recommendation_changed.connect(lambda *args: recommendations.append(args))
    with qtbot.waitSignal(panel.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        panel.bench_button.click()
    report = finished.args[0]
    assert report["kind"] == "bench"
    start = DecodingMethod.from_record(report["recommendation"]["method"])
    assert recommendations == [(model.resolve(), "CPU", start)]
    assert [bar.label for bar in panel.throughput_chart.bars] == [
        "plain", "n=1", "n=2", "lookup K=4"
    ]  # fmt: skip
    assert panel.throughput_chart.bars[-1].kind == "lookup"
    assert [s.label for s in panel.acceptance_chart.series] == ["n=1", "n=2"]
    assert panel.table.rowCount() == 4
    assert panel.banner_title.text().startswith("Recommended:")
    # The methods compared per workload, with the stored winner.
    (entry,) = report["per_set"]
    assert panel.workload_chart.isVisible()
    (workload,) = panel.workload_chart.workloads
    winner = DecodingMethod.from_record(entry["winner"]["method"])
    assert winner is not None
    assert workload.name == entry["prompt_set"] and workload.winner == winner.short_label
    assert [kind for _label, _value, kind in workload.methods] == ["plain", "mtp", "lookup"]
    assert workload.methods[2][1] == report["per_set"][0]["modes"][3]["speedup"]["median"]
    assert _colours(panel.workload_chart.grab().toImage()) > 10
    qtbot.waitUntil(lambda: panel.history_list.count() == 1, timeout=10_000)
    _save(panel, "bench_benchmark.png", screenshot_dir)
    for width, height in ((1024, 700), (1600, 1000)):
        panel.resize(width, height)
        qtbot.wait(100)
        _save(panel, f"bench_workloads_{width}.png", screenshot_dir)
    # Without prompt lookup the comparison chart stays away.
    panel.lookup_check.setChecked(False)
    with qtbot.waitSignal(panel.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        panel.bench_button.click()
    methods = [DecodingMethod.from_record(m["method"]) for m in finished.args[0]["modes"]]
    assert methods == [PLAIN, DecodingMethod.mtp(1), DecodingMethod.mtp(2)]
    assert not panel.workload_chart.isVisible()
    # A chart rendered for export does not depend on the widget's size on screen.
    image = panel.acceptance_chart.render_image(QSize(400, 260))
    assert image.width() == 800 and _colours(image) > 5


def test_cancel_stops_a_benchmark_and_saves_nothing(qtbot: QtBot, panel: BenchPanel) -> None:
    panel.runs_spin.setValue(20)
    panel.tokens_spin.setValue(400)
    measured = []

    def on_progress(progress: object) -> None:
        if "Round" in getattr(progress, "message", "") and not measured:
            measured.append(progress)
            panel.cancel()

    panel.job.progress.connect(on_progress)
    with qtbot.waitSignal(panel.job.cancelled, timeout=RUN_TIMEOUT_MS):
        panel.bench_button.click()
    qtbot.waitUntil(lambda: panel.bench_button.isEnabled(), timeout=10_000)
    assert measured and "Cancelled" in panel.status_label.text()
    assert not panel.progress_bar.isVisible()
    assert panel.history_list.count() == 0 and panel.report is None


def test_reports_written_by_main_show_in_the_history(
    qtbot: QtBot, panel: BenchPanel, screenshot_dir: Path
) -> None:
    """An existing user's data folder holds reports written before DecodingMethod (schema 1,
    "baseline"): each lists, shows its banner, charts and table, and says "plain"."""
    import json

    from qwen_mtp_desktop.core.measure.reports import reports_dir

    model = panel.model_dir
    assert model is not None
    folder = reports_dir(model)
    folder.mkdir(parents=True, exist_ok=True)
    data = Path(__file__).parents[1] / "unit" / "data" / "main_records"
    names = ("bench_two_sets", "bench_exact_compare", "validate_mtp", "validate_lookup")
    for name in names:
        report = json.loads((data / f"{name}.json").read_text())
        report["model"]["path"] = str(model.resolve())
        (folder / f"{report['id']}.json").write_text(json.dumps(report))
    panel._refresh_history()
    qtbot.waitUntil(lambda: panel.history_list.count() == len(names), timeout=10_000)
    # The list selects its first row itself: wait for that report, then start from no row, so
    # each row below is a change that shows its own report.
    qtbot.waitUntil(lambda: panel.report is not None, timeout=10_000)
    panel.history_list.setCurrentRow(-1)
    shown: dict[str, tuple[str, str]] = {}
    for row in range(panel.history_list.count()):
        with qtbot.waitSignal(panel.report_shown, timeout=10_000) as blocker:
            panel.history_list.setCurrentRow(row)
        report = blocker.args[0]
        assert report["schema_version"] == REPORT_SCHEMA_VERSION  # read into the current shape
        assert panel.table.rowCount() > 0 and panel.throughput_chart.bars
        title = panel.banner_title.text()
        shown[report["id"]] = (title, panel.history_list.item(row).text())
        if report["kind"] == "bench" and len(report["per_set"]) == 2:
            assert title == "Recommended: prompt lookup K=4 (1.18x)"  # its stored label
            assert [w.winner for w in panel.workload_chart.workloads] == [
                "lookup K=4", "lookup K=4", "plain"
            ]  # fmt: skip
            assert panel.throughput_chart.bars[0].label == "plain"
            for width, height in ((1024, 700), (1600, 1000)):
                panel.resize(width, height)
                qtbot.wait(100)
                _save(panel, f"bench_main_report_{width}.png", screenshot_dir)
    titles = sorted(title for title, _line in shown.values())
    assert titles.count("Validation passed: MTP output is identical") == 1
    assert titles.count("Validation passed: Prompt lookup output is identical") == 1
    lines = " ".join(line for _title, line in shown.values())
    assert "lookup K=1" in lines and "MTP n=1" in lines and "baseline" not in lines


def test_a_run_whose_process_dies_says_so_and_the_panel_goes_on(
    qtbot: QtBot, panel: BenchPanel, screenshot_dir: Path
) -> None:
    """The run's own process (an engine host) is killed mid-run: the panel says what happened
    in plain words, keeps nothing, and the next run works. While it ran, the panel showed the
    memory of that process."""
    import os
    import signal

    model = panel.model_dir
    assert model is not None
    killed: list[int] = []

    def on_progress(step: object) -> None:
        pid = panel.job.pid
        if "plain decoding" in getattr(step, "message", "") and not killed and pid is not None:
            qtbot.waitUntil(lambda: panel.memory_label.isVisible(), timeout=5_000)
            assert panel.memory_label.text().startswith("Run's process: ")
            for width, height in ((1024, 700), (1600, 1000)):
                panel.resize(width, height)
                _save(panel, f"bench_running_{width}.png", screenshot_dir)
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    panel.job.progress.connect(on_progress)
    with qtbot.waitSignal(panel.job.failed, timeout=RUN_TIMEOUT_MS):
        assert panel.validate_model(model)
    panel.job.progress.disconnect(on_progress)
    assert killed
    status = panel.status_label.text()
    assert status.startswith("The validation stopped: the process running it ended (SIGKILL)")
    assert panel.validate_button.isEnabled() and not panel.cancel_button.isEnabled()
    assert not panel.memory_label.isVisible() and not panel.progress_bar.isVisible()
    assert panel.history_list.count() == 0 and panel.report is None
    for width, height in ((1024, 700), (1600, 1000)):
        panel.resize(width, height)
        qtbot.wait(100)
        _save(panel, f"bench_run_stopped_{width}.png", screenshot_dir)
    with qtbot.waitSignal(panel.run_finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert panel.validate_model(model)
    assert finished.args[0]["summary"]["all_identical"]
