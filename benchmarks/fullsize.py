"""Full-size MTP speed bounds on this machine: random-weight Qwen3.5 checkpoints with the real
0.8B / 2B geometries, exported to INT4 through the app's own export path, benchmarked with
`core.bench` in two variants that bound what MTP can give:

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

See benchmarks/README.md for the steps one by one, memory and time needs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.bench import expected_tokens_per_step, run_benchmark
from qwen_mtp_desktop.core.paths import HOME_ENV
from qwen_mtp_desktop.core.reports import save_report
from qwen_mtp_desktop.core.validate import PromptSet, load_prompt_set

VOCAB_SIZE = 248_320
VARIANTS = ("agree", "random", "bigram")
#: Share of greedy steps that follow the bigram map, calibrated in fp32 before the INT4 export.
BIGRAM_AGREEMENT = 0.8
PROJECTION = (0.6, 0.8, 0.9)
#: Decoding step costs must match between variants: the target does the same work in both.
PARITY_LIMIT = 0.10

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

    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

    prompts = [c.messages[-1].content for c in load_prompt_set("demo").prompts[:2]]

    def acceptance(scale: float) -> float:
        scale_embeddings(model_dir, scale)
        engine = Engine()
        engine.load(model_dir, LoadOptions(mtp=True))
        rates = []
        for text in prompts:
            settings = GenerationSettings(64, num_assistant_tokens=1, ignore_eos=True)
            stats = engine.generate([Message("user", text)], settings).run_to_end()
            rates.append(stats.acceptance_rate)
        engine.unload()
        log(f"bigram tuning: embedding scale {scale:.4f}, acceptance {rates}")
        return sum(rates) / len(rates)

    low, high = math.log(0.01), 0.0  # acceptance grows with the scale
    for _ in range(6):
        mid = (low + high) / 2
        low, high = (mid, high) if acceptance(math.exp(mid)) < BIGRAM_TARGET else (low, mid)
    scale = math.exp((low + high) / 2)
    log(f"bigram tuned: embedding scale {scale:.4f}, acceptance {acceptance(scale):.2f}")
    return scale


def export_int4(checkpoint: Path, out: Path) -> Path:
    """INT4 through the app's export path; --group-size-fallback ignore keeps the MTP RoPE
    frequencies (a channel of size 1) out of group quantization (RUNTIME-NOTES)."""
    from qwen_mtp_desktop.core.export.job import run_export
    from qwen_mtp_desktop.core.export.options import ExportOptions

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
    )
    log(f"  report saved: {save_report(report)}")
    return report


def _mode(report: dict[str, Any], depth: int | None) -> dict[str, Any]:
    return next(m for m in report["modes"] if m["depth"] == depth)


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
    from qwen_mtp_desktop.core.reports import fmt, fmt_spread

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
    if {"agree", "random"} <= set(reports):
        agree = _mode(reports["agree"], None)["decode_tokens_per_s"]["median"]
        rand = _mode(reports["random"], None)["decode_tokens_per_s"]["median"]
        gap = abs(agree - rand) / max(agree, rand)
        verdict = "OK" if gap <= PARITY_LIMIT else "FAIL: the variants are not comparable"
        lines += [
            "",
            f"baseline parity: agree {agree:.2f} vs random {rand:.2f} tok/s, {gap:.1%} apart "
            f"(limit {PARITY_LIMIT:.0%}): {verdict}",
        ]
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


def _paths(work: Path, geometry: str, variant: str) -> tuple[Path, Path]:
    return work / f"qwen3.5-{geometry}-{variant}-ckpt", work / f"qwen3.5-{geometry}-{variant}-int4"


def cmd_build(args: argparse.Namespace) -> int:
    for variant in args.variants:
        checkpoint, exported = _paths(args.work, args.geometry, variant)
        if not exported.exists():
            if not checkpoint.exists():
                build_checkpoint(checkpoint, args.geometry, variant, args.seed)
            export_int4(checkpoint, exported)
            if variant == "bigram":
                tune_bigram(exported)
            if not args.keep_checkpoints:
                shutil.rmtree(checkpoint)  # 3+ GB of fp32 weights; the export is what we run
        else:
            log(f"{exported} exists, reusing it")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from step_costs import measure_step_costs

    reports: dict[str, dict[str, Any]] = {}
    steps: dict[str, Any] | None = None
    for variant in args.variants:
        _checkpoint, exported = _paths(args.work, args.geometry, variant)
        if not exported.exists():
            raise SystemExit(f"{exported} is missing; run the build step first")
        log(f"benchmarking {exported.name}")
        reports[variant] = bench_model(
            exported, args.depths, args.runs, args.max_new_tokens, args.prompts
        )
        if steps is None and not args.no_step_costs:
            log("measuring step costs by calling the IRs directly")
            steps = measure_step_costs(exported, args.depths)
    text = table(reports, steps)
    (args.work / f"table-{args.geometry}.txt").write_text(text + "\n")
    print(text)
    summary = {variant: report["id"] for variant, report in reports.items()}
    (args.work / f"reports-{args.geometry}.json").write_text(
        json.dumps({"reports": summary, "step_costs": steps, "table": text}, indent=2)
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
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
        command.add_argument(
            "--depths", type=lambda s: tuple(int(x) for x in s.split(",")), default=(1, 2, 3)
        )
        command.add_argument("--runs", type=int, default=2)
        command.add_argument("--prompts", type=int, default=2, help="demo prompts per round")
        command.add_argument("--max-new-tokens", type=int, default=128)
        command.add_argument("--no-step-costs", action="store_true")
        command.set_defaults(func=func)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    # Reports go to the app's history; keep these runs out of the user's real profile.
    os.environ.setdefault(HOME_ENV, str(args.work / "app-home"))
    if args.command == "all":
        return cmd_build(args) or cmd_run(args)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # step_costs.py beside this file
    sys.exit(main())
