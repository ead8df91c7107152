"""Continuation prefill: what a follow-up's new tokens cost after a kept conversation, on the
stateful target graph against the explicit-cache continuation graph (core.decoding.continuation),
and against prefilling those new tokens alone with nothing kept (the bound "a turn pays only for
its new tokens" aims at).

Every measurement continues the same kept prefix (prefilled once per length, then resumed from
its snapshot, so only the new part is timed) with fresh random token ids; the cache is
compacted before each timed call so neither path pays for hidden entries. Configurations are
interleaved per round because this machine's speed drifts; ratios are per round.

    .venv/bin/python benchmarks/continuation_prefill.py MODEL_DIR [--kept 2000,6000]
        [--new 32,128,512] [--rounds 2]
    .venv/bin/python benchmarks/continuation_prefill.py --smoke      # demo model; checks
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import psutil  # noqa: E402
from _args import at_least, whole_numbers  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder  # noqa: E402
from qwen_mtp_desktop.core.decoding.method import PLAIN  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"
PATHS = ("stateful", "continuation", "alone")


def token_ids(seed: int, count: int) -> list[int]:
    import numpy as np

    return np.random.default_rng(seed).integers(300, 5000, count).tolist()


def attention_flop_per_pair(model: Path) -> float:
    """FLOP of one query attending to one kept key across the model's full-attention layers
    (scores and the weighted sum of values: 2 multiply-adds per head dimension per head)."""
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    text = config.get("text_config", config)
    layers = sum(1 for kind in text["layer_types"] if kind == "full_attention")
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    return 2.0 * 2 * layers * text["num_attention_heads"] * head_dim


def first_token(decoder: AppDecoder, ids: list[int]) -> None:
    for _ in decoder.decode(ids, method=PLAIN, max_new_tokens=1, stop_ids=frozenset()):
        pass


def measure(model: Path, kept: list[int], new: list[int], rounds: int) -> dict[tuple, list]:
    """{(kept, new, path): [seconds per round]}."""
    keeper = AppDecoder(model, "CPU", mtp=False)
    graph = keeper.target.continuation
    if graph is None:
        raise SystemExit("this model/device has no continuation graph")
    alone = AppDecoder(model, "CPU", mtp=False, cache_budget=0)
    process = psutil.Process()
    times: dict[tuple, list] = {}
    seed = 1000
    for kept_len in kept:
        head = token_ids(kept_len, kept_len)
        keeper.target.continuation = None
        keeper.logits_after(head)  # kept from here on; each measurement resumes after it
        before = process.memory_info().rss
        keeper.target.continuation = graph  # compile it (timed apart) before measuring
        first_token(keeper, head + token_ids(kept_len + 1, max(new)))
        if kept_len == kept[0]:
            times[("memory", 0, "continuation")] = [(process.memory_info().rss - before) / 2**20]
        for round_ in range(rounds):
            for new_len in new:
                order = PATHS[round_ % 3 :] + PATHS[: round_ % 3]
                for path in order:
                    seed += 1
                    tail = token_ids(seed, new_len)
                    if path == "alone":
                        alone.drop_states()
                        began = time.perf_counter()
                        first_token(alone, tail)
                    else:
                        keeper.target.continuation = graph if path == "continuation" else None
                        keeper.logits_after(head)  # back to the kept prefix (no model call)
                        keeper.target.kv.compact()
                        began = time.perf_counter()
                        first_token(keeper, head + tail)
                        if keeper.last_prefill is None or keeper.last_prefill.reused < kept_len:
                            raise SystemExit("the kept prefix was not reused")
                    times.setdefault((kept_len, new_len, path), []).append(
                        time.perf_counter() - began
                    )
    times[("compile", 0, "continuation")] = [graph.compile_s or 0.0]
    times[("copy share", 0, "continuation")] = [
        graph.copy_s / max(graph.copy_s + graph.infer_s, 1e-9)
    ]
    times[("calls", 0, "continuation")] = [float(graph.calls)]
    return times


def report(
    times: dict[tuple, list], kept: list[int], new: list[int], flop_per_pair: float
) -> list[dict[str, float]]:
    print(
        f"{'kept':>6} {'new':>5} | ms per new token: {'stateful':>9} {'continuation':>12} "
        f"{'alone':>7} | speed-up (median of rounds) | continuation / alone"
    )
    rows = []
    for kept_len in kept:
        for new_len in new:
            per = {p: times[(kept_len, new_len, p)] for p in PATHS}
            ms = {p: 1000 * statistics.median(v) / new_len for p, v in per.items()}
            speedup = statistics.median(
                s / c for s, c in zip(per["stateful"], per["continuation"], strict=True)
            )
            bound = statistics.median(
                c / a for c, a in zip(per["continuation"], per["alone"], strict=True)
            )
            print(
                f"{kept_len:>6} {new_len:>5} | {'':17} {ms['stateful']:>9.1f} "
                f"{ms['continuation']:>12.1f} {ms['alone']:>7.1f} | {speedup:>26.2f}x | "
                f"{bound:.2f}x"
            )
            rows.append({"kept": kept_len, "new": new_len, "speedup": speedup, **ms})
    # What a follow-up cannot avoid: its new tokens attend to every kept one. The time the
    # continuation takes beyond the same tokens alone, against that work.
    print(
        f"{'kept':>6} {'new':>5} | attention over the kept tokens | time beyond the new "
        "tokens alone | rate"
    )
    for kept_len in kept:
        for new_len in new:
            extra = statistics.median(
                c - a
                for c, a in zip(
                    times[(kept_len, new_len, "continuation")],
                    times[(kept_len, new_len, "alone")],
                    strict=True,
                )
            )
            gflop = flop_per_pair * kept_len * new_len / 1e9
            rate = f"{gflop / extra:.0f} GFLOP/s" if extra > 0 else "not measurable"
            print(
                f"{kept_len:>6} {new_len:>5} | {gflop:24.2f} GFLOP | {1000 * extra:25.0f} ms "
                f"| {rate}"
            )
    print(
        f"continuation graph compiled in {times[('compile', 0, 'continuation')][0]:.1f} s; "
        f"process memory {times[('memory', 0, 'continuation')][0]:+.0f} MB after its first call "
        f"(at {kept[0]} kept tokens); copying caches out and back took "
        f"{100 * times[('copy share', 0, 'continuation')][0]:.0f} % of its calls' time"
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, nargs="?")
    parser.add_argument("--kept", type=whole_numbers(), default="2000,6000")
    parser.add_argument("--new", type=whole_numbers(), default="32,128,512")
    parser.add_argument("--rounds", type=at_least(1), default=2)
    parser.add_argument("--smoke", action="store_true", help="demo model, tiny sizes; checks")
    args = parser.parse_args(argv)
    if args.smoke:
        kept, new, rounds, model = [600], [40], 1, DEMO
    else:
        if args.model is None:
            parser.error("MODEL_DIR is required (or --smoke)")
        kept, new, rounds, model = args.kept, args.new, args.rounds, args.model
    times = measure(model, kept, new, rounds)
    flop_per_pair = attention_flop_per_pair(model)
    rows = report(times, kept, new, flop_per_pair)
    if not args.smoke:
        return 0
    check = SmokeCheck("continuation_prefill.py")
    check.require(len(rows) == len(kept) * len(new), f"{len(rows)} rows")
    for row in rows:
        for path in PATHS:
            check.positive(f"{path} ms per token", row[path])
    check.positive("continuation calls", times[("calls", 0, "continuation")][0])
    check.positive("attention FLOP per query and kept key", flop_per_pair)
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
