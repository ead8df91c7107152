"""`serve`: the local OpenAI-compatible API (qwen_mtp_desktop.server) over one model, headless,
until Ctrl+C."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.commands import EXIT_OK, CommandError, bounded_int, positive_int
from qwen_mtp_desktop.commands.generate import depth_or_auto
from qwen_mtp_desktop.core.models.library import is_demo_model
from qwen_mtp_desktop.server.examples import (
    API_KEY_ENV,
    SINGLE_TURN_BANNER,
    curl_example,
    model_id_for,
)


def _cmd_serve(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.engine import EngineError, LoadOptions
    from qwen_mtp_desktop.core.errors import UserFacingError
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.hosting.client import HostedEngine
    from qwen_mtp_desktop.core.hosting.service import EngineService
    from qwen_mtp_desktop.server.generation.turns import TurnDefaults
    from qwen_mtp_desktop.server.runner import (
        ServerConfig,
        bind_socket,
        check_config,
        network_urls,
        run_server,
        url_of,
    )

    api_key = args.api_key if args.api_key is not None else os.environ.get(API_KEY_ENV) or None
    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=api_key,
        model_id=args.model_id,
        defaults=TurnDefaults(
            max_tokens=args.max_new_tokens,
            depth=args.num_assistant_tokens,
            thinking=args.think,
            model_sampling=args.generation_config == "auto",
        ),
        access_log=args.access_log,
    )
    if args.access_log:
        access = logging.getLogger("uvicorn.access")
        access.addHandler(logging.StreamHandler(sys.stderr))
        access.setLevel(logging.INFO)
    if args.api_key is not None:
        print(
            "warning: --api-key shows the key to every user of this computer (it is in the "
            f"process list); set {API_KEY_ENV} instead.",
            file=sys.stderr,
        )
    try:
        # Refusals and a taken port come before the model loads, which can take a minute.
        check_config(config)
        sock = bind_socket(config.host, config.port)
    except UserFacingError as exc:
        raise CommandError(str(exc)) from exc
    # The engine runs in its own process: a crash in the runtime ends the answer that was
    # streaming with an error event, and the server carries on with a restarted engine.
    engine = HostedEngine(on_stopped=lambda text: print(text, file=sys.stderr, flush=True))
    service = EngineService(engine, max_waiting=args.max_queue)
    options = LoadOptions(
        device=args.device, mtp=not args.no_mtp, cache_dir=app_paths().compile_cache_dir
    )
    try:
        print(f"Loading {args.model_dir} on {args.device}...", file=sys.stderr, flush=True)
        try:
            with service.exclusive():
                loaded = engine.load(args.model_dir, options)
        except EngineError as exc:
            raise CommandError(str(exc)) from exc
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        model_id = args.model_id or model_id_for(loaded.model_dir)
        if not loaded.mtp:
            mode = "plain decoding (no MTP)"
        elif args.num_assistant_tokens == "auto":
            mode = "MTP, Auto depth"
        else:
            mode = f"MTP, {args.num_assistant_tokens} draft tokens per step"
        url = url_of(sock)
        elsewhere = network_urls(sock)
        key_note = f" (with {API_KEY_ENV} set to the API key)" if api_key else ""
        print(
            f"Serving {model_id!r} ({mode}, {loaded.load_s:.1f} s to load) at {url}/v1\n"
            + "".join(f"  also at {other}/v1 from other machines\n" for other in elsewhere)
            + "OpenAI-compatible: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, "
            + "POST /v1/responses. "
            "Requests are served "
            f"one at a time, in order; Ctrl+C stops. Try it{key_note}:\n\n"
            f"{curl_example(url, model_id, '$' + API_KEY_ENV if api_key else None)}\n",
            flush=True,
        )
        if is_demo_model(loaded.model_dir):
            print(f"Note: {SINGLE_TURN_BANNER}\n", flush=True)
        run_server(service, config, sock)
    except UserFacingError as exc:
        raise CommandError(str(exc)) from exc
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        with service.exclusive():
            engine.close()
    print("Server stopped.", file=sys.stderr)
    return EXIT_OK


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve a model over a local OpenAI-compatible API (/v1/chat/completions)",
        description="Serve MODEL_DIR over an OpenAI-compatible HTTP API with MTP statistics "
        "per response. Loopback only unless an API key is set.",
    )
    serve.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument(
        "--port", type=bounded_int(0, 65535), default=8000, help="port (8000; 0 = any free one)"
    )
    serve.add_argument(
        "--api-key",
        help="require 'Authorization: Bearer KEY' (needed off loopback); prefer setting "
        f"{API_KEY_ENV}, since a command line is visible to other users of this computer",
    )
    serve.add_argument(
        "--model-id",
        help="the model's id for clients (default: the model's name: its folder's, or the "
        "parent folder's for one named openvino; demo-model for the demo)",
    )
    serve.add_argument("--device", default="CPU", help="OpenVINO device (CPU, GPU, NPU, AUTO)")
    depth = serve.add_mutually_exclusive_group()
    depth.add_argument(
        "--num-assistant-tokens",
        type=depth_or_auto,
        default=1,
        metavar="K|auto",
        help="MTP draft tokens per step (default 1), or auto: the chat's Auto policy; a "
        "request may set its own with the num_assistant_tokens field",
    )
    depth.add_argument("--no-mtp", action="store_true", help="plain decoding, no MTP head")
    serve.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=512,
        help="answer length when a request gives no max_tokens (512)",
    )
    serve.add_argument(
        "--think",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="let Qwen3.5 think first unless a request says otherwise "
        "(chat_template_kwargs.enable_thinking); reasoning is sent as reasoning_content",
    )
    serve.add_argument(
        "--generation-config",
        choices=("auto", "none"),
        default="auto",
        help="auto (default): sampling fields a request leaves out (temperature, top_p, "
        "top_k, penalties) come from the model's generation_config.json, as vLLM does; "
        "none: the server's own (greedy unless a request sends a temperature)",
    )
    serve.add_argument(
        "--max-queue",
        type=bounded_int(0, 10_000),
        default=16,
        help="requests that may wait beside the running one; more get 429 (16)",
    )
    serve.add_argument(
        "--access-log", action="store_true", help="log one line per request to stderr"
    )
    serve.set_defaults(func=_cmd_serve)
