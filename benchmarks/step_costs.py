"""Step costs of MTP speculative decoding, measured by calling the exported IRs directly.

One plain decoding step is one target call on 1 token. One MTP step at depth k is one
verification call on k + 1 tokens plus k draft calls; a draft call is the MTP IR on one token
plus the language model's lm_head, which the runtime grafts onto the MTP head (the MTP IR has
none). With these costs, the speed-up at a per-draft acceptance p is

    (1 + p + ... + p^k) * target / (verify(k + 1) + k * draft)

GenAI's pipeline adds its own overhead per call (RUNTIME-NOTES measured 30-75 ms per verify on
0.8B), so `fullsize.py` prints this projection next to the one from the pipeline's measured
step times.

    .venv/bin/python benchmarks/step_costs.py MODEL_DIR [--depths 1,2,3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _lm_head_model(vocab: int, hidden: int, seed: int = 0) -> Any:
    """A vocabulary-sized INT8 MatMul like the exported lm_head (per-row scales), so the CPU
    plugin runs it as a compressed-weight FullyConnected, as it does the real one."""
    import openvino as ov
    from openvino import opset13 as ops

    rng = np.random.default_rng(seed)
    weights = rng.integers(-127, 128, size=(vocab, hidden), dtype=np.int8)
    scales = (rng.random((vocab, 1), dtype=np.float32) * 1e-3).astype(np.float32)
    x = ops.parameter([1, 1, hidden], np.float32, name="hidden")
    w = ops.multiply(ops.convert(ops.constant(weights), np.float32), ops.constant(scales))
    logits = ops.matmul(x, w, transpose_a=False, transpose_b=True)
    return ov.Model([logits], [x], "lm_head")


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # first call: allocations, kernel selection
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


class _Stateful:
    """One infer request of a stateful IR, fed token by token like the pipeline does."""

    def __init__(self, compiled: Any, position_rows: int | None) -> None:
        self.request = compiled.create_infer_request()
        self.request.reset_state()
        self.rows = position_rows
        self.past = 0

    def positions(self, count: int) -> np.ndarray:
        pos = np.arange(self.past, self.past + count, dtype=np.int64)[None, :]
        if self.rows is None:
            return pos
        return np.broadcast_to(pos[None], (self.rows, 1, count)).copy()

    def infer(self, inputs: dict[str, np.ndarray], count: int) -> Any:
        feed = {
            **inputs,
            "attention_mask": np.ones((1, self.past + count), dtype=np.int64),
            "position_ids": self.positions(count),
            "beam_idx": np.zeros(1, dtype=np.int32),
        }
        out = self.request.infer(feed)
        self.past += count
        return out


def measure_step_costs(
    model_dir: Path,
    depths: Sequence[int] = (1, 2, 3),
    *,
    device: str = "CPU",
    repeats: int = 8,
    prompt_tokens: int = 48,
) -> dict[str, Any]:
    """Median milliseconds of each kind of call, in the device's default precision (as chat)."""
    import openvino as ov

    core = ov.Core()
    model_dir = Path(model_dir)
    embed = core.compile_model(model_dir / "openvino_text_embeddings_model.xml", device)
    lm_model = core.read_model(model_dir / "openvino_language_model.xml")
    shape = lm_model.input("position_ids").get_partial_shape()
    rows = shape[0].get_length() if len(shape) == 3 else None
    vocab = lm_model.output("logits").get_partial_shape()[2].get_length()
    lm = core.compile_model(lm_model, device)
    mtp = core.compile_model(model_dir / "openvino_mtp_model.xml", device)
    hidden = mtp.input("hidden_states").get_partial_shape()[2].get_length()
    lm_head = core.compile_model(_lm_head_model(vocab, hidden), device)
    rng = np.random.default_rng(0)

    def tokens(count: int) -> np.ndarray:
        return rng.integers(0, 500, size=(1, count), dtype=np.int64)

    def embeds(count: int) -> np.ndarray:
        result: np.ndarray = embed({"input": tokens(count)})[0]
        return result

    def target_call(state: _Stateful, count: int) -> Callable[[], object]:
        return lambda: state.infer({"inputs_embeds": embeds(count)}, count)

    target = _Stateful(lm, rows)
    target.infer({"inputs_embeds": embeds(prompt_tokens)}, prompt_tokens)
    target_ms = _median_ms(target_call(target, 1), repeats)
    verify_ms: dict[str, float] = {}
    for depth in depths:
        state = _Stateful(lm, rows)
        state.infer({"inputs_embeds": embeds(prompt_tokens)}, prompt_tokens)
        verify_ms[str(depth)] = _median_ms(target_call(state, depth + 1), repeats)

    draft = _Stateful(mtp, None)

    def mtp_inputs(count: int) -> dict[str, np.ndarray]:
        return {
            "hidden_states": rng.standard_normal((1, count, hidden), dtype=np.float32),
            "inputs_embeds": embeds(count),
        }

    draft.infer(mtp_inputs(prompt_tokens), prompt_tokens)
    mtp_ms = _median_ms(lambda: draft.infer(mtp_inputs(1), 1), repeats)
    head_input = rng.standard_normal((1, 1, hidden), dtype=np.float32)
    lm_head_ms = _median_ms(lambda: lm_head({"hidden": head_input}), repeats)
    return {
        "device": device,
        "target_ms": target_ms,
        "verify_ms": verify_ms,
        "mtp_ms": mtp_ms,
        "lm_head_ms": lm_head_ms,
        "draft_ms": mtp_ms + lm_head_ms,
        "prompt_tokens": prompt_tokens,
        "repeats": repeats,
    }


def check_smoke(costs: dict[str, Any], depths: Sequence[int]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("step_costs.py")
    for key in ("target_ms", "mtp_ms", "lm_head_ms", "draft_ms"):
        check.positive(key, costs.get(key))
    verify = costs.get("verify_ms", {})
    check.require(
        sorted(verify) == sorted(str(d) for d in depths),
        f"verify_ms has depths {sorted(verify)}, expected {[str(d) for d in depths]}",
    )
    for depth, value in verify.items():
        check.positive(f"verify_ms[{depth}]", value)
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least, whole_numbers

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "model_dir", type=Path, nargs="?", help="an exported model (--smoke: the demo model)"
    )
    parser.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3")
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--repeats", type=at_least(1), default=8)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny run (demo model unless MODEL_DIR is given, depths 1,2, 2 repeats) that "
        "checks every cost is measured; exit 1 if not",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        from qwen_mtp_desktop.core.files.paths import demo_model_dir

        args.model_dir = args.model_dir or demo_model_dir()
        args.depths, args.repeats = [1, 2], 2
    if args.model_dir is None:
        parser.error("give MODEL_DIR, an exported model folder (or --smoke)")
    if not (args.model_dir / "openvino_mtp_model.xml").is_file():
        parser.error(f"{args.model_dir} is not an exported model with an MTP head")
    depths = tuple(args.depths)
    costs = measure_step_costs(args.model_dir, depths, device=args.device, repeats=args.repeats)
    print(json.dumps(costs, indent=2))
    return check_smoke(costs, depths) if args.smoke else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's app
    raise SystemExit(main())
