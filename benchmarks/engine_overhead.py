"""Engine overhead, load times and memory across load/unload cycles.

    python benchmarks/engine_overhead.py [MODEL_DIR] [--rounds 5] [--tokens 200] [--cycles 10]
    python benchmarks/engine_overhead.py --smoke    # 1 round of 16 tokens, 2 cycles; checks

Prints, for MTP (n=1) and baseline decoding:
- decode tokens/s (exactly --tokens per run: end-of-text is ignored) through a bare
  openvino_genai loop (its continuous-batching pipeline, not the path the engine takes), through
  `Engine.generate()` in this process, and through the app's EngineProcess (the engine host
  process, as the window uses it) with a Qt receiver, interleaved round by round on the same
  prompt and settings; the ratio process / engine is what running the engine in its own process
  costs (target: >= 0.97);
- the time from the engine process sending a batch of chunks to the window's thread receiving
  it (median and 95th percentile), and the resident memory of both processes with a model loaded;
- model load time cold (empty compile cache) and cached;
- process RSS before and after --cycles load/unload cycles.
Speed on this VM drifts between runs, so modes are interleaved and ratios are taken per round.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qwen_mtp_desktop.core.system.privacy import block_telemetry

block_telemetry()

import psutil  # noqa: E402

from qwen_mtp_desktop.core.engine import (  # noqa: E402
    Engine,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.files.paths import demo_model_dir  # noqa: E402

PROMPT = [Message("user", "Count from 1 to 300.")]


def bare_runner(model_dir: Path, mtp: bool, prompt: str, tokens: int) -> Callable[[], float]:
    """The same generation through openvino_genai directly, timed the same way."""
    import openvino_genai

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.enable_prefix_caching = False
    kwargs: dict[str, Any] = {"scheduler_config": scheduler}
    if mtp:
        kwargs["draft_model"] = openvino_genai.draft_model(str(model_dir), "CPU", mtp_mode=True)
    pipeline = openvino_genai.VLMPipeline(str(model_dir), "CPU", **kwargs)
    config = pipeline.get_generation_config()
    config.max_new_tokens = tokens
    config.apply_chat_template = False
    config.ignore_eos = True
    if mtp:
        config.num_assistant_tokens = 1

    def run() -> float:
        times: list[float] = []
        counts: list[int] = []
        started = time.perf_counter()

        class Streamer(openvino_genai.StreamerBase):  # type: ignore[misc]
            def write(self, token: Any) -> Any:
                counts.append(1 if isinstance(token, int) else len(token))
                times.append(time.perf_counter() - started)
                return openvino_genai.StreamingStatus.RUNNING

            def end(self) -> None:
                pass

        pipeline.generate(prompt, generation_config=config, streamer=Streamer())
        return (sum(counts) - counts[0]) / (times[-1] - times[0])

    return run


def engine_runner(model_dir: Path, mtp: bool, tokens: int) -> Any:
    engine = Engine()
    engine.load(model_dir, LoadOptions(mtp=mtp))
    settings = GenerationSettings(max_new_tokens=tokens, ignore_eos=True)

    def run() -> float:
        stats = engine.generate(PROMPT, settings).run_to_end()
        return stats.decode_tokens_per_s

    return engine, run


def process_runner(model_dir: Path, mtp: bool, tokens: int) -> Any:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    from qwen_mtp_desktop.workers.engine_process import EngineProcess

    app = QCoreApplication.instance() or QCoreApplication([])
    process = EngineProcess()
    loop = QEventLoop()
    process.loaded.connect(lambda _m: loop.quit())
    process.load(model_dir, LoadOptions(mtp=mtp))
    loop.exec()
    settings = GenerationSettings(max_new_tokens=tokens, ignore_eos=True)
    received: list[int] = []
    process.chunks.connect(lambda _rid, chunks: received.append(len(chunks)))

    def run() -> float:
        result: list[float] = []
        done = QEventLoop()

        def finished(_rid: int, stats: Any) -> None:
            result.append(stats.decode_tokens_per_s)
            done.quit()

        process.finished.connect(finished)
        process.start_generation(PROMPT, settings)
        done.exec()
        process.finished.disconnect(finished)
        return result[0]

    return (app, process), run


def check_smoke(results: dict[str, Any]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("engine_overhead.py")
    for label in ("MTP n=1", "plain"):
        rates = results.get(label, {})
        check.require(
            sorted(rates) == ["bare", "engine", "process"], f"{label}: rates of {sorted(rates)}"
        )
        for name, values in rates.items():
            check.require(bool(values), f"{label} {name}: no runs")
            for value in values:
                check.positive(f"{label} {name} tok/s", value)
        check.require(bool(results.get(label + " hop")), f"{label}: no chunk hop times")
        check.require(bool(results.get(label + " rss")), f"{label}: no process memory")
    check.positive("cold load s", results.get("cold_load_s"))
    check.positive("cached load s", results.get("cached_load_s"))
    check.positive("RSS before cycles", results.get("rss_before"))
    check.positive("RSS after cycles", results.get("rss_after"))
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", nargs="?", type=Path, default=demo_model_dir())
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument("--tokens", type=at_least(1), default=200)
    parser.add_argument(
        "--cycles", type=at_least(1), default=10, help="load/generate/unload cycles"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="1 round of 16 tokens, 2 cycles, then check every number is there; exit 1 if not",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.tokens, args.cycles = 1, 16, 2
    model_dir: Path = args.model_dir
    if not (model_dir / "openvino_language_model.xml").is_file():
        parser.error(f"{model_dir} is not an exported model folder")
    results: dict[str, Any] = {}

    probe = Engine()
    probe.load(model_dir, LoadOptions(mtp=False))
    prompt = probe.render_prompt(PROMPT)
    probe.unload()

    print(f"model: {model_dir}\ntokens per run: {args.tokens}, rounds: {args.rounds}\n")
    for mtp in (True, False):
        label = "MTP n=1" if mtp else "plain"
        bare = bare_runner(model_dir, mtp, prompt, args.tokens)
        engine, through_engine = engine_runner(model_dir, mtp, args.tokens)
        qt, through_process = process_runner(model_dir, mtp, args.tokens)
        for run in (bare, through_engine, through_process):  # warm-up
            run()
        qt[1].hop_s.clear()
        ratios_engine: list[float] = []
        ratios_process: list[float] = []
        rates: dict[str, list[float]] = {"bare": [], "engine": [], "process": []}
        for _ in range(args.rounds):
            b, e, p = bare(), through_engine(), through_process()
            rates["bare"].append(b)
            rates["engine"].append(e)
            rates["process"].append(p)
            ratios_engine.append(e / b)
            ratios_process.append(p / e)
        results[label] = rates
        print(f"{label}:")
        for name, values in rates.items():
            print(
                f"  {name:<7} median {statistics.median(values):8.1f} tok/s "
                f"(min {min(values):.1f}, max {max(values):.1f})"
            )
        hops = sorted(qt[1].hop_s)
        hop_median, hop_p95 = hops[len(hops) // 2], hops[int(len(hops) * 0.95)]
        window_rss = psutil.Process().memory_info().rss
        host_rss = psutil.Process(qt[1].pid).memory_info().rss
        results[label + " hop"] = (hop_median, hop_p95)
        results[label + " rss"] = (window_rss, host_rss)
        print(f"  engine / bare:            median ratio {statistics.median(ratios_engine):.3f}")
        print(f"  engine process / engine:  median ratio {statistics.median(ratios_process):.3f}")
        print(
            f"  chunk batch hop, engine process -> window: median {hop_median * 1000:.2f} ms, "
            f"95th percentile {hop_p95 * 1000:.2f} ms ({len(hops)} batches)"
        )
        print(
            f"  RSS with the model loaded: this process {window_rss / 2**20:.0f} MiB "
            f"(holds an in-process engine too), engine process {host_rss / 2**20:.0f} MiB\n"
        )
        engine.unload()
        qt[1].shutdown()

    with tempfile.TemporaryDirectory() as cache:
        cold_engine = Engine()
        cold = cold_engine.load(model_dir, LoadOptions(cache_dir=Path(cache))).load_s
        cold_engine.unload()
        warm_engine = Engine()
        warm = warm_engine.load(model_dir, LoadOptions(cache_dir=Path(cache))).load_s
        warm_engine.unload()
    results.update(cold_load_s=cold, cached_load_s=warm)
    print(f"load time (MTP): cold {cold:.2f} s, with compile cache {warm:.2f} s\n")

    process = psutil.Process()
    gc.collect()
    engine = Engine()
    engine.load(model_dir)
    engine.generate(PROMPT, GenerationSettings(max_new_tokens=20)).run_to_end()
    engine.unload()
    gc.collect()
    before = process.memory_info().rss
    for _ in range(args.cycles):
        engine.load(model_dir)
        engine.generate(PROMPT, GenerationSettings(max_new_tokens=20)).run_to_end()
        engine.unload()
        gc.collect()
    after = process.memory_info().rss
    results.update(rss_before=before, rss_after=after)
    print(
        f"RSS across {args.cycles} load/generate/unload cycles: {before / 2**20:.1f} MiB -> "
        f"{after / 2**20:.1f} MiB ({(after - before) / 2**20:+.1f} MiB)"
    )
    return check_smoke(results) if args.smoke else 0


if __name__ == "__main__":
    raise SystemExit(main())
