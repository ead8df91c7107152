"""The generation check's subprocess: `python -m qwen_mtp_desktop.core.models.export.child`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.export.options import ExportError

GENERATION_PROMPT = "Count from 1 to 40, separated by spaces."


def check_generation(
    model_dir: Path, *, max_new_tokens: int = 32, num_assistant_tokens: int = 2
) -> dict[str, Any]:
    """Greedy MTP output vs greedy plain output, f32 numerics, in this process.

    Returns {"equal", "tokens", "mtp_tokens", "baseline_tokens", "first_difference",
    "acceptance_rate", ...}. Run it in a subprocess (`python -m
    qwen_mtp_desktop.core.models.export.child check-generation DIR`) so a native crash or the memory
    it takes stays out of the app.
    """
    from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

    messages = [Message("user", GENERATION_PROMPT)]
    mtp_method = DecodingMethod.mtp(num_assistant_tokens)
    runs: dict[DecodingMethod, dict[str, Any]] = {}
    engine = Engine()
    try:
        for method in (PLAIN, mtp_method):
            head = method.uses_mtp_head
            loaded = engine.load(model_dir, LoadOptions(mtp=head, exact_numerics=True))
            if loaded.mtp != head:
                raise ExportError(
                    "The exported model did not load with its MTP head.",
                    "Re-export; the MTP IR may be damaged.",
                    code="MTP_NOT_LOADED",
                )
            settings = GenerationSettings(max_new_tokens=max_new_tokens, method=method)
            generation = engine.generate(messages, settings)
            tokens: list[int] = []
            for chunk in generation:
                tokens.extend(chunk.token_ids)
            stats = generation.stats
            runs[method] = {
                "tokens": tokens,
                "text": generation.answer,
                "acceptance_rate": stats.acceptance_rate if stats else None,
                "load_s": loaded.load_s,
            }
            engine.unload()
    finally:
        engine.unload()
    # The record's keys ("baseline_tokens", ...) are the export record's (stored) format.
    plain, drafted = runs[PLAIN], runs[mtp_method]
    base, mtp = plain["tokens"], drafted["tokens"]
    first = next((i for i, (a, b) in enumerate(zip(base, mtp, strict=False)) if a != b), None)
    if first is None and len(base) != len(mtp):
        first = min(len(base), len(mtp))
    return {
        "equal": base == mtp,
        "tokens": len(base),
        "baseline_tokens": base,
        "mtp_tokens": mtp,
        "first_difference": first,
        "num_assistant_tokens": num_assistant_tokens,
        "acceptance_rate": drafted["acceptance_rate"],
        "baseline_text": plain["text"],
        "mtp_text": drafted["text"],
    }


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from qwen_mtp_desktop.core.models.export.optimum_cli import die_with_parent, emit
    from qwen_mtp_desktop.core.system.privacy import block_telemetry

    block_telemetry()
    if argv is None:
        die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m qwen_mtp_desktop.core.models.export.child")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check-generation", help="MTP vs plain greedy output")
    check.add_argument("model_dir", type=Path)
    check.add_argument("--max-new-tokens", type=int, default=32)
    check.add_argument("--num-assistant-tokens", type=int, default=2)
    args = parser.parse_args(argv)
    emit("stage", stage="verifying", part="mtp")
    try:
        result = check_generation(
            args.model_dir,
            max_new_tokens=args.max_new_tokens,
            num_assistant_tokens=args.num_assistant_tokens,
        )
    except UserFacingError as exc:
        emit("error", message=exc.message, fix=exc.fix, code=exc.code)
        return 1
    emit("generation", result=result)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
