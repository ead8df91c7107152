"""New tasks that open with the same preamble: what a new conversation or API request waits for
its first token when an earlier one had the same system prompt and tools (issue 41, item 3).

An agent resends its preamble (a long system prompt and the tool definitions; by default 350
words of rules, ~1,100 tokens on Qwen3.5's tokenizer, and six tools, ~2,000) at the start of
every new task; a person starts new chats with the same system prompt. The engine keeps the
state where such a preamble ends (core.decoding.state_cache.resume_points), so a new task
prefills only its own question.

Through the Engine as the chat and `serve` run it (chat template with the tools block, MTP,
greedy). The first task is cold. Then, in rounds that each bring a new question of the same
length and rotate their order (this machine's speed drifts):

- `new task`: the preamble and the round's question on the engine that keeps states;
- `cold`: the same request on a second engine whose states are dropped first (what every new
  task cost before);
- `new alone`: the question alone on the cold engine: the issue's reference, its time scaled
  from its token count to the new task's prefilled tokens.

Prints per round the prompt tokens, how many were reused (`cached_tokens` through `serve`) and
the time to first token, then the medians, the issue's bound (TTFT <= 1.5 x the new tokens'
own prefill + 0.3 s; reused >= 95 % of the preamble), and checks that every new task answered
what the cold engine answered, token for token.

    .venv/bin/python benchmarks/shared_preamble.py MODEL_DIR [--preamble-words 350]
        [--tools 6] [--rounds 3] [--answer-tokens 24]
    .venv/bin/python benchmarks/shared_preamble.py --smoke   # demo model, short; checks
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402
from _turns import Turn, cold_turn, run_turn, warm_and_cold  # noqa: E402

from qwen_mtp_desktop.core.decoding.method import DEFAULT_MTP  # noqa: E402
from qwen_mtp_desktop.core.engine import (  # noqa: E402
    GenerationSettings,
    Message,
)

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"
RULES = (
    "Read the whole request before acting, and restate the goal in one sentence.",
    "Prefer the tools over guessing; when a tool fails, say which and why.",
    "Quote file names, commands and numbers exactly as they appear.",
    "Keep answers short unless the user asks for detail, and never invent sources.",
    "When two instructions conflict, follow the later one and say so.",
    "Check every calculation twice and show the units.",
)
TOOL_NAMES = ("search_files", "read_file", "write_file", "run_tests", "list_issues",
              "open_issue", "web_search", "fetch_page", "send_mail", "calendar_add",
              "convert_units", "query_database")  # fmt: skip
SUBJECTS = ("the build", "the release notes", "the test report", "the budget sheet",
            "the meeting notes", "the bug list", "the roadmap", "the user survey")  # fmt: skip


def system_prompt(words: int) -> str:
    """A made-up agent's operating rules, `words` long (deterministic)."""
    out: list[str] = ["You are a careful assistant working in a software team."]
    index = 0
    while sum(len(s.split()) for s in out) < words:
        out.append(f"Rule {index + 1}: {RULES[index % len(RULES)]}")
        index += 1
    return "\n".join(out)


def tools_json(count: int) -> str:
    """`count` tool definitions as an agent framework sends them (OpenAI function format)."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name.replace('_', ' ').capitalize()} for the current "
                "project. Returns JSON with the result, or an error message that says what "
                "to change.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "target": {"type": "string", "description": "what to act on"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                        "format": {"type": "string", "enum": ["text", "json", "table"]},
                    },
                    "required": ["target"],
                },
            },
        }
        for name in TOOL_NAMES[:count]
    ]
    return json.dumps(tools)


def task(index: int) -> Message:
    """A new task's question (the same length in words for every index)."""
    subject = SUBJECTS[index % len(SUBJECTS)]
    other = SUBJECTS[(index * 3 + 1) % len(SUBJECTS)]
    return Message(
        "user",
        f"Task {index + 1}: compare {subject} with {other}, list the three largest "
        f"differences, and say which of them matters most for next week.",
    )


@dataclass
class Result:
    preamble_tokens: int
    first: Turn
    new_task: list[Turn]
    cold: list[Turn]
    alone: list[Turn]
    identical: list[bool]


def measure(
    model: Path, preamble_words: int, tools: int, rounds: int, answer_tokens: int, exact: bool
) -> Result:
    warm, cold_engine = warm_and_cold(model, exact)
    system = Message("system", system_prompt(preamble_words))
    settings = GenerationSettings(
        max_new_tokens=answer_tokens, method=DEFAULT_MTP, tools_json=tools_json(tools)
    )
    alone_settings = GenerationSettings(max_new_tokens=answer_tokens, method=DEFAULT_MTP)

    try:
        # The preamble's length: the prompt of a task minus that of the task alone.
        first = run_turn(warm, [system, task(0)], settings)
        bare = cold_turn(cold_engine, [task(0)], alone_settings)
        preamble_tokens = first.prompt_tokens - bare.prompt_tokens
        print(
            f"first task (cold): {first.prompt_tokens} prompt tokens, preamble about "
            f"{preamble_tokens}, TTFT {first.ttft_s:.3f} s",
            flush=True,
        )
        new_task: list[Turn] = []
        cold: list[Turn] = []
        alone: list[Turn] = []
        identical: list[bool] = []
        for round_index in range(rounds):
            question = task(round_index + 1)
            found: dict[str, Turn] = {}
            steps = {
                "new task": lambda q=question: run_turn(warm, [system, q], settings),
                "cold": lambda q=question: cold_turn(cold_engine, [system, q], settings),
                "new alone": lambda q=question: cold_turn(cold_engine, [q], alone_settings),
            }
            names = list(steps)
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                found[name] = steps[name]()
            new_task.append(found["new task"])
            cold.append(found["cold"])
            alone.append(found["new alone"])
            identical.append(found["new task"].ids == found["cold"].ids)
            print(
                f"round {round_index + 1}: new task TTFT {found['new task'].ttft_s:.3f} s "
                f"({found['new task'].reused_tokens} of {found['new task'].prompt_tokens} "
                f"reused), cold {found['cold'].ttft_s:.3f} s, new alone "
                f"{found['new alone'].ttft_s:.3f} s ({found['new alone'].prompt_tokens} "
                "tokens)",
                flush=True,
            )
    finally:
        warm.unload()
        cold_engine.unload()
    return Result(preamble_tokens, first, new_task, cold, alone, identical)


def summarise(result: Result) -> dict[str, float]:
    median = {
        name: statistics.median(t.ttft_s for t in turns)
        for name, turns in (
            ("new task", result.new_task),
            ("cold", result.cold),
            ("new alone", result.alone),
        )
    }
    alone_tokens = statistics.median(t.prompt_tokens for t in result.alone)
    new_tokens = statistics.median(t.prefilled for t in result.new_task)
    reference = median["new alone"] * new_tokens / alone_tokens
    bound = 1.5 * reference + 0.3
    reused = min(t.reused_tokens for t in result.new_task)
    share = reused / result.preamble_tokens if result.preamble_tokens > 0 else 0.0
    print("\n| request | median TTFT (s) |")
    print("|---|---|")
    for name, value in median.items():
        print(f"| {name} | {value:.3f} |")
    print(
        f"\npreamble: {result.preamble_tokens} tokens; a new task reused at least {reused} "
        f"({share:.1%} of it; target >= 95 %) and prefilled {new_tokens:.0f}"
    )
    print(
        f"bound: 1.5 x {reference:.3f} s (the new tokens' own prefill) + 0.3 s = {bound:.3f} s; "
        f"new task {median['new task']:.3f} s: {'met' if median['new task'] <= bound else 'MISSED'}"
    )
    print(f"speed-up over a cold prefill: {median['cold'] / median['new task']:.1f}x")
    print(f"every new task answered as the cold engine: {all(result.identical)}")
    return {**median, "share": share, "bound": bound}


def check_smoke(result: Result, numbers: dict[str, float]) -> int:
    check = SmokeCheck("shared_preamble.py")
    for name in ("new task", "cold", "new alone", "bound"):
        check.positive(name, numbers[name])
    check.require(result.first.reused_tokens == 0, "the first task reused a state")
    check.require(all(t.reused_tokens == 0 for t in result.cold), "a cold request reused")
    check.require(numbers["share"] >= 0.95, f"a new task reused {numbers['share']:.0%}")
    check.require(all(result.identical), "a new task answered unlike the cold engine")
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, nargs="?", help="exported model folder")
    parser.add_argument("--preamble-words", type=at_least(50), default=350)
    parser.add_argument("--tools", type=at_least(0), default=6, help="tool definitions (0-12)")
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--answer-tokens", type=at_least(1), default=24)
    parser.add_argument("--exact", action="store_true", help="exact numerics (f32, f32 cache)")
    parser.add_argument("--smoke", action="store_true", help="demo model, short; checks")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model = args.model or DEMO
        args.preamble_words, args.rounds, args.answer_tokens = 120, 2, 8
        args.tools = 12
        args.exact = True  # the tiny model's near-tie logits: compare like with like
    if args.model is None:
        parser.error("give an exported model folder (or --smoke for the demo model)")
    if args.tools > len(TOOL_NAMES):
        parser.error(f"--tools: at most {len(TOOL_NAMES)}")
    if not (args.model / "openvino_language_model.xml").is_file():
        print(f"error: {args.model} is not an exported model folder", file=sys.stderr)
        return 2
    result = measure(
        args.model, args.preamble_words, args.tools, args.rounds, args.answer_tokens, args.exact
    )
    numbers = summarise(result)
    return check_smoke(result, numbers) if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
