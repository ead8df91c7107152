"""The supervised subprocess, staging folders and the job's failure paths, with fake exporters."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from qwen_mtp_desktop.core.models.export.job import ExportJob, ExportRequest
from qwen_mtp_desktop.core.models.export.options import ExportOptions, ExportSource
from qwen_mtp_desktop.core.models.export.process_group import SupervisedProcess
from qwen_mtp_desktop.core.models.export.staging import (
    cleanup_stale_exports,
    move_into_place,
    staging_registry_dir,
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.subprocess
def test_lines_are_streamed_and_split_on_carriage_returns() -> None:
    lines: list[str] = []
    process = SupervisedProcess(
        _python(
            """
            import sys
            print("first", flush=True)
            sys.stdout.write("bar 1%\\rbar 2%\\rbar 100%\\n")
            sys.stderr.write("to stderr\\n")
            sys.exit(3)
            """
        ),
        on_line=lines.append,
    )
    outcome = process.run()
    assert outcome.exit_status == 3 and not outcome.ok and not outcome.cancelled
    assert lines == ["first", "bar 1%", "bar 2%", "bar 100%", "to stderr"]
    assert outcome.tail == lines


@pytest.mark.subprocess
def test_cancel_escalates_to_sigkill_and_kills_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    cancel = threading.Event()
    lines: list[str] = []

    def on_line(line: str) -> None:
        lines.append(line)
        if line == "ready":
            cancel.set()

    process = SupervisedProcess(
        _python(
            f"""
            import signal, subprocess, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            child = subprocess.Popen(["sleep", "300"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            print("ready", flush=True)
            time.sleep(300)
            """
        ),
        on_line=on_line,
        cancel=cancel,
        grace=(0.5, 0.5),
    )
    started = time.monotonic()
    outcome = process.run()
    assert outcome.cancelled
    assert outcome.exit_status == -signal.SIGKILL
    assert time.monotonic() - started < 10
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "a process of the group outlived the cancel"


@pytest.mark.subprocess
def test_sigint_is_enough_for_a_python_exporter() -> None:
    cancel = threading.Event()

    def on_line(line: str) -> None:
        if line == "ready":
            cancel.set()

    outcome = SupervisedProcess(
        # Like core.models.export.optimum_cli, the child takes SIGINT even if started with it
        # ignored.
        _python(
            "import signal, time\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            'print("ready", flush=True)\ntime.sleep(300)'
        ),
        on_line=on_line,
        cancel=cancel,
        grace=(20, 20),
    ).run()
    assert outcome.cancelled
    assert outcome.seconds < 15  # KeyboardInterrupt, not the SIGKILL 40 s later
    assert outcome.exit_status != -signal.SIGKILL


@pytest.mark.subprocess
def test_a_grandchild_holding_the_pipe_does_not_hang_the_job(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    outcome = SupervisedProcess(
        _python(
            f"""
            import subprocess
            child = subprocess.Popen(["sleep", "300"])  # inherits stdout
            open({str(pid_file)!r}, "w").write(str(child.pid))
            print("leader done", flush=True)
            """
        )
    ).run()
    assert outcome.exit_status == 0
    assert outcome.seconds < 10
    time.sleep(0.2)
    assert not _alive(int(pid_file.read_text()))


@pytest.mark.subprocess
def test_peak_memory_of_the_process_tree() -> None:
    outcome = SupervisedProcess(
        _python("import time\nblock = bytearray(200 * 1024 * 1024)\ntime.sleep(1.5)"),
        sample_interval=0.1,
    ).run()
    assert outcome.ok
    assert outcome.peak_rss_bytes > 200 * 1024 * 1024


# --- staging folders -------------------------------------------------------------------------


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.subprocess
def test_cleanup_removes_stale_staging_and_restores_replaced_models(tmp_path: Path) -> None:
    models = tmp_path / "models"
    stale = models / ".old.exporting-dead01"
    (stale / "model").mkdir(parents=True)
    (stale / "owner.json").write_text(json.dumps({"pid": _dead_pid(), "create_time": 1.0}))
    ownerless = models / ".x.exporting-noowner"
    ownerless.mkdir()
    me = psutil.Process()
    live = models / ".busy.exporting-live01"
    live.mkdir()
    (live / "owner.json").write_text(json.dumps({"pid": me.pid, "create_time": me.create_time()}))
    # A replace interrupted after the old model was set aside: it comes back.
    aside = models / ".kept.replaced-abcd"
    aside.mkdir()
    (aside / "weights.bin").write_text("old model")
    # A replace interrupted after the new model arrived: the old one goes.
    (models / "done").mkdir()
    leftover = models / ".done.replaced-ef01"
    leftover.mkdir()
    (models / "regular-model").mkdir()

    handled = cleanup_stale_exports([models])
    assert set(handled) == {stale, ownerless, aside, leftover}
    assert not stale.exists() and not ownerless.exists() and not leftover.exists()
    assert live.exists(), "a running export's staging folder must survive"
    assert (models / "kept" / "weights.bin").read_text() == "old model"
    assert (models / "regular-model").exists() and (models / "done").exists()


@pytest.mark.subprocess
def test_cleanup_finds_custom_destinations_through_the_registry(tmp_path: Path) -> None:
    custom = tmp_path / "elsewhere"
    stale = custom / ".mine.exporting-0badc0de"
    stale.mkdir(parents=True)
    registry = staging_registry_dir()
    registry.mkdir(parents=True)
    entry = registry / "0badc0de.json"
    entry.write_text(json.dumps({"pid": _dead_pid(), "staging": str(stale)}))
    assert stale in cleanup_stale_exports([tmp_path / "models"])
    assert not stale.exists() and not entry.exists()


def testmove_into_place_replaces_only_when_allowed(tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.mkdir()
    (new / "a").write_text("new")
    destination = tmp_path / "models" / "m"
    destination.mkdir(parents=True)
    (destination / "a").write_text("old")
    with pytest.raises(Exception, match="already exists"):
        move_into_place(new, destination, overwrite=False)
    # Issue 19: with overwrite, only a previous export (recognised by its manifest) goes.
    with pytest.raises(Exception, match="not a model exported by this app"):
        move_into_place(new, destination, overwrite=True)
    assert (destination / "a").read_text() == "old"
    (destination / "qwen_mtp_export.json").write_text('{"source": "x", "files": {"a": "0"}}')
    move_into_place(new, destination, overwrite=True)
    assert (destination / "a").read_text() == "new"
    assert sorted(p.name for p in destination.parent.iterdir()) == ["m"]


# --- the job with a fake exporter ------------------------------------------------------------


def _fake_python(tmp_path: Path, body: str) -> str:
    """An executable that stands in for `python -m ...optimum_cli` (it ignores its arguments)."""
    script = tmp_path / "fake-python"
    script.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return str(script)


def _request(tmp_path: Path) -> ExportRequest:
    source = tmp_path / "ckpt"
    source.mkdir(exist_ok=True)
    return ExportRequest(
        ExportSource("folder", str(source)),
        tmp_path / "models" / "out",
        ExportOptions.recommended("int4"),
        verify_generation=False,
    )


def _leftovers(tmp_path: Path) -> list[str]:
    models = tmp_path / "models"
    return sorted(p.name for p in models.iterdir()) if models.exists() else []


@pytest.mark.subprocess
def test_exporter_crash_is_reported_with_the_log_tail(tmp_path: Path) -> None:
    python = _fake_python(
        tmp_path,
        """
        echo '[qmtp] {"event":"stage","stage":"converting","part":"mtp"}'
        echo 'Traceback (most recent call last):'
        echo "RuntimeError: No MTP ('mtp.*') weights were loaded from '/ckpt'."
        exit 1
        """,
    )
    outcome = ExportJob(_request(tmp_path), python=python).run()
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.code == "NO_MTP_WEIGHTS"
    assert "No MTP ('mtp.*') weights" in outcome.log_tail
    assert "[qmtp]" not in outcome.log_tail
    assert _leftovers(tmp_path) == []


@pytest.mark.subprocess
def test_exporter_killed_looks_like_out_of_memory(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, "echo converting\nkill -9 $$\n")
    outcome = ExportJob(_request(tmp_path), python=python).run()
    assert outcome.error is not None and outcome.error.code == "KILLED"
    assert "out of memory" in outcome.error.message
    assert _leftovers(tmp_path) == []


@pytest.mark.subprocess
def test_exporter_that_writes_nothing_fails_verification(tmp_path: Path) -> None:
    outcome = ExportJob(_request(tmp_path), python=_fake_python(tmp_path, "exit 0\n")).run()
    assert outcome.status == "failed" and outcome.error is not None
    assert "openvino_mtp_model.xml" in outcome.error.message
    assert _leftovers(tmp_path) == []


@pytest.mark.subprocess
def test_cancel_before_the_exporter_starts_leaves_nothing(tmp_path: Path) -> None:
    job = ExportJob(_request(tmp_path), python=_fake_python(tmp_path, "sleep 30\n"))
    timer = threading.Timer(0.5, job.cancel)
    timer.start()
    outcome = job.run()
    timer.join()
    assert outcome.status == "cancelled"
    assert outcome.reason() == "export cancelled; nothing was kept"
    assert _leftovers(tmp_path) == []


@pytest.mark.subprocess
def test_exporter_tmpdir_lives_in_the_staging_folder(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, 'echo "tmp=$TMPDIR offline=$HF_HUB_OFFLINE"\nexit 2\n')
    outcome = ExportJob(_request(tmp_path), python=python).run()
    line = next(x for x in outcome.log_tail.splitlines() if x.startswith("tmp="))
    assert ".out.exporting-" in line and line.endswith("offline=1")
    assert Path(line.split()[0]).name == "tmp"


@pytest.mark.subprocess
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")
def test_exporter_dies_with_a_hard_killed_app(tmp_path: Path) -> None:
    """The exporter has its own process group, so only PDEATHSIG stops it if the app is killed."""
    pid_file = tmp_path / "exporter.pid"
    exporter = textwrap.dedent(
        f"""
        import os, time
        from qwen_mtp_desktop.core.models.export.optimum_cli import die_with_parent
        die_with_parent()
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(300)
        """
    )
    app = textwrap.dedent(
        f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", {exporter!r}], start_new_session=True)
        time.sleep(300)
        """
    )
    fake_app = subprocess.Popen([sys.executable, "-c", app])
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    exporter_pid = int(pid_file.read_text())
    assert _alive(exporter_pid)
    fake_app.kill()
    fake_app.wait()
    deadline = time.monotonic() + 10
    while _alive(exporter_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(exporter_pid)
