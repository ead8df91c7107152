"""The Benchmark panel's job object through the real engine host process: a validation and a
benchmark end to end on the demo model, Cancel (mid-run and while the model loads), and the
run's process killed or crashing mid-run (a clear error, nothing saved, the next run works).

Everything here is real: `BenchJob` starts `python -m qwen_mtp_desktop.host` for each run, which
loads the demo model with openvino-genai and the app's decoder.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.hosting.protocol import Measured, MeasureProgress
from qwen_mtp_desktop.core.measure.reports import list_reports
from qwen_mtp_desktop.workers.bench_job import (
    SHUTDOWN_GRACE_MS,
    STOPPED_CODE,
    BenchJob,
    JobResult,
)
from tests.integration.test_validate import small_set

pytestmark = pytest.mark.gui

RUN_TIMEOUT_MS = 180_000
#: Cancel to `cancelled`: the grace before the kill, plus the kill and the reader noticing it.
CANCEL_BOUND_S = 1.5
MTP2 = DecodingMethod.mtp(2)


@pytest.fixture
def job(qtbot: QtBot) -> Iterator[BenchJob]:
    job = BenchJob()
    yield job
    assert job.shutdown(30_000)


@pytest.fixture
def model() -> Path:
    model = demo_model_dir()
    assert (model / "openvino_mtp_model.xml").is_file(), "the bundled demo model is missing"
    return model


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _watch(job: BenchJob) -> dict[str, list[object]]:
    seen: dict[str, list[object]] = {"progress": [], "memory": [], "busy": [], "pids": []}

    def on_progress(step: object) -> None:
        seen["progress"].append(step)
        if job.pid not in seen["pids"]:
            seen["pids"].append(job.pid)

    job.progress.connect(on_progress)
    job.memory.connect(lambda rss, peak: seen["memory"].append((rss, peak)))
    job.busy_changed.connect(seen["busy"].append)
    return seen


@pytest.mark.subprocess
def test_validation_and_benchmark_run_in_a_process_of_their_own(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path
) -> None:
    prompts = small_set(tmp_path, 16)
    seen = _watch(job)
    with qtbot.waitSignal(job.finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
        # One run at a time.
        assert job.running and not job.start_validation(model, prompts, method=MTP2)
    result = finished.args[0]
    assert isinstance(result, JobResult) and result.kind == "validate"
    assert result.report["summary"]["all_identical"]
    assert result.report["settings"]["method"] == MTP2.to_record()
    assert result.path.is_file()  # saved by the window, as before
    assert [entry.path for entry in list_reports(model)] == [result.path]
    # The run happened in another process, which is gone now.
    (pid,) = seen["pids"]
    assert isinstance(pid, int) and pid != os.getpid()
    assert _gone(pid) and job.pid is None and not job.running
    assert seen["busy"] == [True, False]
    steps = [s for s in seen["progress"] if isinstance(s, MeasureProgress)]
    assert len(steps) == len(seen["progress"]) >= 3
    assert steps[0].message.startswith("Loading") and steps[-1].done == steps[-1].total
    # Its memory was watched: the resident size of a process holding the model twice.
    assert seen["memory"] and all(peak >= rss > 20 * 2**20 for rss, peak in seen["memory"])

    with qtbot.waitSignal(job.finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert job.start_benchmark(
            model, [prompts], depths=(1, 2), runs=1, warmup=0, max_new_tokens=16
        )
    bench = finished.args[0]
    assert bench.kind == "bench" and bench.path.is_file()
    methods = [DecodingMethod.from_record(m["method"]) for m in bench.report["modes"]]
    assert methods == [PLAIN, DecodingMethod.mtp(1), DecodingMethod.mtp(2)]  # no lookup asked
    assert bench.report["recommendation"]["method"] is not None
    # The memory figures are the run's own process: the model twice, no window, no Qt.
    memory = bench.report["memory"]
    assert memory["peak_rss_bytes"] >= memory["rss_after_load_bytes"] > memory["rss_start_bytes"]
    assert len(list_reports(model)) == 2


@pytest.mark.subprocess
def test_cancel_mid_run_ends_within_a_second_and_saves_nothing(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path
) -> None:
    prompts = small_set(tmp_path, 400)
    seen = _watch(job)
    asked: list[float] = []

    def on_progress(step: MeasureProgress) -> None:
        if "Round" in step.message and not asked:
            asked.append(time.monotonic())
            job.cancel()

    job.progress.connect(on_progress)
    with qtbot.waitSignal(job.cancelled, timeout=RUN_TIMEOUT_MS):
        job.start_benchmark(model, [prompts], depths=(1, 2, 3), runs=20, max_new_tokens=400)
    took = time.monotonic() - asked[0]
    assert took < CANCEL_BOUND_S, took
    (pid,) = seen["pids"]
    assert isinstance(pid, int)
    qtbot.waitUntil(lambda: _gone(pid), timeout=5_000)
    assert not job.running and list_reports(model) == []
    # Nothing more is said about the cancelled run (no late progress, no failure).
    count = len(seen["progress"])
    failures: list[object] = []
    job.failed.connect(failures.append)
    qtbot.wait(300)
    assert len(seen["progress"]) == count and failures == []


@pytest.mark.subprocess
def test_cancel_while_the_model_loads_kills_the_run(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path
) -> None:
    """Cancel while the run's process starts or loads ends it within the bound: loading
    cannot be interrupted, so the process is killed after CANCEL_GRACE_MS, unless the host
    saw the cancel before it began loading (a fast machine) and stopped by itself."""
    prompts = small_set(tmp_path, 16)
    with qtbot.waitSignal(job.cancelled, timeout=RUN_TIMEOUT_MS):
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
        started = time.monotonic()
        qtbot.wait(50)  # the host is starting or importing OpenVINO
        pid = job.pid
        job.cancel()
        job.cancel()  # a second press changes nothing
    took = time.monotonic() - started
    assert took < CANCEL_BOUND_S + 0.1, took
    assert pid is not None
    qtbot.waitUntil(lambda: _gone(pid), timeout=5_000)
    assert list_reports(model) == []


@pytest.mark.subprocess
def test_quitting_mid_run_ends_the_runs_process_soon(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path
) -> None:
    prompts = small_set(tmp_path, 400)
    with qtbot.waitSignal(job.progress, timeout=RUN_TIMEOUT_MS, check_params_cb=_a_round):
        job.start_benchmark(model, [prompts], depths=(1, 2, 3), runs=20, max_new_tokens=400)
    pid = job.pid
    assert pid is not None
    started = time.monotonic()
    assert job.shutdown()
    assert time.monotonic() - started < SHUTDOWN_GRACE_MS / 1000 + 1.0
    assert _gone(pid) and not job.running and list_reports(model) == []


def _a_round(step: MeasureProgress) -> bool:
    return "Round" in step.message


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["kill", "segv"])
def test_the_runs_process_dying_is_a_clear_error_and_the_next_run_works(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path, how: str
) -> None:
    """A kill from outside (what the out-of-memory killer does) and a native crash."""
    if how == "segv" and sys.platform == "win32":
        pytest.skip("no SIGSEGV to send on Windows")
    prompts = small_set(tmp_path, 64)
    killed: list[int] = []

    def on_progress(step: MeasureProgress) -> None:
        if "plain decoding" in step.message and not killed and job.pid is not None:
            killed.append(job.pid)
            if how == "kill":
                psutil.Process(job.pid).kill()
            else:
                os.kill(job.pid, signal.SIGSEGV)

    job.progress.connect(on_progress)
    with qtbot.waitSignal(job.failed, timeout=RUN_TIMEOUT_MS) as failed:
        job.start_validation(model, prompts, method=MTP2, max_new_tokens=64)
    error = failed.args[0]
    assert isinstance(error, UserFacingError) and error.code == STOPPED_CODE
    if sys.platform != "win32":
        name = "SIGKILL" if how == "kill" else "SIGSEGV"
        assert error.message == (
            f"The validation stopped: the process running it ended ({name}) before it finished."
        )
        assert ("out of memory" in error.fix) == (how == "kill")
    assert "Nothing was saved" in error.fix and "chat was not affected" in error.fix
    assert not job.running and _gone(killed[0]) and list_reports(model) == []
    job.progress.disconnect(on_progress)
    # The job is usable again at once.
    with qtbot.waitSignal(job.finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
    assert finished.args[0].report["summary"]["all_identical"]


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("case", "code", "words"),
    [
        ("empty model folder", "EMPTY_DIR", "empty model is empty"),
        ("prompt file not JSON", "BAD_PROMPT_SET", "small.json"),
        ("no such prompt set", "BAD_PROMPT_SET", "nonsense"),
    ],
)
def test_bad_input_reaches_the_panel_as_the_runs_own_error(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path, case: str, code: str, words: str
) -> None:
    """What the run's process refuses arrives as its specific error (code, message, fix), not
    as a stopped process; nothing is saved."""
    prompts: str | Path = small_set(tmp_path, 16)
    if case == "empty model folder":
        model = tmp_path / "empty model"
        model.mkdir()
    elif case == "prompt file not JSON":
        Path(prompts).write_bytes(b"\xff\xfe not json {")
    else:
        prompts = "nonsense"
    with qtbot.waitSignal(job.failed, timeout=RUN_TIMEOUT_MS) as failed:
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
    error = failed.args[0]
    assert isinstance(error, UserFacingError), error
    assert (error.code, type(error)) == (code, UserFacingError), (error.code, str(error))
    assert words in str(error) and error.fix, str(error)
    assert not job.running and list_reports(model) == []


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["/nonexistent/qwen-host"], "could not start: no process for it"),
        ([sys.executable, "-c", "import sys; sys.exit(3)"], "ended (exit code 3)"),
    ],
)
def test_a_run_whose_process_cannot_run_fails_clearly(
    qtbot: QtBot, model: Path, tmp_path: Path, command: list[str], words: str
) -> None:
    """No process (a broken installation), or one that exits before answering."""
    job = BenchJob(command=command)
    busy: list[bool] = []
    job.busy_changed.connect(busy.append)
    with qtbot.waitSignal(job.failed, timeout=30_000) as failed:
        assert job.start_validation(model, small_set(tmp_path), method=MTP2)
    error = failed.args[0]
    assert error.code == STOPPED_CODE and words in error.message and error.fix, str(error)
    assert busy == [True, False] and not job.running
    assert job.shutdown(10_000)


@pytest.mark.subprocess
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(delay_s=st.floats(min_value=0.0, max_value=5.0))
@example(delay_s=12.0)  # after the end (a 2-prompt validation takes 3-6 s here)
def test_cancel_at_any_moment_ends_cleanly(
    qtbot: QtBot, model: Path, tmp_path: Path, delay_s: float
) -> None:
    """Cancel at a generated moment: while the process starts, while the model loads, mid-run,
    while the report is saved, or after the end. The run ends cancelled with nothing saved, or
    finished (the report had arrived) with its report saved; the panel is idle within a second
    and a half of the click, and the run's process is gone."""
    prompts = small_set(tmp_path, 16)
    job = BenchJob()
    outcomes: list[str] = []
    job.finished.connect(lambda _r: outcomes.append("finished"))
    job.cancelled.connect(lambda: outcomes.append("cancelled"))
    job.failed.connect(lambda e: outcomes.append(f"failed: {e}"))
    pids: list[int] = []
    job.progress.connect(lambda _s: pids.append(job.pid) if job.pid and not pids else None)
    before = len(list_reports(model))
    try:
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
        qtbot.wait(int(delay_s * 1000))
        was_running = job.running
        clicked = time.monotonic()
        job.cancel()
        qtbot.waitUntil(lambda: not job.running, timeout=RUN_TIMEOUT_MS)
        took = time.monotonic() - clicked
        qtbot.wait(50)  # nothing more arrives
        assert len(outcomes) == 1, outcomes
        event(outcomes[0] if was_running else "idle when clicked")
        saved = len(list_reports(model)) - before
        if outcomes == ["cancelled"]:
            assert was_running and saved == 0 and took < CANCEL_BOUND_S, (took, delay_s)
        else:
            assert outcomes == ["finished"] and saved == 1, outcomes
        assert all(_gone(pid) for pid in pids)
    finally:
        assert job.shutdown(30_000)


@pytest.mark.subprocess
def test_cancel_after_the_report_arrived_keeps_it(
    qtbot: QtBot, job: BenchJob, model: Path, tmp_path: Path
) -> None:
    """The click lands between the report's arrival and its saving (or the process's exit):
    the run is complete, so it is kept and the panel says it finished."""
    prompts = small_set(tmp_path, 16)
    clicks: list[object] = []

    def on_event(_rid: int, event: object) -> None:  # after BenchJob's own handler
        if isinstance(event, Measured):
            clicks.append(event)
            job.cancel()

    job._event.connect(on_event)
    cancelled: list[bool] = []
    job.cancelled.connect(lambda: cancelled.append(True))
    with qtbot.waitSignal(job.finished, timeout=RUN_TIMEOUT_MS) as finished:
        assert job.start_validation(model, prompts, method=MTP2, max_new_tokens=16)
    assert clicks and not cancelled
    assert [entry.path for entry in list_reports(model)] == [finished.args[0].path]
