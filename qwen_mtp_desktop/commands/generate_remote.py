"""`generate --remote URL PROMPT`: the same streaming answer from an OpenAI-compatible server
(another PC's `serve`, OVMS, vLLM, llama.cpp), with client-side timing and the server's MTP
statistics when it reports them (core.remote)."""

from __future__ import annotations

import argparse
import os
import sys

from qwen_mtp_desktop.commands import EXIT_OK, CommandError

#: Where the key can come from instead of the command line (which other users can see in ps).
KEY_ENV = "QWEN_MTP_REMOTE_API_KEY"
#: Options that choose how a local model decodes: a remote server decides that itself.
LOCAL_ONLY = {
    "no_mtp": "--no-mtp",
    "prompt_lookup": "--prompt-lookup",
    "num_assistant_tokens": "--num-assistant-tokens",
    "max_ngram_size": "--max-ngram-size",
}


def run_remote(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.commands.answer_output import (
        print_result,
        prompt_messages,
        stream_answer,
    )
    from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings
    from qwen_mtp_desktop.core.remote.client import RemoteAnswer, list_models
    from qwen_mtp_desktop.core.remote.endpoints import (
        EndpointError,
        RemoteEndpoint,
        key_in_clear,
        key_in_clear_warning,
        normalize_base_url,
    )

    usage_error = args.usage_error
    if args.prompt is not None:
        usage_error("with --remote give only the PROMPT, no MODEL_DIR")
    for name, flag in LOCAL_ONLY.items():
        if getattr(args, name) not in (None, False):
            usage_error(f"argument {flag}: applies to local models only, not with --remote")
    if args.device != "CPU":
        usage_error("argument --device: applies to local models only, not with --remote")
    prompt = args.model_dir  # with --remote the one positional argument is the prompt
    api_key = args.api_key or os.environ.get(KEY_ENV) or None
    try:
        base_url = normalize_base_url(args.remote)
    except EndpointError as exc:
        usage_error(f"argument --remote: {exc}")
        raise  # usage_error exits
    if args.api_key:
        print(
            "warning: --api-key shows the key to every user of this computer (it is in the "
            f"process list); set {KEY_ENV} instead.",
            file=sys.stderr,
        )
    exposed = key_in_clear(base_url) if api_key else None
    if exposed is not None:
        print(f"warning: {key_in_clear_warning(exposed)}", file=sys.stderr)
    try:
        model = args.remote_model
        if not model:
            probe = RemoteEndpoint("cli", base_url, base_url, "")
            models = list_models(probe, api_key)
            if len(models) != 1:
                listed = ", ".join(models[:20]) or "none"
                raise CommandError(
                    f"The server offers {len(models)} models ({listed}): choose one with "
                    "--remote-model NAME."
                )
            model = models[0]
        endpoint = RemoteEndpoint("cli", base_url, base_url, model)
        messages = prompt_messages(prompt, args.system)
        settings = GenerationSettings(max_new_tokens=args.max_new_tokens, thinking=args.think)
        answer = RemoteAnswer(endpoint, api_key, messages, settings)
        stream_answer(answer, quiet=args.json)
    except EngineError as exc:
        raise CommandError(str(exc)) from exc
    stats = answer.stats
    assert stats is not None
    summary = (
        f"{stats.generated_tokens} tokens" if stats.generated_tokens else "token count not reported"
    )
    if stats.decode_tokens_per_s:
        summary += f", {stats.decode_tokens_per_s:.1f} tok/s"
    summary += f", TTFT {stats.ttft_s * 1000:.0f} ms (measured here, network included), "
    if answer.server_stats is None:
        summary += "no MTP statistics from the server"
    elif stats.method.is_plain:
        summary += "server decoded plain (no drafts)"
    else:
        summary += (
            f"server: {stats.method.label}, {stats.acceptance_rate:.0%} of "
            f"drafts accepted ({stats.mean_accepted_per_step:.2f} per step)"
        )
    print_result(
        answer, stats, as_json=args.json, summary=summary, head={"remote": base_url, "model": model}
    )
    return EXIT_OK


def add_arguments(gen: argparse.ArgumentParser) -> None:
    gen.add_argument(
        "--remote",
        metavar="URL",
        help="answer with an OpenAI-compatible server instead of a local model (e.g. "
        "http://host:8000/v1, OVMS: http://host:8000/v3); then PROMPT is the only argument",
    )
    gen.add_argument(
        "--api-key",
        metavar="KEY",
        help=f"with --remote: the server's API key; prefer setting {KEY_ENV}, since a "
        "command line is visible to other users of this computer",
    )
    gen.add_argument(
        "--remote-model",
        metavar="NAME",
        help="with --remote: the model to use (default: the server's only model)",
    )
