"""What q = 1..4 new tokens' attention over a long kept KV cache costs per CPU kernel (issue 41
item 1): the kernel-level question behind MTP's verification at long context.

Synthetic graphs with Qwen3.5's full-attention geometry (query heads, KV heads and head size from
a checkpoint's config.json, `--config`; Qwen3.5-0.8B's 8 / 2 / 256 and its 6 full-attention
layers by default), `--layers` independent attention layers per call, each over its own cache of
`past` tokens, timed per call for every path:

- `stateful u8`: what the app's target graph does today. A ReadValue -> Gather(beam_idx) ->
  Concat -> repeat-KV -> ScaledDotProductAttention (float mask, explicit scale) -> Assign per
  layer, as the export has it; the CPU plugin fuses that into ScaledDotProductAttentionWithKVCache
  (checked in the compiled graph) with its default u8 cache, and runs any call over a non-empty
  cache on its single-token kernel, one query at a time.
- `paged u8` / `paged bf16`: the PagedAttentionExtension operation (what
  `paged_attention_transformation` puts in place of each attention) with the caller owning the
  key/value cache tensors ([blocks, KV heads, 32, head size], u8 with in-block scales or bf16,
  the layout the compiled model's inputs give), one sequence: past_lens [past],
  subsequence_begins [0, q], block_indices 0..n-1. Every timed call writes the same slots
  (past .. past+q-1), so the past stays the same size.
- `paged bf16 split`: the same graph and caches, the q tokens passed as q subsequences of one
  token each over the same blocks (past_lens past .. past+q-1): every subsequence then takes
  the kernel's single-token path, the one a plain step takes, so a verification computes each
  position as a plain step would (the multi-token path rounds differently), at the price of
  reading the past q times. Not with a u8 cache: its keys are quantized per channel over a
  block, and q subsequences writing one block in the same call race on its scales (outputs off
  by up to 0.4 in the smoke check, not every run).
- `sdpa bf16`: a plain ScaledDotProductAttention over explicit past+new K/V inputs in bf16 (the
  shared KV heads broadcast by the attention, as graphs.group_attention does): the blocked
  (brgemm) multi-query kernel, not usable as is (the cache would be an input to copy every call),
  shown for what the kernel costs.

Past keys and values are random (the same numbers on every path); the stateful caches are set
from f32 arrays, the paged ones filled by calls of the paged graph itself in 32-token-aligned
subsequences (cheap: each chunk attends only to itself, and the cache layout is the kernel's
own). Rounds interleave paths and query counts; the table gives the median ms per call and the
median of per-round ratios q=k+1 / q=1.

    python benchmarks/attention_kernels.py [--contexts 1024,4096,16384,32768] [--rounds 5]

`--smoke`: contexts of 64 and 100 tokens, 2 layers, one round, and every path's output checked
against a float64 numpy reference of the same attention (and so against each other).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _args import at_least, whole_numbers
from _paged import BLOCK, bind_zeroed_caches
from _smoke import SmokeCheck

SCRIPT = "attention_kernels.py"
FILL_CHUNK = 512  # tokens per subsequence when the paged caches are filled
PATHS = (
    "stateful u8", "paged u8", "paged bf16", "paged bf16 split", "sdpa bf16"
)  # fmt: skip
#: Smoke tolerance on the attention output (values ~N(0, 1)/sqrt(past)): u8 caches round.
TOLERANCE = {"stateful u8": 0.05, "paged u8": 0.05, "paged bf16": 0.03, "sdpa bf16": 0.03,
          "paged bf16 split": 0.03}  # fmt: skip
CONFIGS = (
    Path("/tmp/qwen35-fullsize/qwen3.5-0.8b-agree-ckpt/config.json"),
    Path("/tmp/qwen35-fullsize/qwen3.5-0.8b-agree-int4/config.json"),
)


@dataclass(frozen=True)
class Geometry:
    heads: int
    kv_heads: int
    head_size: int
    layers: int  # attention layers per call

    @property
    def scale(self) -> float:
        return float(self.head_size**-0.5)


def read_geometry(config: Path | None, layers: int | None) -> tuple[Geometry, str]:
    """The full-attention geometry from a checkpoint's config.json (text_config when nested),
    or Qwen3.5-0.8B's; and where it came from."""
    candidates = [config] if config is not None else [p for p in CONFIGS if p.is_file()]
    for path in candidates:
        data = json.loads(path.read_text())
        text = data.get("text_config", data)
        full = sum(1 for t in text.get("layer_types", []) if t == "full_attention")
        geometry = Geometry(
            int(text["num_attention_heads"]),
            int(text["num_key_value_heads"]),
            int(text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]),
            layers or full or 6,
        )
        return geometry, str(path)
    return Geometry(8, 2, 256, layers or 6), "Qwen3.5-0.8B defaults"


# ----------------------------------------------------------------------------- graphs


def stateful_graph(g: Geometry) -> Any:
    """Per layer: ReadValue -> Gather(beam_idx) -> Concat -> repeat KV -> SDPA, Assign."""
    import openvino as ov
    import openvino.opset6 as ops6
    import openvino.opset13 as ops
    from openvino.op.util import Variable, VariableInfo

    q = ops.parameter([-1, g.heads, -1, g.head_size], ov.Type.f32, name="q")
    k = ops.parameter([-1, g.kv_heads, -1, g.head_size], ov.Type.f32, name="k")
    v = ops.parameter([-1, g.kv_heads, -1, g.head_size], ov.Type.f32, name="v")
    mask = ops.parameter([-1, 1, -1, -1], ov.Type.f32, name="mask")
    beam = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    group = g.heads // g.kv_heads
    results, sinks = [], []
    for layer in range(g.layers):
        full = []
        for name, new in (("key", k), ("value", v)):
            info = VariableInfo()
            info.variable_id = f"past.{name}.{layer}"
            info.data_type = ov.Type.f32
            info.data_shape = ov.PartialShape([-1, g.kv_heads, -1, g.head_size])
            variable = Variable(info)
            # An empty initial cache whose batch comes from the input, as in the export.
            empty = ops.concat(
                [
                    ops.gather(ops.shape_of(k), ops.constant(np.array([0])), 0),
                    ops.constant(np.array([g.kv_heads, 0, g.head_size], np.int64)),
                ],
                0,
            )
            init = ops.broadcast(ops.constant(np.float32(0)), empty)
            read = ops6.read_value(init, variable)
            past = ops.gather(read, beam, ops.constant(np.int64(0)))
            cat = ops.concat([past, new], 2)
            sinks.append(ops.assign(cat, variable))
            # The export's repeat_kv: [1, kv, 1, L, d] broadcast to [1, kv, group, L, d].
            unsq = ops.unsqueeze(cat, ops.constant(np.int64(2)))
            shape = ops.concat(
                [
                    ops.constant(np.array([1, g.kv_heads, group], np.int64)),
                    ops.gather(ops.shape_of(cat), ops.constant(np.array([2, 3])), 0),
                ],
                0,
            )
            bcast = ops.broadcast(unsq, shape, broadcast_spec="BIDIRECTIONAL")  # as the export
            view = ops.constant(np.array([1, g.heads, -1, g.head_size], np.int64))
            full.append(ops.reshape(bcast, view, special_zero=False))
        scale = ops.constant(np.float32(g.scale))
        attention = ops.scaled_dot_product_attention(q, full[0], full[1], mask, scale, causal=False)
        results.append(ops.result(attention))
    return ov.Model(results, sinks, [q, k, v, mask, beam], "stateful_attention")


def paged_graph(g: Geometry) -> Any:
    """Per layer one PagedAttentionExtension with its own key_cache.i / value_cache.i inputs,
    the inputs paged_attention_transformation gives it in OpenVINO 2026.4 (28: the optional
    ones as the same empty constants)."""
    import openvino as ov
    import openvino.opset13 as ops
    from openvino.op import _PagedAttentionExtension

    def const(value: Any, dtype: Any) -> Any:
        return ops.constant(np.array(value, dtype=dtype)).output(0)

    i32, f32 = np.int32, np.float32
    q = ops.parameter([-1, g.heads * g.head_size], ov.Type.f32, name="q")
    k = ops.parameter([-1, g.kv_heads * g.head_size], ov.Type.f32, name="k")
    v = ops.parameter([-1, g.kv_heads * g.head_size], ov.Type.f32, name="v")
    ints = {
        name: ops.parameter([-1], ov.Type.i32, name=name)
        for name in ("past_lens", "subsequence_begins", "block_indices", "block_indices_begins")
    }
    max_context = ops.parameter([], ov.Type.i32, name="max_context_len")
    params = [q, k, v, *ints.values(), max_context]
    results = []
    for layer in range(g.layers):
        caches = [
            ops.parameter(ov.PartialShape.dynamic(4), ov.Type.dynamic, name=f"{kind}.{layer}")
            for kind in ("key_cache", "value_cache")
        ]
        for cache in caches:
            cache.output(0).set_names({cache.get_friendly_name()})
        params += caches
        empty_i, empty_f = const(np.zeros(0), i32), const(np.zeros(0), f32)
        inputs = [
            q.output(0), k.output(0), v.output(0), caches[0].output(0), caches[1].output(0),
            *(p.output(0) for p in ints.values()),
            const(g.scale, f32), const(0, i32), empty_f, max_context.output(0),
            empty_i, empty_i, empty_i, empty_f, empty_f,  # score window, rotation, xattention
            const(0, i32), const(0, i32), const(np.zeros((0, 0, 0, 0)), f32),  # ..., sinks
            const(0, i32), empty_i, empty_i, empty_i, empty_i,  # adaptive RKV, token types
            const(np.zeros(0), np.uint8), empty_i,  # qq_bias
        ]  # fmt: skip
        attention = _PagedAttentionExtension(inputs)
        info = attention.get_rt_info()
        info["k_head_size"], info["num_k_heads"] = g.head_size, g.kv_heads
        info["v_head_size"], info["num_v_heads"] = g.head_size, g.kv_heads
        results.append(ops.result(attention.output(0)))
    return ov.Model(results, params, "paged_attention")


def sdpa_graph(g: Geometry) -> Any:
    """Per layer an SDPA over explicit bf16 K/V of past + new tokens, grouped query view."""
    import openvino as ov
    import openvino.opset13 as ops

    q = ops.parameter([1, g.heads, -1, g.head_size], ov.Type.f32, name="q")
    mask = ops.parameter([1, 1, -1, -1], ov.Type.f32, name="mask")
    group = g.heads // g.kv_heads
    grouped = ops.reshape(
        q, ops.constant(np.array([1, g.kv_heads, group, -1, g.head_size], np.int64)), False
    )
    mask5 = ops.unsqueeze(mask, ops.constant(np.int64(2)))
    params, results = [q, mask], []
    for layer in range(g.layers):
        kv = [
            ops.parameter([1, g.kv_heads, 1, -1, g.head_size], ov.Type.bf16, name=f"{n}.{layer}")
            for n in ("k", "v")
        ]
        params += kv
        # A Convert the CPU plugin drops: it computes in bf16 (its default on this CPU).
        keys, values = (ops.convert(x, ov.Type.f32) for x in kv)
        attention = ops.scaled_dot_product_attention(
            grouped, keys, values, mask5, ops.constant(np.float32(g.scale)), causal=False
        )
        back = ops.constant(np.array([1, g.heads, -1, g.head_size], np.int64))
        results.append(ops.result(ops.reshape(attention, back, False)))
    return ov.Model(results, params, "sdpa_attention")


# ----------------------------------------------------------------------------- runners


@dataclass
class Data:
    """One context's random past ([kv heads, past, d] keys and values, the same for every
    layer: each layer still reads its own copy) and the new tokens."""

    past_k: npt.NDArray[np.float32]
    past_v: npt.NDArray[np.float32]
    q: npt.NDArray[np.float32]  # [heads, max q, d]
    k: npt.NDArray[np.float32]  # [kv heads, max q, d]
    v: npt.NDArray[np.float32]

    @property
    def past(self) -> int:
        return int(self.past_k.shape[1])


def make_data(g: Geometry, past: int, max_q: int, seed: int) -> Data:
    rng = np.random.default_rng(seed)

    def normal(*shape: int) -> npt.NDArray[np.float32]:
        return rng.standard_normal(shape, dtype=np.float32)

    return Data(
        normal(g.kv_heads, past, g.head_size),
        normal(g.kv_heads, past, g.head_size),
        normal(g.heads, max_q, g.head_size),
        normal(g.kv_heads, max_q, g.head_size),
        normal(g.kv_heads, max_q, g.head_size),
    )


def reference(g: Geometry, data: Data, n: int) -> npt.NDArray[np.float64]:
    """[heads, n, d]: the new tokens' attention over past + the new tokens up to each (causal)."""
    group = g.heads // g.kv_heads
    keys = np.concatenate([data.past_k, data.k[:, :n]], 1).astype(np.float64)
    values = np.concatenate([data.past_v, data.v[:, :n]], 1).astype(np.float64)
    out = np.empty((g.heads, n, g.head_size))
    for h in range(g.heads):
        scores = data.q[h, :n].astype(np.float64) @ keys[h // group].T * g.scale
        scores[:, data.past :] += np.triu(np.full((n, n), -np.inf), 1)
        weights = np.exp(scores - scores.max(1, keepdims=True))
        out[h] = (weights / weights.sum(1, keepdims=True)) @ values[h // group]
    return out


def causal_mask(past: int, n: int) -> npt.NDArray[np.float32]:
    mask = np.zeros((1, 1, n, past + n), np.float32)
    mask[0, 0, :, past:] = np.triu(np.full((n, n), -np.inf, np.float32), 1)
    return mask


def to_bf16(array: npt.NDArray[np.float32]) -> Any:
    """An OpenVINO bf16 tensor of `array` (rounded to nearest even)."""
    import openvino as ov

    bits = np.ascontiguousarray(array, np.float32).view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    tensor = ov.Tensor(ov.Type.bf16, list(array.shape))
    np.asarray(tensor.data).view(np.uint16)[...] = rounded
    return tensor


def tokens_major(array: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """[heads, tokens, d] -> [tokens, heads * d] (PagedAttention's layout)."""
    heads, tokens, size = array.shape
    return np.ascontiguousarray(array.transpose(1, 0, 2).reshape(tokens, heads * size))


class Runner:
    """One path compiled for one context: `prepare(n)` (untimed) puts the cache back to `past`
    tokens, `call(n)` runs n new tokens and returns each layer's [heads, n, d]."""

    def prepare(self, n: int) -> None:
        """Nothing to undo by default."""

    def call(self, n: int) -> list[npt.NDArray[np.float32]]:
        raise NotImplementedError


class Stateful(Runner):
    def __init__(self, compiled: Any, g: Geometry, data: Data) -> None:
        import openvino as ov

        self.g, self.data = g, data
        self.request = compiled.create_infer_request()
        self._past = {"key": ov.Tensor(data.past_k[None]), "value": ov.Tensor(data.past_v[None])}

    def prepare(self, n: int) -> None:
        """Exactly `past` cached tokens again (every call appends its n)."""
        for state in self.request.query_state():
            state.state = self._past[state.name.split(".")[1]]

    def call(self, n: int) -> list[npt.NDArray[np.float32]]:
        d = self.data
        self.request.infer(
            {
                "q": d.q[None, :, :n], "k": d.k[None, :, :n], "v": d.v[None, :, :n],
                "mask": causal_mask(d.past, n), "beam_idx": np.zeros(1, np.int32),
            }
        )  # fmt: skip
        return [self.request.get_output_tensor(i).data[0] for i in range(self.g.layers)]


class Paged(Runner):
    """The caller's cache tensors: blocks 0 .. past+max_q, one sequence using all of them."""

    def __init__(self, compiled: Any, g: Geometry, data: Data, max_q: int, split: bool) -> None:
        self.g, self.data, self.split = g, data, split
        self.request = compiled.create_infer_request()
        self.blocks = -(-(data.past + max_q) // BLOCK)
        self.cache_bytes, _ = bind_zeroed_caches(
            compiled, self.request, self.blocks, lambda name: "cache" in name
        )
        self._fill()

    def _run(self, n: int, k: Any, v: Any, past: list[int], begins: list[int],
             tables: list[list[int]]) -> None:  # fmt: skip
        q = tokens_major(self.data.q[:, :n]) if n <= self.data.q.shape[1] else None
        if q is None:
            q = np.zeros((n, self.g.heads * self.g.head_size), np.float32)
        starts = np.cumsum([0, *(len(t) for t in tables)]).astype(np.int32)
        longest = max(p + b - a for p, a, b in zip(past, begins, begins[1:], strict=False))
        self.request.infer(
            {
                "q": q, "k": k, "v": v,
                "past_lens": np.asarray(past, np.int32),
                "subsequence_begins": np.asarray(begins, np.int32),
                "block_indices": np.asarray([b for t in tables for b in t], np.int32),
                "block_indices_begins": starts,
                "max_context_len": np.asarray(longest, np.int32),
            }
        )  # fmt: skip

    def _fill(self) -> None:
        """The past written by the kernel itself: subsequences of FILL_CHUNK tokens (block
        aligned) with no past of their own, each attending only to itself."""
        d = self.data
        keys, values = tokens_major(d.past_k), tokens_major(d.past_v)
        per_call = 8 * FILL_CHUNK
        for first in range(0, d.past, per_call):
            last = min(d.past, first + per_call)
            begins = [*range(first, last, FILL_CHUNK), last]
            tables = [list(range(a // BLOCK, -(-b // BLOCK))) for a, b in pairwise(begins)]
            rel = [b - first for b in begins]
            self._run(last - first, keys[first:last], values[first:last], [0] * (len(begins) - 1),
                      rel, tables)  # fmt: skip

    def call(self, n: int) -> list[npt.NDArray[np.float32]]:
        d = self.data
        k, v = tokens_major(d.k[:, :n]), tokens_major(d.v[:, :n])
        table = list(range(self.blocks))
        if self.split:  # n subsequences of one token over the same blocks: the 1-token kernel
            self._run(n, k, v, [d.past + i for i in range(n)], list(range(n + 1)), [table] * n)
        else:
            self._run(n, k, v, [d.past], [0, n], [table])
        heads = self.g.heads
        return [
            self.request.get_output_tensor(i).data.reshape(n, heads, -1).transpose(1, 0, 2)
            for i in range(self.g.layers)
        ]


class Explicit(Runner):
    """SDPA over explicit past + new K/V (bf16), each layer its own copy, made in prepare()."""

    def __init__(self, compiled: Any, g: Geometry, data: Data) -> None:
        self.g, self.data = g, data
        self.request = compiled.create_infer_request()
        self._inputs: dict[str, Any] = {}

    def prepare(self, n: int) -> None:
        d = self.data
        self._inputs = {"mask": causal_mask(d.past, n), "q": d.q[None, :, :n]}
        for layer in range(self.g.layers):
            for name, past, new in (("k", d.past_k, d.k), ("v", d.past_v, d.v)):
                full = np.concatenate([past, new[:, :n]], 1)
                self._inputs[f"{name}.{layer}"] = to_bf16(full[None, :, None])

    def call(self, n: int) -> list[npt.NDArray[np.float32]]:
        self.request.infer(self._inputs)
        return [self.request.get_output_tensor(i).data[0] for i in range(self.g.layers)]


# ----------------------------------------------------------------------------- measuring


def compile_paths(g: Geometry, paths: Sequence[str]) -> dict[str, Any]:
    """Each path's compiled model (the CPU's default bf16 inference precision)."""
    import openvino as ov

    core = ov.Core()
    compiled: dict[str, Any] = {}
    for path in paths:
        if path == "stateful u8":
            compiled[path] = core.compile_model(
                stateful_graph(g), "CPU", {"KV_CACHE_PRECISION": "u8"}
            )
        elif path.startswith("paged"):
            precision = path.split()[1]
            same = next((c for p, c in compiled.items() if p.split()[:2] == path.split()[:2]), None)
            compiled[path] = same or core.compile_model(
                paged_graph(g), "CPU", {"KV_CACHE_PRECISION": precision}
            )
        else:
            compiled[path] = core.compile_model(sdpa_graph(g), "CPU")
    return compiled


def fused_with_cache(compiled: Any) -> bool:
    """Whether the compiled graph runs ScaledDotProductAttentionWithKVCache: the plugin's
    ScaledDotProductAttention node with the cache inputs (beam_idx, past K, past V) added."""
    for op in compiled.get_runtime_model().get_ops():
        kind = op.get_rt_info()["layerType"].astype(str)
        if kind == "ScaledDotProductAttention" and op.get_input_size() > 5:
            return True
    return False


def runner(path: str, compiled: Any, g: Geometry, data: Data, max_q: int) -> Runner:
    if path == "stateful u8":
        return Stateful(compiled, g, data)
    if path.startswith("paged"):
        return Paged(compiled, g, data, max_q, split=path.endswith("split"))
    return Explicit(compiled, g, data)


@dataclass
class Measured:
    ms: dict[tuple[str, int], list[float]]  # (path, q) -> per round ms
    errors: dict[tuple[str, int], float]  # (path, q) -> largest |output - reference|


def measure(g: Geometry, compiled: dict[str, Any], past: int, queries: Sequence[int], rounds: int,
            repeats: int, check: bool, seed: int = 0) -> Measured:  # fmt: skip
    """Rounds of every path x query count in rotating order; a round's figure is the median of
    `repeats` calls (after one untimed warm-up call)."""
    max_q = max(queries)
    data = make_data(g, past, max_q, seed)
    runners = {path: runner(path, c, g, data, max_q) for path, c in compiled.items()}
    result = Measured({}, {})
    if check:
        for n in queries:
            expected = reference(g, data, n)
            for path, run in runners.items():
                run.prepare(n)
                outputs = run.call(n)
                worst = max(
                    float(np.abs(np.asarray(o, np.float64) - expected).max()) for o in outputs
                )
                result.errors[(path, n)] = worst
    order = [(path, n) for path in runners for n in queries]
    for round_ in range(rounds):
        shift = round_ % len(order)
        for path, n in order[shift:] + order[:shift]:
            run = runners[path]
            times = []
            for index in range(repeats + 1):
                run.prepare(n)
                began = time.perf_counter()
                run.call(n)
                if index:
                    times.append((time.perf_counter() - began) * 1000)
            result.ms.setdefault((path, n), []).append(statistics.median(times))
    return result


def ratio(m: Measured, path: str, n: int) -> float:
    """Median over rounds of q=n / q=1."""
    pairs = zip(m.ms[(path, n)], m.ms[(path, 1)], strict=True)
    return statistics.median(a / b for a, b in pairs)


def table(g: Geometry, past: int, m: Measured, paths: Sequence[str], queries: Sequence[int]) -> str:
    head = " | ".join(f"q={n} ms" for n in queries)
    ratios = [n for n in queries if n != 1]
    lines = [
        f"## past {past} tokens ({g.layers} layers x {g.heads} query / {g.kv_heads} KV heads, "
        f"head size {g.head_size})",
        "",
        f"| path | {head} | " + " | ".join(f"q={n}/q=1" for n in ratios) + " |",
        "|---|" + "---:|" * (len(queries) + len(ratios)),
    ]
    for path in paths:
        cells = [f"{statistics.median(m.ms[(path, n)]):.2f}" for n in queries]
        cells += [f"{ratio(m, path, n):.2f}x" for n in ratios]
        lines.append(f"| {path} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contexts", type=whole_numbers(1), default=[1024, 4096, 16384, 32768])
    parser.add_argument("--queries", type=whole_numbers(1, 16), default=[1, 2, 3, 4])
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument("--repeats", type=at_least(1), default=3)
    parser.add_argument("--layers", type=at_least(1), default=None)
    parser.add_argument("--config", type=Path, default=None, help="a checkpoint's config.json")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of: {', '.join(PATHS)}")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in paths if p not in PATHS]
    if unknown or not paths:
        parser.error(f"--paths: unknown path {', '.join(unknown) or '(none)'}")
    if 1 not in args.queries:
        parser.error("--queries: must include 1 (the ratios are against q=1)")
    if args.config is not None and not args.config.is_file():
        parser.error(f"--config: {args.config} is not a file")
    if args.smoke:
        args.contexts, args.rounds, args.repeats = [64, 100], 1, 1
        args.layers = args.layers or 2
    g, source = read_geometry(args.config, args.layers)
    print(f"geometry from {source}: {g.heads} query heads, {g.kv_heads} KV heads, head size "
          f"{g.head_size}, {g.layers} attention layers per call")  # fmt: skip
    compiled = compile_paths(g, paths)
    smoke = SmokeCheck(SCRIPT)
    if "stateful u8" in compiled:
        fused = fused_with_cache(compiled["stateful u8"])
        said = "yes" if fused else "NO"
        print(f"stateful graph fused into ScaledDotProductAttentionWithKVCache: {said}")
        smoke.require(fused, "the stateful graph was not fused with its cache")
    for past in args.contexts:
        m = measure(g, compiled, past, args.queries, args.rounds, args.repeats, args.smoke)
        print()
        print(table(g, past, m, paths, args.queries))
        if m.errors:
            worst = ", ".join(
                f"{p} {max(e for (q, n), e in m.errors.items() if q == p):.4f}" for p in paths
            )
            print(f"\nlargest |output - float64 reference| over q: {worst}")
        for (path, n), values in m.ms.items():
            for value in values:
                smoke.positive(f"{path} q={n} past {past} ms", value)
        for (path, n), error in m.errors.items():
            problem = f"{path} q={n} past {past}: output off the reference by {error:.4f}"
            smoke.require(error <= TOLERANCE[path], problem)
        sys.stdout.flush()
    return smoke.finish() if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
