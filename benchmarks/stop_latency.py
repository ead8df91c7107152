"""Stop while a prompt is being read: how long a turn takes to end after its cancel when the
cancel lands inside one long model call (core.decoding.continuation.run_call), against the time
that call had left to run, which is what Stop cost while calls ran to their end.

Two calls: a cold prefill (the stateful request; its caches are dropped when stopped) and a
follow-up's new tokens after a kept conversation (the continuation graph; the conversation stays
kept, which is checked). Each is timed uncancelled first, then cancelled at the given fractions
of that time. The cancel is the flag the engine sets for Stop, looked at every
`CANCEL_POLL_MS`, so the figures include that wait.

    .venv/bin/python benchmarks/stop_latency.py MODEL_DIR [--prompt 7000] [--kept 6000]
        [--new 1500] [--at 0.3,0.7]
    .venv/bin/python benchmarks/stop_latency.py --smoke      # demo model; checks
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, fractions  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.decoding.continuation import CANCEL_POLL_MS  # noqa: E402
from qwen_mtp_desktop.core.decoding.decoder import AppDecoder  # noqa: E402
from qwen_mtp_desktop.core.decoding.method import PLAIN  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"


def token_ids(seed: int, count: int) -> list[int]:
    import numpy as np

    return np.random.default_rng(seed).integers(300, 2000, count).tolist()


def first_token(decoder: AppDecoder, ids: list[int], cancel_at: float | None = None) -> list[int]:
    """The turn's tokens (at most one); cancelled at the `perf_counter()` time `cancel_at`."""
    steps = decoder.decode(
        ids,
        method=PLAIN,
        max_new_tokens=1,
        stop_ids=frozenset(),
        cancelled=lambda: cancel_at is not None and time.perf_counter() >= cancel_at,
    )
    return [t for step in steps for t in step.tokens]


def stop_rows(
    decoder: AppDecoder,
    prompt: Callable[[int], list[int]],
    prepare: Callable[[], None],
    fractions: list[float],
) -> tuple[float, list[dict[str, float]]]:
    """(the uncancelled time, one row per fraction). Every run reads `prompt(run)`, new ids
    each time (the state cache would otherwise find the last run's tokens kept), after
    `prepare()` has reset the decoder's state."""
    full = float("inf")
    for run in (-1, 0):  # the faster of two: the first may pay for memory touched first
        prepare()
        began = time.perf_counter()
        first_token(decoder, prompt(run))
        full = min(full, time.perf_counter() - began)
    rows = []
    for run, fraction in enumerate(fractions, start=1):
        prepare()
        ids = prompt(run)
        began = time.perf_counter()
        cancel_at = began + fraction * full
        tokens = first_token(decoder, ids, cancel_at)
        ended = time.perf_counter()
        rows.append(
            {
                "at": fraction,
                "stopped": float(not tokens),  # a first token means the call ran through
                "latency": ended - cancel_at,
                "left": full - fraction * full,
            }
        )
    return full, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, nargs="?")
    parser.add_argument("--prompt", type=at_least(1), default=7000, help="cold prefill tokens")
    parser.add_argument("--kept", type=at_least(1), default=6000, help="follow-up: kept tokens")
    parser.add_argument("--new", type=at_least(1), default=1500, help="follow-up: new tokens")
    parser.add_argument(
        "--at", type=fractions, default="0.3,0.7", help="fractions of the call to cancel at"
    )
    parser.add_argument("--smoke", action="store_true", help="demo model, small sizes; checks")
    args = parser.parse_args(argv)
    if args.smoke:
        model, prompt, kept, new, at = DEMO, 16_000, 1000, 12_000, [0.3]
    else:
        if args.model is None:
            parser.error("MODEL_DIR is required (or --smoke)")
        model, prompt, kept, new, at = args.model, args.prompt, args.kept, args.new, args.at
        if not (model / "openvino_language_model.xml").is_file():
            parser.error(f"{model} is not an exported model folder")

    decoder = AppDecoder(model, "CPU", mtp=False)
    head = token_ids(1, kept)
    decoder.logits_after(head)
    first_token(decoder, head + token_ids(2, new))  # compiles the continuation graph

    def back_to_head() -> None:
        decoder.logits_after(head)  # resumes from the kept snapshot: no model call
        decoder.target.kv.compact()

    cases: dict[str, tuple[Callable[[int], list[int]], Callable[[], None]]] = {
        f"cold prefill of {prompt:,} tokens (stateful request)": (
            lambda run: token_ids(100 + run, prompt),
            decoder.drop_states,
        ),
        f"follow-up of {new:,} new after {kept:,} kept (continuation graph)": (
            lambda run: head + token_ids(200 + run, new),
            back_to_head,
        ),
    }
    check = SmokeCheck("stop_latency.py")
    print(f"cancel flag looked at every {CANCEL_POLL_MS} ms")
    for name, (prompt_of, prepare) in cases.items():
        full, rows = stop_rows(decoder, prompt_of, prepare, at)
        print(f"{name}: {full:.2f} s to its first token")
        for row in rows:
            how = "stopped" if row["stopped"] else "ran through (no stop part-way)"
            print(
                f"  cancel at {row['at']:.0%}: {how}, ended {1000 * row['latency']:.0f} ms "
                f"after the cancel; running to its end would have taken {row['left']:.2f} s more"
            )
            check.require(bool(row["stopped"]), f"{name}: the call was not stopped")
            check.positive(f"{name}: stop latency", row["latency"])
            check.require(row["latency"] < full, f"{name}: the stop took longer than the call")
        if "follow-up" in name:
            kept_now = decoder.target.kv.live
            print(f"  kept after the stop: {kept_now:,} tokens (the conversation before it)")
            check.require(kept_now == kept, f"{kept_now:,} tokens kept, expected {kept:,}")
    return check.finish() if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
