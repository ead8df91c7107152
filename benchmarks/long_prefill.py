"""What a long prompt's prefill costs in time and memory on the app's decoder (issue 41 item 4):
peak resident memory above the loaded model, what stays resident afterwards, and prompt tokens
per second, per prompt length and prefill chunk size.

Every configuration runs in a child process of its own (a process's buffers only grow, so a
shared one would carry the previous run's peak): the child loads the model as the chat does
(MTP head on), answers a short warm-up prompt, then prefills a prompt of the given length and
decodes a few tokens with MTP n=1 (so the head's catch-up on the prompt is counted too), while
a thread samples its resident memory every 20 ms. Configurations run in a rotating order, round
by round (this machine's speed drifts); the tokens/s column compares with the shortest length.

    .venv/bin/python benchmarks/long_prefill.py MODEL_DIR --lengths 1024,4096,16384,32768
        [--chunks 0,2048] [--rounds 1]
    .venv/bin/python benchmarks/long_prefill.py --smoke     # demo model, short; checks

`--chunks 0` is the decoder's own choice (its `prefill_chunk` left as the engine sets it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"
MB = 1000**2
TEXT = (
    "The committee met on Tuesday to review the budget. Each department presented its plan, "
    "and the members asked about travel, equipment and training. "
)


def prompt_ids(model: Path, length: int) -> list[int]:
    """`length` token ids of ordinary English (repeated prose), tokenized by the model."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(model))
    encoded = tokenizer.encode(TEXT * 64, add_special_tokens=False)
    block = [int(i) for i in encoded.input_ids.data[0]]
    return (block * (length // len(block) + 1))[:length]


class PeakSampler:
    """This process's resident memory, sampled on a thread: the most seen while running."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss(self) -> int:
        return int(self._process.memory_info().rss)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            self._stop.wait(0.02)

    def __enter__(self) -> PeakSampler:
        self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())


def child(model: Path, length: int, chunk: int, new_tokens: int) -> dict[str, Any]:
    """One configuration, measured in this (fresh) process."""
    from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
    from qwen_mtp_desktop.core.decoding.method import DecodingMethod

    decoder = AppDecoder(model, "CPU", {}, mtp=True)
    if chunk:
        decoder.prefill_chunk = chunk
    method = DecodingMethod.mtp(1)
    ids = prompt_ids(model, length + 64)
    # Warm-up on other tokens: the first calls allocate what every turn needs.
    for _ in decoder.decode(ids[-64:], method=method, max_new_tokens=4, stop_ids=frozenset()):
        pass
    decoder.drop_states()
    sampler = PeakSampler()
    before = sampler.rss()
    first = None
    with sampler:
        began = time.perf_counter()
        for _ in decoder.decode(
            ids[:length], method=method, max_new_tokens=new_tokens, stop_ids=frozenset()
        ):
            if first is None:
                first = time.perf_counter() - began
        total = time.perf_counter() - began
    assert first is not None
    return {
        "length": length,
        "chunk": chunk,
        "ttft_s": first,
        "total_s": total,
        "tokens_per_s": length / first,
        "before_mb": before / MB,
        "peak_above_mb": (sampler.peak - before) / MB,
        "after_above_mb": (sampler.rss() - before) / MB,
    }


def run_child(model: Path, length: int, chunk: int, new_tokens: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(model), str(length), str(chunk)]
    command += ["--new-tokens", str(new_tokens)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"length": length, "chunk": chunk, "error": " / ".join(tail) or "no output"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(
    model: Path, lengths: list[int], chunks: list[int], rounds: int, new_tokens: int
) -> dict[tuple[int, int], list[dict[str, Any]]]:
    configs = [(length, chunk) for length in lengths for chunk in chunks]
    results: dict[tuple[int, int], list[dict[str, Any]]] = {c: [] for c in configs}
    for round_index in range(rounds):
        shift = round_index % len(configs)
        for length, chunk in configs[shift:] + configs[:shift]:
            row = run_child(model, length, chunk, new_tokens)
            results[(length, chunk)].append(row)
            print(json.dumps(row), flush=True)
    return results


def summarise(results: dict[tuple[int, int], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Median per configuration; tokens/s also as a share of the shortest length's (same chunk)."""
    rows: list[dict[str, Any]] = []
    for (length, chunk), runs in sorted(results.items()):
        good = [r for r in runs if "error" not in r]
        if not good:
            rows.append({"length": length, "chunk": chunk, "error": runs[0]["error"]})
            continue
        row: dict[str, Any] = {"length": length, "chunk": chunk}
        for key in ("ttft_s", "tokens_per_s", "before_mb", "peak_above_mb", "after_above_mb"):
            row[key] = statistics.median(r[key] for r in good)
        rows.append(row)
    shortest = min((r["length"] for r in rows), default=0)
    base = {r["chunk"]: r.get("tokens_per_s") for r in rows if r["length"] == shortest}
    for row in rows:
        if "error" not in row and base.get(row["chunk"]):
            row["speed_share"] = row["tokens_per_s"] / base[row["chunk"]]
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'prompt':>8} {'chunk':>6} {'TTFT s':>8} {'tok/s':>7} {'x short':>7} "
        f"{'model MB':>9} {'peak +MB':>9} {'kept +MB':>9}"
    )
    for row in rows:
        chunk = row["chunk"] or "auto"
        if "error" in row:
            print(f"{row['length']:>8,} {chunk:>6} failed: {row['error']}")
            continue
        print(
            f"{row['length']:>8,} {chunk:>6} {row['ttft_s']:>8.2f} {row['tokens_per_s']:>7.1f} "
            f"{row.get('speed_share', 0):>7.2f} {row['before_mb']:>9,.0f} "
            f"{row['peak_above_mb']:>9,.0f} {row['after_above_mb']:>9,.0f}"
        )


def check_smoke(rows: list[dict[str, Any]], configs: int) -> int:
    check = SmokeCheck("long_prefill.py")
    check.require(len(rows) == configs, f"{len(rows)} rows for {configs} configurations")
    for row in rows:
        where = f"{row['length']} tokens, chunk {row['chunk']}"
        check.require("error" not in row, f"{where}: {row.get('error')}")
        if "error" in row:
            continue
        for key in ("ttft_s", "tokens_per_s", "before_mb"):
            check.positive(f"{where}: {key}", row[key])
        check.require(row["peak_above_mb"] >= row["after_above_mb"] - 1, f"{where}: peak < kept")
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, default=DEMO)
    parser.add_argument("--lengths", type=whole_numbers(), default="1024,4096,16384")
    parser.add_argument("--chunks", type=whole_numbers(0), default="0")
    parser.add_argument("--rounds", type=at_least(1), default=1)
    parser.add_argument("--new-tokens", type=at_least(2), default=4)
    parser.add_argument("--smoke", action="store_true", help="demo model, short; checks")
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "LENGTH", "CHUNK"))
    args = parser.parse_args(argv)
    if args.child:
        model, length, chunk = Path(args.child[0]), int(args.child[1]), int(args.child[2])
        print(json.dumps(child(model, length, chunk, args.new_tokens)))
        return 0
    if args.smoke:
        args.model, args.lengths, args.chunks, args.rounds = DEMO, [64, 256], [0, 96], 1
    results = measure(args.model, args.lengths, args.chunks, args.rounds, args.new_tokens)
    rows = summarise(results)
    print_table(rows)
    if args.smoke:
        return check_smoke(rows, len(args.lengths) * len(args.chunks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
