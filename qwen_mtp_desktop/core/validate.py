"""Correctness before speed: MTP speculative decoding must reproduce plain greedy decoding.

`run_validation()` loads the model twice (plain and with its MTP head), both with exact numerics
(f32, no dynamic quantization: bf16 and activation quantization flip near-tie argmaxes, see
RUNTIME-NOTES), renders each prompt of a prompt set with the model's own chat template, decodes
it greedily in both modes and compares the token ids. A divergence is reported with its position,
both tokens, and the plain model's logit margin between them (computed by running the exported
language model directly), which tells a numerical near-tie from a real fault. Only when every
prompt is identical does it time the two modes.

This module also holds what validation and benchmarking (`core.bench`) share to run: prompt
sets (resources/prompts/*.json) and the description of the model and the runtime that every
report records. Report ids, history and shared Markdown pieces are in `core.reports`.
"""

from __future__ import annotations

import logging
import math
import platform
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.decoding import GenerationStats
from qwen_mtp_desktop.core.engine import (
    EXACT_NUMERICS,
    LANGUAGE_MODEL,
    Engine,
    EngineError,
    GenerationSettings,
    LoadOptions,
    Message,
    Role,
    check_model_dir,
)
from qwen_mtp_desktop.core.environment import package_version
from qwen_mtp_desktop.core.errors import RunCancelledError, ValidationError
from qwen_mtp_desktop.core.model_folders.inspection import inspect_model
from qwen_mtp_desktop.core.model_library import display_name, is_demo_model
from qwen_mtp_desktop.core.paths import resources_dir
from qwen_mtp_desktop.core.prompt_lookup import DEFAULT_MAX_NGRAM_SIZE, DraftMethod
from qwen_mtp_desktop.core.reports import (
    REPORT_SCHEMA_VERSION,
    fmt,
    header_lines,
    md_cell,
    model_key,
    new_report_id,
    now_iso,
    version_lines,
)
from qwen_mtp_desktop.core.safe_files import FileKind, read_json_file

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
PROMPT_SET_SCHEMA_VERSION = 1
DEFAULT_MAX_NEW_TOKENS = 64
#: Below this logit margin (plain model, at the divergent position) a divergence is a numerical
#: near-tie rather than a fault: f32 kernels that batch 1 vs k + 1 tokens differ by ~1e-4.
NEAR_TIE_MARGIN = 0.05
TEXT_EMBEDDINGS = "openvino_text_embeddings_model"

DivergenceVerdict = Literal["near_tie", "fault", "unknown"]

#: Top-level keys of a validation report (a test pins them; bump the schema to change them).
VALIDATION_KEYS = frozenset(
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
        "prompt_set",
        "settings",
        "results",
        "summary",
    }
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
        "mode",
        "depth",
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


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    message: str

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


ProgressCallback = Callable[[Progress], None]


# --- prompt sets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptCase:
    id: str
    messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        """The last user message (what a table shows)."""
        return self.messages[-1].content


@dataclass(frozen=True)
class PromptSet:
    """A named list of prompts. Acceptance depends on content, so results stay per set.

    File format (resources/prompts/<name>.json)::

        {"schema_version": 1, "name": str, "title": str, "description": str,
         "max_new_tokens": int,               # optional, the set's default generation length
         "prompts": [{"id": str, "user": str, "system": str (optional)}
                     | {"id": str, "messages": [{"role", "content"}, ...]}]}
    """

    name: str
    title: str
    description: str
    prompts: tuple[PromptCase, ...]
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    path: Path | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "path": str(self.path) if self.path else None,
            "prompt_ids": [p.id for p in self.prompts],
        }


def prompts_dir() -> Path:
    return resources_dir() / "prompts"


def _bad_set(path: Path, why: str) -> ValidationError:
    return ValidationError(
        f"The prompt set {path.name} is not usable: {why}.",
        'Each prompt needs an "id" and a "user" text (or "messages"); see resources/prompts/.',
        code="BAD_PROMPT_SET",
    )


def _parse_prompt(path: Path, index: int, raw: object) -> PromptCase:
    if not isinstance(raw, dict):
        raise _bad_set(path, f"prompt {index + 1} is not an object")
    prompt_id = raw.get("id") or f"prompt-{index + 1}"
    if not isinstance(prompt_id, str):
        raise _bad_set(path, f"prompt {index + 1} has a non-text id")
    messages: list[Message] = []
    if "messages" in raw:
        items = raw["messages"]
        if not isinstance(items, list) or not items:
            raise _bad_set(path, f"prompt {prompt_id!r} has no messages")
        for item in items:
            role = item.get("role") if isinstance(item, dict) else None
            content = item.get("content") if isinstance(item, dict) else None
            if role not in ("system", "user", "assistant") or not isinstance(content, str):
                raise _bad_set(path, f"prompt {prompt_id!r} has a malformed message")
            messages.append(Message(_role(role), content))
    else:
        system, user = raw.get("system"), raw.get("user")
        if not isinstance(user, str) or not user.strip():
            raise _bad_set(path, f"prompt {prompt_id!r} has no user text")
        if system is not None:
            if not isinstance(system, str):
                raise _bad_set(path, f"prompt {prompt_id!r} has a non-text system prompt")
            messages.append(Message("system", system))
        messages.append(Message("user", user))
    if messages[-1].role != "user":
        raise _bad_set(path, f"prompt {prompt_id!r} does not end with a user message")
    return PromptCase(prompt_id, tuple(messages))


def _role(value: str) -> Role:
    if value == "system":
        return "system"
    return "assistant" if value == "assistant" else "user"


def read_prompt_set(path: Path) -> PromptSet:
    try:
        raw = read_json_file(path, kind=FileKind(f"The prompt set {path.name}", ""))
    except FileNotFoundError as exc:
        raise ValidationError(
            f"The prompt set {path} does not exist.",
            f"Use a built-in set ({', '.join(builtin_prompt_set_names())}) or a JSON file.",
            code="BAD_PROMPT_SET",
        ) from exc
    except (OSError, ValueError) as exc:
        raise _bad_set(path, f"it cannot be read as JSON ({exc})") from exc
    if isinstance(raw, list):  # a bare list of prompts is accepted too
        raw = {"prompts": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("prompts"), list) or not raw["prompts"]:
        raise _bad_set(path, 'it has no "prompts" list')
    prompts = tuple(_parse_prompt(path, i, item) for i, item in enumerate(raw["prompts"]))
    ids = [p.id for p in prompts]
    if len(set(ids)) != len(ids):
        raise _bad_set(path, "two prompts share an id")
    max_new = raw.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
    if not isinstance(max_new, int) or isinstance(max_new, bool) or max_new < 1:
        raise _bad_set(path, "max_new_tokens must be a positive whole number")
    name = raw.get("name") if isinstance(raw.get("name"), str) else path.stem
    title = raw.get("title") if isinstance(raw.get("title"), str) else name
    description = raw.get("description") if isinstance(raw.get("description"), str) else ""
    return PromptSet(str(name), str(title), str(description), prompts, max_new, path)


def builtin_prompt_set_names() -> list[str]:
    folder = prompts_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def builtin_prompt_sets() -> list[PromptSet]:
    return [read_prompt_set(prompts_dir() / f"{name}.json") for name in builtin_prompt_set_names()]


def load_prompt_set(spec: str | Path) -> PromptSet:
    """A built-in set by name ("demo", "code"...) or a JSON file by path."""
    text = str(spec)
    if isinstance(spec, str) and "/" not in text and not text.endswith(".json"):
        path = prompts_dir() / f"{text}.json"
        if not path.is_file():
            raise ValidationError(
                f"There is no built-in prompt set called {text!r}.",
                f"Choose one of: {', '.join(builtin_prompt_set_names()) or 'none installed'}; "
                "or give the path of a JSON file.",
                code="BAD_PROMPT_SET",
            )
        return read_prompt_set(path)
    return read_prompt_set(Path(spec).expanduser())


def default_prompt_set_name(model_dir: Path) -> str:
    """The demo model only counts and repeats, so real-text sets would tell nothing about it."""
    return "demo" if is_demo_model(model_dir) else "chat"


# --- what every report records -------------------------------------------------------------


def describe_model(model_dir: Path) -> dict[str, Any]:
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


def describe_machine(device: str) -> dict[str, Any]:
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


def run_record(stats: GenerationStats, depth: int | None) -> dict[str, Any]:
    """One generation's measurements (TTFT is kept apart from decode speed)."""
    decode_steps = max(stats.steps - 1, 0)
    decode_tokens = stats.generated_tokens - (stats.chunk_sizes[0] if stats.chunk_sizes else 0)
    decode_s = decode_tokens / stats.decode_tokens_per_s if stats.decode_tokens_per_s > 0 else 0.0
    return {
        "mode": stats.mode,
        "depth": depth if stats.mode != "baseline" else None,
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.generated_tokens,
        "ttft_s": stats.ttft_s,
        "decode_tokens_per_s": stats.decode_tokens_per_s,
        "total_s": stats.total_s,
        "steps": stats.steps,
        "step_ms": 1000 * decode_s / decode_steps if decode_steps else None,
        "drafted_tokens": stats.drafted_tokens,
        "accepted_tokens": stats.accepted_tokens,
        "acceptance_rate": stats.acceptance_rate if stats.mode != "baseline" else None,
        "mean_accepted_per_step": (
            stats.mean_accepted_per_step if stats.mode != "baseline" else None
        ),
        "acceptance_by_position": list(stats.acceptance_by_position),
        "finish_reason": stats.finish_reason,
    }


def spread(values: Sequence[float]) -> dict[str, float] | None:
    """Median with min and max (what the charts' whiskers show); None for no values."""
    clean = [v for v in values if v is not None and math.isfinite(v)]
    if not clean:
        return None
    return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}


# --- running generations -------------------------------------------------------------------


def generate_ids(
    engine: Engine,
    prompt: str,
    settings: GenerationSettings,
    cancel: threading.Event | None = None,
) -> tuple[list[int], GenerationStats]:
    """Greedy token ids and stats of one generation; RunCancelledError if `cancel` gets set."""
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


def load_engine_pair(model_dir: Path, options: LoadOptions) -> tuple[Engine, Engine]:
    """(plain, MTP) engines on the same model and options; ValidationError without MTP head."""
    baseline, mtp = Engine(), Engine()
    try:
        baseline.load(model_dir, replace(options, mtp=False))
        loaded = mtp.load(model_dir, replace(options, mtp=True))
    except BaseException:
        baseline.unload()
        mtp.unload()
        raise
    if loaded.mode != "mtp":
        baseline.unload()
        mtp.unload()
        raise ValidationError(
            f"{display_name(model_dir)} has no MTP head, so there is nothing to validate.",
            "Re-export the checkpoint with optimum-intel 2.2 or newer (task image-text-to-text).",
            code="NO_MTP",
        )
    return baseline, mtp


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
) -> dict[str, Any]:
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


def prompt_caption(case: PromptCase, index: int, total: int) -> str:
    """How progress names a prompt: its place and its first words, not its internal id
    ("prompt 2/5 “Count from 35 to 52.”")."""
    words = " ".join(case.text.split())
    if len(words) > 40:
        words = words[:39].rstrip() + "…"
    return f"prompt {index + 1}/{total} “{words}”"


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


# --- validation ----------------------------------------------------------------------------


def run_validation(
    model_dir: Path,
    prompt_set: PromptSet,
    *,
    max_new_tokens: int | None = None,
    num_assistant_tokens: int = 1,
    device: str = "CPU",
    timing: bool = True,
    margins: bool = True,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    method: DraftMethod = "mtp",
    max_ngram_size: int = DEFAULT_MAX_NGRAM_SIZE,
) -> dict[str, Any]:
    """Validate a drafting method (MTP, or prompt lookup with `method="lookup"`) against plain
    greedy decoding on every prompt of `prompt_set`. The drafting side keeps the report key
    "mtp" (the schema predates prompt lookup); `settings.method` says which method it was.

    Returns the report dict (keys: VALIDATION_KEYS). Raises EngineError / ValidationError when
    the model cannot run, RunCancelledError when `cancel` is set.
    """
    if num_assistant_tokens < 1:
        raise ValidationError("The number of draft tokens must be at least 1.", code="BAD_SETTINGS")
    lookup = method == "lookup"
    label = "prompt lookup" if lookup else "MTP"
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
    if lookup:
        # One engine: plain turns on its plain pipeline, prompt lookup on its own pipeline.
        tracker.start(
            f"Loading {display_name(model_dir)} (plain and prompt lookup, exact numerics)…"
        )
        baseline = Engine()
        baseline.load(model_dir, replace(options, mtp=False))
        mtp = baseline
        decoders = {"plain": baseline.require_loaded().decoder, "mtp": "genai"}
    else:
        tracker.start(f"Loading {display_name(model_dir)} twice (plain and MTP, exact numerics)…")
        baseline, mtp = load_engine_pair(model_dir, options)
        decoders = {"plain": baseline.require_loaded().decoder, "mtp": mtp.require_loaded().decoder}
    tracker.done()
    results: list[dict[str, Any]] = []
    try:
        tokens = ModelTokenizer(model_dir)
        probe = LogitProbe(model_dir, device) if margins else None
        plain_settings = settings = GenerationSettings(
            max_new_tokens=new_tokens, num_assistant_tokens=num_assistant_tokens
        )
        if lookup:
            settings = replace(settings, prompt_lookup=True, max_ngram_size=max_ngram_size)
        rendered: dict[str, str] = {}
        for number, case in enumerate(prompts):
            caption = prompt_caption(case, number, len(prompts))
            prompt = rendered[case.id] = baseline.render_prompt(case.messages)
            tracker.start(f"{caption}: plain decoding")
            base_ids, base_stats = generate_ids(baseline, prompt, plain_settings, cancel)
            tracker.done()
            tracker.start(f"{caption}: {label} decoding (n={num_assistant_tokens})")
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
                    "baseline": run_record(base_stats, None),
                    "mtp": run_record(mtp_stats, num_assistant_tokens),
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
                base_rec = run_record(base_stats, None)
                mtp_rec = run_record(mtp_stats, num_assistant_tokens)
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
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": "validate",
        "id": new_report_id("validate"),
        "created": created,
        "app_version": __version__,
        "duration_s": time.perf_counter() - started,
        "model": model,
        "versions": installed_versions(),
        "machine": describe_machine(device),
        "device": device,
        "numerics": "exact",
        "prompt_set": prompt_set.to_json_dict(),
        "settings": {
            "max_new_tokens": new_tokens,
            "num_assistant_tokens": num_assistant_tokens,
            # What drafted: "mtp" (the MTP head) or "lookup" (prompt lookup, with its n-gram).
            "method": method,
            "max_ngram_size": max_ngram_size if lookup else None,
            "greedy": True,
            "load_properties": dict(EXACT_NUMERICS),
            # What decoded each side: "fast" (the app's decoder) or "genai" (openvino-genai).
            "decoders": decoders,
        },
        "results": results,
        "summary": _validation_summary(results),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def acceptance_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
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


def _validation_summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
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


def _decoder_lines(decoders: dict[str, str] | None) -> list[str]:
    """Which decoder ran each side (reports from before the app's own decoder have none)."""
    if not decoders:
        return []
    names = {"fast": "the app's MTP decoder", "genai": "openvino-genai"}
    return [
        f"Plain decoding: {names.get(decoders['plain'], decoders['plain'])}; "
        f"MTP: {names.get(decoders['mtp'], decoders['mtp'])}.",
        "",
    ]


def validation_markdown(report: dict[str, Any]) -> str:
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
            f"({settings['max_new_tokens']} new tokens, n={settings['num_assistant_tokens']} "
            "draft tokens per step)."
        ),
        "",
        *_decoder_lines(settings.get("decoders")),
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


def method_label(settings: dict[str, Any]) -> str:
    """ "MTP" or "Prompt lookup": what drafted in a validation (older reports: MTP)."""
    return "Prompt lookup" if settings.get("method") == "lookup" else "MTP"


VERDICT_TEXT: dict[str, str] = {
    "near_tie": "a numerical near-tie (the two tokens score almost the same), not a fault.",
    "fault": "a clear margin, so MTP changed the output: a real fault.",
    "unknown": "the margin could not be computed.",
}


__all__ = [
    "EngineError",
    "Progress",
    "PromptCase",
    "PromptSet",
    "RunCancelledError",
    "ValidationError",
    "builtin_prompt_sets",
    "load_prompt_set",
    "run_validation",
]
