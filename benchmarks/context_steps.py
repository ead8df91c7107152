"""Decoding step costs against context length: the app decoder's plain step and its MTP step at
depths 1-3, after 1k, 4k and 16k tokens of conversation (issue 24 item 8).

A verification call attends k + 1 queries to the whole context while a plain step attends one,
so MTP's extra cost per step grows with the context; acceptance can change too. Every context
is prefilled once and kept (the decoder's state cache: each method's run resumes at the end of
the same prompt with no model call), the next length extends it, and at each length every method
decodes the same number of tokens, in an order that rotates round by round (this machine's speed
drifts). Printed per length and method: the median step time, tokens per step, tokens per
second, and both as ratios to plain decoding at that length.

    .venv/bin/python benchmarks/context_steps.py MODEL_DIR [--lengths 1024,4096,16384]
        [--depths 1,2,3] [--tokens 48] [--rounds 3]
    .venv/bin/python benchmarks/context_steps.py --smoke      # demo model, short; checks
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder  # noqa: E402
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"
TEXT = (
    "The committee met on Tuesday to review the budget. Each department presented its plan, "
    "and the members asked about travel, equipment and training. "
)


def prompt_ids(model: Path, length: int) -> list[int]:
    """`length` token ids of ordinary English (repeated prose), tokenized by the model."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(model))
    ids: list[int] = []
    while len(ids) < length:
        encoded = tokenizer.encode(TEXT * 64, add_special_tokens=False)
        ids.extend(int(i) for i in encoded.input_ids.data[0])
    return ids[:length]


def run(
    decoder: AppDecoder, ids: list[int], method: DecodingMethod, tokens: int
) -> tuple[list[float], int, float]:
    """(step times, tokens produced, seconds) of one answer after the kept prompt."""
    produced = 0
    started = time.perf_counter()
    first = None
    for step in decoder.decode(ids, method=method, max_new_tokens=tokens, stop_ids=frozenset()):
        if first is None:
            first = time.perf_counter()
        produced += len(step.tokens)
    seconds = time.perf_counter() - (first or started)
    return list(decoder.timing.steps), produced - 1, seconds  # the timing is per answer


def measure(
    model: Path, lengths: list[int], depths: list[int], tokens: int, rounds: int
) -> dict[int, dict[str, dict[str, float]]]:
    decoder = AppDecoder(model, "CPU", {}, mtp=True)
    methods = [PLAIN, *(DecodingMethod.mtp(d) for d in depths)]
    base = prompt_ids(model, max(lengths))
    results: dict[int, dict[str, dict[str, float]]] = {}
    for length in sorted(lengths):
        ids = base[:length]
        started = time.perf_counter()
        run(decoder, ids, PLAIN, 1)  # prefill (extending the previous length's kept state)
        run(decoder, ids, DecodingMethod.mtp(1), 3)  # the MTP head catches up on the context
        print(f"context {length:,}: prefilled in {time.perf_counter() - started:.1f} s", flush=True)
        samples: dict[str, list[tuple[list[float], int, float]]] = {m.label: [] for m in methods}
        for round_index in range(rounds):
            shift = round_index % len(methods)
            for method in methods[shift:] + methods[:shift]:
                samples[method.label].append(run(decoder, ids, method, tokens))
        row: dict[str, dict[str, float]] = {}
        for method in methods:
            steps = [s for steps, _n, _t in samples[method.label] for s in steps]
            produced = sum(n for _s, n, _t in samples[method.label])
            seconds = sum(t for _s, _n, t in samples[method.label])
            row[method.label] = {
                "step_ms": statistics.median(steps) * 1000,
                "tokens_per_step": produced / max(len(steps), 1),
                "tokens_per_s": produced / seconds if seconds > 0 else 0.0,
            }
        results[length] = row
        report_length(length, row)
    return results


def report_length(length: int, row: dict[str, dict[str, float]]) -> None:
    plain = row[PLAIN.label]
    print(f"\n## context {length:,} tokens")
    print("| method | step (ms) | step / plain step | tokens per step | tokens/s | speed-up |")
    print("|---|---|---|---|---|---|")
    for label, values in row.items():
        print(
            f"| {label} | {values['step_ms']:.1f} | {values['step_ms'] / plain['step_ms']:.2f}x | "
            f"{values['tokens_per_step']:.2f} | {values['tokens_per_s']:.1f} | "
            f"{values['tokens_per_s'] / plain['tokens_per_s']:.2f}x |"
        )
    print(flush=True)


def check_smoke(results: dict[int, dict[str, dict[str, float]]], depths: list[int]) -> int:
    check = SmokeCheck("context_steps.py")
    labels = [PLAIN.label, *(DecodingMethod.mtp(d).label for d in depths)]
    for length, row in results.items():
        check.require(list(row) == labels, f"{length}: methods {list(row)}")
        for label, values in row.items():
            for key, value in values.items():
                check.positive(f"{length} {label} {key}", value)
            if label == PLAIN.label:
                check.require(values["tokens_per_step"] == 1, "plain made more than one token")
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, nargs="?", help="exported model folder")
    parser.add_argument("--lengths", type=whole_numbers(), default="1024,4096,16384")
    parser.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3")
    parser.add_argument("--tokens", type=at_least(2), default=48, help="tokens per answer")
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--smoke", action="store_true", help="demo model, short; checks")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model = args.model or DEMO
        args.lengths, args.depths, args.tokens, args.rounds = [64, 256], [1, 2], 12, 1
    if args.model is None:
        parser.error("give an exported model folder (or --smoke for the demo model)")
    lengths, depths = args.lengths, args.depths
    if not (args.model / "openvino_language_model.xml").is_file():
        print(f"error: {args.model} is not an exported model folder", file=sys.stderr)
        return 2
    results = measure(args.model, lengths, depths, args.tokens, args.rounds)
    return check_smoke(results, depths) if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
