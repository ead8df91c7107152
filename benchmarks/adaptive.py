"""Auto MTP (core.auto.policy) against every fixed setting, over a scripted multi-turn conversation.

Two models per run: one where MTP wins (its head predicts the content) and one where it loses
(the same model with its MTP head's weights randomised, `devtools.mtp_head`). For each, the same
20-turn conversation (the user prompts of a prompt set, cycled; the history grows turn by turn)
is run in every setting: plain decoding, MTP n=1..3, and Auto, cold (no benchmark verdict: it
starts at n=1) and seeded (it starts from `qwen-mtp-desktop bench`'s verdict, measured here with
the app's own benchmark first). All settings share one engine (the MTP pipeline and the plain
pipeline beside it, as the chat runs them), and run turn by turn interleaved in a rotating order,
so the machine's speed drift hits all of them alike.

Speed is decode tokens per second over the whole conversation (tokens after each turn's first,
over the time from each turn's first token to its last: time to first token is excluded, but a
within-turn switch's re-prefill is included). Greedy decoding throughout; every setting's answers
are compared with plain decoding's.

    .venv/bin/python benchmarks/adaptive.py                      # demo model + broken copy
    .venv/bin/python benchmarks/adaptive.py --fullsize /tmp/qwen35-fullsize --max-new-tokens 32
      (needs qwen3.5-0.8b-agree-int4 and qwen3.5-0.8b-random-int4 from benchmarks/fullsize.py)
    .venv/bin/python benchmarks/adaptive.py --smoke              # 2 turns of 12 tokens; checks
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qwen_mtp_desktop.core.auto.policy import AdaptivePolicy, TurnSample
from qwen_mtp_desktop.core.auto.turns import policy_from_recommendation
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.measure.prompt_sets import PromptSet, load_prompt_set

FIXED: tuple[DecodingMethod, ...] = (PLAIN, *(DecodingMethod.mtp(d) for d in (1, 2, 3)))


@dataclass
class Run:
    name: str
    fixed: DecodingMethod = PLAIN
    policy: AdaptivePolicy | None = None
    history: list[Message] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0
    answers: list[list[int]] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    switches: int = 0
    reprefill_s: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def run_turn(engine: Engine, run: Run, user: str, max_new_tokens: int) -> None:
    run.history.append(Message("user", user))
    if run.policy is not None:
        decision = run.policy.decide()
        method = decision.method
        within = (
            run.policy.within_turn_check(method.drafts, max_new_tokens)
            if method.uses_mtp_head
            else None
        )
        run.choices.append(decision.label + (" (probe)" if decision.probe else ""))
    else:
        method, within = run.fixed, None
    settings = GenerationSettings(max_new_tokens=max_new_tokens, method=method, within_turn=within)
    generation = engine.generate(run.history, settings)
    stats = generation.run_to_end()
    times = stats.chunk_times
    if len(times) > 1:
        run.tokens += stats.generated_tokens - stats.chunk_sizes[0]
        run.seconds += times[-1] - times[0]
    if stats.switched_to_plain_at is not None:
        run.switches += 1
        at = stats.switched_to_plain_at
        run.choices[-1] += f" -> plain at step {at}"
        run.reprefill_s.append(times[at] - times[at - 1])
    run.answers.append(list(generation.token_ids))
    run.history.append(Message("assistant", generation.answer))
    if run.policy is not None:
        run.policy.observe(TurnSample.from_stats(stats, max_new_tokens))


def seeded_policy(model: Path, prompts: PromptSet, max_new_tokens: int) -> tuple[Any, str]:
    """The app's own benchmark on this model, as the chat's Auto would find it stored."""
    from qwen_mtp_desktop.core.measure.bench import run_benchmark

    report = run_benchmark(
        model,
        [prompts],
        depths=(1, 2, 3),
        runs=1,
        warmup=1,
        max_new_tokens=max_new_tokens,
        lookup=None,  # only the depth recommendation is used here
    )
    rec = report["recommendation"]
    policy = policy_from_recommendation(
        DecodingMethod.from_record(rec["method"]),
        speedup=rec["speedup"],
        acceptance=rec["acceptance_rate"],
    )
    return policy, f"{rec['label']} ({rec['speedup'] or 0:.2f}x)"


def conversation(
    model: Path, prompts: PromptSet, turns: int, max_new_tokens: int
) -> dict[str, Any]:
    seeded, verdict = seeded_policy(model, prompts, max_new_tokens)
    engine = Engine()
    engine.load(model, LoadOptions(mtp=True))
    engine.load_plain()
    runs = [Run(m.short_label, fixed=m) for m in FIXED]
    runs.append(Run("Auto (cold)", policy=AdaptivePolicy()))
    runs.append(Run("Auto (bench-seeded)", policy=seeded))
    users = [case.text for case in prompts.prompts]
    # Warm both pipelines and every depth once, outside the measurement.
    for method in FIXED:
        warm = GenerationSettings(max_new_tokens=8, method=method)
        engine.generate([Message("user", users[0])], warm).run_to_end()
    started = time.perf_counter()
    for turn in range(turns):
        user = users[turn % len(users)]
        shift = turn % len(runs)
        for run in runs[shift:] + runs[:shift]:
            run_turn(engine, run, user, max_new_tokens)
        print(f"  turn {turn + 1}/{turns} done", file=sys.stderr, flush=True)
    engine.unload()
    plain = runs[0]
    best = max(runs[: len(FIXED)], key=lambda r: r.rate)
    rows = []
    for run in runs:
        same = sum(a == b for a, b in zip(run.answers, plain.answers, strict=True))
        rows.append(
            {
                "setting": run.name,
                "tokens": run.tokens,
                "tok_s": run.rate,
                "vs_plain": run.rate / plain.rate,
                "vs_best_fixed": run.rate / best.rate,
                "answers_equal_plain": f"{same}/{turns}",
                "choices": run.choices,
                "within_turn_switches": run.switches,
                "reprefill_ms": [round(s * 1000, 1) for s in run.reprefill_s],
            }
        )
    return {
        "model": str(model),
        "bench_verdict": verdict,
        "best_fixed": best.name,
        "rows": rows,
        "seconds": time.perf_counter() - started,
    }


def print_table(title: str, result: dict[str, Any]) -> None:
    print(f"\n## {title}\n")
    print(f"model {result['model']}; bench verdict {result['bench_verdict']}; "
          f"best fixed setting: {result['best_fixed']}\n")  # fmt: skip
    print("| setting | decode tok/s | vs plain | vs best fixed | answers = plain | switches |")
    print("|---|---|---|---|---|---|")
    for row in result["rows"]:
        print(
            f"| {row['setting']} | {row['tok_s']:.1f} | {row['vs_plain']:.3f} | "
            f"{row['vs_best_fixed']:.3f} | {row['answers_equal_plain']} | "
            f"{row['within_turn_switches']} |"
        )
    for row in result["rows"]:
        if row["setting"].startswith("Auto"):
            print(f"\n{row['setting']} turn by turn: " + ", ".join(row["choices"]))
            if row["reprefill_ms"]:
                print(f"  re-prefill per within-turn switch (ms): {row['reprefill_ms']}")


SETTINGS = [m.short_label for m in FIXED] + ["Auto (cold)", "Auto (bench-seeded)"]


def check_smoke(results: dict[str, Any], turns: int) -> int:
    """Both models ran, every setting has a speed, and every answer equals plain decoding's
    (greedy MTP must not change the output, whatever the drafts)."""
    from _smoke import SmokeCheck

    check = SmokeCheck("adaptive.py")
    check.require(sorted(results) == ["MTP loses", "MTP wins"], f"models run: {sorted(results)}")
    for title, result in results.items():
        rows = {row["setting"]: row for row in result["rows"]}
        check.require(list(rows) == SETTINGS, f"{title}: settings {list(rows)}")
        for name, row in rows.items():
            check.positive(f"{title} / {name} tok/s", row["tok_s"])
            check.positive(f"{title} / {name} vs plain", row["vs_plain"])
            check.require(
                row["answers_equal_plain"] == f"{turns}/{turns}",
                f"{title} / {name}: answers equal to plain {row['answers_equal_plain']}",
            )
            if name.startswith("Auto"):
                check.require(
                    len(row["choices"]) == turns, f"{title} / {name}: choices {row['choices']}"
                )
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fullsize", type=Path, help="work dir of benchmarks/fullsize.py")
    parser.add_argument("--geometry", default="0.8b")
    parser.add_argument("--prompts", default="demo")
    parser.add_argument("--turns", type=at_least(1), default=20)
    parser.add_argument("--max-new-tokens", type=at_least(1), default=48)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--only", choices=("wins", "loses"), help="run one of the two models (each takes long)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="2 turns of 12 tokens on the demo models, then check every row; exit 1 if not",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.turns, args.max_new_tokens, args.only = 2, 12, None
    try:
        prompts = load_prompt_set(args.prompts)
        # A private app home: the seeded policy's benchmark must not touch a real profile.
        with tempfile.TemporaryDirectory(prefix="adaptive-bench-") as home:
            os.environ["QWEN_MTP_DESKTOP_HOME"] = home
            results = run_all(args, prompts, Path(home))
    except UserFacingError as error:  # a bad prompt set or model folder: say so, no traceback
        print(f"adaptive.py: {error}", file=sys.stderr)
        return 1
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return check_smoke(results, args.turns) if args.smoke else 0


def run_all(args: argparse.Namespace, prompts: PromptSet, home: Path) -> dict[str, Any]:
    if args.fullsize:
        win = args.fullsize / f"qwen3.5-{args.geometry}-agree-int4"
        lose = args.fullsize / f"qwen3.5-{args.geometry}-random-int4"
    else:
        from qwen_mtp_desktop.core.files.paths import demo_model_dir
        from qwen_mtp_desktop.devtools.mtp_head import make_broken_mtp_copy

        win = demo_model_dir()
        lose = make_broken_mtp_copy(win, home / "demo with random MTP head")
    results = {}
    for title, model in (("MTP wins", win), ("MTP loses", lose)):
        if args.only and not title.endswith(args.only):
            continue
        print(f"{title}: {model}", file=sys.stderr, flush=True)
        results[title] = conversation(model, prompts, args.turns, args.max_new_tokens)
        print_table(title, results[title])
    return results


if __name__ == "__main__":
    raise SystemExit(main())
