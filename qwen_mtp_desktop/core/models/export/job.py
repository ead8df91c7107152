"""One export, start to finish: [download] -> export -> verify -> manifest -> move into place."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.models.export.command import export_command, generation_check_command
from qwen_mtp_desktop.core.models.export.exporter_log import ExportLog
from qwen_mtp_desktop.core.models.export.manifest import write_manifest
from qwen_mtp_desktop.core.models.export.optimum_cli import MARKER
from qwen_mtp_desktop.core.models.export.options import (
    ExportCancelledError,
    ExportError,
    ExportOptions,
    ExportSource,
    parse_source,
)
from qwen_mtp_desktop.core.models.export.process_group import (
    LOG_TAIL_LINES,
    ProcessOutcome,
    ProcessStats,
    SupervisedProcess,
)
from qwen_mtp_desktop.core.models.export.progress import (
    _TQDM_RE,
    ProgressEvent,
    ProgressParser,
    expected_compressions,
    read_markers,
    stage_plan,
)
from qwen_mtp_desktop.core.models.export.staging import Staging, move_into_place
from qwen_mtp_desktop.core.models.export.verify import (
    Verification,
    generation_item,
    verify_precisions,
)

JobStatus = Literal["succeeded", "failed", "cancelled"]


@dataclass(frozen=True)
class ExportRequest:
    source: ExportSource
    destination: Path
    options: ExportOptions
    #: Replace a non-empty destination (the wizard asks first; the CLI needs --force).
    overwrite: bool = False
    #: Load the result and compare MTP with plain greedy output.
    verify_generation: bool = True


@dataclass
class ExportOutcome:
    request: ExportRequest
    status: JobStatus
    output_dir: Path | None
    seconds: float
    peak_rss_bytes: int
    error: ExportError | None = None
    verification: Verification | None = None
    manifest: dict[str, Any] | None = None
    log_tail: str = ""
    revision: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    #: The exporter's whole output (what the wizard hides included), kept for a bug report.
    log_file: Path | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def reason(self) -> str:
        """One line: why it failed, or a short success note."""
        if self.status == "cancelled":
            return "export cancelled; nothing was kept"
        if self.error is not None:
            return str(self.error)
        if self.verification is not None and not self.verification.ok:
            return f"exported to {self.output_dir}, but verification failed: " + (
                self.verification.summary()
            )
        return f"exported to {self.output_dir}"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "output_dir": str(self.output_dir) if self.output_dir else None,
            "source": self.request.source.display,
            "revision": self.revision,
            "options": self.request.options.to_json_dict(),
            "seconds": round(self.seconds, 2),
            "peak_rss_bytes": self.peak_rss_bytes,
            "stage_seconds": {k: round(v, 2) for k, v in self.stage_seconds.items()},
            "error": (
                {"code": self.error.code, "message": self.error.message, "fix": self.error.fix}
                if self.error
                else None
            ),
            "verification": self.verification.to_json_dict() if self.verification else None,
            "log_tail": self.log_tail,
            "log_file": str(self.log_file) if self.log_file else None,
        }


def explain_failure(outcome: ProcessOutcome, what: str = "exporter") -> ExportError:
    """A specific message for the ways the exporter is known to fail, else the exit status."""
    tail = "\n".join(line for line in outcome.tail if not line.startswith(MARKER))
    lowered = tail.lower()
    if "no mtp ('mtp.*') weights" in lowered or ("mtp.*" in lowered and "runtimeerror" in lowered):
        return ExportError(
            "The checkpoint has no MTP weights (mtp.* tensors), so no MTP head can be exported.",
            "Use the original checkpoint from its publisher.",
            code="NO_MTP_WEIGHTS",
            log_tail=tail,
        )
    if "mtp_num_hidden_layers" in lowered:
        return ExportError(
            "The exporter supports exactly one MTP layer (mtp_num_hidden_layers = 1).",
            "Use a checkpoint with one MTP layer.",
            code="MTP_LAYERS",
            log_tail=tail,
        )
    if "invalidgroupsizeerror" in lowered or ("group size" in lowered and "error" in lowered):
        return ExportError(
            "INT4 compression failed: a layer does not fit the group size.",
            "Set the group-size fallback to 'ignore' or 'adjust', or choose another group size.",
            code="GROUP_SIZE",
            log_tail=tail,
        )
    if "no space left on device" in lowered:
        return ExportError(
            "The disk filled up during the export.",
            "Free some space or choose a destination on another disk, then export again.",
            code="DISK_FULL",
            log_tail=tail,
        )
    if outcome.exit_status == -signal.SIGKILL and not outcome.cancelled:
        return ExportError(
            f"The {what} was killed (exit by SIGKILL), most likely because the computer ran "
            "out of memory.",
            "Close other applications and export again, or export on a computer with more RAM.",
            code="KILLED",
            log_tail=tail,
        )
    if outcome.signal_name:
        detail = f"was stopped by {outcome.signal_name}"
    else:
        detail = f"failed (exit status {outcome.exit_status})"
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return ExportError(
        f"The {what} {detail}" + (f": {last[:300]}" if last else "."),
        "See the log below for details.",
        code="EXPORTER_FAILED",
        log_tail=tail,
    )


class ExportJob:
    """One export, start to finish, on the calling thread (no Qt; workers run it on a QThread).

    Callbacks (all on the calling thread): `on_line(str)` for each log line,
    `on_event(ProgressEvent)` for stage and progress changes, `on_stats(ProcessStats)` about
    twice a second. `cancel()` may be called from any thread.
    """

    def __init__(
        self,
        request: ExportRequest,
        *,
        on_line: Callable[[str], None] | None = None,
        on_event: Callable[[ProgressEvent], None] | None = None,
        on_stats: Callable[[ProcessStats], None] | None = None,
        python: str | None = None,
        grace: tuple[float, float] = (5.0, 5.0),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.request = request
        #: Where the exporter's whole output is written (logs/exports by default).
        self.log_dir = log_dir if log_dir is not None else app_paths().log_dir / "exports"
        self._export_log: ExportLog | None = None
        self.on_line = on_line
        self.on_event = on_event
        self.on_stats = on_stats
        self.python = python or sys.executable
        self.grace = grace
        self.extra_env = env or {}
        self.cancel_event = threading.Event()
        self.parser = ProgressParser(
            stage_plan(
                request.options,
                download=request.source.kind == "hub",
                verify=True,
            ),
            expected_compressions(request.options),
        )
        self._started = 0.0
        self._peak = 0
        self._stage_started: dict[str, float] = {}
        self._log: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._last_event: ProgressEvent | None = None
        self._tqdm_shown: dict[str, tuple[float, int]] = {}

    def cancel(self) -> None:
        self.cancel_event.set()

    # callbacks -------------------------------------------------------------------------------
    def _line(self, line: str) -> None:
        event = self.parser.feed(line)
        if not line.startswith(MARKER) and self._show_line(line):
            if self._export_log is not None:
                self._export_log.write(line)
            self._log.append(line)
            if self.on_line is not None:
                self.on_line(line)
        if event is not None:
            self._emit(event)

    def _show_line(self, line: str) -> bool:
        """tqdm redraws a bar dozens of times a second: keep one frame every 2 s, and 100 %."""
        match = _TQDM_RE.match(line)
        if match is None:
            return True
        key, percent, now = match.group("label"), int(match.group("pct")), time.monotonic()
        last = self._tqdm_shown.get(key)
        if percent >= 100:
            if last is not None and last[1] >= 100:
                return False
        elif last is not None and now - last[0] < 2.0:
            return False
        self._tqdm_shown[key] = (now, percent)
        return True

    def _emit(self, event: ProgressEvent) -> None:
        self._stage_started.setdefault(event.stage, time.monotonic())
        last = self._last_event
        if (
            last is not None
            and (last.stage, last.label) == (event.stage, event.label)
            and abs((event.fraction or 0.0) - (last.fraction or 0.0)) < 0.01
            and event.overall - last.overall < 0.005
        ):
            return  # a tqdm redraw that changes nothing visible
        self._last_event = event
        if self.on_event is not None:
            self.on_event(event)

    def _stats(self, stats: ProcessStats) -> None:
        self._peak = max(self._peak, stats.peak_rss_bytes)
        if self.on_stats is not None:
            elapsed = time.monotonic() - self._started
            self.on_stats(ProcessStats(elapsed, stats.rss_bytes, self._peak))

    def _check_cancel(self) -> None:
        if self.cancel_event.is_set():
            raise ExportCancelledError()

    def _run_process(self, command: list[str], env: dict[str, str]) -> ProcessOutcome:
        process = SupervisedProcess(
            command,
            env=env,
            on_line=self._line,
            on_stats=self._stats,
            cancel=self.cancel_event,
            grace=self.grace,
        )
        outcome = process.run()
        self._peak = max(self._peak, outcome.peak_rss_bytes)
        if outcome.cancelled:
            raise ExportCancelledError()
        return outcome

    def _env(self, staging: Staging, *, offline: bool) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONUNBUFFERED="1",
            TMPDIR=str(staging.tmp_dir),  # scratch files die with the staging folder
            TOKENIZERS_PARALLELISM="false",
        )
        if offline:
            env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.update(self.extra_env)
        return env

    # the job ---------------------------------------------------------------------------------
    def run(self) -> ExportOutcome:
        self._export_log = ExportLog(self.log_dir, self.request.source.short_name)
        try:
            outcome = self._run()
        finally:
            self._export_log.close()
        outcome.log_file = self._export_log.path
        return outcome

    def _run(self) -> ExportOutcome:
        request = self.request
        self._started = time.monotonic()
        staging: Staging | None = None
        revision = request.source.revision
        verification: Verification | None = None
        try:
            request.options.check()
            destination = request.destination.expanduser().absolute()
            self._check_destination(destination)
            staging = Staging.create(destination)
            source_path = request.source.value
            if request.source.kind == "hub":
                source_path, revision = self._download(staging)
            elif Path(source_path).parent.name == "snapshots":  # a folder inside an HF cache
                revision = revision or Path(source_path).name
            self._check_cancel()
            command = export_command(
                source_path, staging.model_dir, request.options, python=self.python
            )
            self._emit(self.parser.enter("loading"))
            outcome = self._run_process(command, self._env(staging, offline=True))
            if not outcome.ok:
                raise explain_failure(outcome)
            self._check_cancel()
            self._emit(self.parser.enter("verifying"))
            verification = verify_precisions(staging.model_dir, request.options)
            if not verification.files_ok:
                failed = next(i for i in verification.items if i.status == "fail")
                raise ExportError(
                    failed.message, failed.fix, code="VERIFY_FAILED", log_tail=self._tail()
                )
            if request.verify_generation:
                verification.generation = self._check_generation(staging)
                verification.items.append(generation_item(verification.generation))
            self._check_cancel()
            self._emit(self.parser.enter("finishing"))
            shutil.rmtree(staging.tmp_dir, ignore_errors=True)
            seconds = time.monotonic() - self._started
            manifest = write_manifest(
                staging.model_dir,
                source=request.source.value,
                revision=revision,
                options=request.options,
                duration_s=seconds,
                peak_rss_bytes=self._peak,
                extra={"verification": verification.to_json_dict()},
                cancel=self.cancel_event,
            )
            self._check_cancel()
            move_into_place(staging.model_dir, destination, overwrite=request.overwrite)
            self._emit(self.parser.finish())
            return self._outcome(
                "succeeded",
                destination,
                verification=verification,
                manifest=manifest,
                revision=revision,
            )
        except ExportCancelledError:
            return self._outcome("cancelled")
        except ExportError as exc:
            if not exc.log_tail:
                exc.log_tail = self._tail()
            return self._outcome("failed", error=exc, verification=verification, revision=revision)
        except OSError as exc:
            error = ExportError(
                f"The export could not write its files: {exc.strerror or exc} "
                f"({exc.filename or request.destination}).",
                "Check the destination's permissions and free space.",
                code="IO_ERROR",
                log_tail=self._tail(),
            )
            return self._outcome("failed", error=error)
        finally:
            if staging is not None:
                staging.remove()

    def _outcome(
        self,
        status: JobStatus,
        output_dir: Path | None = None,
        *,
        error: ExportError | None = None,
        verification: Verification | None = None,
        manifest: dict[str, Any] | None = None,
        revision: str | None = None,
    ) -> ExportOutcome:
        """How the run ended, with what every ending reports: the time so far, the peak
        memory, each stage's time and the log's tail (the error's own, when it has one)."""
        return ExportOutcome(
            self.request,
            status,
            output_dir,
            time.monotonic() - self._started,
            self._peak,
            error=error,
            verification=verification,
            manifest=manifest,
            log_tail=error.log_tail if error is not None else self._tail(),
            revision=revision,
            stage_seconds=self._stage_durations(),
        )

    def _tail(self) -> str:
        return "\n".join(self._log)

    def _stage_durations(self) -> dict[str, float]:
        ordered = sorted(self._stage_started.items(), key=lambda item: item[1])
        end = time.monotonic()
        durations = {}
        for index, (stage, started) in enumerate(ordered):
            stop = ordered[index + 1][1] if index + 1 < len(ordered) else end
            durations[stage] = stop - started
        return durations

    def _check_destination(self, destination: Path) -> None:
        from qwen_mtp_desktop.core.models.export.preflight.checks import check_destination

        source = self.request.source
        item = check_destination(
            destination,
            overwrite=self.request.overwrite,
            source=Path(source.value) if source.kind == "folder" else None,
        )
        if item.status == "fail":
            raise ExportError(item.message, item.fix, code="BAD_DESTINATION")

    def _download(self, staging: Staging) -> tuple[str, str | None]:
        from qwen_mtp_desktop.core.models.export.hub import download_command

        source = self.request.source
        self._emit(self.parser.enter("downloading"))
        command = download_command(source.value, source.revision, python=self.python)
        # The download is the one step allowed online (unless HF_HUB_OFFLINE is set).
        outcome = self._run_process(command, self._env(staging, offline=False))
        if not outcome.ok:
            raise self._download_error(outcome)
        snapshots = [m for m in read_markers(outcome.tail) if m.get("event") == "snapshot"]
        if not snapshots:
            raise ExportError(
                "The download finished without reporting where the files are.",
                "Try again; see the log for details.",
                code="DOWNLOAD_FAILED",
                log_tail="\n".join(outcome.tail),
            )
        last = snapshots[-1]
        return str(last["path"]), (str(last["revision"]) if last.get("revision") else None)

    @staticmethod
    def _download_error(outcome: ProcessOutcome) -> ExportError:
        errors = [m for m in read_markers(outcome.tail) if m.get("event") == "error"]
        tail = "\n".join(line for line in outcome.tail if not line.startswith(MARKER))
        if errors:
            return ExportError(
                str(errors[-1].get("message", "The download failed.")),
                str(errors[-1].get("fix", "")),
                code=str(errors[-1].get("code", "DOWNLOAD_FAILED")),
                log_tail=tail,
            )
        return explain_failure(outcome, "download")

    def _check_generation(self, staging: Staging) -> dict[str, Any]:
        """Greedy MTP vs plain output, in a subprocess. A run that a signal ended (a rare crash
        inside the runtime) runs once more, and the result keeps both outcomes: one crash must
        neither fail a good export nor be hidden."""
        result, crashed_by = self._run_generation_check(staging)
        if crashed_by is None:
            return result
        self._line(
            f"The generation check was stopped by {crashed_by} (a crash inside the OpenVINO "
            "runtime); running it once more."
        )
        result, _ = self._run_generation_check(staging)
        result["first_run"] = f"stopped by {crashed_by}"
        return result

    def _run_generation_check(self, staging: Staging) -> tuple[dict[str, Any], str | None]:
        """The check's result, and the signal that ended its process if one did."""
        command = generation_check_command(staging.model_dir, python=self.python)
        outcome = self._run_process(command, self._env(staging, offline=True))
        results = [m for m in read_markers(outcome.tail) if m.get("event") == "generation"]
        if not outcome.ok or not results:
            errors = [m for m in read_markers(outcome.tail) if m.get("event") == "error"]
            message = (
                str(errors[-1].get("message"))
                if errors
                else explain_failure(outcome, "verification").message
            )
            return {"equal": False, "error": message, "first_difference": None}, (
                outcome.signal_name
            )
        result = results[-1].get("result")
        return (result if isinstance(result, dict) else {"equal": False}), None


def run_export(
    source: str,
    output_dir: Path,
    options: ExportOptions,
    *,
    on_line: Callable[[str], None] | None = None,
    overwrite: bool = False,
    verify_generation: bool = False,
) -> ExportOutcome:
    """Export `source` (folder or hub id) to `output_dir`; raise ExportError on failure.

    A shorthand for `ExportJob(...).run()` that raises instead of returning a failed outcome.
    """
    request = ExportRequest(
        parse_source(source),
        Path(output_dir),
        options,
        overwrite=overwrite,
        verify_generation=verify_generation,
    )
    outcome = ExportJob(request, on_line=on_line).run()
    if outcome.error is not None:
        raise outcome.error
    if outcome.status == "cancelled":
        raise ExportError("The export was cancelled.", code="CANCELLED")
    return outcome
