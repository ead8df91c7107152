"""Prefill speed: prompt tokens per second of the app's decoder against openvino-genai's two
plain backends (stateful SDPA and PagedAttention), per prompt length, inference precision and
prefill chunk size. Issue 24 item 5: keep the fastest exact choice.

Every configuration prefills the same random token ids (no chat template: the prefill alone)
with a cold state and produces one token; the time to that token is the prefill. Rounds are
interleaved in a rotating order because this machine's speed drifts; ratios are per round
against the SDPA pipeline at the same precision.

    .venv/bin/python benchmarks/prefill_speed.py MODEL_DIR [--lengths 512,2048,8192] [--rounds 3]
        [--precisions bf16,f32] [--chunks 0,512,2048]
    .venv/bin/python benchmarks/prefill_speed.py --smoke      # demo model, short; checks
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder  # noqa: E402
from qwen_mtp_desktop.core.decoding.method import PLAIN  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"


def precision_properties(precision: str) -> dict[str, str]:
    if precision == "f32":  # exact numerics (validate's): no bf16, no dynamic quantization
        return {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    return {"INFERENCE_PRECISION_HINT": precision}


def app_runner(model: Path, precision: str, chunk: int) -> Callable[[list[int]], float]:
    decoder = AppDecoder(model, "CPU", precision_properties(precision), mtp=False)
    decoder.prefill_chunk = chunk or None

    def run(ids: list[int]) -> float:
        decoder.drop_states()
        started = time.perf_counter()
        for _ in decoder.decode(ids, method=PLAIN, max_new_tokens=1, stop_ids=frozenset()):
            pass
        return time.perf_counter() - started

    return run


def genai_runner(model: Path, precision: str, backend: str) -> Callable[[list[int]], float]:
    import openvino_genai

    properties: dict[str, Any] = dict(precision_properties(precision))
    if backend == "SDPA":
        properties["ATTENTION_BACKEND"] = "SDPA"
    else:
        scheduler = openvino_genai.SchedulerConfig()
        scheduler.enable_prefix_caching = False
        properties["scheduler_config"] = scheduler
    pipeline = openvino_genai.VLMPipeline(str(model), "CPU", **properties)
    tokenizer = openvino_genai.Tokenizer(str(model))
    config = pipeline.get_generation_config()
    config.max_new_tokens = 1
    config.apply_chat_template = False
    config.ignore_eos = True

    def run(ids: list[int]) -> float:
        text = tokenizer.decode(ids)
        started = time.perf_counter()
        pipeline.generate(text, generation_config=config)
        return time.perf_counter() - started

    return run


def prompt_ids(model: Path, length: int, seed: int = 0) -> list[int]:
    """`length` ids of ordinary text (ids that decode and re-encode to themselves, so every
    path prefills the same tokens)."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(model))
    words = "the budget committee met on tuesday and reviewed travel equipment training " * 8
    text = ""
    ids: list[int] = []
    while len(ids) < length:
        text += words + f"{seed} "
        ids = [int(i) for i in tokenizer.encode(text, add_special_tokens=False).input_ids.data[0]]
    return ids[:length]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, default=DEMO)
    parser.add_argument("--lengths", type=whole_numbers(), default="512,2048,8192")
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--precisions", default="bf16,f32")
    parser.add_argument(
        "--chunks",
        type=whole_numbers(minimum=0),
        default="0,512,2048",
        help="app prefill chunk sizes (0: one call)",
    )
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model, args.lengths, args.rounds, args.precisions, args.chunks = (
            DEMO,
            [64, 256],
            1,
            "bf16,f32",
            [0, 64],
        )
    lengths, chunks = args.lengths, args.chunks
    runners: dict[str, Callable[[list[int]], float]] = {}
    for precision in args.precisions.split(","):
        runners[f"genai SDPA {precision}"] = genai_runner(args.model, precision, "SDPA")
        runners[f"genai PA {precision}"] = genai_runner(args.model, precision, "PA")
        for chunk in chunks:
            name = f"app {precision}" + (f" chunk {chunk}" if chunk else "")
            runners[name] = app_runner(args.model, precision, chunk)
    seconds: dict[tuple[str, int], list[float]] = {}
    for length in lengths:
        ids = prompt_ids(args.model, length)
        for runner in runners.values():  # warm-up: first calls allocate
            runner(ids[:32])
        names = list(runners)
        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                seconds.setdefault((name, length), []).append(runners[name](ids))
    smoke = SmokeCheck("prefill_speed.py")
    print(f"{'path':<24}" + "".join(f"{n:>10} tok {'':>12}" for n in lengths))
    for name in runners:
        precision = name.split()[-1] if name.startswith("genai") else name.split()[1]
        row = f"{name:<24}"
        for length in lengths:
            times = seconds[(name, length)]
            base = seconds[(f"genai SDPA {precision}", length)]
            ratios = [b / t for b, t in zip(base, times, strict=True)]
            speed = length / statistics.median(times)
            row += f"{speed:>10.0f} tok/s {statistics.median(ratios):>5.2f}x   "
            smoke.positive(f"{name} at {length} tokens: prefill speed", speed)
            smoke.positive(f"{name} at {length} tokens: ratio", statistics.median(ratios))
        print(row)
    print("ratios: median of per-round (genai SDPA at the same precision) / (this path) times")
    return smoke.finish() if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
