"""Correctness before speed: a drafting method (MTP, prompt lookup) must reproduce plain greedy
decoding.

`run_validation()` loads the model twice (plain and with its MTP head), both with exact numerics
(f32, no dynamic quantization: bf16 and activation quantization flip near-tie argmaxes, see
RUNTIME-NOTES), renders each prompt of a prompt set with the model's own chat template, decodes
it greedily in both modes and compares the token ids. A divergence is reported with its position,
both tokens, and the plain model's logit margin between them (computed by running the exported
language model directly), which tells a numerical near-tie from a real fault. Only when every
prompt is identical does it time the two modes.

Prompt sets are in `core.measure.prompt_sets`; what validation shares with benchmarking to measure
(the engine pair, run records, progress, the model and machine described) in
`core.measure.measurement`; report ids, history and shared Markdown pieces in
`core.measure.reports`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP, PLAIN, DecodingMethod, MethodError
from qwen_mtp_desktop.core.engine import (
    EXACT_NUMERICS,
    LANGUAGE_MODEL,
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
    Decoders,
    Divergence,
    DivergenceVerdict,
    ValidationReport,
    ValidationResult,
    ValidationSettings,
    ValidationSummary,
)
from qwen_mtp_desktop.core.measure.reports import (
    fmt,
    header_lines,
    md_cell,
    now_iso,
    version_lines,
)
from qwen_mtp_desktop.core.measure.verdicts import row_method
from qwen_mtp_desktop.core.models.library import display_name

log = logging.getLogger(__name__)

#: Below this logit margin (plain model, at the divergent position) a divergence is a numerical
#: near-tie rather than a fault: f32 kernels that batch 1 vs k + 1 tokens differ by ~1e-4.
NEAR_TIE_MARGIN = 0.05
TEXT_EMBEDDINGS = "openvino_text_embeddings_model"

#: Top-level keys of a validation report (a test pins them; bump the schema to change them).
VALIDATION_KEYS = REPORT_HEADER_KEYS | frozenset(
    {
        "prompt_set",
        "settings",
        "results",
        "summary",
    }
)
RESULT_KEYS = frozenset(
    {
        "prompt_id",
        "prompt",
        "identical",
        "baseline_tokens",
        "mtp_tokens",
        "divergence",
        "output",
        "baseline",
        "mtp",
        "timing",
    }
)
DIVERGENCE_KEYS = frozenset(
    {
        "position",
        "baseline_token_id",
        "mtp_token_id",
        "baseline_token",
        "mtp_token",
        "context",
        "baseline_margin",
        "top_token_id",
        "verdict",
    }
)


# --- prompt sets ---------------------------------------------------------------------------


# --- what every report records -------------------------------------------------------------


# --- running generations -------------------------------------------------------------------


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    """The first position where the sequences differ (a length difference counts)."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


class ModelTokenizer:
    """The model's own tokenizer, for counting and decoding single tokens."""

    def __init__(self, model_dir: Path) -> None:
        import openvino_genai

        self._tokenizer = openvino_genai.Tokenizer(str(model_dir))

    def encode(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]
        return [int(i) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        if not ids:
            return ""
        text: str = self._tokenizer.decode(list(ids), skip_special_tokens=False)
        return text


@dataclass
class LogitProbe:
    """Runs the exported language model directly (no GenAI pipeline) to read raw logits."""

    model_dir: Path
    device: str
    _embed: Any = field(default=None, init=False, repr=False)
    _lm: Any = field(default=None, init=False, repr=False)

    def logits(self, ids: Sequence[int]) -> Any:
        """Logits (numpy, vocab-sized) for the token after `ids`."""
        import numpy as np

        if self._lm is None:
            import openvino

            core = openvino.Core()
            self._embed = core.compile_model(
                self.model_dir / f"{TEXT_EMBEDDINGS}.xml", self.device, EXACT_NUMERICS
            )
            self._lm = core.compile_model(
                self.model_dir / f"{LANGUAGE_MODEL}.xml", self.device, EXACT_NUMERICS
            )
        tokens = np.asarray([list(ids)], dtype=np.int64)
        embeds = self._embed({"input": tokens})[0]
        request = self._lm.create_infer_request()
        request.reset_state()
        length = tokens.shape[1]
        rows = len(self._lm.input("position_ids").get_partial_shape()) == 3
        positions = np.arange(length, dtype=np.int64)[None, :]
        if rows:  # Qwen3.5's multimodal RoPE: one row per section, all equal for text
            count = self._lm.input("position_ids").get_partial_shape()[0].get_length()
            positions = np.broadcast_to(positions[None], (count, 1, length)).copy()
        out = request.infer(
            {
                "inputs_embeds": embeds,
                "attention_mask": np.ones((1, length), dtype=np.int64),
                "position_ids": positions,
                "beam_idx": np.zeros(1, dtype=np.int32),
            }
        )
        return out["logits"][0, -1]


def describe_divergence(
    tokens: ModelTokenizer,
    probe: LogitProbe | None,
    prompt_ids: Sequence[int],
    baseline_ids: Sequence[int],
    mtp_ids: Sequence[int],
    position: int,
) -> Divergence:
    base_tok = baseline_ids[position] if position < len(baseline_ids) else None
    mtp_tok = mtp_ids[position] if position < len(mtp_ids) else None
    margin: float | None = None
    top: int | None = None
    verdict: DivergenceVerdict = "unknown"
    if probe is not None and base_tok is not None and mtp_tok is not None:
        try:
            logits = probe.logits([*prompt_ids, *baseline_ids[:position]])
            margin = float(logits[base_tok] - logits[mtp_tok])
            top = int(logits.argmax())
        except Exception:  # optional: the margin explains a divergence but is not required
            log.warning("could not compute the logit margin", exc_info=True)
        if margin is not None and top == base_tok:
            verdict = "near_tie" if abs(margin) < NEAR_TIE_MARGIN else "fault"
    context = tokens.decode(list(baseline_ids[max(0, position - 12) : position]))
    return {
        "position": position,
        "baseline_token_id": base_tok,
        "mtp_token_id": mtp_tok,
        "baseline_token": tokens.decode([base_tok]) if base_tok is not None else None,
        "mtp_token": tokens.decode([mtp_tok]) if mtp_tok is not None else None,
        "context": context,
        "baseline_margin": margin,
        "top_token_id": top,
        "verdict": verdict,
    }


# --- validation ----------------------------------------------------------------------------


def run_validation(
    model_dir: Path,
    prompt_set: PromptSet,
    *,
    max_new_tokens: int | None = None,
    method: DecodingMethod = DEFAULT_MTP,
    device: str = "CPU",
    timing: bool = True,
    margins: bool = True,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> ValidationReport:
    """Validate a drafting `method` (MTP at a depth, prompt lookup) against plain greedy
    decoding on every prompt of `prompt_set`, both greedy. The drafting side keeps the report
    key "mtp" (the schema predates prompt lookup); `settings.method` says which method it was.

    Returns the report dict (keys: VALIDATION_KEYS). Raises EngineError / MeasurementError when
    the model cannot run, RunCancelledError when `cancel` is set.
    """
    method = method.drafting
    try:
        method.check()
    except MethodError as exc:
        raise MeasurementError(str(exc), code="BAD_SETTINGS") from exc
    if method.is_plain:
        raise MeasurementError(
            "Validation compares a drafting method (MTP or prompt lookup) with plain decoding.",
            code="BAD_SETTINGS",
        )
    label = method.name
    model_dir = Path(model_dir).expanduser()
    check_model_dir(model_dir)  # a wrong folder fails here, before any progress is shown
    started = time.perf_counter()
    created = now_iso()
    new_tokens = max_new_tokens or prompt_set.max_new_tokens
    prompts = prompt_set.prompts
    # Load (1) + correctness (2 per prompt) + timing (2 per prompt).
    tracker = Tracker(1 + 2 * len(prompts) + (2 * len(prompts) if timing else 0), progress, cancel)
    model = describe_model(model_dir)
    options = LoadOptions(device=device, exact_numerics=True)
    if not method.uses_mtp_head:
        # No MTP head needed: the drafting method runs on the decoder the chat uses.
        tracker.start(f"Loading {display_name(model_dir)} (plain and {label}, exact numerics)…")
    else:
        tracker.start(f"Loading {display_name(model_dir)} twice (plain and MTP, exact numerics)…")
    baseline, mtp = load_engine_pair(model_dir, options, mtp_head=method.uses_mtp_head)
    decoders: Decoders = {
        "plain": baseline.require_loaded().decoder,
        "mtp": mtp.require_loaded().decoder,
    }
    tracker.done()
    results: list[ValidationResult] = []
    try:
        tokens = ModelTokenizer(model_dir)
        probe = LogitProbe(model_dir, device) if margins else None
        plain_settings = GenerationSettings(max_new_tokens=new_tokens, method=PLAIN)
        settings = GenerationSettings(max_new_tokens=new_tokens, method=method)
        rendered: dict[str, str] = {}
        for number, case in enumerate(prompts):
            caption = prompt_caption(case, number, len(prompts))
            prompt = rendered[case.id] = baseline.render_prompt(case.messages)
            tracker.start(f"{caption}: plain decoding")
            base_ids, base_stats = generate_ids(baseline, prompt, plain_settings, cancel)
            tracker.done()
            tracker.start(f"{caption}: {method.label}")
            mtp_ids, mtp_stats = generate_ids(mtp, prompt, settings, cancel)
            tracker.done()
            position = first_divergence(base_ids, mtp_ids)
            divergence = None
            if position is not None:
                tracker.start(f"{caption}: output differs at token {position}; reading logits")
                divergence = describe_divergence(
                    tokens, probe, tokens.encode(prompt), base_ids, mtp_ids, position
                )
            results.append(
                {
                    "prompt_id": case.id,
                    "prompt": case.text,
                    "identical": position is None,
                    "baseline_tokens": len(base_ids),
                    "mtp_tokens": len(mtp_ids),
                    "divergence": divergence,
                    "output": tokens.decode(base_ids)[:400],
                    "baseline": run_record(base_stats),
                    "mtp": run_record(mtp_stats),
                    "timing": None,
                }
            )
        if timing and all(r["identical"] for r in results):
            # The correctness pass doubles as warm-up; this pass is what the speed figures use.
            for number, (case, result) in enumerate(zip(prompts, results, strict=True)):
                caption = prompt_caption(case, number, len(prompts))
                prompt = rendered[result["prompt_id"]]
                tracker.start(f"{caption}: timing plain decoding")
                _ids, base_stats = generate_ids(baseline, prompt, plain_settings, cancel)
                tracker.done()
                tracker.start(f"{caption}: timing {label} decoding")
                _ids, mtp_stats = generate_ids(mtp, prompt, settings, cancel)
                tracker.done()
                base_rec = run_record(base_stats)
                mtp_rec = run_record(mtp_stats)
                result["timing"] = {
                    "baseline": base_rec,
                    "mtp": mtp_rec,
                    "speedup": _ratio(
                        mtp_rec["decode_tokens_per_s"], base_rec["decode_tokens_per_s"]
                    ),
                }
    finally:
        baseline.unload()
        mtp.unload()
    tracker.finish("Validation finished")
    return {
        **report_header(
            "validate",
            created=created,
            duration_s=time.perf_counter() - started,
            model=model,
            device=device,
            numerics="exact",
        ),
        "prompt_set": prompt_set.to_json_dict(),
        "settings": {
            "max_new_tokens": new_tokens,
            # What drafted (DecodingMethod.to_record): MTP at a depth, or prompt lookup.
            "method": method.to_record(),
            "greedy": True,
            "load_properties": dict(EXACT_NUMERICS),
            # What decoded each side: "app" (the app's decoder) or "genai" (openvino-genai).
            "decoders": decoders,
        },
        "results": results,
        "summary": _validation_summary(results),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _validation_summary(results: Sequence[ValidationResult]) -> ValidationSummary:
    identical = sum(1 for r in results if r["identical"])
    timed = [r["timing"] for r in results if r["timing"] is not None]
    return {
        "prompts": len(results),
        "identical_prompts": identical,
        "all_identical": identical == len(results) and bool(results),
        # Drafts accepted / drafts proposed, over every MTP step of every prompt.
        **acceptance_summary([r["mtp"] for r in results]),
        "baseline_decode_tokens_per_s": spread(
            [t["baseline"]["decode_tokens_per_s"] for t in timed]
        ),
        "mtp_decode_tokens_per_s": spread([t["mtp"]["decode_tokens_per_s"] for t in timed]),
        "speedup": spread([t["speedup"] for t in timed if t["speedup"] is not None]),
    }


# --- report history ------------------------------------------------------------------------


# --- Markdown ------------------------------------------------------------------------------


def _decoder_lines(decoders: Decoders | None, label: str) -> list[str]:
    """Which decoder ran each side (reports from before the app's own decoder have none)."""
    if not decoders:
        return []
    names = {"app": "the app's MTP decoder", "genai": "openvino-genai"}
    return [
        f"Plain decoding: {names.get(decoders['plain'], decoders['plain'])}; "
        f"{label}: {names.get(decoders['mtp'], decoders['mtp'])}.",
        "",
    ]


def validation_markdown(report: ValidationReport) -> str:
    summary = report["summary"]
    settings = report["settings"]
    ok = summary["all_identical"]
    label = method_label(settings)
    lines = [
        f"# {label} validation: {report['model']['name']}",
        "",
        (
            f"**{'PASS' if ok else 'FAIL'}: {label} output "
            f"{'equals' if ok else 'differs from'} plain greedy decoding on "
            f"{summary['identical_prompts']} of {summary['prompts']} prompts** "
            f"({settings['max_new_tokens']} new tokens, {row_method(settings).label})."
        ),
        "",
        *_decoder_lines(settings.get("decoders"), label),
        *header_lines(report),
        "",
        "## Results",
        "",
        f"| Prompt | Identical | Tokens | Acceptance | Plain tok/s | {label} tok/s | Speed-up |",
        "|---|---|---|---|---|---|---|",
    ]
    for result in report["results"]:
        timing = result["timing"]
        lines.append(
            f"| {md_cell(result['prompt'])} | {'yes' if result['identical'] else '**no**'} | "
            f"{result['baseline_tokens']} | {fmt(result['mtp']['acceptance_rate'], '{:.0%}')} | "
            f"{fmt(timing and timing['baseline']['decode_tokens_per_s'])} | "
            f"{fmt(timing and timing['mtp']['decode_tokens_per_s'])} | "
            f"{fmt(timing and timing['speedup'], '{:.2f}x')} |"
        )
    lines += [
        "",
        "Timings use the same exact f32 numerics as the comparison, so they are slower than "
        "chat; `qwen-mtp-desktop bench` measures speed as the chat runs.",
        "",
        f"Acceptance over all prompts: {fmt(summary['acceptance_rate'], '{:.1%}')} "
        f"(by draft position: "
        f"{', '.join(f'{p:.0%}' for p in summary['acceptance_by_position']) or '–'}); "
        f"mean accepted drafts per step {fmt(summary['mean_accepted_per_step'], '{:.2f}')}.",
    ]
    if not ok:
        lines += ["", "Speed is not measured while the outputs differ.", "", "## Divergences", ""]
        for result in report["results"]:
            div = result["divergence"]
            if div is None:
                continue
            margin = div["baseline_margin"]
            lines.append(
                f"- **{md_cell(result['prompt'])}**: first different token at position "
                f"{div['position']}: plain {div['baseline_token']!r} "
                f"(id {div['baseline_token_id']}) vs {label} {div['mtp_token']!r} "
                f"(id {div['mtp_token_id']}), after "
                f"{div['context']!r}. Logit margin {fmt(margin, '{:.4f}')}: "
                f"{VERDICT_TEXT[div['verdict']]}"
            )
    lines += ["", *version_lines(report), ""]
    return "\n".join(lines)


def method_label(settings: ValidationSettings) -> str:
    """ "MTP" or "Prompt lookup": what drafted in a validation."""
    name = row_method(settings).name
    return name[:1].upper() + name[1:]


VERDICT_TEXT: dict[str, str] = {
    "near_tie": "a numerical near-tie (the two tokens score almost the same), not a fault.",
    "fault": "a clear margin, so MTP changed the output: a real fault.",
    "unknown": "the margin could not be computed.",
}


__all__ = [
    "DIVERGENCE_KEYS",
    "RESULT_KEYS",
    "VALIDATION_KEYS",
    "LogitProbe",
    "ModelTokenizer",
    "describe_divergence",
    "first_divergence",
    "method_label",
    "run_validation",
    "validation_markdown",
]
