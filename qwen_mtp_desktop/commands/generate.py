"""`generate`: answer one prompt with the engine, streaming to stdout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.commands import (
    EXIT_OK,
    CommandError,
    add_lookup_arguments,
    check_lookup_arguments,
    drafting_method,
    positive_int,
    whole_number,
)
from qwen_mtp_desktop.commands.generate_remote import add_arguments as add_remote_arguments


def depth_or_auto(text: str) -> int | str:
    """`--num-assistant-tokens`: a positive whole number, or "auto" (core.auto.policy)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a positive whole number nor 'auto'"
        ) from None
    from qwen_mtp_desktop.core.decoding.method import MAX_MTP_DEPTH

    return whole_number(text, 1, MAX_MTP_DEPTH)


def _cmd_generate(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.prompt.guards import text_problem

    # An argument that is not UTF-8 reaches Python as lone surrogates: say so here, plainly.
    prompt = args.model_dir if args.remote is not None else args.prompt
    for name, text in (("PROMPT", prompt), ("--system", args.system)):
        problem = text_problem(text) if text is not None else None
        if problem is not None:
            args.usage_error(f"argument {name}: {problem}; write the text in UTF-8")
    if args.remote is not None:
        from qwen_mtp_desktop.commands.generate_remote import run_remote

        if args.generation_config is not None:
            args.usage_error("argument --generation-config: the remote server decides")

        return run_remote(args)
    if args.api_key is not None or args.remote_model is not None:
        args.usage_error("arguments --api-key and --remote-model: only with --remote")
    if args.prompt is None:
        args.usage_error("the following arguments are required: PROMPT")
    args.model_dir = Path(args.model_dir)
    from qwen_mtp_desktop.commands.answer_output import (
        print_result,
        prompt_messages,
        stream_answer,
    )
    from qwen_mtp_desktop.core.decoding.method import PLAIN
    from qwen_mtp_desktop.core.engine import (
        Engine,
        EngineError,
        GenerationSettings,
        LoadOptions,
    )
    from qwen_mtp_desktop.core.files.paths import app_paths

    lookup = args.prompt_lookup
    depth = args.num_assistant_tokens
    usage_error = args.usage_error  # exits 2 with the reason, like argparse's own checks
    if lookup and args.no_mtp:
        usage_error("argument --prompt-lookup: not allowed with argument --no-mtp")
    if lookup and depth == "auto":
        usage_error(
            "argument --num-assistant-tokens: with --prompt-lookup give a number of draft "
            "tokens; 'auto' is the Auto policy, which chooses the method itself"
        )
    check_lookup_arguments(args, depth)
    messages = prompt_messages(args.prompt, args.system)
    auto = depth == "auto" and not args.no_mtp
    method = (
        PLAIN if args.no_mtp else drafting_method(args, depth if isinstance(depth, int) else None)
    )
    if args.generation_config in (None, "auto"):
        # The model's own sampling defaults, as the chat and `serve` use them.
        from qwen_mtp_desktop.core.chat.generation_defaults import read_generation_defaults

        model = read_generation_defaults(args.model_dir)
        for note in model.notes:
            print(f"note: {note}", file=sys.stderr)
        if model.sampling is not None:
            method = method.with_sampling(model.sampling)
    settings = GenerationSettings(
        max_new_tokens=args.max_new_tokens, method=method, thinking=args.think
    )
    options = LoadOptions(
        device=args.device, mtp=not args.no_mtp, cache_dir=app_paths().compile_cache_dir
    )
    engine = Engine()
    try:
        loaded = engine.load(args.model_dir, options)
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        decision = None
        if auto and loaded.mtp:
            # The chat's Auto policy: the stored benchmark verdict (n=1 without one), and a
            # fall back to plain decoding mid-answer if the drafts keep being rejected.
            from qwen_mtp_desktop.core.chat.turns import AutoDecoding

            auto_decoding = AutoDecoding()
            found = AutoDecoding.lookup(args.model_dir, args.device)
            auto_decoding.remember(args.model_dir, args.device, found)
            turn = auto_decoding.plan_turn(
                (0, args.model_dir, args.device),
                settings,
                plain_ready=engine.plain_ready,
                load_s=loaded.load_s,
                history=messages,
            )
            settings, decision = turn.settings, turn.decision
            assert decision is not None
            print(f"Auto: {decision.summary()}", file=sys.stderr)
        generation = engine.generate(messages, settings)
        stream_answer(generation, quiet=args.json)
    except EngineError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        engine.unload()
    stats = generation.stats
    assert stats is not None
    tail: dict[str, Any] = {}
    if decision is not None:
        from qwen_mtp_desktop.core.auto.turns import auto_summary

        tail["auto"] = auto_summary(decision, stats)
    summary = (
        f"{stats.generated_tokens} tokens, {stats.decode_tokens_per_s:.1f} tok/s, "
        f"TTFT {stats.ttft_s * 1000:.0f} ms, "
    )
    if stats.method.is_plain:
        summary += "plain (no drafts)"
    else:
        summary += (
            f"{stats.method.label}: {stats.drafted_tokens} drafts proposed, "
            f"{stats.acceptance_rate:.0%} accepted ({stats.mean_accepted_per_step:.2f} per step)"
        )
    if stats.switched_to_plain_at is not None:
        switched = sum(stats.chunk_sizes[: stats.switched_to_plain_at])
        summary += f"; Auto switched to plain decoding after {switched} tokens"
    print_result(
        generation,
        stats,
        as_json=args.json,
        summary=summary,
        head={"model_dir": str(loaded.model_dir), "load_s": loaded.load_s},
        tail=tail,
    )
    return EXIT_OK


def register(commands: Any) -> None:
    gen = commands.add_parser(
        "generate",
        help="answer one prompt, streaming to stdout",
        description="Answer one prompt, streaming the text to stdout (reasoning to stderr). On "
        "a terminal, control characters and bidi controls in the text (escape sequences that "
        "could retitle the window, clear the screen or plant a link) are shown as \\uXXXX; "
        "piped or redirected, the text is written exactly as the model produced it.",
    )
    # With --remote the one positional argument is the prompt (kept a str: a Path would
    # rewrite "a//b" in it).
    gen.add_argument("model_dir", metavar="MODEL_DIR")
    gen.add_argument("prompt", metavar="PROMPT", nargs="?")
    gen.add_argument("--system", help="system prompt")
    gen.add_argument("--max-new-tokens", type=positive_int, default=512)
    depth = gen.add_mutually_exclusive_group()
    depth.add_argument(
        "--num-assistant-tokens",
        type=depth_or_auto,
        default=None,
        metavar="K|auto",
        help="draft tokens per step: MTP (default 1; more is not validated for every model), "
        "or with --prompt-lookup (default 4); or auto: the chat's Auto policy (benchmark "
        "verdict, plain decoding when drafts lose)",
    )
    depth.add_argument("--no-mtp", action="store_true", help="plain decoding, no MTP head")
    add_lookup_arguments(
        gen,
        what="draft by prompt lookup (n-grams of the prompt and answer) instead of the MTP head",
    )
    gen.add_argument("--device", default="CPU", help="OpenVINO device (CPU, GPU, NPU, AUTO)")
    gen.add_argument(
        "--think",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="let Qwen3.5 think before answering (reasoning goes to stderr)",
    )
    gen.add_argument(
        "--generation-config",
        choices=("auto", "none"),
        default=None,
        help="auto (default): decode with the model's generation_config.json sampling "
        "defaults, as the chat and serve do (greedy when it says do_sample false); none: "
        "greedy decoding",
    )
    gen.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object at the end (control characters escaped)",
    )
    add_remote_arguments(gen)
    gen.set_defaults(func=_cmd_generate, usage_error=gen.error)
