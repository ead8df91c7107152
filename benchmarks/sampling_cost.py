"""What sampling costs per logits row at the real vocabulary (core.decoding.sampling).

    python benchmarks/sampling_cost.py [--vocab 248320] [--draft-vocab 32768] [--rows 200]
                                       [--history 4000] [--smoke] [--json]

For each setting (greedy; Qwen's recommendations without and with thinking; the same with a
presence penalty over a history of `--history` tokens; top-p or min-p without top-k; an
untruncated temperature), `process_logits` on `--rows` synthetic rows: the median and 90th
percentile in ms per row and how many tokens the distribution kept. Then one speculative
step at depths 1 and 3 as the decoder runs it: the drafts sampled from draft-vocabulary rows,
the target rows processed lazily by `verify_drafts`, the draws included.

Rows are shaped like a language model's: a normal bulk (sd 2) with a few tokens far above it
(among the draft vocabulary's ids); the draft rows are the target's plus noise (sd 1).
Every setting processes every row once, the settings alternating in time so machine load
hits them alike, and each row cold from memory like a fresh model output; the load average
is printed with the numbers. `--smoke` runs 5 rows and checks the numbers are sane.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from _smoke import SmokeCheck

from qwen_mtp_desktop.core.decoding.method import Sampling
from qwen_mtp_desktop.core.decoding.sampling import (
    Distribution,
    PenaltyHistory,
    make_generator,
    process_logits,
    sample_draft,
    verify_drafts,
)

QWEN = Sampling(temperature=0.7, top_p=0.8, top_k=20)
THINKING = Sampling(temperature=0.6, top_p=0.95, top_k=20)
SETTINGS = {
    "greedy": Sampling(),
    "greedy, presence 1.5": Sampling(presence_penalty=1.5),
    "T 0.7, top-p 0.8, top-k 20": QWEN,
    "T 0.6, top-p 0.95, top-k 20": THINKING,
    "T 0.7, top-p 0.8, top-k 20, presence 1.5": Sampling(
        temperature=0.7, top_p=0.8, top_k=20, presence_penalty=1.5
    ),
    "T 1, top-p 0.95 (no top-k)": Sampling(temperature=1.0, top_p=0.95),
    "T 1, min-p 0.05 (no top-k)": Sampling(temperature=1.0, min_p=0.05),
    "T 1, untruncated": Sampling(temperature=1.0),
}


def language_model_rows(count: int, vocab: int, frequent: int, seed: int) -> list[np.ndarray]:
    """A normal bulk (sd 2) and five likely tokens 8-20 above it (confident rows and flat
    ones) among the `frequent` lowest ids (byte-level BPE gives frequent tokens low ids:
    the draft vocabulary)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        row = (rng.standard_normal(vocab) * 2).astype(np.float32)
        row[rng.integers(0, frequent, 5)] += rng.uniform(8, 20, 5).astype(np.float32)
        rows.append(row)
    return rows


def per_row(rows: list[np.ndarray], history: PenaltyHistory) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    kept: dict[str, list[int]] = {name: [] for name in SETTINGS}
    names = list(SETTINGS)
    # Pass p gives row i to setting (i + p) mod n: every setting sees every row once, the
    # settings alternate in time (machine load hits them alike), and each row comes cold
    # from memory (the rows together are far larger than the caches), as a fresh model
    # output would.
    for shift in range(len(names)):
        for index, row in enumerate(rows):
            name = names[(index + shift) % len(names)]
            began = time.perf_counter()
            distribution = process_logits(row, SETTINGS[name], history)
            times[name].append((time.perf_counter() - began) * 1e3)
            kept[name].append(len(distribution))
    return {
        name: {
            "median_ms": statistics.median(values),
            "p90_ms": float(np.percentile(values, 90)),
            "kept": statistics.median(kept[name]),
        }
        for name, values in times.items()
    }


def speculative_step(
    targets: list[np.ndarray],
    drafts: list[np.ndarray],
    draft_ids: np.ndarray,
    history: PenaltyHistory,
    depth: int,
    repeats: int,
) -> dict[str, float]:
    """ms per step: `depth` drafts sampled from draft rows, then verification (target rows
    processed as far as the first rejection, or all k + 1)."""
    rng = make_generator(5)
    times = []
    accepted_total = 0
    for repeat in range(repeats):
        began = time.perf_counter()
        tokens: list[int] = []
        qs = []
        for index in range(depth):
            row = drafts[(repeat + index) % len(drafts)]
            token, q = sample_draft(row, QWEN, rng, history, tokens, ids=draft_ids)
            tokens.append(token)
            qs.append(q)

        def target(index: int, offset: int = repeat, drafted: list[int] = tokens) -> Distribution:
            row = targets[(offset + index) % len(targets)]
            return process_logits(row, QWEN, history, drafted[:index])

        verdict = verify_drafts(tokens, qs, target, rng)
        times.append((time.perf_counter() - began) * 1e3)
        accepted_total += verdict.accepted
    return {
        "median_ms": statistics.median(times),
        "p90_ms": float(np.percentile(times, 90)),
        "accepted_per_step": accepted_total / repeats,
    }


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=at_least(1), default=248_320)
    parser.add_argument("--draft-vocab", type=at_least(1), default=32_768)
    parser.add_argument("--rows", type=at_least(1), default=200)
    parser.add_argument("--history", type=at_least(0), default=4000)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rows = 5
    if args.draft_vocab > args.vocab:
        print("--draft-vocab must be at most --vocab", file=sys.stderr)
        return 2

    rng = np.random.default_rng(0)
    history = PenaltyHistory(args.vocab, rng.integers(0, args.vocab, args.history // 2))
    history.extend(rng.integers(0, args.vocab, args.history - args.history // 2).tolist())
    rows = language_model_rows(args.rows, args.vocab, args.draft_vocab, seed=1)
    # The draft head sees the target's row over its vocabulary, plus its own error.
    draft_ids = np.arange(args.draft_vocab, dtype=np.int64)
    drafts = [
        row[: args.draft_vocab] + rng.normal(0, 1, args.draft_vocab).astype(np.float32)
        for row in rows
    ]
    results = {
        "vocab": args.vocab,
        "rows": args.rows,
        "history_tokens": args.history,
        "load_average": os.getloadavg()[0],
        "per_row": per_row(rows, history),
        "step": {
            str(depth): speculative_step(rows, drafts, draft_ids, history, depth, args.rows)
            for depth in (1, 3)
        },
    }
    if args.json:
        print(json.dumps(results, indent=2))
    print(
        f"process_logits per row, vocabulary {args.vocab:,}, {args.rows} rows, history of "
        f"{args.history:,} tokens (load average {results['load_average']:.1f}, "
        f"{os.cpu_count()} CPUs):"
    )
    for name, row in results["per_row"].items():
        print(
            f"  {name:44s} {row['median_ms']:.3f} ms/row median, {row['p90_ms']:.3f} ms p90 "
            f"(kept {row['kept']:g})"
        )
    for depth, step in results["step"].items():
        print(
            f"speculative step at depth {depth} (T 0.7, top-p 0.8, top-k 20, draft vocabulary "
            f"{args.draft_vocab:,}): {step['median_ms']:.3f} ms median, {step['p90_ms']:.3f} "
            f"ms p90, {step['accepted_per_step']:.2f} drafts accepted per step"
        )
    if not args.smoke:
        return 0
    check = SmokeCheck("sampling_cost.py")
    check.require(set(results["per_row"]) == set(SETTINGS), "a setting has no numbers")
    for name, row in results["per_row"].items():
        check.positive(f"{name}: median", row["median_ms"])
        check.positive(f"{name}: kept", row["kept"])
    check.require(results["per_row"]["greedy"]["kept"] == 1, "greedy kept more than 1 token")
    for depth, step in results["step"].items():
        check.positive(f"depth {depth}: median", step["median_ms"])
        check.require(
            0 <= step["accepted_per_step"] <= int(depth), f"depth {depth}: accepted out of range"
        )
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
