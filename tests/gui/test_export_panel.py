"""The export wizard (offscreen): pages, preflight checklist, toolkit install, real exports.

The real export here is the tiny dense model in INT8 (MTP head INT4), through every page; a
second test cancels an export and then exports again from the same panel. Screenshots of each
page go to .cache/screenshots/export_*.png.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.models.export.job import ExportOutcome
from qwen_mtp_desktop.core.models.export.preflight.toolkit import installed_versions
from qwen_mtp_desktop.devtools.tiny_model import BUILDER_VERSION
from qwen_mtp_desktop.ui.export import panel as panel_module
from qwen_mtp_desktop.ui.export.panel import ExportPanel, PreflightEnvironment
from qwen_mtp_desktop.ui.export.widgets import ExportDialogs
from qwen_mtp_desktop.ui.widgets.style import stylesheet
from qwen_mtp_desktop.workers.export_job import InstallOutcome
from qwen_mtp_desktop.workers.tasks import TaskRunner
from tests.models import cached_checkpoint
from tests.unit.test_export_preflight import TENSORS, make_checkpoint

pytestmark = pytest.mark.gui

SIZE = (1000, 700)


class Dialogs:
    def __init__(self) -> None:
        self.answers: list[bool] = []
        self.asked: list[str] = []
        self.buttons: list[tuple[str, str]] = []
        self.folder: Path | None = None

    def confirm(self, _parent: Any, title: str, _text: str, action: str, keep: str) -> bool:
        self.asked.append(title)
        self.buttons.append((action, keep))
        return self.answers.pop(0) if self.answers else False

    def choose(self, _parent: Any, _title: str, _start: Path) -> Path | None:
        return self.folder

    def build(self) -> ExportDialogs:
        return ExportDialogs(choose_folder=self.choose, confirm=self.confirm)


@pytest.fixture
def runner() -> Iterator[TaskRunner]:
    runner = TaskRunner("test-io")
    yield runner
    runner.shutdown()


@pytest.fixture
def dialogs() -> Dialogs:
    return Dialogs()


def make_panel(
    qtbot: QtBot,
    runner: TaskRunner,
    tmp_path: Path,
    dialogs: Dialogs,
    *,
    missing_toolkit: bool = False,
    free: int | None = None,
) -> ExportPanel:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    app.setStyleSheet(stylesheet(False))

    def versions() -> dict[str, str | None]:
        found = installed_versions()
        if missing_toolkit:
            found.update({"optimum-intel": None, "torch": None, "nncf": None})
        return found

    env = PreflightEnvironment(
        versions=versions,
        free_bytes=(lambda _p: free) if free is not None else None,
        memory=lambda: (32 * 1024**3, 64 * 1024**3),
    )
    panel = ExportPanel(runner, tmp_path / "models", dialogs=dialogs.build(), environment=env)
    qtbot.addWidget(panel)
    panel.resize(*SIZE)
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: runner.pending == 0, timeout=10_000)
    return panel


def shoot(panel: ExportPanel, screenshot_dir: Path, name: str) -> None:
    QApplication.processEvents()  # let pending layout requests settle, as on screen
    QApplication.processEvents()
    path = screenshot_dir / f"export_{name}.png"
    assert panel.grab().save(str(path))
    assert QImage(str(path)).width() == SIZE[0]


def check(panel: ExportPanel, qtbot: QtBot, source: Path) -> None:
    panel.folder_edit.setText(str(source))
    panel.folder_radio.setChecked(True)
    panel.run_check()
    qtbot.waitUntil(lambda: panel.check_busy.isHidden(), timeout=30_000)


def keys(panel: ExportPanel, status: str) -> list[str]:
    assert panel.report is not None
    return [item.key for item in panel.report.items if item.status == status]


@pytest.fixture(autouse=True)
def stop_jobs(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    for widget in QApplication.topLevelWidgets():
        if isinstance(widget, ExportPanel):
            widget.shutdown()


def test_source_page_offers_the_toolkit_install(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs, missing_toolkit=True)
    assert panel.pages.currentIndex() == 0
    assert not panel.trust_check.isChecked(), "trust_remote_code must start off"
    assert panel.toolkit_banner.isVisible()
    command = panel.command_label.text()
    assert command.startswith(f"{sys.executable} -m pip install")
    assert "optimum-intel==2.2.*" in command
    assert not panel.check_button.isEnabled()  # no source yet
    panel.hub_edit.setText("Qwen/Qwen3.5-0.8B")
    assert panel.check_button.isEnabled()
    shoot(panel, screenshot_dir, "1_source_toolkit_missing")


@pytest.mark.subprocess
def test_toolkit_install_shows_pip_progress(
    qtbot: QtBot,
    runner: TaskRunner,
    tmp_path: Path,
    dialogs: Dialogs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = (
        "import time\n"
        "for line in ['Collecting optimum-intel==2.2.*', 'Downloading torch-2.14.1.whl',"
        " 'Installing collected packages: torch, optimum-intel',"
        " 'Successfully installed optimum-intel-2.2.0 torch-2.14.1']:\n"
        "    print(line, flush=True); time.sleep(0.1)\n"
    )
    fake = [sys.executable, "-c", script]
    monkeypatch.setattr(panel_module, "install_command", lambda **_kw: fake)
    panel = make_panel(qtbot, runner, tmp_path, dialogs, missing_toolkit=True)
    finished: list[object] = []
    panel.jobs.finished.connect(lambda _id, outcome: finished.append(outcome))
    qtbot.mouseClick(panel.install_button, panel_module.Qt.MouseButton.LeftButton)
    assert panel.jobs.busy
    qtbot.waitUntil(lambda: bool(finished), timeout=30_000)
    outcome = finished[0]
    assert isinstance(outcome, InstallOutcome) and outcome.succeeded
    assert "Successfully installed" in panel.install_log.toPlainText()
    assert panel.install_status.text().startswith("Installed")
    assert not panel.jobs.busy


def test_bad_source_fails_preflight_with_fixes(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    stripped = {k: v for k, v in TENSORS.items() if not k.startswith("mtp.")}
    source = make_checkpoint(tmp_path / "stripped", tensors=stripped)
    panel = make_panel(qtbot, runner, tmp_path, dialogs, free=1000)
    check(panel, qtbot, source)
    assert panel.pages.currentIndex() == 1
    assert set(keys(panel, "fail")) == {"mtp_tensors", "disk"}
    assert not panel.options_button.isEnabled()
    assert "2 problems" in panel.check_summary.text()
    first = panel.checklist.rows[0]
    assert first.status == "fail" and first.fix_label.text()
    shoot(panel, screenshot_dir, "2_check_failed")


@pytest.mark.export
def test_good_source_passes_and_options_explain_the_choices(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    assert keys(panel, "fail") == []
    assert panel.options_button.isEnabled()
    # The fixture's hidden size (64) fits no INT4 group of 128: the first check (with the
    # form's default before the checkpoint was read) knows, but the Check page (before a
    # format is chosen) does not show it. The Options page then starts at 64, which fits.
    assert "group_size" in keys(panel, "warn")
    titles = [row.title_label.text() for row in panel.checklist.rows]
    assert "INT4 group size" not in titles, titles
    shoot(panel, screenshot_dir, "2_check_passed")
    panel.show_page(2)
    assert panel.group_combo.currentData() == 64 and panel.current_options().group_size == 64
    assert not panel.options_problems.isVisibleTo(panel)
    # A size that does not fit, picked by the user, is warned about (while INT4 is chosen).
    _pick_group(panel, 128)
    assert panel.options_problems.isVisibleTo(panel) and "group size" in (
        panel.options_problems.text()
    )
    panel.format_radios["fp16"].setChecked(True)
    assert not panel.options_problems.isVisibleTo(panel)
    panel.format_radios["int8"].setChecked(True)
    panel.mtp_combo.setCurrentIndex(panel.mtp_combo.findData("int4"))
    options = panel.current_options()
    assert (options.weight_format, options.mtp_weight_format) == ("int8", "int4")
    assert options.group_size_fallback == "ignore"  # INT4 head: RoPE-safe default
    assert "RoPE" in panel.mtp_text.text()
    assert panel.dest_edit.text().endswith(f"ckpt-v{BUILDER_VERSION}-dense-t0-s0-int8-mtp-int4")
    assert "Estimated model size" in panel.options_estimate.text()
    shoot(panel, screenshot_dir, "3_options")


def _pick_group(panel: ExportPanel, size: int) -> None:
    """Pick an INT4 group size as a user does (the combo's activated signal)."""
    combo = panel.group_combo
    combo.setCurrentIndex(combo.findData(size))
    combo.activated.emit(combo.currentIndex())


@pytest.mark.export
def test_export_asks_before_going_ahead_with_a_setting_the_page_warns_about(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    """Issue 44, minor 9: the demo-sized checkpoint (hidden size 64) starts at the group size
    that fits it, a user's pick stays through another check, and Export with a size the page
    warns about asks first: "Change the options" returns to them with nothing queued, "Export
    anyway" queues the options as checked."""
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    panel.show_page(2)
    assert panel.group_combo.currentData() == 64 and not panel.options_problems.isVisibleTo(panel)
    _pick_group(panel, 128)
    warning = panel.options_problems.text()
    assert "The hidden size 64 is not a multiple of the group size 128" in warning
    assert "64 fits this checkpoint" in warning
    for width, height in ((1024, 700), (1600, 1000)):
        panel.resize(width, height)
        QApplication.processEvents()
        assert panel.grab().save(str(screenshot_dir / f"export_group_warn-{width}x{height}.png"))
    panel.resize(*SIZE)
    panel.recheck_button.click()  # Check again keeps the user's pick
    qtbot.waitUntil(lambda: panel.check_busy.isHidden(), timeout=30_000)
    assert panel.group_combo.currentData() == 128
    panel.show_page(2)

    submitted: list[Any] = []
    panel.jobs.submit = lambda request: submitted.append(request) or 1  # type: ignore[method-assign]
    dialogs.answers = [False]
    panel.export_button.click()
    qtbot.waitUntil(lambda: len(dialogs.asked) == 1, timeout=30_000)
    assert dialogs.asked == ["Export with this warning?"]
    assert dialogs.buttons == [("Export anyway", "Change the options")]
    QApplication.processEvents()
    assert submitted == [] and panel.pages.currentIndex() == 2
    assert panel.options_problems.isVisibleTo(panel)

    dialogs.answers = [True]
    panel.export_button.click()
    qtbot.waitUntil(lambda: len(submitted) == 1, timeout=30_000)
    # 128 is the exporter's default: the options leave it to it.
    assert len(dialogs.asked) == 2 and submitted[0].options.group_size is None
    assert panel.pages.currentIndex() == 3

    # A size that fits exports without a question.
    panel.show_page(2)
    _pick_group(panel, 32)
    assert not panel.options_problems.isVisibleTo(panel)
    panel.export_button.click()
    qtbot.waitUntil(lambda: len(submitted) == 2, timeout=30_000)
    assert len(dialogs.asked) == 2 and submitted[1].options.group_size == 32


@pytest.mark.export
def test_existing_destination_asks_before_replacing(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    panel.show_page(2)
    taken = Path(panel.dest_edit.text())
    taken.mkdir(parents=True)
    (taken / "old").write_text("keep me")
    dialogs.answers = [False]
    panel.start_export()
    assert dialogs.asked == ["Replace the existing folder?"]
    assert not panel.jobs.busy
    assert (taken / "old").read_text() == "keep me"


@pytest.mark.subprocess
def test_confirm_quit_while_busy(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    assert panel.confirm_quit()  # idle: no question
    busy: list[bool] = []
    panel.jobs.busy_changed.connect(busy.append)
    from qwen_mtp_desktop.workers.export_job import InstallRequest

    panel.jobs.submit_install(InstallRequest((sys.executable, "-c", "import time; time.sleep(60)")))
    assert panel.jobs.busy and busy == [True]
    dialogs.answers = [False, True]
    assert not panel.confirm_quit()
    assert panel.confirm_quit()
    qtbot.waitUntil(lambda: not panel.jobs.busy, timeout=20_000)
    assert busy == [True, False]


def _wait_outcome(qtbot: QtBot, panel: ExportPanel, timeout_s: float = 600) -> ExportOutcome:
    qtbot.waitUntil(lambda: panel.last_outcome is not None, timeout=int(timeout_s * 1000))
    assert panel.last_outcome is not None
    return panel.last_outcome


@pytest.mark.export
@pytest.mark.export
def test_wizard_exports_dense_int8_end_to_end(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    qtbot.mouseClick(panel.options_button, panel_module.Qt.MouseButton.LeftButton)
    panel.format_radios["int8"].setChecked(True)
    panel.mtp_combo.setCurrentIndex(panel.mtp_combo.findData("int4"))
    panel.group_combo.setCurrentIndex(panel.group_combo.findData(16))
    destination = Path(panel.dest_edit.text())
    busy: list[bool] = []
    stages: list[str] = []
    panel.jobs.busy_changed.connect(busy.append)
    panel.jobs.progress.connect(lambda _id, event: stages.append(event.stage))
    qtbot.mouseClick(panel.export_button, panel_module.Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.pages.currentIndex() == 3, timeout=30_000)
    qtbot.waitUntil(lambda: "converting" in stages, timeout=120_000)
    # The job keeps running while another page is shown.
    panel.show_page(0)
    time.sleep(0.2)
    panel.show_page(3)
    shoot(panel, screenshot_dir, "4_running")
    outcome = _wait_outcome(qtbot, panel)
    assert outcome.status == "succeeded", outcome.reason()
    assert outcome.output_dir == destination
    assert outcome.verification is not None and outcome.verification.ok
    assert outcome.verification.precisions["mtp"].startswith("INT4")
    assert outcome.verification.precisions["language_model"].startswith("INT8")
    assert busy == [True, False]
    for stage in ("loading", "converting", "compressing", "verifying"):
        assert stage in stages
    assert panel.progress.value() == 1000
    assert 0 < panel.log_view.document().blockCount() <= panel_module.LOG_LINE_CAP
    # The exporter's Python warnings are counted but hidden until asked for.
    warnings = panel._log_warnings
    assert warnings > 0 and f"({warnings})" in panel.warnings_check.text()
    hidden_text = panel.log_view.toPlainText()
    assert "Warning: " not in hidden_text
    panel.warnings_check.setChecked(True)
    assert "Warning: " in panel.log_view.toPlainText()
    assert len(panel.log_view.toPlainText()) > len(hidden_text)
    panel.warnings_check.setChecked(False)
    assert panel.log_view.toPlainText() == hidden_text
    # What the view hides is kept in the export's log file, offered after the export.
    assert outcome.log_file is not None and outcome.log_file.is_file()
    assert "Warning: " in outcome.log_file.read_text()
    assert panel.run_view.log_file_button.isVisibleTo(panel)
    assert panel.chat_button.isVisible() and panel.models_button.isVisible()
    opened: list[Path] = []
    shown: list[Path] = []
    panel.open_in_chat.connect(opened.append)
    panel.show_in_models.connect(shown.append)
    qtbot.mouseClick(panel.chat_button, panel_module.Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.models_button, panel_module.Qt.MouseButton.LeftButton)
    assert opened == [destination] and shown == [destination]
    shoot(panel, screenshot_dir, "5_done")


@pytest.mark.export
@pytest.mark.export
def test_wizard_cancel_then_export_again(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    panel.show_page(2)
    panel.format_radios["fp16"].setChecked(True)
    destination = Path(panel.dest_edit.text())
    stages: list[str] = []
    panel.jobs.progress.connect(lambda _id, event: stages.append(event.stage))
    panel.start_export()
    qtbot.waitUntil(lambda: "converting" in stages, timeout=120_000)
    # Cancel asks first; "no" keeps the export running.
    dialogs.answers.append(False)
    qtbot.mouseClick(panel.cancel_button, panel_module.Qt.MouseButton.LeftButton)
    assert dialogs.asked[-1] == "Stop the export?"
    # Each button says what it does: never "Cancel export" beside "Cancel".
    assert dialogs.buttons[-1] == ("Stop export", "Keep exporting")
    assert panel.jobs.busy and panel.cancel_button.isEnabled() and panel.last_outcome is None
    dialogs.answers.append(True)
    qtbot.mouseClick(panel.cancel_button, panel_module.Qt.MouseButton.LeftButton)
    outcome = _wait_outcome(qtbot, panel, 60)
    assert outcome.status == "cancelled"
    assert panel.result_title.text() == "Cancelled"
    assert not destination.exists()
    assert sorted(p.name for p in destination.parent.iterdir()) == []
    shoot(panel, screenshot_dir, "6_cancelled")
    # The same panel exports fine afterwards.
    panel.last_outcome = None
    stages.clear()
    panel.show_page(2)
    panel.start_export()
    again = _wait_outcome(qtbot, panel)
    assert again.status == "succeeded", again.reason()
    assert (destination / "openvino_mtp_model.xml").is_file()


@pytest.mark.subprocess
def test_queue_runs_jobs_one_at_a_time(qtbot: QtBot) -> None:
    from qwen_mtp_desktop.workers.export_job import ExportQueue, InstallRequest

    queue = ExportQueue()
    events: list[tuple[str, int]] = []
    queue.started.connect(lambda job: events.append(("start", job)))
    queue.finished.connect(lambda job, _outcome: events.append(("end", job)))
    sleep = (sys.executable, "-c", "import time; time.sleep(0.5)")
    first = queue.submit_install(InstallRequest(sleep))
    second = queue.submit_install(InstallRequest(sleep))
    third = queue.submit_install(InstallRequest(sleep))
    queue.cancel(third)  # cancelled while queued: it never starts
    assert queue.jobs() == [first, second, third]
    qtbot.waitUntil(lambda: not queue.busy, timeout=30_000)
    assert events == [
        ("start", first),
        ("end", first),
        ("start", second),
        ("end", second),
        ("end", third),
    ]
    assert queue.shutdown()


def _layout_index(panel: ExportPanel, widget: Any) -> int:
    layout = panel.options_form.layout()
    assert layout is not None
    return layout.indexOf(widget)


def test_options_follow_the_selected_format(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    """Each format's settings sit right under it and only those that apply are shown (the INT4
    settings used to sit under FP16, whatever was chosen)."""
    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    panel.show_page(2)
    form = panel.options_form
    box = panel.int4_box

    def under(fmt: str) -> bool:
        return _layout_index(panel, box) == _layout_index(panel, form._hints[fmt]) + 1

    def shown(widget: Any) -> bool:
        return widget.isVisibleTo(panel)

    panel.format_radios["int4"].setChecked(True)
    assert under("int4") and shown(box)
    assert all(shown(w) for w in (panel.group_combo, panel.ratio_spin, panel.fallback_combo))
    assert shown(panel.sym_check)
    shoot(panel, screenshot_dir, "3_options_int4")
    panel.format_radios["int8"].setChecked(True)
    assert under("int8") and shown(box) and shown(panel.sym_check)
    assert not shown(panel.group_combo) and not shown(panel.ratio_spin)
    assert panel.current_options().group_size_fallback is None
    panel.mtp_combo.setCurrentIndex(panel.mtp_combo.findData("int4"))
    assert shown(panel.group_combo) and shown(panel.fallback_combo) and not shown(panel.ratio_spin)
    assert "MTP head" in form.settings_caption.text()
    shoot(panel, screenshot_dir, "3_options_int8_mtp_int4")
    panel.mtp_combo.setCurrentIndex(panel.mtp_combo.findData("default"))
    panel.sym_check.setChecked(True)
    panel.format_radios["fp16"].setChecked(True)
    assert under("fp16") and not shown(box)  # nothing is compressed: no settings
    options = panel.current_options()
    assert (options.weight_format, options.sym, options.group_size) == ("fp16", False, None)
    panel.format_radios["int4"].setChecked(True)
    assert panel.current_options().sym  # the choice comes back where it applies


def test_start_state_is_driven_by_the_exporter_progress(qtbot: QtBot) -> None:
    """Until the exporter measures something the bar moves without a percentage and says what
    is happening; the first real step turns it into a percentage (the real parser on the
    exporter's real output lines)."""
    from qwen_mtp_desktop.core.models.export.options import ExportOptions
    from qwen_mtp_desktop.core.models.export.progress import ProgressParser, stage_plan
    from qwen_mtp_desktop.ui.export.run_view import STARTING_TEXT, WAITING_TEXT, ExportRunView

    view = ExportRunView()
    qtbot.addWidget(view)
    view.begin("Exporting x", "a → b")
    assert view.indeterminate and view.stage_label.text() == WAITING_TEXT
    view.started()
    assert view.indeterminate and view.stats_label.text() == "Elapsed 00:00"
    options = ExportOptions(weight_format="int8")
    parser = ProgressParser(stage_plan(options, download=False))
    event = parser.feed('[qmtp] {"event": "stage", "stage": "loading"}')
    assert event is not None
    view.show_progress(event)
    assert view.indeterminate and view.stage_label.text() == STARTING_TEXT
    assert view.percent_label.text() == ""
    event = parser.feed("Loading weights:  40%|████      | 8/20 [00:01<00:01]")
    assert event is not None
    view.show_progress(event)
    assert not view.indeterminate and view.progress.value() > 0
    assert view.stage_label.text() == "Loading the checkpoint's weights"
    event = parser.feed(
        '[qmtp] {"event": "stage", "stage": "converting", "part": "openvino_language_model"}'
    )
    assert event is not None
    view.show_progress(event)
    assert not view.indeterminate and view.stage_label.text() == "Converting the language model"
    view.stop()


def test_the_log_hides_torch_and_cuda_noise_until_asked(qtbot: QtBot) -> None:
    """Lines torch and transformers print on a machine without a GPU (seen in a real export's
    log) stay out of the exporter log; "Show hidden messages" shows the raw log again."""
    from qwen_mtp_desktop.ui.export.run_view import ExportRunView

    view = ExportRunView()
    qtbot.addWidget(view)
    view.begin("Exporting x", "a → b")
    noise = [
        "W1202 06:33:39.327000 6248 torch/_dynamo/utils.py:183] CUDA not available",
        "UserWarning: CUDA initialization: Found no NVIDIA driver on your system.",
        "`torch_dtype` is deprecated! Use `dtype` instead!",
        "The fast path is not available because one of the required library is not installed",
    ]
    stages = ["Loading the checkpoint", "Converting openvino_language_model"]
    view.add_log_lines([stages[0], *noise, stages[1]])
    assert view.log_view.toPlainText().splitlines() == stages
    assert view.warnings_check.text().endswith(f"({len(noise)})")
    view.warnings_check.setChecked(True)  # the raw log, every line in order
    assert view.log_view.toPlainText().splitlines() == [stages[0], *noise, stages[1]]
    view.warnings_check.setChecked(False)
    assert view.log_view.toPlainText().splitlines() == stages
    view.stop()


@pytest.mark.export
@pytest.mark.export
def test_real_export_start_shows_what_is_happening(
    qtbot: QtBot, runner: TaskRunner, tmp_path: Path, dialogs: Dialogs, screenshot_dir: Path
) -> None:
    """The first seconds of a real export (Python and PyTorch starting): a moving bar, the
    words, the elapsed time; screenshots at 1024x700 and 1600x1000; then cancel."""
    from qwen_mtp_desktop.ui.export.run_view import STARTING_TEXT

    panel = make_panel(qtbot, runner, tmp_path, dialogs)
    check(panel, qtbot, cached_checkpoint(moe=False))
    panel.show_page(2)
    panel.format_radios["int8"].setChecked(True)
    stages: list[str] = []
    panel.jobs.progress.connect(lambda _id, event: stages.append(event.stage))
    panel.start_export()
    qtbot.waitUntil(lambda: panel.pages.currentIndex() == 3, timeout=30_000)
    view = panel.run_view
    assert view.indeterminate
    qtbot.waitUntil(lambda: "loading" in stages, timeout=60_000)
    if view.stage_label.text() == STARTING_TEXT:  # PyTorch still importing: the usual case
        assert view.indeterminate and view.percent_label.text() == ""
        qtbot.waitUntil(lambda: view.stats_label.text() >= "Elapsed 00:01", timeout=10_000)
        assert view.stats_label.text().startswith("Elapsed 00:0")
        for width, height in ((1024, 700), (1600, 1000)):
            panel.resize(width, height)
            QApplication.processEvents()
            assert panel.grab().save(str(screenshot_dir / f"export-start-{width}x{height}.png"))
    qtbot.waitUntil(lambda: not view.indeterminate, timeout=300_000)
    assert view.progress.value() > 0 and "%" in view.percent_label.text()
    dialogs.answers.append(True)
    qtbot.mouseClick(panel.cancel_button, panel_module.Qt.MouseButton.LeftButton)
    outcome = _wait_outcome(qtbot, panel, 120)
    assert outcome.status == "cancelled"
