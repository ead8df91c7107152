"""Benchmark plain decoding against MTP at several draft depths, and remember the best depth.

Every decoding path the app can run is measured: plain decoding on openvino-genai's stateful
SDPA pipeline and on the app's own decoder (core.decoding.decoder at depth 0), MTP per depth on the
decoder the chat uses, and optionally openvino-genai's own MTP for comparison. The baseline is
the fastest plain path (by median decode speed); it is named in the report, and every speed-up
is measured against it. After a warm-up, every round runs each prompt in every mode, in an
order that rotates from prompt to prompt and round to round, so drift on a busy machine hits
all modes alike; speed-ups are ratios of a run to the baseline run of the same prompt in the
same round, then summarised as medians with min-max. Decode speed excludes the time to first
token (TTFT is reported apart).

The recommendation is the fastest depth whose output stayed identical to plain decoding; if none
beats plain decoding, it is plain decoding. core.measure.recommendations stores it per model folder
and device, where the chat's "auto" setting reads it.

Every row of the report names its method as a `DecodingMethod` record ("method"), with the
decoder that ran it. Prompt lookup (core.decoding.prompt_lookup) is measured beside the others
as one more method, on the decoder the chat uses. Every run prefills its prompt cold (no
state kept from an earlier run), so times to first token compare like with like.
Each prompt set is a workload (code, chat, list, summarise, edit): its `winner` is the fastest
method that kept the output identical (plain, MTP n=k or prompt lookup), stored with the
recommendation so Auto and the chat know which method wins where.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from qwen_mtp_desktop.core.decoding.method import DEFAULT_LOOKUP, PLAIN, DecodingMethod, MethodError
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import (
    EXACT_NUMERICS,
    Engine,
    GenerationSettings,
    LoadOptions,
    check_model_dir,
)
from qwen_mtp_desktop.core.errors import MeasurementError
from qwen_mtp_desktop.core.measure.measurement import (
    REPORT_HEADER_KEYS,
    ProgressCallback,
    Tracker,
    acceptance_summary,
    describe_model,
    generate_ids,
    load_engine_pair,
    report_header,
    run_record,
    spread,
)
from qwen_mtp_desktop.core.measure.prompt_sets import PromptSet, prompt_caption
from qwen_mtp_desktop.core.measure.records import (
    AcceptanceSummary,
    BenchReport,
    BenchRun,
    ModeSummary,
    Recommendation,
    RoundRun,
    SetEntry,
)
from qwen_mtp_desktop.core.measure.reports import (
    fmt,
    fmt_spread,
    header_lines,
    md_cell,
    now_iso,
    version_lines,
)
from qwen_mtp_desktop.core.measure.verdicts import row_method, workload_winner
from qwen_mtp_desktop.core.models.library import display_name

log = logging.getLogger(__name__)

DEFAULT_DEPTHS = (1, 2, 3, 4)
MAX_DEPTH = 8
#: Per-draft acceptance levels for the "what would this machine give" projection.
PROJECTION_ACCEPTANCE = (0.6, 0.8, 0.9)

BENCH_KEYS = REPORT_HEADER_KEYS | frozenset(
    {
        "prompt_sets",
        "settings",
        "runs",
        "modes",
        "per_set",
        "memory",
        "recommendation",
        "baseline",
        "comparison",
    }
)
MODE_KEYS = frozenset(
    {
        "method",
        "decoder",
        "label",
        "runs",
        "decode_tokens_per_s",
        "ttft_s",
        "speedup",
        "acceptance_rate",
        "mean_accepted_per_step",
        "acceptance_by_position",
        "identical",
        "step_ms",
        "peak_rss_bytes",
        "projected_speedup",
        "break_even_acceptance",
    }
)
RECOMMENDATION_KEYS = frozenset(
    {"method", "label", "speedup", "acceptance_rate", "mtp_slower", "diverged_depths", "reason"}
)


def parse_depths(text: str) -> tuple[int, ...]:
    """'1,2,3' -> (1, 2, 3); MeasurementError for anything else."""
    try:
        depths = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        depths = []
    if not depths or depths[0] < 1 or depths[-1] > MAX_DEPTH:
        raise MeasurementError(
            f"{text!r} is not a list of draft depths.",
            f"Give whole numbers from 1 to {MAX_DEPTH}, separated by commas, e.g. 1,2,3.",
            code="BAD_SETTINGS",
        )
    return tuple(depths)


#: A measured decoding path: (greedy method, decoder: "app" or "genai").
ModeKey = tuple[DecodingMethod, str]
DECODER_NAMES = {"app": "app decoder", "genai": "openvino-genai"}


def mode_label(method: DecodingMethod, decoder: str | None = None) -> str:
    """Plain always names what decoded it ("plain · openvino-genai", "plain · app decoder");
    MTP does when it is not the app's own decoder ("MTP n=2" vs "MTP n=2 · openvino-genai");
    prompt lookup is named by its settings alone ("prompt lookup K=4, n-gram 3")."""
    if method.drafts_vary:
        return method.label
    base = method.short_label
    if decoder is None or (not method.is_plain and decoder == "app"):
        return base
    return f"{base} · {DECODER_NAMES.get(decoder, decoder)}"


class RssSampler:
    """Samples this process's resident memory in the background; `window()` is the peak since
    the previous call, `peak` the peak overall."""

    def __init__(self, interval_s: float = 0.05) -> None:
        import psutil

        self._process = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.start_rss = self._process.memory_info().rss
        self.peak = self.start_rss
        self._window = self.start_rss
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> int:
        rss = self._process.memory_info().rss
        with self._lock:
            self.peak = max(self.peak, rss)
            self._window = max(self._window, rss)
        return rss

    def window(self) -> int:
        rss = self.sample()
        with self._lock:
            peak, self._window = self._window, rss
        return peak

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()


def _rotated(modes: Sequence[ModeKey], shift: int) -> list[ModeKey]:
    shift %= len(modes)
    return [*modes[shift:], *modes[:shift]]


def run_benchmark(
    model_dir: Path,
    prompt_sets: Sequence[PromptSet],
    *,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    runs: int = 3,
    warmup: int = 1,
    max_new_tokens: int | None = None,
    device: str = "CPU",
    exact_numerics: bool = False,
    cache_dir: Path | None = None,
    compare_genai_mtp: bool = False,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    lookup: DecodingMethod | None = DEFAULT_LOOKUP,
) -> BenchReport:
    """Benchmark every plain path, MTP at each depth and `lookup` (prompt lookup's drafts per
    step and n-gram size; None: not measured); returns the report (keys: BENCH_KEYS).

    `exact_numerics=False` measures what the chat runs (the device's default precision);
    outputs are compared within the same numerics either way. `compare_genai_mtp` also runs
    openvino-genai's own MTP at each depth (reported under "comparison").
    """
    depths = tuple(sorted(set(depths)))
    if not depths or min(depths) < 1 or max(depths) > MAX_DEPTH:
        raise MeasurementError(
            f"Draft depths must be between 1 and {MAX_DEPTH}.", code="BAD_SETTINGS"
        )
    if runs < 1 or warmup < 0:
        raise MeasurementError("Runs must be at least 1 (warm-up at least 0).", code="BAD_SETTINGS")
    if not prompt_sets:
        raise MeasurementError("Choose at least one prompt set.", code="BAD_SETTINGS")
    if lookup is not None:
        lookup = _greedy_lookup(lookup)
    model_dir = Path(model_dir).expanduser()
    check_model_dir(model_dir)  # a wrong folder fails here, before any progress is shown
    started = time.perf_counter()
    created = now_iso()
    cases = [(pset, case) for pset in prompt_sets for case in pset.prompts]

    def tokens_for(pset: PromptSet) -> int:
        return max_new_tokens or pset.max_new_tokens

    run_rows: list[BenchRun] = []
    groups: list[dict[ModeKey, tuple[list[int], RoundRun]]] = []
    engines: dict[str, Engine] = {}
    with RssSampler() as sampler:
        tracker = Tracker(1, progress, cancel)
        tracker.start(f"Loading {display_name(model_dir)} (plain and MTP)…")
        model = describe_model(model_dir)
        options = LoadOptions(
            device=device,
            cache_dir=cache_dir,
            exact_numerics=exact_numerics,
            plain_decoder="app",  # the "plain · app decoder" row; genai's plain has its engine
        )
        try:
            engines["plain"], engines["mtp"] = load_engine_pair(model_dir, options)
            chat_decoder = engines["mtp"].require_loaded().decoder
            modes: list[ModeKey] = [(PLAIN, "genai")]
            if chat_decoder == "app":
                modes.append((PLAIN, "app"))
            mtp_modes = [(DecodingMethod.mtp(depth), chat_decoder) for depth in depths]
            modes += mtp_modes
            if lookup is not None:
                modes.append((lookup, chat_decoder))
            if compare_genai_mtp and chat_decoder == "app":
                engines["genai-mtp"] = Engine()
                engines["genai-mtp"].load(model_dir, replace(options, app_decoder=False))
                modes += [(DecodingMethod.mtp(depth), "genai") for depth in depths]
        except BaseException:
            for engine in engines.values():
                engine.unload()
            raise
        rss_loaded = sampler.sample()
        tracker.done()
        tracker = Tracker(len(modes) * (warmup + runs * len(cases)), progress, cancel)

        def run(key: ModeKey, prompt: str, new_tokens: int) -> tuple[list[int], GenerationStats]:
            method, decoder = key
            # The MTP engine decodes on the app's decoder (plain and prompt lookup too), the
            # plain engine on openvino-genai's plain pipeline.
            if not method.uses_mtp_head:
                engine = engines["mtp"] if decoder == "app" else engines["plain"]
            else:
                engine = engines["mtp"] if decoder == chat_decoder else engines["genai-mtp"]
            settings = GenerationSettings(max_new_tokens=new_tokens, method=method)
            return generate_ids(engine, prompt, settings, cancel)

        try:
            plain_engine = engines["plain"]
            rendered = {
                (pset.name, case.id): plain_engine.render_prompt(case.messages)
                for pset, case in cases
            }
            first_set, first_case = cases[0]
            for index in range(warmup):
                for key in _rotated(modes, index):
                    tracker.start(f"Warm-up {index + 1}/{warmup}: {mode_label(*key)}")
                    run(key, rendered[(first_set.name, first_case.id)], tokens_for(first_set))
                    tracker.done()
            counter = 0
            for round_index in range(runs):
                for number, (pset, case) in enumerate(cases):
                    group: dict[ModeKey, tuple[list[int], RoundRun]] = {}
                    # Rotate which mode goes first, so no mode always runs on a cold cache.
                    order = _rotated(modes, counter)
                    counter += 1
                    for position, key in enumerate(order):
                        tracker.start(
                            f"Round {round_index + 1}/{runs} · "
                            f"{prompt_caption(case, number, len(cases))} · {mode_label(*key)}"
                        )
                        sampler.window()
                        ids, stats = run(key, rendered[(pset.name, case.id)], tokens_for(pset))
                        row: RoundRun = {
                            **run_record(stats),
                            "decoder": key[1],
                            "round": round_index,
                            "order": position,
                            "prompt_set": pset.name,
                            "prompt_id": case.id,
                            "peak_rss_bytes": sampler.window(),
                        }
                        group[key] = (ids, row)
                        tracker.done()
                    groups.append(group)
        finally:
            for engine in engines.values():
                engine.unload()
        tracker.finish("Benchmark finished")
    baseline_key = fastest_plain(groups)
    for group in groups:
        base_ids, base_row = group[baseline_key]
        for key, (ids, row) in group.items():
            run_rows.append(
                {
                    **row,
                    "identical": ids == base_ids,
                    "speedup": (
                        None
                        if key == baseline_key or not base_row["decode_tokens_per_s"]
                        else row["decode_tokens_per_s"] / base_row["decode_tokens_per_s"]
                    ),
                }
            )
    main_modes = [baseline_key, *mtp_modes]
    if lookup is not None:
        main_modes.append((lookup, chat_decoder))
    others = [key for key in modes if key not in main_modes]
    mode_summaries = summarise_modes(run_rows, main_modes, baseline_key)
    report: BenchReport = {
        **report_header(
            "bench",
            created=created,
            duration_s=time.perf_counter() - started,
            model=model,
            device=device,
            numerics="exact" if exact_numerics else "default",
        ),
        "prompt_sets": [pset.to_json_dict() for pset in prompt_sets],
        "settings": {
            "depths": list(depths),
            "runs": runs,
            "warmup": warmup,
            "max_new_tokens": max_new_tokens,
            "max_new_tokens_per_set": {pset.name: tokens_for(pset) for pset in prompt_sets},
            "greedy": True,
            "load_properties": dict(EXACT_NUMERICS) if exact_numerics else {},
            "mtp_decoder": chat_decoder,
            "lookup": lookup.to_record() if lookup is not None else None,
        },
        "baseline": {
            "decoder": baseline_key[1],
            "label": mode_label(PLAIN, baseline_key[1]),
            "reason": "the fastest plain decoding measured (median decode tokens/s)",
        },
        "runs": run_rows,
        "modes": mode_summaries,
        "comparison": summarise_modes(run_rows, others, baseline_key),
        "per_set": [
            _set_entry(pset.name, run_rows, main_modes, baseline_key) for pset in prompt_sets
        ],
        "memory": {
            "rss_start_bytes": sampler.start_rss,
            "rss_after_load_bytes": rss_loaded,
            "peak_rss_bytes": sampler.peak,
        },
        "recommendation": recommend(mode_summaries),
    }
    return report


def _set_entry(
    name: str, rows: Sequence[BenchRun], modes: Sequence[ModeKey], baseline: ModeKey
) -> SetEntry:
    """One workload (prompt set): its modes and the method that won it."""
    summaries = summarise_modes([r for r in rows if r["prompt_set"] == name], modes, baseline)
    return {"prompt_set": name, "modes": summaries, "winner": workload_winner(summaries)}


def fastest_plain(groups: Sequence[dict[ModeKey, tuple[list[int], RoundRun]]]) -> ModeKey:
    """The plain path with the highest median decode speed over all rounds."""
    speeds: dict[ModeKey, list[float]] = {}
    for group in groups:
        for key, (_ids, row) in group.items():
            if key[0].is_plain:
                speeds.setdefault(key, []).append(row["decode_tokens_per_s"])
    return max(speeds, key=lambda key: statistics.median(speeds[key]))


def expected_tokens_per_step(acceptance: float, depth: int) -> float:
    """Tokens one MTP step yields when each draft is accepted with probability `acceptance`
    given the previous one was: 1 + p + p² + … + p^k."""
    return sum(acceptance**i for i in range(depth + 1))


def break_even_acceptance(step_ratio: float, depth: int) -> float | None:
    """The per-draft acceptance at which MTP matches plain decoding, given the cost of an MTP
    step relative to a plain step; None if even 100 % acceptance cannot pay for it."""
    if step_ratio <= 1:
        return 0.0
    if step_ratio > depth + 1:
        return None
    low, high = 0.0, 1.0
    for _ in range(50):
        mid = (low + high) / 2
        if expected_tokens_per_step(mid, depth) < step_ratio:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def summarise_modes(
    rows: Sequence[BenchRun],
    modes: Sequence[ModeKey],
    baseline: ModeKey,
) -> list[ModeSummary]:
    """One summary per mode key (method, decoder); `baseline` is the plain path the speed-ups
    and projections are relative to."""

    def rows_of(key: ModeKey) -> list[BenchRun]:
        method, decoder = key
        return [
            r
            for r in rows
            if row_method(r).drafting == method and r.get("decoder", decoder) == decoder
        ]

    out: list[ModeSummary] = []
    base_steps = [r["step_ms"] for r in rows_of(baseline) if r["step_ms"] is not None]
    base_step = statistics.median(base_steps) if base_steps else None
    for key in modes:
        method, decoder = key
        mine = rows_of(key)
        steps = [r["step_ms"] for r in mine if r["step_ms"] is not None]
        step_ms = statistics.median(steps) if steps else None
        if method.is_plain:
            acceptance: AcceptanceSummary = {
                "acceptance_rate": None,
                "mean_accepted_per_step": None,
                "acceptance_by_position": [],
            }
        else:
            acceptance = acceptance_summary(mine)
        projected: dict[str, float] | None = None
        even: float | None = None
        # Drafts per step that vary (prompt lookup): no per-depth projection.
        if not method.is_plain and step_ms and base_step and not method.drafts_vary:
            depth = method.drafts
            projected = {
                f"{p:.2f}": expected_tokens_per_step(p, depth) * base_step / step_ms
                for p in PROJECTION_ACCEPTANCE
            }
            even = break_even_acceptance(step_ms / base_step, depth)
        summary: ModeSummary = {
            "method": method.to_record(),
            "decoder": decoder,
            "label": mode_label(method, decoder),
            "runs": len(mine),
            "decode_tokens_per_s": spread([r["decode_tokens_per_s"] for r in mine]),
            "ttft_s": spread([r["ttft_s"] for r in mine]),
            "speedup": spread([r["speedup"] for r in mine if r["speedup"] is not None]),
            "identical": all(r["identical"] for r in mine) and bool(mine),
            "step_ms": step_ms,
            "peak_rss_bytes": max((r["peak_rss_bytes"] for r in mine), default=None),
            "projected_speedup": projected,
            "break_even_acceptance": even,
            **acceptance,
        }
        out.append(summary)
    return out


def recommend(modes: Sequence[ModeSummary]) -> Recommendation:
    """The fastest MTP depth whose output stayed identical, or plain decoding when MTP does
    not pay: where Auto starts (its "method")."""
    mtp_modes = [m for m in modes if row_method(m).uses_mtp_head]
    diverged = [row_method(m).drafts for m in mtp_modes if not m["identical"]]
    candidates = [
        (measured["median"], m)
        for m in mtp_modes
        if m["identical"] and (measured := m["speedup"]) is not None
    ]
    if not candidates:
        return {
            "method": PLAIN.to_record(),
            "label": PLAIN.short_label,
            "speedup": None,
            "acceptance_rate": None,
            "mtp_slower": False,
            "diverged_depths": diverged,
            "reason": "No draft depth kept the output identical to plain decoding, so use plain "
            "decoding; run `validate` to see where and why the outputs differ.",
        }
    speedup, best = max(candidates, key=lambda pair: pair[0])
    method = row_method(best).drafting
    if speedup <= 1.0:
        return {
            "method": PLAIN.to_record(),
            "label": PLAIN.short_label,
            "speedup": speedup,
            "acceptance_rate": best["acceptance_rate"],
            "mtp_slower": True,
            "diverged_depths": diverged,
            "reason": f"MTP is slower than plain decoding on this model and device (best: "
            f"{method.label} at {speedup:.2f}x, {_pct(best['acceptance_rate'])} of drafts "
            "accepted), so use plain decoding.",
        }
    return {
        "method": method.to_record(),
        "label": method.short_label,
        "speedup": speedup,
        "acceptance_rate": best["acceptance_rate"],
        "mtp_slower": False,
        "diverged_depths": diverged,
        "reason": f"{method.label} is the fastest depth whose output stayed identical: "
        f"{speedup:.2f}x the plain decoding speed (median of per-round ratios), "
        f"{_pct(best['acceptance_rate'])} of drafts accepted.",
    }


def _greedy_lookup(lookup: DecodingMethod) -> DecodingMethod:
    """The benchmark decodes greedily (its outputs are compared): prompt lookup's settings."""
    try:
        lookup.check()
    except MethodError as exc:
        raise MeasurementError(str(exc), code="BAD_SETTINGS") from exc
    if lookup.kind != "lookup":
        raise MeasurementError(f"{lookup} is not prompt lookup.", code="BAD_SETTINGS")
    return lookup.drafting


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


# --- Markdown ------------------------------------------------------------------------------


def _mode_rows(modes: Sequence[ModeSummary]) -> Iterator[str]:
    yield (
        "| Method | Decode tok/s | TTFT ms | Speed-up | Acceptance | Accepted/step | "
        "By position | Identical | Peak RSS |"
    )
    yield "|---|---|---|---|---|---|---|---|---|"
    for m in modes:
        positions = ", ".join(f"{p:.0%}" for p in m["acceptance_by_position"]) or "–"
        rss = m["peak_rss_bytes"]
        yield (
            f"| {m['label']} | {fmt_spread(m['decode_tokens_per_s'])} | "
            f"{fmt_spread(m['ttft_s'], '{:.0f}', 1000)} | "
            f"{fmt_spread(m['speedup'], '{:.2f}x') if m['speedup'] else '1.00x'} | "
            f"{_pct(m['acceptance_rate'])} | "
            f"{fmt(m['mean_accepted_per_step'], '{:.2f}')} | {positions} | "
            f"{'yes' if m['identical'] else '**no**'} | "
            f"{fmt(rss and rss / 2**20, '{:,.0f} MiB')} |"
        )


def bench_markdown(report: BenchReport) -> str:
    rec = report["recommendation"]
    settings = report["settings"]
    recommended = row_method(rec)
    verdict = (
        f"**Recommendation: {recommended.label}"
        + (f" ({rec['speedup']:.2f}x plain decoding)" if not recommended.is_plain else "")
        + f".** {rec['reason']}"
    )
    lengths = ", ".join(f"{k}: {v}" for k, v in settings["max_new_tokens_per_set"].items())
    lines = [
        f"# Decoding benchmark: {report['model']['name']}",
        "",
        verdict,
        "",
        *header_lines(report),
        f"| Settings | depths {', '.join(map(str, settings['depths']))} · "
        f"{settings['runs']} run{'s' if settings['runs'] != 1 else ''} after "
        f"{settings['warmup']} warm-up · new tokens {lengths} |",
        "",
        "Decode speed excludes the time to first token. Speed-up is the median of per-round "
        "ratios (a run over the same round's baseline run of the same prompt), with min-max.",
        "",
    ]
    baseline = report.get("baseline")
    if baseline:
        lines += [
            f"Baseline: **{md_cell(baseline['label'])}**, {md_cell(baseline['reason'])}. "
            "Every speed-up is relative to it.",
            "",
        ]
    sets = report["per_set"]
    winners = [e for e in sets if e.get("winner")]
    if winners:
        lines += [
            "## Winner per workload",
            "",
            "The fastest method per prompt set whose output stayed identical to plain decoding.",
            "",
            "| Workload | Winner | Speed-up | Acceptance |",
            "|---|---|---|---|",
            *(
                f"| {md_cell(e['prompt_set'])} | {md_cell(e['winner']['label'])} | "
                f"{fmt(e['winner']['speedup'], '{:.2f}x')} | "
                f"{_pct(e['winner']['acceptance_rate'])} |"
                for e in winners
            ),
            "",
        ]
    if len(sets) > 1:
        lines += ["## All prompt sets", "", *_mode_rows(report["modes"]), ""]
    for entry in sets:
        lines += [
            f"## Prompt set: {md_cell(entry['prompt_set'])}",
            "",
            *_mode_rows(entry["modes"]),
            "",
        ]
    if report.get("comparison"):
        lines += [
            "## Other decoding paths (for comparison)",
            "",
            *_mode_rows(report["comparison"]),
            "",
        ]
    lines += [
        "## What this machine would give at other acceptance levels",
        "",
        "From the measured cost of a decoding step in each mode (plain: one target token; MTP "
        "n=k: a k+1-token verification plus k draft calls), assuming each draft is accepted "
        "with the given probability when the previous one was.",
        "",
        "| Method | ms per step | "
        + " | ".join(f"{p:.0%} accepted" for p in PROJECTION_ACCEPTANCE)
        + " | Break-even |",
        "|---|---|" + "---|" * len(PROJECTION_ACCEPTANCE) + "---|",
    ]
    for m in report["modes"]:
        method = row_method(m)
        if method.drafts_vary:
            continue  # its drafts per step vary: the projection does not apply
        step = "–" if m["step_ms"] is None else f"{m['step_ms']:.1f}"
        if method.is_plain:
            lines.append(
                f"| {m['label']} | {step} |" + " 1.00x |" * len(PROJECTION_ACCEPTANCE) + " – |"
            )
            continue
        projected = m["projected_speedup"] or {}
        cells = " | ".join(
            f"{projected[f'{p:.2f}']:.2f}x" if f"{p:.2f}" in projected else "–"
            for p in PROJECTION_ACCEPTANCE
        )
        even = m["break_even_acceptance"]
        lines.append(
            f"| {m['label']} | {step} | {cells} | "
            f"{'never' if even is None and projected else _pct(even)} |"
        )
    memory = report["memory"]
    lines += [
        "",
        f"Memory (resident set): {memory['rss_after_load_bytes'] / 2**20:,.0f} MiB with both "
        f"pipelines loaded, peak {memory['peak_rss_bytes'] / 2**20:,.0f} MiB.",
        "",
        *version_lines(report),
        "",
    ]
    return "\n".join(lines)


__all__ = [
    "BENCH_KEYS",
    "MODE_KEYS",
    "RECOMMENDATION_KEYS",
    "bench_markdown",
    "parse_depths",
    "recommend",
    "run_benchmark",
    "summarise_modes",
]
