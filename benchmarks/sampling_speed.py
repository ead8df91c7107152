"""MTP's speed-up with sampling against its speed-up with greedy decoding (issue 26's speed target):
at temperature 0.7, top-p 0.8, top-k 20 (Qwen's recommendation without thinking), MTP sampling
at the best depth should keep >= 0.85x of the greedy speed-up at the same depth.

    .venv/bin/python benchmarks/sampling_speed.py MODEL_DIR [--depths 1,2,3] [--rounds 3]
                                                  [--prompts demo] [--max-new-tokens 96]
    .venv/bin/python benchmarks/sampling_speed.py --smoke     # the demo model, checks

Rows, for greedy and for sampled decoding each: plain decoding on both plain paths (the app's
decoder, and openvino-genai's stateful plain pipeline, `LoadOptions.plain_decoder="genai"`)
and MTP at each depth on the app's decoder. Every row runs every prompt once per round, rows
interleaved in a rotating order within each round so the machine's drift hits them alike;
answers run to `--max-new-tokens` (EOS ignored) with seeds fixed per round and prompt, so a
run is repeatable. A row's speed is its decode tokens over its decode seconds (prefill
excluded), summed over its turns; a speed-up is over the faster plain path of the same
decoding (greedy or sampled). Printed: each row's speed and acceptance, each depth's greedy
and sampled speed-up and their ratio, and the best depth's verdict; with the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _args import at_least, whole_numbers
from _smoke import SmokeCheck

from qwen_mtp_desktop.core.decoding.method import GREEDY, DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions
from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set

QWEN = Sampling(temperature=0.7, top_p=0.8, top_k=20)
TARGET_RATIO = 0.85
MODES = {"greedy": GREEDY, "sampled": QWEN}
PLAIN_PATHS = ("plain (app)", "plain (genai)")


@dataclass
class Row:
    """One decoding's totals over the run."""

    name: str
    mode: str
    method: DecodingMethod
    engine: str  # which engine runs it: "app" or "genai" (plain turns on genai's pipeline)
    tokens: int = 0
    seconds: float = 0.0
    drafted: int = 0
    accepted: int = 0

    @property
    def speed(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


def build_rows(depths: list[int]) -> list[Row]:
    rows = []
    for mode, sampling in MODES.items():
        rows.append(Row("plain (app)", mode, DecodingMethod.plain(sampling), "app"))
        rows.append(Row("plain (genai)", mode, DecodingMethod.plain(sampling), "genai"))
        for depth in depths:
            rows.append(Row(f"MTP n={depth}", mode, DecodingMethod.mtp(depth, sampling), "app"))
    return rows


def run(model: Path, depths: list[int], rounds: int, prompts: str, max_new: int) -> list[Row]:
    cases = load_prompt_set(prompts).prompts
    engines = {"app": Engine(), "genai": Engine()}
    engines["app"].load(model, LoadOptions())
    # Plain text turns on openvino-genai's stateful pipeline (the fastest plain path on
    # full-size models); this engine runs only those.
    engines["genai"].load(model, LoadOptions(plain_decoder="genai"))
    rows = build_rows(depths)
    for round_index in range(rounds + 1):
        order = rows[round_index % len(rows) :] + rows[: round_index % len(rows)]
        # Round 0 warms every path up on the first prompt and is not counted.
        for case_index, case in enumerate(cases if round_index else cases[:1]):
            for row in order:
                sampling = row.method.sampling
                if not sampling.greedy:
                    seed = round_index * 1000 + case_index
                    sampling = Sampling(**{**sampling.to_record(), "seed": seed})
                settings = GenerationSettings(
                    max_new_tokens=max_new,
                    method=row.method.with_sampling(sampling),
                    ignore_eos=True,
                )
                engine = engines[row.engine]
                engine.drop_states()  # every turn prefills cold, alike
                stats = engine.generate(list(case.messages), settings).run_to_end()
                if round_index == 0:
                    continue
                decode_tokens = stats.generated_tokens - (
                    stats.chunk_sizes[0] if stats.chunk_sizes else 0
                )
                row.tokens += decode_tokens
                row.seconds += stats.total_s - stats.ttft_s
                row.drafted += stats.drafted_tokens
                row.accepted += stats.accepted_tokens
        print(f"round {round_index}/{rounds} done", flush=True)
    for engine in engines.values():
        engine.unload()
    return rows


def report(rows: list[Row], depths: list[int]) -> dict[int, tuple[float, float, float]]:
    """Print the table; returns per depth (greedy speed-up, sampled speed-up, ratio)."""
    print(f"\n{'decoding':<16} {'mode':<8} {'tok/s':>8} {'accepted':>9} {'tokens':>7}")
    for row in rows:
        shown = f"{row.acceptance:.1%}" if row.acceptance is not None else "-"
        print(f"{row.name:<16} {row.mode:<8} {row.speed:>8.2f} {shown:>9} {row.tokens:>7}")
    by = {(row.name, row.mode): row for row in rows}
    plain = {}
    for mode in MODES:
        fastest = max((by[(path, mode)] for path in PLAIN_PATHS), key=lambda r: r.speed)
        plain[mode] = fastest.speed
        print(f"fastest plain path, {mode}: {fastest.name} at {fastest.speed:.2f} tok/s")
    results: dict[int, tuple[float, float, float]] = {}
    print(f"\n{'depth':<8} {'greedy speed-up':>16} {'sampled speed-up':>17} {'ratio':>7}")
    for depth in depths:
        greedy = by[(f"MTP n={depth}", "greedy")].speed / plain["greedy"]
        sampled = by[(f"MTP n={depth}", "sampled")].speed / plain["sampled"]
        ratio = sampled / greedy if greedy > 0 else 0.0
        results[depth] = (greedy, sampled, ratio)
        print(f"MTP n={depth:<4} {greedy:>15.2f}x {sampled:>16.2f}x {ratio:>7.2f}")
    best = max(depths, key=lambda d: results[d][1])
    greedy, sampled, ratio = results[best]
    verdict = "meets" if ratio >= TARGET_RATIO else "misses"
    print(
        f"best sampled depth: MTP n={best}, {sampled:.2f}x against greedy's {greedy:.2f}x "
        f"at that depth: ratio {ratio:.2f} ({verdict} the {TARGET_RATIO} target)"
    )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, help="an exported model with MTP head")
    parser.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3")
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--prompts", default="demo", help="a prompt set (name or JSON file)")
    parser.add_argument("--max-new-tokens", type=at_least(2), default=96)
    parser.add_argument("--smoke", action="store_true", help="demo model, 1 round, 12 tokens")
    args = parser.parse_args(argv)
    depths = sorted(set(args.depths))
    if args.smoke:
        from qwen_mtp_desktop.core.files.paths import demo_model_dir

        args.model = args.model or demo_model_dir()
        args.rounds, args.max_new_tokens = 1, 12
    if args.model is None or not (args.model / "openvino_mtp_model.xml").is_file():
        print(
            f"error: {args.model} is not an exported model folder with an MTP head",
            file=sys.stderr,
        )
        return 2
    load = os.getloadavg()
    print(f"{args.model}: load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"sampled: {QWEN.describe()}; {args.rounds} rounds, {args.max_new_tokens} tokens")
    rows = run(args.model, depths, args.rounds, args.prompts, args.max_new_tokens)
    results = report(rows, depths)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if not args.smoke:
        return 0
    check = SmokeCheck("sampling_speed.py")
    for row in rows:
        check.positive(f"{row.name} {row.mode} speed", row.speed)
        if row.method.uses_mtp_head:
            check.fraction(f"{row.name} {row.mode} acceptance", row.acceptance)
    for depth, values in results.items():
        for value in values:
            check.positive(f"MTP n={depth} speed-up or ratio", value)
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
