"""OpenVINO graph changes that let the app's own MTP decoder (core.decoding.decoder) run a Qwen3.5
export: read the IRs once, change them in memory, never write them back.

- Target (`openvino_language_model`): a `last_hidden_state` output (the lm_head's input, i.e.
  the final-normed hidden state the MTP head takes), a `logits_positions` input so only the
  positions the decoder asks for are projected onto the 248k-token vocabulary (a prefill of
  1,000 tokens needs one row, not 1,000), and the Gated DeltaNet states (convolution and
  recurrent, fixed size) turned from internal variables into explicit inputs and outputs. The
  decoder double-buffers those, so rejecting drafts costs no copy: the next call simply reads
  the previous buffers again. Attention KV caches (growing) stay internal and are trimmed.
- Draft (`openvino_mtp_model`): the target's lm_head restricted to a draft vocabulary (rows
  chosen by the decoder, stored INT8 per row) and an argmax in the graph, so a draft step costs
  the MTP layer plus a small projection instead of a full-vocabulary one. openvino-genai grafts
  the full lm_head onto the MTP model (`graft_lm_head_on_mtp`); this does the same with fewer
  rows. The target still verifies against the full vocabulary, so output stays exact.

Runtime facts this relies on are in RUNTIME-NOTES: the logits Result is produced by the lm_head
MatMul whose first input is the last hidden state (openvino-genai's `expose_last_hidden_state`
relies on the same), and KV states are the variables with a dynamic sequence axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Draft vocabulary size: the draft projection should cost little next to a target step.
#: 32,768 rows of INT8 cost about a tenth of the 248k-row projection
#: (benchmarks/results/fullsize.md).
#: Here, not in decoder.py, so LoadOptions (core.engine.types) can name it without loading
#: the decoding loop and numpy into the window's process.
DEFAULT_DRAFT_VOCAB = 32_768

LOGITS = "logits"
HIDDEN = "last_hidden_state"
LOGITS_POSITIONS = "logits_positions"
DRAFT_INDEX = "draft_index"
#: The draft head's logits over the draft vocabulary (sampled drafts read them).
DRAFT_LOGITS = "draft_logits"
STATE_IN = "state_in."
STATE_OUT = "state_out."
#: The continuation graph's attention caches: the live entries in, those plus the call's out.
KV_IN = "kv_in."
KV_OUT = "kv_out."


class GraphError(Exception):
    """The IR does not have the shape the fast decoder needs; the message says what differs."""


@dataclass(frozen=True)
class StatePort:
    """One Gated DeltaNet state turned into an explicit input/output pair."""

    name: str
    shape: tuple[int, ...]
    element_type: Any  # openvino.Type


@dataclass(frozen=True)
class TargetGraph:
    model: Any  # openvino.Model
    states: tuple[StatePort, ...]
    hidden_size: int
    vocab_size: int


def _logits_matmul(model: Any) -> Any:
    for result in model.get_results():
        if LOGITS in result.output(0).get_names() or LOGITS in result.input_value(0).get_names():
            node = result.input_value(0).get_node()
            if node.get_type_name() != "MatMul":
                raise GraphError(f"the logits output comes from {node.get_type_name()}, not MatMul")
            return node
    raise GraphError("the language model has no `logits` output")


def lm_head_weight(model: Any) -> tuple[Any, bool]:
    """The lm_head weight (its decompression subgraph's output) and whether it is transposed."""
    matmul = _logits_matmul(model)
    return matmul.input_value(1), bool(matmul.get_attributes().get("transpose_b", False))


def transform_target(model: Any, compute_type: Any = None) -> TargetGraph:
    """Change the language model in place (module docstring) and describe the result.

    `compute_type`: the element type (openvino.Type) of the explicit states and of the hidden
    state output; pass the device's inference precision. The CPU plugin keeps these states in
    it internally (bf16 on CPUs with bf16), and an f32 port there keeps the neighbouring layers
    out of bf16: an f32 hidden output alone turned the whole residual stream f32 (96 extra
    reorders, steps 1.2-1.4x slower on Qwen3.5-0.8B)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    matmul = _logits_matmul(model)
    hidden = matmul.input_value(0)
    hidden_shape = hidden.get_partial_shape()
    hidden_size = hidden_shape[2].get_length() if hidden_shape.rank.get_length() == 3 else -1
    logits_shape = matmul.get_output_partial_shape(0)
    vocab_size = logits_shape[2].get_length() if logits_shape[2].is_static else -1
    if hidden_size <= 0 or vocab_size <= 0:
        raise GraphError(f"unexpected lm_head shapes {hidden_shape} -> {logits_shape}")

    hidden_out = hidden if compute_type in (None, hidden.get_element_type()) else None
    if hidden_out is None:
        hidden_out = ops.convert(hidden, compute_type).output(0)
    hidden_result = ops.result(hidden_out)
    hidden_result.output(0).set_names({HIDDEN})
    positions = ops.parameter([-1], ov.Type.i64, name=LOGITS_POSITIONS)
    positions.output(0).set_names({LOGITS_POSITIONS})
    gathered = ops.gather(hidden, positions, ops.constant(np.int64(1)))
    matmul.input(0).replace_source_output(gathered.output(0))

    new_params: list[Any] = [positions]
    new_results: list[Any] = [hidden_result]
    states: list[StatePort] = []
    assigns = {sink.get_variable_id(): sink for sink in model.get_sinks()}
    for node in model.get_ordered_ops():
        if node.get_type_name() != "ReadValue":
            continue
        variable_id = node.get_variable_id()
        shape = node.get_output_partial_shape(0)
        if not all(shape[i].is_static for i in range(1, shape.rank.get_length())):
            # A growing cache stays internal; the decoder trims it on axis 2.
            if shape.rank.get_length() != 4 or shape[2].is_static:
                raise GraphError(f"state {variable_id} is not a [batch, heads, seq, dim] cache")
            continue
        assign = assigns.get(variable_id)
        if assign is None:
            raise GraphError(f"state {variable_id} has no Assign")
        dims = (1, *(shape[i].get_length() for i in range(1, shape.rank.get_length())))
        element = compute_type or node.get_output_element_type(0)
        name = f"s{len(states)}"
        param, result = _expose_state(
            model, node, assign, list(dims), element, STATE_IN + name, STATE_OUT + name
        )
        new_params.append(param)
        new_results.append(result)
        states.append(StatePort(name, dims, element))
    model.add_parameters(new_params)
    # The state outputs go first. The CPU plugin orders execution by a depth-first walk from
    # the results in order, so results added after `logits` ran after the whole network: a
    # convolution state's new value is a Slice of [state, the layer's new tokens] ([1, 6144,
    # 4 + tokens] f32 on Qwen3.5-0.8B), and run last it kept every Gated DeltaNet layer's
    # concatenation alive to the end of the call, about half of a long prefill's memory (0.2
    # of 0.44 MB per prompt token; 1,645 -> 838 MB above the model at 4k tokens). Ordered
    # first, each slice runs inside its layer: the same nodes, bit-identical outputs, and
    # ports are found by name, never by index.
    original = list(model.get_results())
    for result in original:
        model.remove_result(result)
    model.add_results([*new_results[1:], hidden_result, *original])
    model.validate_nodes_and_infer_types()
    return TargetGraph(model, tuple(states), hidden_size, vocab_size)


def make_kv_explicit(model: Any) -> tuple[str, ...]:
    """Turn the attention caches of a `transform_target` graph into explicit inputs
    `kv_in.<i>` ([1, heads, past, head size]) and outputs `kv_out.<i>` (past + this call's
    entries), in place; the caches' variable ids in port order.

    Why a second graph: the CPU plugin fuses a stateful cache with its attention
    (ScaledDotProductAttentionWithKVCache) and then runs every call that continues a non-empty
    cache on its single-token kernel, one query at a time (`use_one_token = L1 == 1 ||
    (fuse_concat && L0 > 0)` in scaled_attn.cpp). A 500-token follow-up after 6,000 kept tokens
    cost 3-4x a cold 500-token prefill there. With the cache as a plain input the attention is
    not fused and takes the blocked (brgemm) kernel, as a cold prefill does."""

    assigns = {sink.get_variable_id(): sink for sink in model.get_sinks()}
    params: list[Any] = []
    results: list[Any] = []
    names: list[str] = []
    for node in model.get_ordered_ops():
        if node.get_type_name() != "ReadValue":
            continue
        variable_id = node.get_variable_id()
        shape = node.get_output_partial_shape(0)
        assign = assigns.get(variable_id)
        if assign is None or shape.rank.get_length() != 4 or shape[2].is_static:
            raise GraphError(f"state {variable_id} is not a growing [batch, heads, seq, dim] cache")
        index = len(params)
        param, result = _expose_state(
            model,
            node,
            assign,
            [1, shape[1], -1, shape[3]],
            node.get_output_element_type(0),
            f"{KV_IN}{index}",
            f"{KV_OUT}{index}",
        )
        params.append(param)
        results.append(result)
        names.append(variable_id)
    model.add_parameters(params)
    model.add_results(results)
    group_attention(model)
    model.validate_nodes_and_infer_types()
    return tuple(names)


def _bypass_if_beam_gather(node: Any) -> None:
    """Replace `node` by its input if it is the export's beam reorder of a state (a Gather by
    `beam_idx` on axis 0). The app runs one sequence, so the Gather only copied the state:
    the whole kept cache for a continuation graph's cache input (0.13 s of a 747-token
    follow-up after 6,700 kept ones on Qwen3.5-0.8B), every Gated DeltaNet state at every
    step for the target's state ports. The stateful graph's plugin folds it into its cache."""
    if node.get_type_name() != "Gather" or node.get_input_size() != 3:
        return
    indices = node.input_value(1).get_node()
    axis = node.input_value(2).get_node()
    if indices.get_type_name() != "Parameter" or "beam_idx" not in indices.output(0).get_names():
        return
    if axis.get_type_name() != "Constant" or axis.get_data().reshape(-1).tolist() != [0]:
        return
    node.output(0).replace(node.input_value(0))


def group_attention(model: Any) -> int:
    """Let each attention read its grouped key/value heads directly, in place; how many.

    The export repeats every KV head for the query heads that share it (`repeat_kv`: an
    Unsqueeze, a Broadcast to [batch, kv heads, group, tokens, head size], a Reshape) before
    the ScaledDotProductAttention. The CPU plugin folds that away only where it fuses the
    attention with a stateful cache; with the cache as an input (the continuation graph) the
    Broadcast runs, in f32, over the whole cache: 1.3 s of a 7.6 s follow-up of 747 tokens
    after 6,700 kept ones on Qwen3.5-0.8B. Here the query is viewed as [batch, kv heads, group,
    queries, head size] instead, so the attention broadcasts the shared heads itself and the
    repeated cache is never written. Attentions of another shape are left as they are."""
    import numpy as np
    import openvino.opset13 as ops

    grouped = 0
    for node in model.get_ordered_ops():
        if node.get_type_name() != "ScaledDotProductAttention" or node.get_input_size() < 4:
            continue
        shared = [_repeated_heads(node.input_value(i)) for i in (1, 2)]
        query = node.input_value(0)
        shape = query.get_partial_shape()
        if any(s is None for s in shared) or shape.rank.get_length() != 4:
            continue
        key_heads = shared[0].get_partial_shape()[1]
        if not (shape[1].is_static and shape[3].is_static and key_heads.is_static):
            continue
        heads, size, kv_heads = shape[1].get_length(), shape[3].get_length(), key_heads.get_length()
        if kv_heads <= 0 or heads % kv_heads:
            continue
        view = ops.constant(np.array([0, kv_heads, heads // kv_heads, -1, size], np.int64))
        inputs = [
            ops.reshape(query, view, special_zero=True),
            shared[0],
            shared[1],
            ops.unsqueeze(node.input_value(3), ops.constant(np.int64(2))),
            *(node.input_value(i) for i in range(4, node.get_input_size())),
        ]
        attention = ops.scaled_dot_product_attention(
            *inputs, causal=bool(node.get_attributes().get("causal", False))
        )
        back = ops.constant(np.array([0, heads, -1, size], np.int64))
        node.output(0).replace(ops.reshape(attention, back, special_zero=True).output(0))
        grouped += 1
    return grouped


def _repeated_heads(value: Any) -> Any:
    """The [batch, kv heads, 1, tokens, head size] tensor that `value` repeats over each group
    (Reshape of a Broadcast of it), or None when `value` is not such a repetition."""
    reshape = value.get_node()
    if reshape.get_type_name() != "Reshape":
        return None
    broadcast = reshape.input_value(0).get_node()
    if broadcast.get_type_name() != "Broadcast":
        return None
    source = broadcast.input_value(0)
    shape = source.get_partial_shape()
    if shape.rank.is_dynamic or shape.rank.get_length() != 5:
        return None
    if not (shape[2].is_static and shape[2].get_length() == 1):
        return None
    return source


def _expose_state(
    model: Any,
    read: Any,
    assign: Any,
    shape: list[Any],
    element: Any,
    in_name: str,
    out_name: str,
) -> tuple[Any, Any]:
    """Replace a state's ReadValue/Assign pair by a parameter `in_name` of `shape` and
    `element` (converted to and from the state's own type where they differ) and a result
    `out_name`, read without the export's beam reorder; the variable is removed. The caller
    adds both to the model."""
    import openvino.opset13 as ops

    original = read.get_output_element_type(0)
    param = ops.parameter(shape, element, name=in_name)
    param.output(0).set_names({in_name})
    value = param if element == original else ops.convert(param, original)
    read.output(0).replace(value.output(0))
    for reader in list(value.output(0).get_target_inputs()):
        _bypass_if_beam_gather(reader.get_node())
    produced = assign.input_value(0)
    if element != original:
        produced = ops.convert(produced, element).output(0)
    result = ops.result(produced)
    result.output(0).set_names({out_name})
    model.remove_sink(assign)
    model.remove_variable(model.get_variable_by_id(read.get_variable_id()))
    return param, result


def lm_head_rows(core: Any, language_model: Any, rows: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
    """Rows of the target's lm_head weight as float32, computed by OpenVINO from the (possibly
    INT8/INT4-compressed) weight in chunks, so the full-vocabulary matrix is never in memory."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    weight, transposed = lm_head_weight(language_model)
    ids = ops.parameter([-1], ov.Type.i64, name="rows")
    axis = 0 if transposed else 1
    picked = ops.gather(weight, ids, ops.constant(np.int64(axis)))
    if picked.get_output_element_type(0) != ov.Type.f32:
        picked = ops.convert(picked, ov.Type.f32)
    compiled = core.compile_model(
        ov.Model([ops.result(picked)], [ids], "lm_head_rows"),
        "CPU",
        {"INFERENCE_PRECISION_HINT": "f32"},
    )
    request = compiled.create_infer_request()
    chunks = []
    for start in range(0, len(rows), 8192):
        part = rows[start : start + 8192].astype(np.int64)
        request.infer({0: part})
        out = np.array(request.get_output_tensor(0).data, dtype=np.float32)
        chunks.append(out if transposed else out.T)
    return np.concatenate(chunks, axis=0)


def transform_draft(model: Any, rows: npt.NDArray[np.float32], compute_type: Any = None) -> None:
    """Give the MTP model a draft lm_head (`rows`: [draft vocab, hidden] float32, stored as
    INT8 with one scale per row) on its last position and an argmax output `draft_index`
    (an index into the draft vocabulary), in place. Its hidden-state input and output take
    `compute_type` (see transform_target), so the target's output feeds it unconverted."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    hidden = hidden_result = None
    for result in model.get_results():
        if HIDDEN in result.output(0).get_names() or HIDDEN in result.input_value(0).get_names():
            hidden, hidden_result = result.input_value(0), result
    if hidden is None or hidden_result is None:
        raise GraphError("the MTP model has no `last_hidden_state` output")
    if compute_type is not None and compute_type != hidden.get_element_type():
        hidden_result.input(0).replace_source_output(ops.convert(hidden, compute_type).output(0))
        for index, param in enumerate(model.get_parameters()):
            if "hidden_states" in param.output(0).get_names():
                typed = ops.parameter(param.get_partial_shape(), compute_type, name="hidden_states")
                typed.output(0).set_names({"hidden_states"})
                param.output(0).replace(ops.convert(typed, param.get_element_type()).output(0))
                model.replace_parameter(index, typed)
    scale = np.abs(rows).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    quantized = np.clip(np.rint(rows / scale), -127, 127).astype(np.int8)
    weight = ops.multiply(
        ops.convert(ops.constant(quantized), ov.Type.f32), ops.constant(scale.astype(np.float32))
    )
    last = ops.slice(
        hidden,
        ops.constant(np.array([-1], np.int64)),
        ops.constant(np.array([np.iinfo(np.int64).max], np.int64)),
        ops.constant(np.array([1], np.int64)),
        ops.constant(np.array([1], np.int64)),
    )
    logits = ops.matmul(last, weight, transpose_a=False, transpose_b=True)
    top = ops.topk(logits, ops.constant(np.int64(1)), -1, "max", "value", ov.Type.i32, stable=True)
    index = ops.result(top.output(1))
    index.output(0).set_names({DRAFT_INDEX})
    logits_result = ops.result(logits)
    logits_result.output(0).set_names({DRAFT_LOGITS})
    model.add_results([index, logits_result])
    model.validate_nodes_and_infer_types()
