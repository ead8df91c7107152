"""Full-size MTP speed bounds on this machine: random-weight Qwen3.5 checkpoints with the real
0.8B / 2B geometries, exported to INT4 through the app's own export path, benchmarked with
`core.measure.bench` in two variants that bound what MTP can give:

- agree:  both final norms (target and MTP) have weight -1; Qwen3.5's RMSNorm multiplies by
          (1 + weight), so both emit all-zero logits and always pick the same token: ~100 %
          acceptance with the target doing exactly the same work as in the random variant.
- random: independent random weights: ~0 % acceptance.
- bigram: a realistic middle (60-90 % per-draft acceptance). The token embeddings dominate the
          target's residual stream, so its next token is a bigram map f(current token) except
          where its random layers' history-dependent contribution flips the argmax; the MTP head
          knows only f (it passes the embedding through to the target's final norm and lm_head),
          so its drafts are accepted where no flip happens. The embedding scale is calibrated on
          a real greedy run (`make_bigram`). Same shapes, so the target does the same work.

    .venv/bin/python benchmarks/fullsize.py all --geometry 0.8b --work /tmp/qwen35-fullsize
    .venv/bin/python benchmarks/fullsize.py --smoke    # tiny geometry, cached exports; checks

See benchmarks/README.md for the steps one by one, memory and time needs.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":
    # This checkout's app (before an installed copy), and step_costs.py beside this file.
    sys.path[:0] = [str(REPO_ROOT), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402

from qwen_mtp_desktop.core.errors import UserFacingError  # noqa: E402
from qwen_mtp_desktop.core.files.paths import HOME_ENV  # noqa: E402
from qwen_mtp_desktop.core.measure.bench import expected_tokens_per_step, run_benchmark  # noqa: E402
from qwen_mtp_desktop.core.measure.prompt_sets import PromptSet, load_prompt_set  # noqa: E402
from qwen_mtp_desktop.core.measure.reports import save_report  # noqa: E402

VOCAB_SIZE = 248_320
VARIANTS = ("agree", "random", "bigram")
#: Share of greedy steps that follow the bigram map, calibrated in fp32 before the INT4 export.
BIGRAM_AGREEMENT = 0.8
PROJECTION = (0.6, 0.8, 0.9)
#: Decoding step costs must match between variants: the target does the same work in both.
PARITY_LIMIT = 0.10
#: `--smoke`: the real steps (build + export once, cached; benchmark; table), made tiny.
SMOKE = {
    "geometry": "tiny",
    "variants": ["agree", "bigram"],
    "depths": (1, 2),
    "runs": 1,
    "prompts": 1,
    "max_new_tokens": 16,
}

#: Text geometries from the published config.json files (Qwen/Qwen3.5-0.8B, Qwen/Qwen3.5-2B):
#: 24 layers (3 linear-attention : 1 full-attention), 8 query / 2 KV heads of 256, Gated
#: DeltaNet with 16 key / 16 value heads of 128, tied embeddings, one MTP layer. "tiny" only
#: smoke-tests this script (same vocabulary, small layers).
GEOMETRIES: dict[str, dict[str, Any]] = {
    "0.8b": {
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "mrope_section": [11, 11, 10],
    },
    "2b": {
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "mrope_section": [11, 11, 10],
    },
    "tiny": {
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "mrope_section": [3, 3, 2],
    },
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --- building --------------------------------------------------------------------------------


def make_config(geometry: str, tokenizer: Any) -> Any:
    from transformers import Qwen3_5Config

    from qwen_mtp_desktop.devtools import corpus

    dims = dict(GEOMETRIES[geometry])
    mrope_section = dims.pop("mrope_section")
    layers = dims["num_hidden_layers"]
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in corpus.SPECIAL_TOKENS}
    text = {
        **dims,
        "vocab_size": VOCAB_SIZE,
        "layer_types": [
            "full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)
        ],
        "linear_conv_kernel_dim": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 262_144,
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "tie_word_embeddings": True,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": mrope_section,
            "partial_rotary_factor": 0.25,
            "rope_theta": 10_000_000.0,
            "rope_type": "default",
        },
        "mtp_num_hidden_layers": 1,
        "eos_token_id": ids[corpus.IM_END],
        "pad_token_id": ids[corpus.ENDOFTEXT],
    }
    # Text decoding never runs the vision encoder, so it stays tiny (export time and disk).
    vision = {
        "depth": 1,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_heads": 2,
        "out_hidden_size": dims["hidden_size"],
        "num_position_embeddings": 256,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
    }
    return Qwen3_5Config(
        text_config=text,
        vision_config=vision,
        tie_word_embeddings=True,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )


def build_checkpoint(out: Path, geometry: str, variant: str, seed: int = 0) -> Path:
    """A random-weight Qwen3.5 checkpoint with `mtp.*` weights, sharded like hub checkpoints."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file
    from transformers import GenerationConfig, Qwen3_5ForConditionalGeneration

    from qwen_mtp_desktop.devtools import corpus
    from qwen_mtp_desktop.devtools.tiny_model import build_tokenizer, make_processor
    from qwen_mtp_desktop.devtools.training import MTPHead

    if variant not in VARIANTS:
        raise SystemExit(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if out.exists():
        raise SystemExit(f"{out} already exists; remove it or choose another folder")
    started = time.perf_counter()
    work = out.with_name(out.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tokenizer = build_tokenizer()  # the demo model's byte-level BPE (no hub needed)
    config = make_config(geometry, tokenizer)
    torch.manual_seed(seed)
    model = Qwen3_5ForConditionalGeneration(config).eval()
    head = MTPHead(config.text_config, moe=False)
    first_special = min(tokenizer.convert_tokens_to_ids(t) for t in corpus.SPECIAL_TOKENS)
    with torch.no_grad():
        if variant == "agree":
            # (1 + w) * x with w = -1: zero hidden state, zero logits, argmax 0 in both.
            model.model.language_model.norm.weight.fill_(-1.0)
            head.norm.weight.fill_(-1.0)
        else:
            # Only ordinary BPE tokens can win the argmax: no EOS (runs keep their length) and
            # no id the detokenizer does not know. The lm_head keeps its full size and cost.
            model.get_input_embeddings().weight[first_special:] = 0.0
        if variant == "bigram":
            make_bigram(model, head, first_special, seed)
    parameters = sum(p.numel() for p in model.parameters())
    log(f"{geometry}/{variant}: {parameters / 1e6:,.1f} M parameters, saving")
    model.generation_config = GenerationConfig(
        eos_token_id=[config.text_config.eos_token_id],
        pad_token_id=config.text_config.pad_token_id,
        do_sample=False,
    )
    model.save_pretrained(work, max_shard_size="100GB")
    del model
    main_shard, mtp_shard = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    (work / "model.safetensors").replace(work / main_shard)
    save_file(head.checkpoint_tensors(), work / mtp_shard, metadata={"format": "pt"})
    weight_map: dict[str, str] = {}
    for shard in (main_shard, mtp_shard):
        with safe_open(str(work / shard), framework="pt") as handle:
            weight_map.update(dict.fromkeys(handle.keys(), shard))
    total = sum((work / shard).stat().st_size for shard in (main_shard, mtp_shard))
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (work / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    processor = make_processor(tokenizer)
    processor.save_pretrained(work)
    processor.image_processor.save_pretrained(work)
    processor.video_processor.save_pretrained(work)
    work.replace(out)
    log(f"built {out} in {time.perf_counter() - started:.0f} s")
    return out


def make_bigram(model: Any, head: Any, first_special: int, seed: int) -> None:
    """Turn random weights into the bigram variant (module docstring), in place.

    The target keeps its random layers; its token embeddings (equal row norms, scaled by alpha)
    dominate the residual stream, so its next token is the bigram map f(current token) except
    where the layers' history-dependent contribution flips the argmax. The MTP head knows only
    f (embedding passed through, the target's final norm), so its drafts are accepted where no
    flip happens. alpha is calibrated on a real greedy run so that BIGRAM_AGREEMENT of the
    steps follow f."""
    import torch

    from qwen_mtp_desktop.devtools.tiny_model import build_tokenizer

    generator = torch.Generator().manual_seed(seed + 1)
    for name, param in head.named_parameters():
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            param.mul_(1e-4)  # the MTP layer adds ~0 (not 0: quantizers need a range)
    embed = model.get_input_embeddings().weight
    hidden = embed.shape[1]
    signs = torch.randn(hidden, generator=generator)
    model.model.language_model.norm.weight.copy_(signs - 1.0)
    head.norm.weight.copy_(signs - 1.0)
    head.fc.weight.zero_()
    head.fc.weight[:, :hidden] = torch.eye(hidden)
    head.pre_fc_norm_embedding.weight.zero_()
    base = embed[:first_special] * torch.rsqrt(embed[:first_special].pow(2).mean(-1, True))

    def bigram(ids: torch.Tensor) -> torch.Tensor:
        return ((base[ids] * signs) @ base.T).argmax(-1)

    tokenizer = build_tokenizer()
    prompt = torch.tensor([tokenizer.encode("Count from 1 to 20, then repeat it.")])

    def agreement(alpha: float) -> float:
        embed[:first_special] = base * alpha
        out = model.generate(input_ids=prompt, max_new_tokens=40, do_sample=False)[0]
        tokens = out[prompt.shape[1] - 1 :]
        return float((bigram(tokens[:-1]) == tokens[1:]).float().mean())

    low, high = -6.0, 8.0  # log2(alpha); agreement grows with alpha
    for _ in range(7):
        mid = (low + high) / 2
        low, high = (low, mid) if agreement(2**mid) > BIGRAM_AGREEMENT else (mid, high)
    alpha = 2 ** ((low + high) / 2)
    log(f"bigram: embedding scale {alpha:.4f}, agreement {agreement(alpha):.2f} on 40 tokens")


EMBEDDING_SCALE = "bigram_embedding_scale"
#: Per-draft acceptance (n=1) the exported bigram variant is tuned to.
BIGRAM_TARGET = 0.8


def scale_embeddings(model_dir: Path, scale: float) -> None:
    """Multiply the text embeddings model's output by `scale` (replacing an earlier scale)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    xml = model_dir / "openvino_text_embeddings_model.xml"
    model = ov.Core().read_model(xml)
    result = model.get_results()[0]
    source = result.input_value(0)
    if source.get_node().get_friendly_name() == EMBEDDING_SCALE:
        source = source.get_node().input_value(0)
    scaled = ops.multiply(source, ops.constant(np.float32(scale)))
    scaled.set_friendly_name(EMBEDDING_SCALE)
    result.input(0).replace_source_output(scaled.output(0))
    staged = model_dir / "embeddings-staged.xml"
    ov.save_model(model, staged, compress_to_fp16=False)
    staged.with_suffix(".bin").replace(xml.with_suffix(".bin"))
    staged.replace(xml)


def tune_bigram(model_dir: Path) -> float:
    """Scale the exported bigram variant's embeddings so drafts are accepted about
    BIGRAM_TARGET of the time at n=1, measured with the app's engine on the demo prompts.
    Quantization moves the balance between the embedding and the layers, so the fp32
    calibration before export (`make_bigram`) only gets close."""
    import math

    from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

    prompts = [c.messages[-1].content for c in load_prompt_set("demo").prompts[:2]]

    def acceptance(scale: float) -> float:
        scale_embeddings(model_dir, scale)
        engine = Engine()
        engine.load(model_dir, LoadOptions(mtp=True))
        rates = []
        for text in prompts:
            settings = GenerationSettings(64, method=DEFAULT_MTP, ignore_eos=True)
            stats = engine.generate([Message("user", text)], settings).run_to_end()
            rates.append(stats.acceptance_rate)
        engine.unload()
        log(f"bigram tuning: embedding scale {scale:.4f}, acceptance {rates}")
        return sum(rates) / len(rates)

    # Acceptance grows with the scale overall but not monotonically near the target (a few
    # tokens of the history-dependent part flip a draft), so the bisection steers and the
    # scale kept is the measured one closest to the target, set again at the end.
    measured: dict[float, float] = {}
    low, high = math.log(0.01), 0.0
    for _ in range(6):
        mid = (low + high) / 2
        measured[math.exp(mid)] = rate = acceptance(math.exp(mid))
        low, high = (mid, high) if rate < BIGRAM_TARGET else (low, mid)
    scale = min(measured, key=lambda s: abs(measured[s] - BIGRAM_TARGET))
    scale_embeddings(model_dir, scale)
    log(f"bigram tuned: embedding scale {scale:.4f}, acceptance {measured[scale]:.2f}")
    return scale


def export_int4(checkpoint: Path, out: Path) -> Path:
    """INT4 through the app's export path; --group-size-fallback ignore keeps the MTP RoPE
    frequencies (a channel of size 1) out of group quantization (RUNTIME-NOTES)."""
    from qwen_mtp_desktop.core.models.export.job import run_export
    from qwen_mtp_desktop.core.models.export.options import ExportOptions

    options = ExportOptions.recommended("int4", group_size_fallback="ignore")
    started = time.perf_counter()
    outcome = run_export(str(checkpoint), out, options)
    peak = (
        f", peak RSS {outcome.peak_rss_bytes / 2**30:.1f} GiB"
        if getattr(outcome, "peak_rss_bytes", None)
        else ""
    )
    log(f"exported {out} in {time.perf_counter() - started:.0f} s{peak}")
    return out


# --- benchmarking ----------------------------------------------------------------------------


def prompt_set(max_new_tokens: int, prompts: int) -> PromptSet:
    from dataclasses import replace

    demo = load_prompt_set("demo")
    return replace(
        demo, name="fullsize", prompts=demo.prompts[:prompts], max_new_tokens=max_new_tokens
    )


def bench_model(
    model_dir: Path, depths: tuple[int, ...], runs: int, max_new_tokens: int, prompts: int
) -> dict[str, Any]:
    last = ""

    def progress(p: Any) -> None:
        nonlocal last
        if p.message != last:
            log(f"  [{p.done}/{p.total}] {p.message}")
            last = p.message

    report = run_benchmark(
        model_dir,
        [prompt_set(max_new_tokens, prompts)],
        depths=depths,
        runs=runs,
        warmup=1,
        compare_genai_mtp=True,
        progress=progress,
        lookup=None,  # this benchmark compares the MTP decoders
    )
    log(f"  report saved: {save_report(report)}")
    return report


def _depth(mode: dict[str, Any]) -> int | None:
    """A report mode's MTP depth (None: plain decoding)."""
    from qwen_mtp_desktop.core.measure.verdicts import row_method

    method = row_method(mode)
    return method.drafts if method.uses_mtp_head else None


def _mode(report: dict[str, Any], depth: int | None) -> dict[str, Any]:
    return next(m for m in report["modes"] if _depth(m) == depth)


def projections(
    report: dict[str, Any], steps: dict[str, Any] | None
) -> list[tuple[int, float, list[float], list[float] | None]]:
    """(depth, pipeline ms per step, speed-ups at PROJECTION from the pipeline's step costs,
    the same from the direct IR step costs or None)."""
    base_step = _mode(report, None)["step_ms"]
    out = []
    for depth in report["settings"]["depths"]:
        step = _mode(report, depth)["step_ms"]
        pipeline = [expected_tokens_per_step(p, depth) * base_step / step for p in PROJECTION]
        direct = None
        if steps is not None:
            cost = steps["verify_ms"][str(depth)] + depth * steps["draft_ms"]
            direct = [
                expected_tokens_per_step(p, depth) * steps["target_ms"] / cost for p in PROJECTION
            ]
        out.append((depth, step, pipeline, direct))
    return out


def table(reports: dict[str, dict[str, Any]], steps: dict[str, Any] | None) -> str:
    from qwen_mtp_desktop.core.measure.reports import fmt, fmt_spread

    lines = [
        f"{'variant':<8} {'mode':<26} {'decode tok/s (min-max)':<24} {'speed-up (min-max)':<22} "
        f"{'accepted':>8} {'ms/step':>8}",
    ]
    for variant, report in reports.items():
        lines.append(f"{variant}: speed-ups against {report['baseline']['label']} (fastest plain)")
        for mode in [*report["modes"], *report.get("comparison", [])]:
            speedup = fmt_spread(mode["speedup"], "{:.2f}x") if mode["speedup"] else "1.00x"
            lines.append(
                f"{variant:<8} {mode['label']:<26} {fmt_spread(mode['decode_tokens_per_s']):<24} "
                f"{speedup:<22} {fmt(mode['acceptance_rate'], '{:.0%}'):>8} "
                f"{fmt(mode['step_ms'], '{:.1f}'):>8}"
            )
    if "agree" in reports and len(reports) > 1:
        # Every variant makes the target do the same work, so their baselines must agree.
        lines.append("")
        agree = _mode(reports["agree"], None)["decode_tokens_per_s"]["median"]
        for other in (v for v in reports if v != "agree"):
            theirs = _mode(reports[other], None)["decode_tokens_per_s"]["median"]
            gap = abs(agree - theirs) / max(agree, theirs)
            verdict = "OK" if gap <= PARITY_LIMIT else "FAIL: the variants are not comparable"
            lines.append(
                f"baseline parity: agree {agree:.2f} vs {other} {theirs:.2f} tok/s, {gap:.1%} "
                f"apart (limit {PARITY_LIMIT:.0%}): {verdict}"
            )
    source = reports.get("agree") or next(iter(reports.values()))
    header = " ".join(f"{p:>6.0%}" for p in PROJECTION)
    lines += [
        "",
        "speed-up this machine would give at a per-draft acceptance of",
        f"{'depth':<6} {'ms/step':>8}  pipeline: {header}"
        + (f"   direct IR: {header}" if steps is not None else ""),
    ]
    for depth, step, pipeline, direct in projections(source, steps):
        row = f"n={depth:<4} {step:>8.1f}            " + " ".join(f"{v:>5.2f}x" for v in pipeline)
        if direct is not None:
            row += "              " + " ".join(f"{v:>5.2f}x" for v in direct)
        lines.append(row)
    if steps is not None:
        verify = ", ".join(f"{int(k) + 1} tokens {v:.1f}" for k, v in steps["verify_ms"].items())
        lines += [
            "",
            f"step costs (direct IR, median ms): target 1 token {steps['target_ms']:.1f}; "
            f"verify {verify}; MTP draft call {steps['draft_ms']:.1f} "
            f"(MTP layer {steps['mtp_ms']:.1f} + lm_head {steps['lm_head_ms']:.1f})",
        ]
    return "\n".join(lines)


# --- command line ----------------------------------------------------------------------------


def _paths(exports: Path, geometry: str, variant: str) -> tuple[Path, Path]:
    return (
        exports / f"qwen3.5-{geometry}-{variant}-ckpt",
        exports / f"qwen3.5-{geometry}-{variant}-int4",
    )


def cmd_build(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.models.export.options import missing_components

    for variant in args.variants:
        checkpoint, exported = _paths(args.exports, args.geometry, variant)
        # Written when a variant is complete (exported and, for bigram, tuned in place).
        done = exported.with_name(exported.name + ".done")
        missing = missing_components(exported) if exported.exists() else []
        if args.rebuild_incomplete and exported.exists() and not done.exists():
            missing = missing or ["the end of its build (interrupted?)"]
        if missing:
            if not args.rebuild_incomplete:
                raise SystemExit(
                    f"{exported} is incomplete (no {', '.join(missing)}); "
                    "remove it and run the build step again"
                )
            log(f"{exported} is incomplete, building it again")
            shutil.rmtree(exported)
        if not exported.exists():
            try:
                if not checkpoint.exists():
                    build_checkpoint(checkpoint, args.geometry, variant, args.seed)
            except ImportError as error:
                raise SystemExit(
                    f"building {checkpoint.name} needs the export toolkit ({error.name} is "
                    "missing): pip install -e '.[export]'"
                ) from None
            export_int4(checkpoint, exported)
            if variant == "bigram":
                tune_bigram(exported)
            done.write_text(f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
            if not args.keep_checkpoints:
                shutil.rmtree(checkpoint)  # 3+ GB of fp32 weights; the export is what we run
        else:
            log(f"{exported} exists, reusing it")
    return 0


def run_variants(
    args: argparse.Namespace,
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None, str]:
    """Benchmark every variant; (reports by variant, direct step costs or None, the table)."""
    from step_costs import measure_step_costs

    reports: dict[str, dict[str, Any]] = {}
    steps: dict[str, Any] | None = None
    for variant in args.variants:
        _checkpoint, exported = _paths(args.exports, args.geometry, variant)
        if not exported.exists():
            raise SystemExit(f"{exported} is missing; run the build step first")
        log(f"benchmarking {exported.name}")
        reports[variant] = bench_model(
            exported, tuple(args.depths), args.runs, args.max_new_tokens, args.prompts
        )
        if steps is None and not args.no_step_costs:
            log("measuring step costs by calling the IRs directly")
            steps = measure_step_costs(exported, tuple(args.depths))
    return reports, steps, table(reports, steps)


def cmd_run(args: argparse.Namespace) -> int:
    write_results(args, *run_variants(args))
    return 0


def write_results(
    args: argparse.Namespace,
    reports: dict[str, dict[str, Any]],
    steps: dict[str, Any] | None,
    text: str,
) -> None:
    (args.work / f"table-{args.geometry}.txt").write_text(text + "\n")
    print(text)
    summary = {variant: report["id"] for variant, report in reports.items()}
    (args.work / f"reports-{args.geometry}.json").write_text(
        json.dumps({"reports": summary, "step_costs": steps, "table": text}, indent=2)
    )


# --- smoke run -------------------------------------------------------------------------------


def build_fingerprint() -> str:
    """A hash of everything that decides what the build step produces, so a changed builder
    never reuses a stale cached export."""
    from qwen_mtp_desktop.devtools.tiny_model import BUILDER_VERSION

    builders = (make_config, build_checkpoint, make_bigram, export_int4, tune_bigram)
    parts = [inspect.getsource(builder) for builder in (*builders, scale_embeddings)]
    parts += [json.dumps(GEOMETRIES, sort_keys=True), str(VOCAB_SIZE)]
    parts += [str(BIGRAM_AGREEMENT), str(BIGRAM_TARGET), EMBEDDING_SCALE]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    return f"v{BUILDER_VERSION}-{digest}"


def smoke_cache_dir() -> Path:
    """The smoke run's exports: in the test fixture cache (QWEN_MTP_TEST_CACHE, as in
    tests/conftest.py), keyed by builder version like tests/models.py's fixtures."""
    root = Path(os.environ.get("QWEN_MTP_TEST_CACHE", REPO_ROOT / ".cache" / "fixtures"))
    return root / f"fullsize-{build_fingerprint()}"


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One builder at a time per cache folder (test runs may share the cache)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # Windows: no concurrent test runs to guard against
        yield
        return
    with (folder.parent / f".{folder.name}.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def smoke_problems(
    reports: dict[str, dict[str, Any]], steps: dict[str, Any] | None, text: str
) -> list[str]:
    """What is wrong with a smoke run's results: a missing row, a number that is not a finite
    positive speed or time, an acceptance outside [0, 1], an `agree` draft rejected."""
    problems: list[str] = []

    def positive(what: str, value: object) -> None:
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            problems.append(f"{what} is {value!r}, expected a finite positive number")

    if list(reports) != SMOKE["variants"]:
        problems.append(f"variants benchmarked: {list(reports)}, expected {SMOKE['variants']}")
    lines = text.splitlines()
    for variant, report in reports.items():
        depths = [_depth(m) for m in report["modes"]]
        if depths != [None, *SMOKE["depths"]]:
            problems.append(f"{variant}: modes for depths {depths}")
        if not report.get("comparison"):
            problems.append(f"{variant}: no comparison rows (openvino-genai MTP, other plain)")
        for mode in [*report["modes"], *report.get("comparison", [])]:
            what = f"{variant} / {mode['label']}"
            speed = mode["decode_tokens_per_s"] or {}
            for key in ("median", "min", "max"):
                positive(f"{what} decode tok/s {key}", speed.get(key))
            positive(f"{what} ms/step", mode["step_ms"])
            if mode["speedup"] is not None:
                positive(f"{what} speed-up", mode["speedup"]["median"])
            if _depth(mode) is not None:
                rate = mode["acceptance_rate"]
                if not (isinstance(rate, float | int) and 0 <= rate <= 1):
                    problems.append(f"{what}: acceptance {rate!r}")
                elif variant == "agree" and rate < 0.9:
                    # Both heads emit all-zero logits: every draft must match the target.
                    problems.append(f"{what}: acceptance {rate:.0%} on the agree variant")
            if not any(line.startswith(f"{variant:<8} {mode['label']:<26} ") for line in lines):
                problems.append(f"table has no row for {what}")
    source = reports.get("agree") or next(iter(reports.values()), None)
    for depth, step, pipeline, direct in projections(source, steps) if source else ():
        positive(f"n={depth} ms/step", step)
        for value in [*pipeline, *(direct or [])]:
            positive(f"n={depth} projected speed-up", value)
        if not any(line.startswith(f"n={depth} ") for line in lines):
            problems.append(f"table has no projection row for n={depth}")
    if steps is None:
        problems.append("no direct step costs measured")
    else:
        for key in ("target_ms", "draft_ms", "mtp_ms", "lm_head_ms"):
            positive(f"step costs {key}", steps[key])
        for depth, value in steps["verify_ms"].items():
            positive(f"step costs verify_ms[{depth}]", value)
    for heading in ("baseline parity: agree", "speed-up this machine would give", "step costs"):
        if heading not in text:
            problems.append(f"table has no {heading!r} line")
    return problems


def cmd_smoke(work: Path) -> int:
    """Build (once: cached) and benchmark the tiny geometry, print the table, check it."""
    args = argparse.Namespace(
        **SMOKE,
        work=work,
        exports=smoke_cache_dir(),
        seed=0,
        keep_checkpoints=False,
        rebuild_incomplete=True,  # the cache folder is ours
        no_step_costs=False,
    )
    log(f"smoke run; exports cached in {args.exports}")
    with _locked(args.exports):
        cmd_build(args)
    results = run_variants(args)
    write_results(args, *results)
    problems = smoke_problems(*results)
    if problems:
        print("fullsize.py smoke check FAILED:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print("fullsize.py smoke check passed")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="build (cached in the test fixture cache) and run the tiny geometry's agree and "
        "bigram variants at depths 1,2 with 16 tokens, then check the table; exit 1 if wrong",
    )
    sub = parser.add_subparsers(dest="command")
    for name, func, help_text in (
        ("build", cmd_build, "build and export the checkpoints (INT4)"),
        ("run", cmd_run, "benchmark the exported variants and print the table"),
        ("all", None, "build, then run"),
    ):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("--geometry", choices=sorted(GEOMETRIES), default="0.8b")
        command.add_argument("--work", type=Path, default=Path("/tmp/qwen35-fullsize"))
        command.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
        command.add_argument("--seed", type=int, default=0)
        command.add_argument("--keep-checkpoints", action="store_true")
        command.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3")
        command.add_argument("--runs", type=at_least(1), default=2)
        command.add_argument(
            "--prompts", type=at_least(1), default=2, help="demo prompts per round"
        )
        command.add_argument("--max-new-tokens", type=at_least(2), default=128)
        command.add_argument("--no-step-costs", action="store_true")
        command.set_defaults(func=func)
    args = parser.parse_args(argv)
    if args.smoke == bool(args.command):
        parser.error("give one of build, run, all, or --smoke")
    try:
        if args.smoke:
            with tempfile.TemporaryDirectory(prefix="fullsize-smoke-") as work:
                # Reports go to the app's history; keep these runs out of the user's profile.
                os.environ.setdefault(HOME_ENV, str(Path(work) / "app-home"))
                return cmd_smoke(Path(work))
        args.exports, args.rebuild_incomplete = args.work, False
        args.work.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault(HOME_ENV, str(args.work / "app-home"))
        if args.command == "all":
            return cmd_build(args) or cmd_run(args)
        result: int = args.func(args)
        return result
    except UserFacingError as error:  # a failed export, a bad model folder: one line, no trace
        print(f"fullsize.py: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
