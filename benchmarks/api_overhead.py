"""What the local API server adds to a request, against the same turn in process.

    python benchmarks/api_overhead.py [MODEL_DIR] [--rounds 30] [--tokens 64]
    python benchmarks/api_overhead.py --smoke    # 3 rounds of 16 tokens; checks

The server is `qwen-mtp-desktop serve MODEL_DIR --port 0` in a process of its own (as a user
runs it; a client in the server's process would compete with the decoding loop for the
interpreter), and this process loads the same model for the in-process path. Per round,
interleaved on the same prompt and greedy settings:
- in process: `service.turn()` to the end (what `generate` does, minus printing);
- HTTP: a non-streaming request through the official `openai` client;
- HTTP streaming: the same request with stream=True, read to [DONE].
Prints the median wall time of each path and the median per-round difference to in process
(the server's overhead per request), and time to the first streamed text. Also checks that
every path returned the same text.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = "Count from 1 to 20."


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir", nargs="?", type=Path)
    parser.add_argument("--rounds", type=at_least(1), default=30)
    parser.add_argument("--tokens", type=at_least(1), default=64)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.tokens = 3, 16

    import openai

    from benchmarks._smoke import SmokeCheck
    from qwen_mtp_desktop.core.engine import EngineError, GenerationSettings, LoadOptions, Message
    from qwen_mtp_desktop.core.files.paths import demo_model_dir
    from qwen_mtp_desktop.core.hosting.service import EngineService

    model_dir = args.model_dir or demo_model_dir()
    service = EngineService()
    try:
        with service.exclusive() as engine:
            engine.load(model_dir, LoadOptions())
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    server = subprocess.Popen(
        [sys.executable, "-m", "qwen_mtp_desktop", "serve", str(model_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert server.stdout is not None
    url = None
    for line in server.stdout:
        found = re.search(r"at (http://\S+)/v1$", line.strip())
        if found:
            url = found.group(1)
            break
    if url is None:
        server.kill()
        print("error: the server did not start", file=sys.stderr)
        return 1
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    settings = GenerationSettings(max_new_tokens=args.tokens)
    messages = [Message("user", PROMPT)]
    request = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": args.tokens,
    }
    times: dict[str, list[float]] = {"in process": [], "HTTP": [], "HTTP streaming": []}
    first_text: list[float] = []
    texts: set[str] = set()
    try:
        for _ in range(args.rounds):
            started = time.perf_counter()
            with service.turn(messages, settings) as generation:
                generation.run_to_end()
                texts.add(generation.answer)
            times["in process"].append(time.perf_counter() - started)

            started = time.perf_counter()
            response = client.chat.completions.create(**request)  # type: ignore[call-overload]
            times["HTTP"].append(time.perf_counter() - started)
            texts.add(response.choices[0].message.content or "")

            started = time.perf_counter()
            text = ""
            for chunk in client.chat.completions.create(**request, stream=True):  # type: ignore[call-overload]
                if chunk.choices and chunk.choices[0].delta.content:
                    if not text:
                        first_text.append(time.perf_counter() - started)
                    text += chunk.choices[0].delta.content
            times["HTTP streaming"].append(time.perf_counter() - started)
            texts.add(text)
    finally:
        server.terminate()
        server.wait(30)
        with service.exclusive() as engine:
            engine.unload()

    base = times["in process"]
    print(f"{model}: {args.rounds} rounds, {args.tokens} tokens at most, greedy, MTP n=1")
    for name, values in times.items():
        line = f"  {name:15} median {statistics.median(values) * 1000:.2f} ms"
        if name != "in process":
            extra = [t - b for t, b in zip(values, base, strict=True)]
            line += f", overhead median {statistics.median(extra) * 1000:.2f} ms"
        print(line)
    print(f"  first streamed text after median {statistics.median(first_text) * 1000:.2f} ms")
    print(f"  same text on every path: {len(texts) == 1}")
    if not args.smoke:
        return 0 if len(texts) == 1 else 1
    check = SmokeCheck("api_overhead.py")
    for name, values in times.items():
        check.positive(f"{name} median", statistics.median(values))
    check.positive("first streamed text", statistics.median(first_text))
    check.require(len(texts) == 1, f"the paths answered differently: {sorted(texts)}")
    return check.finish()


if __name__ == "__main__":
    sys.exit(main())
