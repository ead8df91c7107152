"""Native crashes per decoding path: N load + generate cycles each, in child processes, under
CPU load (issue 29, item 18).

openvino-genai has open reports of freshly built pipelines that crash at their first generate
or accept no drafts on CPU (openvino.genai #4425, on 2026.3.1 with Eagle3; its reporter saw
both go away on 2026.4.0 over 50 instances), and the app saw a rare SIGSEGV under load. This
script counts, for every path a chat turn can take:

- `decoder`: the app's own decoder (core.decoding.decoder) through the Engine, MTP n=2, a text
  turn;
- `genai-plain`: openvino-genai's plain SDPA `VLMPipeline` (the Engine loaded without MTP and
  without the app's decoder);
- `genai-mtp`: openvino-genai's MTP `VLMPipeline` (continuous batching, the MTP head as draft
  model; the Engine with `app_decoder=False`);
- `lookup`: openvino-genai's prompt-lookup pipeline (the Engine without MTP and without the
  app's decoder, a lookup turn; with it, lookup turns run on the app's decoder);
- `vision`: a turn with an image (the Engine loaded for MTP; the image turn opens
  openvino-genai's MTP pipeline beside the app's decoder).

Each cycle builds a new Engine, loads the model, decodes one answer and unloads it. A child
process runs `--cycles-per-child` cycles (a crash ends the child; the next child carries on),
the paths take turns child by child so they see the same machine, and `--load-workers` busy
processes keep every core loaded meanwhile (or `--parallel N` children run at once, loading
each other). Loads use a compiled-model cache, as the app's chat does (the first load of each
path compiles it). Per path it reports cycles, crashes (by signal,
with the phase: load or generate), hangs, Python errors, MTP turns that accepted no draft,
answers that differ from the path's first answer, and median load / generate times.

    .venv/bin/python benchmarks/native_crashes.py [MODEL_DIR] [--cycles 1000] [--paths ...]
    .venv/bin/python benchmarks/native_crashes.py --smoke   # 2 cycles per path, one crash
                                                            # injected to prove detection
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

PATHS = ("decoder", "genai-plain", "genai-mtp", "lookup", "vision")
#: Paths whose turns draft with the MTP head: a turn there that accepts nothing is the other
#: symptom #4425 describes (the demo model accepts nearly every draft on this prompt).
MTP_PATHS = ("decoder", "genai-mtp", "vision")
PROMPT = "Count from 1 to 20."
CHILD_MARK = "CYCLE "


@dataclass
class PathResult:
    cycles: int = 0
    ok: int = 0
    #: "SIGSEGV at generate" -> count
    crashes: dict[str, int] = field(default_factory=dict)
    hangs: int = 0
    errors: int = 0
    no_drafts_accepted: int = 0
    differs: int = 0
    load_s: list[float] = field(default_factory=list)
    generate_s: list[float] = field(default_factory=list)
    first_answer: str = ""
    #: The first crash's faulthandler record (the child's stderr tail).
    first_crash: str = ""
    first_error: str = ""

    @property
    def crash_count(self) -> int:
        return sum(self.crashes.values())


# ---- the child: K cycles of one path ------------------------------------------------------


def run_child(path: str, model: Path, cycles: int, first: int, image: Path, inject: int) -> int:
    faulthandler.enable()  # a native crash leaves its Python stack on stderr
    from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
    from qwen_mtp_desktop.core.system.privacy import block_telemetry

    block_telemetry()
    cache = image.parent / "ov-cache"  # a compiled-model cache, as the app's chat loads
    # Every path but `decoder` keeps the app's decoder out (app_decoder=False), so the turn
    # runs on the openvino-genai pipeline it names; `vision` loads both, as the chat does.
    genai_only = LoadOptions(mtp=False, app_decoder=False, plain_decoder="genai", cache_dir=cache)
    options = {
        "decoder": LoadOptions(cache_dir=cache),
        "genai-plain": genai_only,
        "genai-mtp": LoadOptions(app_decoder=False, cache_dir=cache),
        "lookup": genai_only,
        "vision": LoadOptions(cache_dir=cache),
    }[path]
    method = DecodingMethod.lookup(4) if path == "lookup" else DecodingMethod.mtp(2)
    if path == "genai-plain":
        method = PLAIN
    settings = GenerationSettings(max_new_tokens=24, method=method)
    message = Message("user", PROMPT, image=image if path == "vision" else None)
    for cycle in range(first, first + cycles):
        print(f"{CHILD_MARK}{cycle} load", flush=True)
        engine = Engine()
        started = time.perf_counter()
        engine.load(model, options)
        loaded = time.perf_counter()
        print(f"{CHILD_MARK}{cycle} generate", flush=True)
        if cycle == inject:
            os.kill(os.getpid(), signal.SIGSEGV)  # --inject: prove a crash is detected
        generation = engine.generate([message], settings)
        stats = generation.run_to_end()
        done = time.perf_counter()
        engine.unload()
        record = {
            "load_s": loaded - started,
            "generate_s": done - loaded,
            "drafted": stats.drafted_tokens,
            "accepted": stats.accepted_tokens,
            "answer": generation.answer,
        }
        print(f"{CHILD_MARK}{cycle} done {json.dumps(record)}", flush=True)
    return 0


# ---- the parent: schedule children, keep the machine busy, count --------------------------


def start_load(workers: int) -> list[subprocess.Popen[bytes]]:
    """Busy processes, one per core by default: the crashes were seen under load."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True:\n    pass"]) for _ in range(workers)
    ]


def stop_load(burners: Sequence[subprocess.Popen[bytes]]) -> None:
    for burner in burners:
        burner.kill()
        burner.wait()


def run_children(
    path: str,
    model: Path,
    count: int,
    first: int,
    image: Path,
    inject: int,
    result: PathResult,
    timeout_per_cycle: float,
) -> int:
    """One child of `count` cycles starting at `first`; returns the cycles accounted for."""
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        path,
        str(model),
        "--cycles",
        str(count),
        "--first",
        str(first),
        "--image",
        str(image),
        "--inject",
        str(inject),
    ]
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    _CHILDREN.add(child)
    try:
        stdout, stderr = child.communicate(timeout=timeout_per_cycle * count)
        code, hung = child.returncode, False
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
        code, hung = None, True
    finally:
        _CHILDREN.discard(child)
    last_phase = ("", -1)
    finished = 0
    for line in stdout.splitlines():
        if not line.startswith(CHILD_MARK):
            continue
        cycle_text, phase, *rest = line[len(CHILD_MARK) :].split(" ", 2)
        if phase != "done":
            last_phase = (phase, int(cycle_text))
            continue
        finished += 1
        record = json.loads(rest[0])
        result.cycles += 1
        result.ok += 1
        result.load_s.append(record["load_s"])
        result.generate_s.append(record["generate_s"])
        if path in MTP_PATHS and record["drafted"] > 0 and record["accepted"] == 0:
            result.no_drafts_accepted += 1
        if not result.first_answer:
            result.first_answer = record["answer"]
        elif record["answer"] != result.first_answer:
            result.differs += 1
    if finished == count:
        return count
    # The child ended before its last cycle finished: one cycle is a crash, hang or error.
    result.cycles += 1
    phase = last_phase[0] or "start"
    if hung:
        result.hangs += 1
    elif code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        key = f"{name} at {phase}"
        result.crashes[key] = result.crashes.get(key, 0) + 1
        if not result.first_crash:
            result.first_crash = stderr[-3000:]
    else:
        result.errors += 1
        if not result.first_error:
            result.first_error = f"exit {code} at {phase}:\n{stderr[-3000:]}"
    return finished + 1


#: The children running now: a SIGTERM ends them with the run.
_CHILDREN: set[subprocess.Popen[str]] = set()


def _terminate(burners: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGTERM: stop every child and busy process this run started, then exit."""
    for child in list(_CHILDREN):
        child.kill()
    stop_load(burners)
    os._exit(1)


def run_all(
    model: Path,
    paths: Sequence[str],
    cycles: int,
    per_child: int,
    workers: int,
    inject: dict[str, int],
    timeout_per_cycle: float,
    progress: Path | None = None,
    parallel: int = 1,
) -> dict[str, PathResult]:
    results = {path: PathResult() for path in paths}
    if progress is not None and progress.is_file():  # --resume: carry on where it stopped
        saved = json.loads(progress.read_text())
        for path in paths:
            if path in saved:
                fields = {k: v for k, v in saved[path].items() if k != "crash_count"}
                results[path] = PathResult(**fields)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="native-crashes-") as folder:
        image = Path(folder) / "image.png"
        _write_image(image)
        burners = start_load(workers)
        signal.signal(signal.SIGTERM, lambda *_: _terminate(burners))
        try:
            while any(results[p].cycles < cycles for p in paths):
                # The paths take turns, child by child (`parallel` children at once: each
                # path's child touches only its own result).
                due = [p for p in paths if results[p].cycles < cycles]
                with ThreadPoolExecutor(max_workers=parallel) as pool:
                    for path in due:
                        result = results[path]
                        pool.submit(
                            run_children,
                            path,
                            model,
                            min(per_child, cycles - result.cycles),
                            result.cycles,
                            image,
                            inject.get(path, -1),
                            result,
                            timeout_per_cycle,
                        )
                if progress is not None:
                    _save(progress, results)
                done = sum(r.cycles for r in results.values())
                print(
                    f"  ... {done} of {cycles * len(paths)} cycles, "
                    f"{sum(r.crash_count for r in results.values())} crashes, "
                    f"{time.monotonic() - started:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            stop_load(burners)
    return results


def _save(target: Path, results: dict[str, PathResult]) -> None:
    data = {p: {**asdict(r), "crash_count": r.crash_count} for p, r in results.items()}
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    partial.replace(target)


def _write_image(path: Path) -> None:
    from PIL import Image

    image = Image.new("RGB", (96, 64))
    for x in range(96):
        for y in range(64):
            image.putpixel((x, y), (x * 2, y * 3, (x + y) % 256))
    image.save(path)


def report(results: dict[str, PathResult], seconds: float, workers: int) -> None:
    print(
        f"native crashes: {sum(r.cycles for r in results.values())} cycles in {seconds:.0f} s, "
        f"{workers} busy load processes, load average {os.getloadavg()[0]:.2f}"
    )
    header = (
        "| path | cycles | ok | crashes | hangs | errors | no draft accepted | differs | "
        "load s (median) | generate s (median) |"
    )
    print(header)
    print("|" + "---|" * 10)
    for path, r in results.items():
        crashes = ", ".join(f"{n} {k}" for k, n in sorted(r.crashes.items())) or "0"
        load = statistics.median(r.load_s) if r.load_s else 0.0
        generate = statistics.median(r.generate_s) if r.generate_s else 0.0
        print(
            f"| {path} | {r.cycles} | {r.ok} | {crashes} | {r.hangs} | {r.errors} | "
            f"{r.no_drafts_accepted if path in MTP_PATHS else '-'} | {r.differs} | "
            f"{load:.3f} | {generate:.3f} |"
        )
    for path, r in results.items():
        print(f"{path}: {r.cycles} cycles, {r.crash_count} crashes, {r.hangs} hangs")
    for path, r in results.items():
        if r.first_crash:
            print(f"\nfirst crash on {path}:\n{r.first_crash}")
        if r.first_error:
            print(f"\nfirst error on {path}:\n{r.first_error}")


def check_smoke(results: dict[str, PathResult], cycles: int, inject: dict[str, int]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("native_crashes.py")
    for path, r in results.items():
        check.require(r.cycles == cycles, f"{path}: {r.cycles} cycles, expected {cycles}")
        check.require(r.errors == 0, f"{path}: {r.errors} errors: {r.first_error}")
        check.require(r.hangs == 0, f"{path}: {r.hangs} hangs")
        expected = {"SIGSEGV at generate": 1} if path in inject else {}
        check.require(r.crashes == expected, f"{path}: crashes {r.crashes}, expected {expected}")
        check.require(r.differs == 0, f"{path}: {r.differs} answers differ from the first")
        if path in MTP_PATHS:
            check.require(r.no_drafts_accepted == 0, f"{path}: a turn accepted no draft")
        check.require(bool(r.first_answer.strip()), f"{path}: empty answer")
        for value in r.load_s + r.generate_s:
            check.positive(f"{path} seconds", value)
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, nargs="?", help="exported model (default: demo)")
    parser.add_argument("--cycles", type=at_least(1), default=1000, help="load + generate per path")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated paths")
    parser.add_argument("--cycles-per-child", type=at_least(1), default=25)
    parser.add_argument("--load-workers", type=at_least(0), default=os.cpu_count() or 1)
    parser.add_argument(
        "--parallel",
        type=at_least(1),
        default=1,
        help="children at once (they load each other too)",
    )
    parser.add_argument("--timeout-per-cycle", type=float, default=120.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--resume",
        type=Path,
        help="keep the results in this file after every round and continue from it",
    )
    parser.add_argument("--smoke", action="store_true", help="2 cycles per path; checks")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--image", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--inject", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    from qwen_mtp_desktop.core.files.paths import demo_model_dir

    model = (args.model or demo_model_dir()).expanduser()
    if args.child:
        return run_child(args.child, model, args.cycles, args.first, args.image, args.inject)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        parser.error(f"unknown path {', '.join(unknown) or '(none)'}; choose from {PATHS}")
    if args.timeout_per_cycle <= 0:
        parser.error("--timeout-per-cycle must be positive")
    if not (model / "openvino_language_model.xml").is_file():
        print(f"error: {model} is not an exported model folder", file=sys.stderr)
        return 2
    inject: dict[str, int] = {}
    if args.smoke:
        args.cycles, args.cycles_per_child, args.load_workers = 2, 2, 1
        inject = {"decoder": 1}  # the second cycle of the first path crashes on purpose
    started = time.monotonic()
    results = run_all(
        model,
        paths,
        args.cycles,
        args.cycles_per_child,
        args.load_workers,
        inject,
        args.timeout_per_cycle,
        args.resume,
        args.parallel,
    )
    report(results, time.monotonic() - started, args.load_workers)
    if args.json:
        _save(args.json, results)
    return check_smoke(results, args.cycles, inject) if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
