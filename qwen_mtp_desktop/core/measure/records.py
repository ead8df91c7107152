"""Validation and benchmark reports as typed records: what `validate` and `bench` write, what
`reports` saves, loads and upgrades, and what the verdicts, the recommendation store, the
Markdown, the Benchmark panel and the CLI read.

They are TypedDicts, so a report stays the plain JSON dict it always was (files on disk, the
CLI's `--json` and the host's answer are unchanged), while mypy checks every key each module
reads or writes against the one description here. A key that older reports lack (schema 1,
upgraded by `reports.load_report`, or a report written before the key was measured) is
`NotRequired`; the readers use `.get` for those. Every row that measured a method carries it as a
`DecodingMethod.to_record()` dict under "method" (`MethodRow`), read through
`verdicts.row_method`.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, NotRequired, TypeAlias, TypedDict, TypeVar

ReportKind = Literal["validate", "bench"]

#: What a divergence's logit margin says: a numerical near-tie, a real fault, or not known.
DivergenceVerdict = Literal["near_tie", "fault", "unknown"]

#: A `DecodingMethod.to_record()` dict (read it through `verdicts.row_method`).
MethodRecord: TypeAlias = dict[str, Any]


class Spread(TypedDict):
    """Median with min and max of several runs (`measurement.spread`)."""

    median: float
    min: float
    max: float


class MethodRow(TypedDict):
    """Any row that names the method it measured: runs, modes, winners, the recommendation,
    a validation's settings."""

    method: MethodRecord


class AcceptanceSummary(TypedDict):
    """Acceptance over runs (`measurement.acceptance_summary`); None where nothing drafted."""

    acceptance_rate: float | None
    mean_accepted_per_step: float | None
    acceptance_by_position: list[float]


class RunRecord(MethodRow, AcceptanceSummary):
    """One generation's measurements (`measurement.run_record`, keys RUN_KEYS)."""

    prompt_tokens: int
    tokens: int
    ttft_s: float
    decode_tokens_per_s: float
    total_s: float
    steps: int
    step_ms: float | None
    drafted_tokens: int
    accepted_tokens: int
    finish_reason: str


class RoundRun(RunRecord):
    """A benchmark run as its round measured it, before it is compared with the baseline."""

    #: "app" or "genai"; benchmarks from before every plain path was measured have none.
    decoder: NotRequired[str]
    round: int
    order: int
    prompt_set: str
    prompt_id: str
    peak_rss_bytes: int


class BenchRun(RoundRun):
    """A row of a benchmark's "runs": its round's run compared with the baseline's."""

    identical: bool
    #: Over the same round's baseline run of the same prompt; None for the baseline itself.
    speedup: float | None


class ModeSummary(MethodRow, AcceptanceSummary):
    """One measured decoding path over its runs (`bench.summarise_modes`, keys MODE_KEYS)."""

    #: "app" or "genai"; benchmarks from before every plain path was measured have none.
    decoder: NotRequired[str]
    label: str
    runs: int
    decode_tokens_per_s: Spread | None
    ttft_s: Spread | None
    speedup: Spread | None
    identical: bool
    step_ms: float | None
    peak_rss_bytes: int | None
    #: Per-draft acceptance ("0.60", ...) -> the speed-up this machine would give.
    projected_speedup: dict[str, float] | None
    break_even_acceptance: float | None


class Winner(MethodRow):
    """The fastest method on one workload that kept the output identical
    (`verdicts.workload_winner`); plain decoding with the runner-up when nothing beat it."""

    label: str
    speedup: float | None
    acceptance_rate: float | None
    runner_up: str | None
    runner_up_speedup: float | None


class Recommendation(MethodRow):
    """Where Auto starts: the fastest identical MTP depth, or plain decoding
    (`bench.recommend`, keys RECOMMENDATION_KEYS)."""

    label: str
    speedup: float | None
    acceptance_rate: float | None
    mtp_slower: bool
    diverged_depths: list[int]
    reason: str


class SetEntry(TypedDict):
    """One workload (prompt set) of a benchmark: its modes and the method that won it."""

    prompt_set: str
    modes: list[ModeSummary]
    #: Benchmarks from before prompt lookup have none.
    winner: NotRequired[Winner]


class MethodVerdict(TypedDict):
    """The overall winner and each workload's (`verdicts.method_verdict`; not saved)."""

    overall: Winner
    workloads: list[tuple[str, Winner]]


class BenchBaseline(TypedDict):
    """The plain path every speed-up of a benchmark is relative to."""

    decoder: str
    label: str
    reason: str


class BenchSettings(TypedDict):
    depths: list[int]
    runs: int
    warmup: int
    max_new_tokens: int | None
    max_new_tokens_per_set: dict[str, int]
    greedy: bool
    load_properties: dict[str, str]
    #: The decoder MTP ran on; benchmarks from before every plain path was measured have none.
    mtp_decoder: NotRequired[str]
    #: Prompt lookup's method, None when it was not measured.
    lookup: MethodRecord | None


class BenchMemory(TypedDict):
    rss_start_bytes: int
    rss_after_load_bytes: int
    peak_rss_bytes: int


class ModelInfo(TypedDict):
    """Where the model came from and how it is compressed (`measurement.describe_model`)."""

    path: str
    key: str
    name: str
    source_model_id: str | None
    source_revision: str | None
    kind: str
    model_type: str | None
    #: Component -> its precision ("INT4 asym g64 (92 %), ...").
    precisions: dict[str, str]
    mtp_precision: str | None
    export_versions: dict[str, str]


class MachineInfo(TypedDict):
    platform: str
    python: str
    device_name: str | None
    logical_cpus: int | None
    total_ram_bytes: int


class PromptSetRecord(TypedDict):
    """A prompt set as a report names it (`PromptSet.to_json_dict`)."""

    name: str
    title: str
    path: str | None
    prompt_ids: list[str]


#: A report's kind as a type: `ReportHeader[KindT]` is one kind's header.
KindT = TypeVar("KindT", Literal["validate"], Literal["bench"])


class ReportHeader(TypedDict, Generic[KindT]):
    """What every report starts with (`measurement.report_header`, keys REPORT_HEADER_KEYS)."""

    schema_version: int
    kind: KindT
    id: str
    created: str
    app_version: str
    duration_s: float
    model: ModelInfo
    #: Package -> installed version (None: not installed).
    versions: dict[str, str | None]
    machine: MachineInfo
    device: str
    #: "exact" (f32, no dynamic quantization) or "default".
    numerics: str


class BenchReport(ReportHeader[Literal["bench"]]):
    """A benchmark report (`bench.run_benchmark`, keys BENCH_KEYS)."""

    prompt_sets: list[PromptSetRecord]
    settings: BenchSettings
    #: Benchmarks from before every plain path was measured have none.
    baseline: NotRequired[BenchBaseline]
    runs: list[BenchRun]
    modes: list[ModeSummary]
    #: Other decoding paths (openvino-genai's MTP); as `baseline`.
    comparison: NotRequired[list[ModeSummary]]
    per_set: list[SetEntry]
    memory: BenchMemory
    recommendation: Recommendation


class Decoders(TypedDict):
    """What decoded each side of a validation: "app" (the app's decoder) or "genai"."""

    plain: str
    mtp: str


class ValidationSettings(MethodRow):
    """What a validation ran; its "method" is the drafting method checked."""

    max_new_tokens: int
    greedy: bool
    load_properties: dict[str, str]
    #: Validations from before the app's own decoder have none.
    decoders: NotRequired[Decoders]


class Divergence(TypedDict):
    """Where a drafting method's output first left plain decoding's (keys DIVERGENCE_KEYS)."""

    position: int
    baseline_token_id: int | None
    mtp_token_id: int | None
    baseline_token: str | None
    mtp_token: str | None
    context: str
    baseline_margin: float | None
    top_token_id: int | None
    verdict: DivergenceVerdict


class Timing(TypedDict):
    """The timed pass of one prompt (run only when every output was identical)."""

    baseline: RunRecord
    mtp: RunRecord
    speedup: float | None


class ValidationResult(TypedDict):
    """One prompt of a validation (keys RESULT_KEYS); "mtp" is the drafting side, whatever
    method drafted."""

    prompt_id: str
    prompt: str
    identical: bool
    baseline_tokens: int
    mtp_tokens: int
    divergence: Divergence | None
    output: str
    baseline: RunRecord
    mtp: RunRecord
    timing: Timing | None


class ValidationSummary(AcceptanceSummary):
    prompts: int
    identical_prompts: int
    all_identical: bool
    baseline_decode_tokens_per_s: Spread | None
    mtp_decode_tokens_per_s: Spread | None
    speedup: Spread | None


class ValidationReport(ReportHeader[Literal["validate"]]):
    """A validation report (`validate.run_validation`, keys VALIDATION_KEYS)."""

    prompt_set: PromptSetRecord
    settings: ValidationSettings
    results: list[ValidationResult]
    summary: ValidationSummary


#: Any saved report; `report["kind"]` tells which.
Report: TypeAlias = BenchReport | ValidationReport


__all__ = [
    "AcceptanceSummary",
    "BenchBaseline",
    "BenchMemory",
    "BenchReport",
    "BenchRun",
    "BenchSettings",
    "Decoders",
    "Divergence",
    "DivergenceVerdict",
    "KindT",
    "MachineInfo",
    "MethodRecord",
    "MethodRow",
    "MethodVerdict",
    "ModeSummary",
    "ModelInfo",
    "PromptSetRecord",
    "Recommendation",
    "Report",
    "ReportHeader",
    "ReportKind",
    "RoundRun",
    "RunRecord",
    "SetEntry",
    "Spread",
    "Timing",
    "ValidationReport",
    "ValidationResult",
    "ValidationSettings",
    "ValidationSummary",
    "Winner",
]
