"""The Benchmark panel's runs inside an engine host: a `Measure` request handed to
core.measure.validate or core.measure.bench, its progress sent as events, its end sent as the report
or a plain error.

The report is not saved here: the window saves it (and the benchmark's recommendation and the
acceptance references) once it has arrived, so a run that is cancelled, killed or crashes
leaves nothing behind, whatever moment it ends at.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.errors import UserFacingError, as_user_error
from qwen_mtp_desktop.core.hosting.protocol import (
    Devices,
    Measure,
    Measured,
    MeasureFailed,
    MeasureProgress,
)

if TYPE_CHECKING:  # the measurement code is imported when a run needs it
    from qwen_mtp_desktop.core.measure.records import Report

log = logging.getLogger(__name__)


def run_measure(request: Measure, send: Callable[[object], None], cancel: threading.Event) -> None:
    """Run `request` to its end and send `MeasureProgress` events, then `Measured` or
    `MeasureFailed` (code CANCELLED when `cancel` stopped it). OSError from `send` (the window
    is gone) propagates."""
    rid = request.request_id

    def progress(step: Any) -> None:  # core.measure.measurement.Progress
        send(MeasureProgress(rid, step.done, step.total, step.message))

    try:
        report = _measure(request, progress, cancel)
    except OSError:
        raise
    except Exception as exc:
        error = as_user_error(exc, UserFacingError)  # an unexpected one is logged here
        # A plain UserFacingError with the same words and code: every subclass pickles.
        send(MeasureFailed(rid, UserFacingError(error.message, error.fix, code=error.code)))
        return
    send(Measured(rid, report))


def _measure(request: Measure, progress: Callable[[Any], None], cancel: threading.Event) -> Report:
    # Imported here: a host that only chats never loads the measurement code.
    from qwen_mtp_desktop.core.errors import MeasurementError
    from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set

    if not request.prompt_sets:
        raise MeasurementError("Choose at least one prompt set.", code="BAD_SETTINGS")
    if request.kind == "validate":
        from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP
        from qwen_mtp_desktop.core.measure.validate import run_validation

        return run_validation(
            request.model_dir,
            load_prompt_set(request.prompt_sets[0]),
            max_new_tokens=request.max_new_tokens,
            method=request.method or DEFAULT_MTP,
            device=request.device,
            progress=progress,
            cancel=cancel,
        )
    from qwen_mtp_desktop.core.measure.bench import run_benchmark

    return run_benchmark(
        request.model_dir,
        [load_prompt_set(spec) for spec in request.prompt_sets],
        depths=request.depths,
        runs=request.runs,
        warmup=request.warmup,
        max_new_tokens=request.max_new_tokens,
        device=request.device,
        exact_numerics=request.exact_numerics,
        cache_dir=request.cache_dir,
        progress=progress,
        cancel=cancel,
        lookup=request.lookup,
    )


def list_devices() -> Devices:
    """OpenVINO's devices, or the reason they could not be listed."""
    from qwen_mtp_desktop.core.system.environment import available_devices

    devices, error = available_devices()
    return Devices(tuple(device.name for device in devices), error)
