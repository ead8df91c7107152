"""Cancelling and crashing a real export: nothing registered, nothing left, nothing running.

Cancel points: while the exporter loads (imports torch), while it converts, while nncf
compresses. Crashes: the exporter raises (a checkpoint with two MTP layers, past preflight) and
the exporter is killed from outside (what the OOM killer does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from qwen_mtp_desktop.core.models.export.job import ExportJob, ExportOutcome, ExportRequest
from qwen_mtp_desktop.core.models.export.options import ExportOptions, ExportSource
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import inspect_checkpoint_folder
from qwen_mtp_desktop.core.models.export.preflight.checks import run_preflight
from qwen_mtp_desktop.core.models.export.progress import ProgressEvent
from qwen_mtp_desktop.core.models.export.staging import cleanup_stale_exports, staging_registry_dir
from tests.models import cached_checkpoint

pytestmark = pytest.mark.export


def _request(tmp_path: Path, checkpoint: Path, options: ExportOptions) -> ExportRequest:
    return ExportRequest(
        ExportSource("folder", str(checkpoint)),
        tmp_path / "models" / "tiny",
        options,
        verify_generation=False,
    )


#: Children of the test process from before the test (none of them an exporter of its).
_EARLIER: set[int] = set()


@pytest.fixture(autouse=True)
def _earlier_children() -> None:
    _EARLIER.clear()
    _EARLIER.update(child.pid for child in psutil.Process().children(recursive=True))


def _exporter_processes() -> list[psutil.Process]:
    """Processes this test started that are still running."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.pid not in _EARLIER and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def _assert_nothing_left(tmp_path: Path, outcome: ExportOutcome) -> None:
    models = tmp_path / "models"
    assert outcome.output_dir is None
    assert not (models / "tiny").exists(), "a partial model was registered"
    leftovers = sorted(p.name for p in models.iterdir()) if models.exists() else []
    assert leftovers == [], leftovers
    assert list(staging_registry_dir().glob("*.json")) == []
    deadline = time.monotonic() + 5
    while _exporter_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _exporter_processes() == [], "an exporter process survived"
    assert cleanup_stale_exports([models]) == []


def _run(
    tmp_path: Path,
    options: ExportOptions,
    trigger: Callable[[ProgressEvent, ExportJob], None],
    checkpoint: Path | None = None,
) -> tuple[ExportOutcome, list[ProgressEvent]]:
    events: list[ProgressEvent] = []
    holder: list[ExportJob] = []

    def on_event(event: ProgressEvent) -> None:
        events.append(event)
        trigger(event, holder[0])

    job = ExportJob(
        _request(tmp_path, checkpoint or cached_checkpoint(moe=False), options),
        on_event=on_event,
        grace=(5.0, 5.0),
    )
    holder.append(job)
    return job.run(), events


@pytest.mark.parametrize(
    ("stage", "options"),
    [
        ("loading", ExportOptions.recommended("int4", group_size=16)),
        ("converting", ExportOptions.recommended("int4", group_size=16)),
        ("compressing", ExportOptions.recommended("int4", group_size=16)),
    ],
)
def test_cancel_leaves_nothing_behind(tmp_path: Path, stage: str, options: ExportOptions) -> None:
    fired: list[float] = []

    def trigger(event: ProgressEvent, job: ExportJob) -> None:
        if event.stage != stage or fired:
            return
        if stage == "compressing" and event.fraction in (None, 0.0):
            return  # wait until nncf reports a percentage
        fired.append(time.monotonic())
        if stage == "loading":  # mid-import of torch, a few seconds in
            threading.Timer(3.0, job.cancel).start()
        else:
            job.cancel()

    started = time.monotonic()
    outcome, events = _run(tmp_path, options, trigger)
    assert fired, f"never reached {stage}: {[e.stage for e in events]}"
    assert outcome.status == "cancelled", outcome.reason()
    assert time.monotonic() - fired[0] < 15, "cancel took too long"
    print(f"\nMEASURE cancel at {stage}: stopped {time.monotonic() - fired[0]:.1f} s after, "
          f"job {time.monotonic() - started:.1f} s")  # fmt: skip
    _assert_nothing_left(tmp_path, outcome)
    # The app still works: a preflight of the same checkpoint runs normally afterwards.
    report = run_preflight(
        inspect_checkpoint_folder(cached_checkpoint(moe=False)),
        options,
        tmp_path / "models" / "tiny",
    )
    assert report.item("mtp_tensors") is not None


def test_exporter_that_raises_is_reported_with_its_log(tmp_path: Path) -> None:
    checkpoint = tmp_path / "two-mtp-layers"
    shutil.copytree(cached_checkpoint(moe=False), checkpoint)
    config = json.loads((checkpoint / "config.json").read_text())
    config["text_config"]["mtp_num_hidden_layers"] = 2
    (checkpoint / "config.json").write_text(json.dumps(config))
    outcome, _ = _run(
        tmp_path, ExportOptions(weight_format="fp16"), lambda e, j: None, checkpoint=checkpoint
    )
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.code == "MTP_LAYERS"
    assert "exactly one MTP layer" in outcome.error.message
    assert "NotImplementedError" in outcome.log_tail
    _assert_nothing_left(tmp_path, outcome)


def test_exporter_killed_midway_is_reported(tmp_path: Path) -> None:
    killed: list[int] = []

    def trigger(event: ProgressEvent, job: ExportJob) -> None:
        if event.stage == "converting" and not killed:
            for process in _exporter_processes():
                if "qwen_mtp_desktop.core.models.export.optimum_cli" in " ".join(process.cmdline()):
                    os.kill(process.pid, signal.SIGKILL)
                    killed.append(process.pid)

    outcome, _ = _run(tmp_path, ExportOptions(weight_format="fp16"), trigger)
    assert killed
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.code == "KILLED"
    assert "out of memory" in outcome.error.message
    assert outcome.log_tail  # what the exporter printed before it died
    _assert_nothing_left(tmp_path, outcome)
