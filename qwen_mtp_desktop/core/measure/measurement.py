"""What validation (core.measure.validate) and benchmarking (core.measure.bench) share to measure:
the plain and MTP engine pair, one generation run to its end and its record, the spread of several
runs, the acceptance over runs, progress with cancellation, and the model, machine and runtime
versions that every report records."""

from __future__ import annotations

import logging
import math
import platform
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions
from qwen_mtp_desktop.core.errors import MeasurementError, RunCancelledError
from qwen_mtp_desktop.core.measure.records import (
    AcceptanceSummary,
    KindT,
    MachineInfo,
    ModelInfo,
    ReportHeader,
    RunRecord,
    Spread,
)
from qwen_mtp_desktop.core.measure.reports import (
    REPORT_SCHEMA_VERSION,
    model_key,
    new_report_id,
)
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.library import display_name
from qwen_mtp_desktop.core.system.environment import package_version

log = logging.getLogger(__name__)

#: Packages whose installed versions every report records.
VERSION_PACKAGES = (
    "optimum-intel",
    "transformers",
    "nncf",
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
)


MODEL_KEYS = frozenset(
    {
        "path",
        "key",
        "name",
        "source_model_id",
        "source_revision",
        "kind",
        "model_type",
        "precisions",
        "mtp_precision",
        "export_versions",
    }
)


RUN_KEYS = frozenset(
    {
        "method",
        "prompt_tokens",
        "tokens",
        "ttft_s",
        "decode_tokens_per_s",
        "total_s",
        "steps",
        "step_ms",
        "drafted_tokens",
        "accepted_tokens",
        "acceptance_rate",
        "mean_accepted_per_step",
        "acceptance_by_position",
        "finish_reason",
    }
)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    message: str

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressCallback = Callable[[Progress], None]


def describe_model(model_dir: Path) -> ModelInfo:
    """Where the model came from and how it is compressed (no weights are read)."""
    report = inspect_model(model_dir, measure_memory=False)
    precisions = {c.key: c.precision for c in report.components if c.present}
    return {
        "path": str(Path(model_dir).expanduser().resolve()),
        "key": model_key(model_dir),
        "name": display_name(Path(model_dir)),
        "source_model_id": report.source.model_id,
        "source_revision": report.source.revision,
        "kind": report.kind,
        "model_type": report.model_type,
        "precisions": precisions,
        "mtp_precision": precisions.get("mtp"),
        "export_versions": dict(report.versions),
    }


def installed_versions() -> dict[str, str | None]:
    return {name: package_version(name) for name in VERSION_PACKAGES}


def describe_machine(device: str) -> MachineInfo:
    import psutil

    device_name: str | None = None
    try:
        import openvino

        device_name = str(openvino.Core().get_property(device, "FULL_DEVICE_NAME"))
    except Exception:  # a device that cannot describe itself does not stop the run
        log.debug("no FULL_DEVICE_NAME for %s", device, exc_info=True)
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "device_name": device_name,
        "logical_cpus": psutil.cpu_count(logical=True),
        "total_ram_bytes": psutil.virtual_memory().total,
    }


def run_record(stats: GenerationStats) -> RunRecord:
    """One generation's measurements (TTFT is kept apart from decode speed) and the method
    that ran it (`DecodingMethod.to_record`)."""
    decode_steps = max(stats.steps - 1, 0)
    decode_tokens = stats.generated_tokens - (stats.chunk_sizes[0] if stats.chunk_sizes else 0)
    decode_s = decode_tokens / stats.decode_tokens_per_s if stats.decode_tokens_per_s > 0 else 0.0
    drafting = not stats.method.is_plain
    return {
        "method": stats.method.to_record(),
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.generated_tokens,
        "ttft_s": stats.ttft_s,
        "decode_tokens_per_s": stats.decode_tokens_per_s,
        "total_s": stats.total_s,
        "steps": stats.steps,
        "step_ms": 1000 * decode_s / decode_steps if decode_steps else None,
        "drafted_tokens": stats.drafted_tokens,
        "accepted_tokens": stats.accepted_tokens,
        "acceptance_rate": stats.acceptance_rate if drafting else None,
        "mean_accepted_per_step": stats.mean_accepted_per_step if drafting else None,
        "acceptance_by_position": list(stats.acceptance_by_position),
        "finish_reason": stats.finish_reason,
    }


def spread(values: Sequence[float]) -> Spread | None:
    """Median with min and max (what the charts' whiskers show); None for no values."""
    clean = [v for v in values if v is not None and math.isfinite(v)]
    if not clean:
        return None
    return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}


def generate_ids(
    engine: Engine,
    prompt: str,
    settings: GenerationSettings,
    cancel: threading.Event | None = None,
) -> tuple[list[int], GenerationStats]:
    """Greedy token ids and stats of one generation; RunCancelledError if `cancel` gets set.
    The prompt is prefilled cold (no state kept from an earlier run), so every run's time to
    first token measures the same work."""
    engine.drop_states()
    generation = engine.generate_raw(prompt, settings)
    try:
        while True:
            if cancel is not None and cancel.is_set():
                generation.cancel()
            try:
                generation.next_chunk(timeout=0.1)
            except StopIteration:
                break
    except BaseException:
        generation.close()
        raise
    if cancel is not None and cancel.is_set():
        raise RunCancelledError()
    assert generation.stats is not None
    return list(generation.token_ids), generation.stats


def plain_reference_options(options: LoadOptions) -> LoadOptions:
    """`options` for openvino-genai's plain pipeline alone (no app decoder, no MTP head)."""
    return replace(options, mtp=False, app_decoder=False, plain_decoder="genai")


def load_engine_pair(
    model_dir: Path, options: LoadOptions, *, mtp_head: bool = True
) -> tuple[Engine, Engine]:
    """(plain reference, drafting) engines on the same model and options. The plain engine is
    openvino-genai's plain pipeline alone: the independent reference for exactness and the
    "plain · openvino-genai" row; the other holds the app's decoder, with the MTP head when
    `mtp_head` (MeasurementError NO_MTP when the model has none) or without it (prompt lookup)."""
    baseline, drafting = Engine(), Engine()
    try:
        baseline.load(model_dir, plain_reference_options(options))
        loaded = drafting.load(model_dir, replace(options, mtp=mtp_head))
    except BaseException:
        baseline.unload()
        drafting.unload()
        raise
    if mtp_head and not loaded.mtp:
        baseline.unload()
        drafting.unload()
        raise MeasurementError(
            f"{display_name(model_dir)} has no MTP head, so there is nothing to validate.",
            "Re-export the checkpoint with optimum-intel 2.2 or newer (task image-text-to-text).",
            code="NO_MTP",
        )
    return baseline, drafting


class Tracker:
    """Counts units of work for the progress callback and checks for cancellation."""

    def __init__(
        self, total: int, progress: ProgressCallback | None, cancel: threading.Event | None
    ) -> None:
        self.total = total
        self.count = 0
        self._progress = progress
        self._cancel = cancel
        self._message = ""

    def start(self, message: str) -> None:
        self._message = message
        self._emit()

    def done(self) -> None:
        self.count = min(self.count + 1, self.total)
        self._emit()

    def finish(self, message: str) -> None:
        self.count = self.total
        self.start(message)

    def _emit(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise RunCancelledError()
        if self._progress is not None:
            self._progress(Progress(self.count, self.total, self._message))


def acceptance_summary(runs: Sequence[RunRecord]) -> AcceptanceSummary:
    """Acceptance over several MTP runs of one depth, weighted by their decode steps."""
    steps = sum(max(r["steps"] - 1, 0) for r in runs)
    drafted = sum(r["drafted_tokens"] for r in runs)
    accepted = sum(r["accepted_tokens"] for r in runs)
    depth = max((len(r["acceptance_by_position"]) for r in runs), default=0)
    positions = [
        sum(
            r["acceptance_by_position"][i] * max(r["steps"] - 1, 0)
            for r in runs
            if len(r["acceptance_by_position"]) > i
        )
        / steps
        for i in range(depth)
        if steps
    ]
    return {
        "acceptance_rate": accepted / drafted if drafted else None,
        "mean_accepted_per_step": accepted / steps if steps and drafted else None,
        "acceptance_by_position": positions,
    }


#: Keys at the top of every validation and benchmark report (report_header).
REPORT_HEADER_KEYS = frozenset(
    {
        "schema_version",
        "kind",
        "id",
        "created",
        "app_version",
        "duration_s",
        "model",
        "versions",
        "machine",
        "device",
        "numerics",
    }
)


def report_header(
    kind: KindT,
    *,
    created: str,
    duration_s: float,
    model: ModelInfo,
    device: str,
    numerics: str,
) -> ReportHeader[KindT]:
    """What every report starts with: its id and kind, when and how long, the app and runtime
    versions, the model and the machine (keys: REPORT_HEADER_KEYS)."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": kind,
        "id": new_report_id(kind),
        "created": created,
        "app_version": __version__,
        "duration_s": duration_s,
        "model": model,
        "versions": installed_versions(),
        "machine": describe_machine(device),
        "device": device,
        "numerics": numerics,
    }
