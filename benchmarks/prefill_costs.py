"""What a turn's prefill costs on each decoding path, and what switching paths costs: the
numbers Auto (core.auto.policy) prices long prompts, image turns and method switches with.

Each path the chat can run a turn on is measured at several prompt lengths, interleaved in a
rotating order (this machine's speed drifts), with a few new tokens so the time to first token
is the prefill:

- `MTP (app)`, `plain (app)` and `lookup (app)`: the app's own decoder (core.decoding.decoder),
  text turns;
- `MTP (genai, image)` and `plain (genai, image)`: openvino-genai's MTP and plain pipelines,
  which image turns run on (the image adds its own tokens to the prompt).

Per path it prints a least-squares line, time to first token = a + b x prompt tokens, and the
switch costs: loading a pipeline on its first turn (the time its first request took beyond a
warm one), and the time to first token of a request right after another path ran against one
right after the same path ran. Every request here prefills its whole prompt cold (the state the
app's decoder keeps between turns is dropped first: Auto prices the tokens a turn prefills, and
benchmarks/prefill_speed.py measures what reuse saves), so switching loses no cache; this checks
that.

    .venv/bin/python benchmarks/prefill_costs.py                   # demo model + MoE fixture
    .venv/bin/python benchmarks/prefill_costs.py MODEL_DIR --lengths 64,512,2048
    .venv/bin/python benchmarks/prefill_costs.py --smoke           # demo model, short; checks
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod  # noqa: E402
from qwen_mtp_desktop.core.engine import (  # noqa: E402
    Engine,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.errors import UserFacingError  # noqa: E402

TEXT = (
    "The committee met on Tuesday to review the budget. Each department presented its plan, "
    "and the members asked about travel, equipment and training. "
)
PATHS = ("MTP (app)", "plain (app)", "lookup (app)", "MTP (genai, image)", "plain (genai, image)")


@dataclass
class Measured:
    #: path -> [(prompt tokens, ttft seconds, previous path)]
    ttft: dict[str, list[tuple[int, float, str]]] = field(default_factory=dict)
    #: path -> (first request's ttft, warm ttft at the same prompt)
    first_use: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: The model's own load time (Engine.load), what Auto scales pipeline loads from.
    model_load_s: float = 0.0
    #: path -> what decoded it ("app": the app's decoder, "genai": openvino-genai)
    decoder: dict[str, str] = field(default_factory=dict)


def settings_for(path: str) -> GenerationSettings:
    if path.startswith("plain"):
        return GenerationSettings(max_new_tokens=2, method=PLAIN)
    if path.startswith("lookup"):
        return GenerationSettings(max_new_tokens=2, method=DecodingMethod.lookup(4))
    return GenerationSettings(max_new_tokens=2, method=DecodingMethod.mtp(1))


def messages_for(path: str, words: int, image: Path) -> list[Message]:
    text = (TEXT * (words // 20 + 1)).split()[:words]
    content = " ".join(text) + "\nSummarise this."
    return [Message("user", content, image=image if "image" in path else None)]


def ttft(engine: Engine, path: str, words: int, image: Path, out: Measured) -> tuple[int, float]:
    engine.drop_states()
    generation = engine.generate(messages_for(path, words, image), settings_for(path))
    stats = generation.run_to_end()
    out.decoder[path] = stats.decoder
    return stats.prompt_tokens, stats.ttft_s


def measure(model: Path, lengths: list[int], rounds: int, image: Path) -> Measured:
    out = Measured()
    engine = Engine()
    try:
        out.model_load_s = engine.load(model, LoadOptions(mtp=True)).load_s
        # First use of each path: its pipeline loads (and warms) inside the request.
        for path in PATHS:
            first = ttft(engine, path, lengths[0], image, out)[1]
            warm = min(ttft(engine, path, lengths[0], image, out)[1] for _ in range(2))
            out.first_use[path] = (first, warm)
        previous = PATHS[-1]
        for round_index in range(rounds):
            for length_index, words in enumerate(lengths):
                shift = (round_index + length_index) % len(PATHS)
                # Each path twice in a row, then the next: a same-path and a switched request.
                for path in PATHS[shift:] + PATHS[:shift]:
                    for _ in range(2):
                        tokens, seconds = ttft(engine, path, words, image, out)
                        out.ttft.setdefault(path, []).append((tokens, seconds, previous))
                        previous = path
    finally:
        engine.unload()
    return out


def fit(points: list[tuple[int, float, str]]) -> tuple[float, float]:
    """(a seconds, b seconds per token) of the least-squares line ttft = a + b x tokens, over
    the median per prompt length (a slow outlier on a shared machine moves a median less)."""
    by_tokens: dict[int, list[float]] = {}
    for tokens, seconds, _previous in points:
        by_tokens.setdefault(tokens, []).append(seconds)
    xs = sorted(by_tokens)
    ys = [statistics.median(by_tokens[x]) for x in xs]
    if len(xs) < 2:
        return ys[0], 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    return mean_y - slope * mean_x, slope


def switch_ratio(points: list[tuple[int, float, str]], path: str) -> tuple[float, float]:
    """Median of ttft after another path over ttft after the same path, per prompt length."""
    ratios = []
    for tokens in {p[0] for p in points}:
        same = [s for t, s, prev in points if t == tokens and prev == path]
        other = [s for t, s, prev in points if t == tokens and prev != path]
        if same and other:
            ratios.append(statistics.median(other) / statistics.median(same))
    return (statistics.median(ratios) if ratios else float("nan")), float(len(ratios))


def report(name: str, measured: Measured) -> dict[str, Any]:
    print(f"\n## {name}")
    print("| path | prefill a (ms) | per 1k prompt tokens (ms) | first request / warm | "
          "ttft after a switch / after the same path |")  # fmt: skip
    print("|---|---|---|---|---|")
    rows: dict[str, Any] = {}
    for path in PATHS:
        points = measured.ttft.get(path, [])
        a, b = fit(points)
        first, warm = measured.first_use[path]
        ratio, _count = switch_ratio(points, path)
        rows[path] = {"a": a, "b": b, "first": first, "warm": warm, "switch": ratio}
        print(
            f"| {path} [{measured.decoder.get(path, '?')}] | {a * 1000:.1f} | "
            f"{b * 1e6:.1f} | {first * 1000:.0f} ms / {warm * 1000:.1f} ms | {ratio:.2f} |"
        )
    print(f"{name}: model load {measured.model_load_s:.2f} s")
    for path in PATHS:
        first, warm = measured.first_use[path]
        share = (first - warm) / measured.model_load_s if measured.model_load_s else 0.0
        print(f"{name}: {path} first use costs {share:.2f}x the model's load time")
    app = rows["MTP (app)"]
    for path in PATHS:
        row = rows[path]
        if row is app:
            continue
        if row["b"] <= 0 or app["b"] <= 0:  # the prompt lengths differ too little for the noise
            print(f"{name}: {path} prefill per token: too small to tell from the noise here")
            continue
        print(f"{name}: {path} prefill per token = {row['b'] / app['b']:.2f}x MTP (app)")
    return rows


def check_smoke(results: dict[str, dict[str, Any]]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("prefill_costs.py")
    for name, rows in results.items():
        check.require(set(rows) == set(PATHS), f"{name}: paths {sorted(rows)}")
        for path, row in rows.items():
            check.positive(f"{name} {path} first request", row["first"])
            check.positive(f"{name} {path} warm request", row["warm"])
            check.positive(f"{name} {path} switch ratio", row["switch"])
    return check.finish()


def write_image(folder: Path) -> Path:
    from PIL import Image

    path = folder / "picture.png"
    Image.new("RGB", (64, 64), (200, 120, 40)).save(path)
    return path


def main(argv: list[str] | None = None) -> int:
    from _args import at_least, whole_numbers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", type=Path, nargs="*", help="exported model folders")
    parser.add_argument(
        "--lengths", type=whole_numbers(), default="32,256,1024", help="prompt lengths in words"
    )
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--smoke", action="store_true", help="demo model, short; checks")
    args = parser.parse_args(argv)
    lengths = args.lengths
    from qwen_mtp_desktop.core.files.paths import demo_model_dir

    models: list[tuple[str, Path]] = [(p.name, p) for p in args.models]
    if args.smoke:
        # lengths far apart: on the demo model a token's prefill is microseconds
        models, lengths, rounds = [("demo", demo_model_dir())], [16, 512], 1
    else:
        rounds = args.rounds
        if not models:
            from tests.models import cached_checkpoint, cached_export

            models = [
                ("demo", demo_model_dir()),
                ("MoE fixture", cached_export(cached_checkpoint(moe=True), "fp16")),
            ]
    for _name, path in models:
        if not (path / "openvino_mtp_model.xml").is_file():
            print(f"error: {path} is not an exported model with an MTP head", file=sys.stderr)
            return 2
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        image = write_image(Path(tmp))
        for name, path in models:
            started = time.perf_counter()
            try:
                measured = measure(path, lengths, rounds, image)
            except UserFacingError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            results[name] = report(name, measured)
            print(f"({name}: {time.perf_counter() - started:.0f} s)")
    return check_smoke(results) if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
