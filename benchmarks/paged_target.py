"""A prototype, not the app's code: the app's target graph (core.decoding.graphs.transform_target:
Gated DeltaNet states as explicit inputs/outputs) with its full-attention layers' stateful KV
caches replaced by PagedAttention over cache tensors the caller owns (issue 41 item 1).

Each ScaledDotProductAttention whose keys and values are a ReadValue -> Gather(beam_idx) ->
Concat of a stateful cache becomes one PagedAttentionExtension: query, key and value are this
call's tokens ([tokens, heads x head size]), the past is read from `key_cache.i` /
`value_cache.i` ([blocks, KV heads, 32, head size]) through `block_indices`, and the call's keys
and values are written at positions past_lens .. past_lens + tokens - 1. The cache variables and
their Assigns go; the Gated DeltaNet states stay explicit ports, the attention mask goes unused
(attention is causal over past_lens tokens: a rejected draft's entries are overwritten by the next
call, nothing is hidden or copied). openvino's own `paged_attention_transformation` is not used:
on Qwen3.5 in OpenVINO 2026.4 it also turns each Gated DeltaNet layer into PagedGatedDeltaNet /
PagedCausalConv1D over block-indexed state tables (`la.block_indices`, `la.cache_interval`) and
flattens the batch into tokens, which the app's explicit-state double buffering does not fit.

What it measures, on one model, both graphs compiled the same way:
1. Logits and the residual stream entering the final norm (the `agree` variant's logits are all
   0): a prompt prefilled in chunks, then single-token steps and a verification of 4 tokens, on
   the stateful graph (f32 cache under exact numerics, the app's u8 otherwise) and each paged
   graph: max |difference| and argmax agreement; and, per graph, a 4-token verification
   against the same 4 tokens fed one at a time from the same state (MTP == plain needs the same
   argmax; bit-identical makes it certain). `split`: the verification's tokens passed to
   PagedAttention as 4 subsequences of one token over the same blocks, so each takes the
   single-token kernel a plain step takes (the multi-token kernel packs the whole past into a
   scratch copy and multiplies in bf16: one pass over the past, other rounding).
2. Time: a prompt prefilled in `--chunk`-token calls to each context length (timed, chunks
   interleaved across graphs), then rounds of a plain step (1 token) and verifications of 2, 3
   and 4 tokens at that past, interleaved across graphs; the median ms and the median per-round
   ratio to the same graph's plain step.

    python benchmarks/paged_target.py MODEL_DIR [--contexts 4096,16384] [--chunk 2048]
    python benchmarks/paged_target.py --smoke    # the demo model, short; checks
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402
from _paged import BLOCK, bind_zeroed_caches  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.decoding.graphs import (  # noqa: E402
    LOGITS,
    LOGITS_POSITIONS,
    STATE_IN,
    STATE_OUT,
    transform_target,
)

SCRIPT = "paged_target.py"
DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"
RESIDUAL = "residual"
PAGED_INPUTS = ("past_lens", "subsequence_begins", "block_indices", "block_indices_begins")


def _kv_source(value: Any) -> tuple[Any, Any] | None:
    """(this call's keys or values [B, KV heads, T, d], the cache's ReadValue) behind an
    attention input: through the export's repeat-KV (Reshape / Broadcast / Unsqueeze) to a
    Concat of Gather(ReadValue, beam_idx) and the new entries."""
    node = value.get_node()
    while node.get_type_name() in ("Reshape", "Broadcast", "Unsqueeze", "Multiply", "Convert"):
        node = node.input_value(0).get_node()
    if node.get_type_name() != "Concat" or node.get_input_size() != 2:
        return None
    past = node.input_value(0).get_node()
    if past.get_type_name() == "Gather":
        past = past.input_value(0).get_node()
    if past.get_type_name() == "Convert":
        past = past.input_value(0).get_node()
    if past.get_type_name() != "ReadValue":
        return None
    return node.input_value(1), past


def page_attention(model: Any) -> int:
    """Replace every stateful-cache attention of `model` by PagedAttentionExtension, in place
    (module docstring); how many. Adds the parameters key_cache.i, value_cache.i, past_lens,
    subsequence_begins, block_indices, block_indices_begins and max_context_len."""
    import openvino as ov
    import openvino.opset13 as ops
    from openvino.op import _PagedAttentionExtension

    def const(value: Any, dtype: Any) -> Any:
        return ops.constant(np.array(value, dtype=dtype)).output(0)

    i32, f32 = np.int32, np.float32
    shared = {name: ops.parameter([-1], ov.Type.i32, name=name) for name in PAGED_INPUTS}
    max_context = ops.parameter([], ov.Type.i32, name="max_context_len")
    params: list[Any] = [*shared.values(), max_context]
    for param in params:
        param.output(0).set_names({param.get_friendly_name()})
    sinks = {sink.get_variable_id(): sink for sink in model.get_sinks()}
    index = 0
    for node in list(model.get_ordered_ops()):
        if node.get_type_name() != "ScaledDotProductAttention":
            continue
        sources = [_kv_source(node.input_value(i)) for i in (1, 2)]
        if sources[0] is None or sources[1] is None:
            continue
        query = node.input_value(0)
        q_shape = query.get_partial_shape()
        heads, size = q_shape[1].get_length(), q_shape[3].get_length()
        kv_heads = sources[0][0].get_partial_shape()[1].get_length()
        order = ops.constant(np.array([0, 2, 1, 3], np.int64))

        def flat(x: Any, width: int, order: Any = order) -> Any:
            return ops.reshape(
                ops.transpose(x, order), ops.constant(np.array([-1, width], np.int64)), False
            ).output(0)

        caches = []
        for kind in ("key_cache", "value_cache"):
            cache = ops.parameter(
                ov.PartialShape.dynamic(4), ov.Type.dynamic, name=f"{kind}.{index}"
            )
            cache.output(0).set_names({f"{kind}.{index}"})
            caches.append(cache)
        params += caches
        scale = node.input_value(4) if node.get_input_size() > 4 else const(size**-0.5, f32)
        if scale.get_element_type() != ov.Type.f32:
            scale = ops.convert(scale, ov.Type.f32).output(0)
        empty_i, empty_f = const(np.zeros(0), i32), const(np.zeros(0), f32)
        inputs = [
            flat(query, heads * size),
            flat(sources[0][0], kv_heads * size),
            flat(sources[1][0], kv_heads * size),
            caches[0].output(0), caches[1].output(0),
            *(p.output(0) for p in shared.values()),
            scale, const(0, i32), empty_f, max_context.output(0),
            empty_i, empty_i, empty_i, empty_f, empty_f,
            const(0, i32), const(0, i32), const(np.zeros((0, 0, 0, 0)), f32),
            const(0, i32), empty_i, empty_i, empty_i, empty_i,
            const(np.zeros(0), np.uint8), empty_i,
        ]  # fmt: skip
        attention = _PagedAttentionExtension(inputs)
        info = attention.get_rt_info()
        info["k_head_size"], info["num_k_heads"] = size, kv_heads
        info["v_head_size"], info["num_v_heads"] = size, kv_heads
        back = ops.reshape(
            attention.output(0), ops.constant(np.array([1, -1, heads, size], np.int64)), False
        )
        node.output(0).replace(ops.transpose(back, order).output(0))
        for _value, read in sources:  # type: ignore[misc]
            variable_id = read.get_variable_id()
            model.remove_sink(sinks[variable_id])
            model.remove_variable(model.get_variable_by_id(variable_id))
        index += 1
    model.add_parameters(params)
    model.validate_nodes_and_infer_types()
    left = [n for n in model.get_ordered_ops() if n.get_type_name() == "ReadValue"]
    if left:
        raise RuntimeError(f"{len(left)} cache ReadValues still in use after paging")
    return index


def add_residual_output(model: Any) -> None:
    """An output `residual`: the residual stream entering the final norm (the Add under the
    norm's Multiplys). The logits alone cannot show a difference on the `agree` variant,
    whose zeroed final norm makes every logit 0."""
    import openvino as ov
    import openvino.opset13 as ops

    matmul = next(
        r.input_value(0).get_node()
        for r in model.get_results()
        if LOGITS in r.output(0).get_names()
    )
    node = matmul.input_value(0).get_node()
    while node.get_type_name() in ("Gather", "Multiply", "Convert"):
        node = node.input_value(0).get_node()
    if node.get_type_name() != "Add":
        raise RuntimeError(f"no residual Add under the final norm (found {node.get_type_name()})")
    value = node.output(0)
    if value.get_element_type() != ov.Type.f32:
        value = ops.convert(value, ov.Type.f32).output(0)
    result = ops.result(value)
    result.output(0).set_names({RESIDUAL})
    model.add_results([result])


class Graph:
    """One compiled target graph (stateful or paged) with its request, its Gated DeltaNet states
    bound in place (a call's outputs overwrite its inputs, as the app's kept calls do) and, when
    paged, its cache tensors for `capacity` tokens."""

    def __init__(self, core: Any, model_dir: Path, *, paged: bool, properties: dict[str, Any],
                 capacity: int, label: str) -> None:  # fmt: skip
        import openvino as ov

        self.label, self.paged = label, paged
        model = core.read_model(model_dir / "openvino_language_model.xml")
        precision = properties.get("INFERENCE_PRECISION_HINT", "bf16")
        compute = ov.Type.f32 if precision == "f32" else ov.Type.bf16
        target = transform_target(model, compute)
        add_residual_output(model)
        self.vocab = target.vocab_size
        self.attention_layers = page_attention(model) if paged else 0
        self.compiled = core.compile_model(model, "CPU", properties)
        self.request = self.compiled.create_infer_request()
        self.states = {p.name: ov.Tensor(p.element_type, list(p.shape)) for p in target.states}
        for name, tensor in self.states.items():
            self.request.set_tensor(STATE_IN + name, tensor)
            self.request.set_tensor(STATE_OUT + name, tensor)
        self.blocks = -(-capacity // BLOCK)
        self.cache_bytes = 0
        if paged:
            self.cache_bytes, self.cache_type = bind_zeroed_caches(
                self.compiled, self.request, self.blocks, lambda name: "_cache." in name
            )
        self.length = 0
        self.reset()

    def reset(self) -> None:
        for tensor in self.states.values():
            np.asarray(tensor.data).view(np.uint8).fill(0)
        if not self.paged:
            self.request.reset_state()
        self.length = 0

    def snapshot(self) -> tuple[int, list[npt.NDArray[np.uint8]], list[Any]]:
        """The length, the Gated DeltaNet states and, for the stateful graph, a copy of its KV
        caches (a paged cache needs none: a later call overwrites the entries after `length`)."""
        import openvino as ov

        states = [np.array(np.asarray(t.data).view(np.uint8)) for t in self.states.values()]
        caches = [] if self.paged else [
            (s.name, ov.Tensor(np.array(s.state.data))) for s in self.request.query_state()
        ]  # fmt: skip
        return self.length, states, caches

    def restore(self, saved: tuple[int, list[npt.NDArray[np.uint8]], list[Any]]) -> None:
        self.length = saved[0]
        for tensor, array in zip(self.states.values(), saved[1], strict=True):
            np.asarray(tensor.data).view(np.uint8)[...] = array
        tensors = dict(saved[2])
        for state in self.request.query_state() if tensors else ():
            state.state = tensors[state.name]

    def run(self, embeds: npt.NDArray[np.float32], rows_from: int,
            split: bool = False) -> npt.NDArray[np.float32]:  # fmt: skip
        """Process embeds [1, T, hidden] at positions length..; logits of rows rows_from.. .
        `split` (paged): the T tokens go to the attention as T subsequences of one token over
        the same blocks, so each takes the single-token kernel a plain step takes."""
        count = embeds.shape[1]
        total = self.length + count
        positions = np.arange(self.length, total, dtype=np.int64)
        inputs: dict[str, Any] = {
            "inputs_embeds": embeds,
            "position_ids": np.broadcast_to(positions, (4, 1, count)).copy(),
            "beam_idx": np.zeros(1, np.int32),
            "attention_mask": np.ones((1, total), np.int64),
            LOGITS_POSITIONS: np.arange(rows_from, count, dtype=np.int64),
        }
        if self.paged:
            used = -(-total // BLOCK)
            if used > self.blocks:
                raise ValueError(f"{total} tokens do not fit {self.blocks} blocks")
            table = np.arange(used, dtype=np.int32)
            parts = count if split else 1
            inputs |= {
                "past_lens": (self.length + np.arange(parts)).astype(np.int32),
                "subsequence_begins": (np.arange(parts + 1) * (1 if split else count)).astype(
                    np.int32
                ),
                "block_indices": np.tile(table, parts),
                "block_indices_begins": (np.arange(parts + 1) * used).astype(np.int32),
                "max_context_len": np.array(total, np.int32),
            }
        self.request.infer(inputs)
        self.length = total
        #: The residual stream entering the final norm, every position of the call [T, hidden].
        self.residual = np.array(self.request.get_tensor(RESIDUAL).data[0], np.float32)
        return np.array(self.request.get_tensor(LOGITS).data[0], np.float32)


class Tokens:
    """Random token ids (seeded) and their embeddings from the export's embedding model."""

    def __init__(self, core: Any, model_dir: Path, vocab: int, seed: int = 0) -> None:
        compiled = core.compile_model(model_dir / "openvino_text_embeddings_model.xml", "CPU")
        self.request = compiled.create_infer_request()
        self.ids = np.random.default_rng(seed).integers(0, min(vocab, 50_000), 1 << 16)

    def embeds(self, start: int, count: int) -> npt.NDArray[np.float32]:
        ids = self.ids[np.arange(start, start + count) % len(self.ids)][None]
        self.request.infer({0: ids.astype(np.int64)})
        return np.array(self.request.get_output_tensor(0).data, np.float32)


def compare(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> tuple[float, int, int]:
    """(max |a - b| relative to max |a|, rows whose argmax agrees, rows)."""
    scale = float(np.abs(a).max()) or 1.0
    same = int((a.argmax(-1) == b.argmax(-1)).sum())
    return float(np.abs(a - b).max()) / scale, same, a.shape[0]


def verify_vs_steps(graph: Graph, tokens: Tokens, prompt: int, smoke: SmokeCheck,
                    strict: bool, split: bool = False) -> None:  # fmt: skip
    """A 4-token verification against the same 4 tokens one at a time, from the same state
    (MTP == plain needs the same argmax; bit-identical logits make it certain)."""
    saved = graph.snapshot()
    verify = graph.run(tokens.embeds(prompt + 8, 4), 0, split=split)
    verify_residual = graph.residual
    graph.restore(saved)
    rows_, residuals = [], []
    for i in range(4):
        rows_.append(graph.run(tokens.embeds(prompt + 8 + i, 1), 0))
        residuals.append(graph.residual)
    steps, steps_residual = np.concatenate(rows_), np.concatenate(residuals)
    rel, same, rows = compare(steps, verify)
    exact = bool(np.array_equal(steps, verify) and np.array_equal(steps_residual, verify_residual))
    res = float(np.abs(steps_residual - verify_residual).max()) / float(
        np.abs(steps_residual).max() or 1.0
    )
    graph.restore(saved)  # as it was for the next check
    label = f"{graph.label} split" if split else graph.label
    print(f"{label}: 4-token verification vs 4 single steps: max |diff| {rel:.2e} (residual "
          f"{res:.2e}), "
          f"argmax equal {same}/{rows}, bit-identical: {'yes' if exact else 'no'}")  # fmt: skip
    smoke.require(same == rows or not strict, f"{label}: verification argmax != steps")


def check(core: Any, model_dir: Path, prompt: int, chunk: int, properties: dict[str, Any],
          caches: Sequence[str], smoke: SmokeCheck) -> None:  # fmt: skip
    """Logits (and the residual stream) of the stateful graph against each paged graph over the
    same tokens, and each
    graph's verification of 4 tokens against the same tokens one at a time. Argmax agreement
    is required under exact numerics only (bf16 can flip near-ties, RUNTIME-NOTES)."""
    strict = properties.get("INFERENCE_PRECISION_HINT") == "f32"
    # Under exact numerics the reference keeps an f32 cache too (like for like); otherwise the
    # app's u8 cache.
    reference_cache = "f32" if strict else "u8"
    stateful = Graph(core, model_dir, paged=False, capacity=0, label=f"stateful {reference_cache}",
                     properties={**properties, "KV_CACHE_PRECISION": reference_cache})  # fmt: skip
    tokens = Tokens(core, model_dir, stateful.vocab)
    numerics = ", ".join(f"{k}={v}" for k, v in properties.items()) or "defaults"
    print(f"## logits ({numerics}; {prompt} prompt tokens in {chunk}-token calls, then 4 "
          "single-token steps and a 4-token verification)")  # fmt: skip

    def script(graph: Graph) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Every call's projected logits and every position's residual, concatenated."""
        logits, residual = [], []
        calls = [(s, min(chunk, prompt - s)) for s in range(0, prompt, chunk)]
        calls += [(prompt + i, 1) for i in range(4)] + [(prompt + 4, 4)]
        for start, count in calls:
            logits.append(
                graph.run(tokens.embeds(start, count), 0 if start >= prompt else count - 1)
            )
            residual.append(graph.residual)
        return np.concatenate(logits), np.concatenate(residual)

    reference, reference_residual = script(stateful)
    verify_vs_steps(stateful, tokens, prompt, smoke, strict)
    del stateful
    for cache in caches:
        props = {**properties, "KV_CACHE_PRECISION": cache}
        paged = Graph(core, model_dir, paged=True, properties=props, capacity=prompt + 16,
                      label=f"paged {cache}")  # fmt: skip
        assert isinstance(paged.cache_type, str)
        got, got_residual = script(paged)
        rel, same, rows = compare(reference, got)
        res = float(np.abs(reference_residual - got_residual).max()) / float(
            np.abs(reference_residual).max() or 1.0
        )
        print(f"{paged.label} ({paged.cache_type} cache) vs stateful {reference_cache}: max |diff| "
              f"{rel:.2e} of "
              f"the largest logit, argmax equal in {same}/{rows} rows; residual stream max "
              f"|diff| {res:.2e} of its largest ({len(reference_residual)} positions)")  # fmt: skip
        smoke.require(res < 0.05, f"paged {cache}: residual off the stateful graph by {res:.3f}")
        smoke.require(same == rows or not strict, f"paged {cache}: argmax differs from stateful")
        smoke.require(rel < 0.05, f"paged {cache}: logits off the stateful graph by {rel:.3f}")
        verify_vs_steps(paged, tokens, prompt, smoke, strict)
        if cache != "u8":  # one-token subsequences sharing a u8 block race on its key scales
            verify_vs_steps(paged, tokens, prompt, smoke, strict, split=True)
        del paged
    print()


def timing(core: Any, model_dir: Path, contexts: Sequence[int], chunk: int, rounds: int,
           repeats: int, caches: Sequence[str], smoke: SmokeCheck) -> None:  # fmt: skip
    """Chunked prefill to each context on every graph (chunks interleaved across graphs), then
    rounds of q = 1..4 calls at that past, interleaved; medians and per-round ratios."""
    capacity = max(contexts) + 64
    graphs = [Graph(core, model_dir, paged=False, properties={}, capacity=0, label="stateful u8")]
    graphs += [
        Graph(
            core,
            model_dir,
            paged=True,
            properties={"KV_CACHE_PRECISION": c},
            capacity=capacity,
            label=f"paged {c}",
        )
        for c in caches
    ]
    tokens = Tokens(core, model_dir, graphs[0].vocab)
    prefill = {g.label: 0.0 for g in graphs}
    done = 0
    for context in sorted(contexts):
        while done < context:
            count = min(chunk, context - done)
            for graph in graphs:
                began = time.perf_counter()
                graph.run(tokens.embeds(done, count), count - 1)
                prefill[graph.label] += time.perf_counter() - began
            done += count
        for graph in graphs:
            graph.compiled.release_memory()  # the prefill's intermediate buffers
        print(f"## past {context} tokens: prefill in {chunk}-token calls, seconds so far: "
              + ", ".join(f"{k} {v:.1f}" for k, v in prefill.items()))  # fmt: skip
        for label, seconds in prefill.items():
            smoke.positive(f"{label} prefill to {context}", seconds)
        ms: dict[tuple[str, int], list[float]] = {}
        modes = [(g, False) for g in graphs]
        modes += [(g, True) for g in graphs if g.paged and "u8" not in g.label]  # u8: a race
        order = [(g, split, n) for g, split in modes for n in (1, 2, 3, 4)]
        for round_ in range(rounds):
            shift = (round_ * 5) % len(order)
            for graph, split, n in order[shift:] + order[:shift]:
                embeds = tokens.embeds(context, n)
                times = []
                for _ in range(repeats):
                    saved_length = graph.length
                    began = time.perf_counter()
                    graph.run(embeds, 0, split=split)
                    times.append((time.perf_counter() - began) * 1000)
                    if graph.paged:
                        graph.length = saved_length  # the same slots again next call
                label = f"{graph.label} split" if split else graph.label
                ms.setdefault((label, n), []).append(statistics.median(times))
        print(
            "\n| graph | plain step ms | verify 2 ms | verify 3 ms | verify 4 ms | 2/1 | 3/1 |",
            end="",
        )
        print(" 4/1 |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for graph, split in modes:
            label = f"{graph.label} split" if split else graph.label
            cells = [f"{statistics.median(ms[(label, n)]):.1f}" for n in (1, 2, 3, 4)]
            for n in (2, 3, 4):
                pairs = zip(ms[(label, n)], ms[(label, 1)], strict=True)
                cells.append(f"{statistics.median(a / b for a, b in pairs):.2f}x")
            print(f"| {label} | " + " | ".join(cells) + " |")
            for n in (1, 2, 3, 4):
                smoke.positive(f"{label} q={n} at {context}", statistics.median(ms[(label, n)]))
        grown = max(g.length for g in graphs if not g.paged) - context
        print(f"(the stateful cache grew by {grown} tokens over the rounds; paged calls rewrite "
              "the same slots)\n")  # fmt: skip
        sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", type=Path, help="an exported Qwen3.5 model folder")
    parser.add_argument("--contexts", type=whole_numbers(1), default=[4096, 16384])
    parser.add_argument("--chunk", type=at_least(1), default=2048)
    parser.add_argument("--rounds", type=at_least(1), default=5)
    parser.add_argument("--repeats", type=at_least(1), default=3)
    parser.add_argument("--check-prompt", type=at_least(8), default=300)
    parser.add_argument("--check-chunk", type=at_least(1), default=64)
    parser.add_argument("--caches", default="u8,bf16", help="paged cache precisions to time")
    parser.add_argument("--check-only", action="store_true", help="the logits checks, no timing")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    if args.smoke:
        args.model = args.model or DEMO
        args.contexts, args.chunk, args.rounds, args.repeats = [64, 160], 48, 1, 1
        args.check_prompt = 100
    if args.model is None or not (args.model / "openvino_language_model.xml").is_file():
        parser.error(f"{args.model} is not an exported model folder")
    caches = [c.strip() for c in args.caches.split(",") if c.strip()]
    import openvino as ov

    core = ov.Core()
    smoke = SmokeCheck(SCRIPT)
    exact = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0}
    check(core, args.model, args.check_prompt, args.check_chunk, exact, ["u8", "f32"], smoke)
    check(core, args.model, args.check_prompt, args.check_chunk, {}, caches, smoke)
    if not args.check_only:
        timing(
            core, args.model, args.contexts, args.chunk, args.rounds, args.repeats, caches, smoke
        )
    return smoke.finish() if args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
