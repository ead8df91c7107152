"""Add the MTP head to an OpenVINO model that lacks it, without the export toolkit.

Ready OpenVINO exports on the hub usually drop the MTP head. The head is small (one full-
attention decoder layer, an `fc` projection and norms; it shares the trunk's embeddings and
lm_head) and sits in the source checkpoint as its `mtp.*` tensors. This module reads just
those (core.models.ready.tensor_source: the index, a header per shard, the head's byte ranges),
checks that they fit the trunk, and builds `openvino_mtp_model.xml/.bin` with OpenVINO's own
graph API in the layout optimum-intel exports and both the app's decoder and openvino-genai
load: inputs `hidden_states`, `inputs_embeds`, `attention_mask`, `position_ids`, `beam_idx`;
output `last_hidden_state`; the layer's key and value caches as two states (ReadValue ->
beam Gather -> Concat -> Assign); the repeated KV heads as Unsqueeze -> Broadcast -> Reshape
before a ScaledDotProductAttention. No torch, transformers or optimum: it runs in the bundle.

The forward is optimum-intel's `_qwen3_5_mtp_module_forward` (Qwen3.5's own layer code):
x = fc(cat[norm_e(embedding of token t+1), norm_h(h_t)]) -> decoder layer -> norm, where
Qwen3.5's RMSNorm multiplies by (1 + weight), the attention's q_proj also yields a sigmoid
output gate, q and k are RMS-normed per head, and RoPE turns the first
`head_dim * partial_rotary_factor` dimensions (the head's positions are 1-D, so M-RoPE's three
sections coincide and reduce to plain RoPE).

Weights: `fp16` stores every weight as float16 (as the app's own export does for an
uncompressed head); `int8` stores the matrices as symmetric per-row INT8 with float32 scales
(the CPU plugin runs them as compressed weights) and the norms as float32. `auto` picks int8
for an integer-compressed trunk and fp16 otherwise: INT4, optimum's default, would save a few
MB on a head that is a fortieth of a step's weights while adding error to the one layer whose
job is to agree with the target. The output is written beside the trunk atomically (a temp
name, then renamed), so an interrupted graft never leaves a head that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.models.ready.tensor_source import (
    TensorSource,
    locate,
    read_tensors,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MTP_STEM = "openvino_mtp_model"
#: Our record of a graft, beside the IR (source, commit, format, bytes read).
GRAFT_RECORD = "qwen_mtp_graft.json"
PREFIX = "mtp."
WeightFormat = Literal["auto", "fp16", "int8", "fp32"]
WEIGHT_FORMATS: tuple[str, ...] = ("auto", "fp16", "int8", "fp32")
_KEY_STATE = "past_key_values.0.keypresent_key_values.0.key"
_VALUE_STATE = "past_key_values.0.valuepresent_key_values.0.value"


class GraftError(UserFacingError):
    """The head cannot be added: the message says why and what to do."""

    code = "GRAFT_FAILED"


@dataclass(frozen=True)
class HeadShape:
    """The dimensions of a Qwen3.5 MTP head, from a checkpoint's (or an export's) config."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float
    rope_theta: float
    rotary_dim: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any], what: str) -> HeadShape:
        text = config.get("text_config")
        text = text if isinstance(text, Mapping) else config
        model_type = str(text.get("model_type") or config.get("model_type") or "?")
        fix_other = "Choose the Qwen3.5 checkpoint this model was converted from."
        if "moe" in model_type:
            raise GraftError(
                f"{what} is a Qwen3.5-MoE model: adding an MTP head to MoE models is not "
                "supported yet (its head has experts).",
                "Export the model with its head instead (Export tab, with a source install).",
                code="GRAFT_UNSUPPORTED",
            )
        if not model_type.startswith("qwen3_5"):
            raise GraftError(f"{what} is a {model_type!r} model, not Qwen3.5.", fix_other)
        layers = text.get("mtp_num_hidden_layers")
        if layers != 1:
            raise GraftError(
                f"{what} declares mtp_num_hidden_layers = {layers!r}; a Qwen3.5 MTP head has "
                "exactly one layer.",
                fix_other,
                code="GRAFT_UNSUPPORTED",
            )
        if text.get("attention_bias") or text.get("hidden_act", "silu") != "silu":
            raise GraftError(
                f"{what} uses attention biases or a {text.get('hidden_act')!r} activation, "
                "which Qwen3.5 heads do not.",
                fix_other,
                code="GRAFT_UNSUPPORTED",
            )
        rope = text.get("rope_parameters")
        rope = rope if isinstance(rope, Mapping) else {}
        if rope.get("rope_type", "default") != "default":
            raise GraftError(
                f"{what} uses {rope.get('rope_type')!r} rotary embeddings; only the default "
                "kind is supported.",
                fix_other,
                code="GRAFT_UNSUPPORTED",
            )

        def whole(name: str, low: int, high: int, default: Any = None) -> int:
            value = text.get(name, default)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise GraftError(f"{what} has no valid {name} ({value!r}).", fix_other)
            return value

        def number(value: Any, name: str, low: float, high: float) -> float:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise GraftError(f"{what} has no valid {name} ({value!r}).", fix_other)
            if not (math.isfinite(value) and low <= value <= high):
                raise GraftError(f"{what} has no valid {name} ({value!r}).", fix_other)
            return float(value)

        hidden = whole("hidden_size", 1, 65_536)
        heads = whole("num_attention_heads", 1, 1_024)
        kv_heads = whole("num_key_value_heads", 1, heads)
        head_dim = whole("head_dim", 2, 4_096, hidden // heads)
        if heads % kv_heads:
            raise GraftError(f"{what}: {heads} heads do not share {kv_heads} KV heads.", fix_other)
        factor = number(
            rope.get("partial_rotary_factor", text.get("partial_rotary_factor", 1.0)),
            "partial_rotary_factor",
            0.0,
            1.0,
        )
        rotary = int(head_dim * factor)
        if rotary < 2 or rotary % 2:
            raise GraftError(f"{what}: a rotary width of {rotary} is not even.", fix_other)
        return cls(
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=whole("intermediate_size", 1, 1 << 20),
            vocab=whole("vocab_size", 1, 1 << 24),
            eps=number(text.get("rms_norm_eps", 1e-6), "rms_norm_eps", 0.0, 1.0),
            rope_theta=number(
                rope.get("rope_theta", text.get("rope_theta", 10_000.0)), "rope_theta", 1.0, 1e12
            ),
            rotary_dim=rotary,
        )

    def tensors(self) -> dict[str, tuple[int, ...]]:
        """Every `mtp.*` tensor a head of this shape has, with its shape."""
        h, d = self.hidden, self.head_dim
        layer = "layers.0."
        shapes: dict[str, tuple[int, ...]] = {
            "fc.weight": (h, 2 * h),
            "pre_fc_norm_embedding.weight": (h,),
            "pre_fc_norm_hidden.weight": (h,),
            "norm.weight": (h,),
            layer + "input_layernorm.weight": (h,),
            layer + "post_attention_layernorm.weight": (h,),
            layer + "self_attn.q_proj.weight": (self.heads * d * 2, h),
            layer + "self_attn.k_proj.weight": (self.kv_heads * d, h),
            layer + "self_attn.v_proj.weight": (self.kv_heads * d, h),
            layer + "self_attn.o_proj.weight": (h, self.heads * d),
            layer + "self_attn.q_norm.weight": (d,),
            layer + "self_attn.k_norm.weight": (d,),
            layer + "mlp.gate_proj.weight": (self.intermediate, h),
            layer + "mlp.up_proj.weight": (self.intermediate, h),
            layer + "mlp.down_proj.weight": (h, self.intermediate),
        }
        return {PREFIX + name: shape for name, shape in shapes.items()}

    def differences(self, other: HeadShape) -> list[str]:
        return [
            f"{name} {getattr(self, name)} vs {getattr(other, name)}"
            for name in (
                "hidden",
                "heads",
                "kv_heads",
                "head_dim",
                "intermediate",
                "vocab",
                "rotary_dim",
            )
            if getattr(self, name) != getattr(other, name)
        ] + [
            f"{name} {getattr(self, name):g} vs {getattr(other, name):g}"
            for name in ("eps", "rope_theta")
            if not math.isclose(getattr(self, name), getattr(other, name), rel_tol=1e-6)
        ]


@dataclass(frozen=True)
class GraftResult:
    weight_format: str
    source: str
    commit: str | None
    bytes_read: int
    requests: int
    seconds: float
    head_bytes: int


# --- the graph --------------------------------------------------------------------------------


class _Weights:
    """Constants in the chosen storage format."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt

    def matrix(self, weight: npt.NDArray[np.float32], name: str) -> Any:
        import numpy as np
        import openvino as ov
        import openvino.opset13 as ops

        if self.fmt == "int8":
            peak = np.abs(weight).max(axis=1, keepdims=True)
            scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
            quantized = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
            const = ops.constant(quantized, name=name + "_compressed")
            return ops.multiply(
                ops.convert(const, ov.Type.f32), ops.constant(scale, name=name + "_scale")
            )
        return self.vector(weight, name)

    def vector(self, values: npt.NDArray[np.float32], name: str) -> Any:
        import numpy as np
        import openvino as ov
        import openvino.opset13 as ops

        if self.fmt == "fp16":
            if np.abs(values).max(initial=0.0) > 65_000:
                return ops.constant(values, name=name)  # beyond float16: keep it exact
            const = ops.constant(values.astype(np.float16), name=name + "_compressed")
            return ops.convert(const, ov.Type.f32)
        return ops.constant(values, name=name)


def _rms(x: Any, weight: npt.NDArray[np.float32], eps: float, store: _Weights, name: str) -> Any:
    """Qwen3.5's RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * (1 + weight)."""
    import numpy as np
    import openvino.opset13 as ops

    mean = ops.reduce_mean(
        ops.power(x, ops.constant(np.float32(2.0))),
        ops.constant(np.array([-1], np.int64)),
        keep_dims=True,
    )
    root = ops.sqrt(ops.add(mean, ops.constant(np.float32(eps))))
    normed = ops.multiply(x, ops.divide(ops.constant(np.float32(1.0)), root))
    gamma = store.vector((1.0 + weight.astype(np.float32)).astype(np.float32), name)
    return ops.multiply(normed, gamma)


def _linear(x: Any, weight: npt.NDArray[np.float32], store: _Weights, name: str) -> Any:
    import openvino.opset13 as ops

    return ops.matmul(x, store.matrix(weight, name), transpose_a=False, transpose_b=True)


def _ints(*values: int) -> Any:
    import numpy as np
    import openvino.opset13 as ops

    return ops.constant(np.array(values, np.int64))


def _rotate(x: Any, cos: Any, sin: Any, rotary: int, head_dim: int) -> Any:
    """RoPE on the first `rotary` dims of the last axis (transformers' apply_rotary_pos_emb)."""
    import numpy as np
    import openvino.opset13 as ops

    half = rotary // 2
    lengths = (half, half, head_dim - rotary) if head_dim > rotary else (half, half)
    parts = ops.variadic_split(x, ops.constant(np.int64(-1)), _ints(*lengths)).outputs()
    first, second = parts[0], parts[1]
    rotated = ops.concat([ops.negative(second), first], -1)
    turned = ops.add(ops.multiply(ops.concat([first, second], -1), cos), ops.multiply(rotated, sin))
    return ops.concat([turned, parts[2]], -1) if head_dim > rotary else turned


def build_head(weights: Mapping[str, npt.NDArray[np.float32]], shape: HeadShape, fmt: str) -> Any:
    """The MTP head as an `openvino.Model` (module docstring for the layout)."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops
    from openvino.op.util import Variable, VariableInfo

    w = {name[len(PREFIX) :]: value for name, value in weights.items()}
    store = _Weights(fmt)
    h, d, heads, kv = shape.hidden, shape.head_dim, shape.heads, shape.kv_heads
    hidden = ops.parameter([-1, -1, h], ov.Type.f32, name="hidden_states")
    embeds = ops.parameter([-1, -1, h], ov.Type.f32, name="inputs_embeds")
    mask_in = ops.parameter([-1, -1], ov.Type.i64, name="attention_mask")
    positions = ops.parameter([-1, -1], ov.Type.i64, name="position_ids")
    beam = ops.parameter([-1], ov.Type.i32, name="beam_idx")
    for param in (hidden, embeds, mask_in, positions, beam):
        param.output(0).set_names({param.get_friendly_name()})

    e_norm = _rms(embeds, w["pre_fc_norm_embedding.weight"], shape.eps, store, "pre_fc_norm_e")
    h_norm = _rms(hidden, w["pre_fc_norm_hidden.weight"], shape.eps, store, "pre_fc_norm_h")
    x = _linear(ops.concat([e_norm, h_norm], -1), w["fc.weight"], store, "fc")

    # Rotary tables [batch, 1, seq, rotary], computed in f32 from f32 frequencies.
    inv_freq = 1.0 / (
        shape.rope_theta ** (np.arange(0, shape.rotary_dim, 2, dtype=np.int64) / shape.rotary_dim)
    )
    angles = ops.multiply(
        ops.unsqueeze(ops.convert(positions, ov.Type.f32), _ints(-1)),
        ops.constant(inv_freq.astype(np.float32).reshape(1, 1, -1)),
    )
    emb = ops.concat([angles, angles], -1)
    cos = ops.unsqueeze(ops.cos(emb), _ints(1))
    sin = ops.unsqueeze(ops.sin(emb), _ints(1))

    layer = "layers.0."
    residual = x
    xn = _rms(x, w[layer + "input_layernorm.weight"], shape.eps, store, "input_layernorm")
    q_gate = ops.reshape(
        _linear(xn, w[layer + "self_attn.q_proj.weight"], store, "q_proj"),
        _ints(0, 0, heads, 2 * d),
        special_zero=True,
    )
    query, gate = ops.split(q_gate, ops.constant(np.int64(-1)), 2).outputs()
    gate = ops.reshape(gate, _ints(0, 0, heads * d), special_zero=True)
    query = _rms(query, w[layer + "self_attn.q_norm.weight"], shape.eps, store, "q_norm")
    query = ops.transpose(query, _ints(0, 2, 1, 3))
    key = ops.reshape(
        _linear(xn, w[layer + "self_attn.k_proj.weight"], store, "k_proj"),
        _ints(0, 0, kv, d),
        special_zero=True,
    )
    key = ops.transpose(
        _rms(key, w[layer + "self_attn.k_norm.weight"], shape.eps, store, "k_norm"),
        _ints(0, 2, 1, 3),
    )
    value = ops.transpose(
        ops.reshape(
            _linear(xn, w[layer + "self_attn.v_proj.weight"], store, "v_proj"),
            _ints(0, 0, kv, d),
            special_zero=True,
        ),
        _ints(0, 2, 1, 3),
    )
    query = _rotate(query, cos, sin, shape.rotary_dim, d)
    key = _rotate(key, cos, sin, shape.rotary_dim, d)

    batch = ops.gather(ops.shape_of(embeds), _ints(0), ops.constant(np.int64(0)))
    empty = ops.broadcast(ops.constant(np.float32(0.0)), ops.concat([batch, _ints(kv, 0, d)], 0))
    caches = []
    sinks = []
    for variable_id, new in ((_KEY_STATE, key), (_VALUE_STATE, value)):
        info = VariableInfo()
        info.data_shape = ov.PartialShape([-1, kv, -1, d])
        info.data_type = ov.Type.f32
        info.variable_id = variable_id
        variable = Variable(info)
        past = ops.gather(ops.read_value(empty, variable), beam, ops.constant(np.int64(0)))
        cache = ops.concat([past, new], 2)
        sinks.append(ops.assign(cache, variable))
        caches.append(cache)

    # Causal mask over past + new positions, plus the caller's attention mask (as optimum's).
    new_len = ops.gather(ops.shape_of(x), _ints(1), ops.constant(np.int64(0)))
    total = ops.gather(ops.shape_of(caches[0]), _ints(2), ops.constant(np.int64(0)))
    past_len = ops.subtract(total, new_len)
    scalar = _ints(0)
    rows = ops.add(
        ops.unsqueeze(
            ops.range(
                ops.constant(np.int64(0)),
                ops.squeeze(new_len, scalar),
                ops.constant(np.int64(1)),
                "i64",
            ),
            _ints(1),
        ),
        past_len,
    )
    cols = ops.unsqueeze(
        ops.range(
            ops.constant(np.int64(0)), ops.squeeze(total, scalar), ops.constant(np.int64(1)), "i64"
        ),
        _ints(0),
    )
    lowest = ops.constant(np.float32(np.finfo(np.float32).min))
    causal = ops.multiply(ops.convert(ops.greater(cols, rows), ov.Type.f32), lowest)
    window = ops.slice(mask_in, _ints(0), total, _ints(1), _ints(1))
    padding = ops.multiply(
        ops.subtract(ops.constant(np.float32(1.0)), ops.convert(window, ov.Type.f32)), lowest
    )
    mask = ops.add(ops.unsqueeze(causal, _ints(0, 1)), ops.unsqueeze(padding, _ints(1, 2)))

    group = heads // kv
    repeated = []
    for cache in caches:
        dims = ops.shape_of(cache)
        wide = ops.concat(
            [
                ops.gather(dims, _ints(0, 1), ops.constant(np.int64(0))),
                _ints(group),
                ops.gather(dims, _ints(2, 3), ops.constant(np.int64(0))),
            ],
            0,
        )
        repeated.append(
            ops.reshape(
                ops.broadcast(ops.unsqueeze(cache, _ints(2)), wide),
                _ints(0, heads, -1, d),
                special_zero=True,
            )
        )
    attention = ops.scaled_dot_product_attention(
        query, repeated[0], repeated[1], mask, ops.constant(np.float32(d**-0.5)), causal=False
    )
    attention = ops.reshape(
        ops.transpose(attention, _ints(0, 2, 1, 3)), _ints(0, 0, heads * d), special_zero=True
    )
    attention = ops.multiply(attention, ops.sigmoid(gate))
    x = ops.add(residual, _linear(attention, w[layer + "self_attn.o_proj.weight"], store, "o_proj"))

    residual = x
    xn = _rms(x, w[layer + "post_attention_layernorm.weight"], shape.eps, store, "post_norm")
    gated = ops.multiply(
        ops.swish(_linear(xn, w[layer + "mlp.gate_proj.weight"], store, "gate_proj")),
        _linear(xn, w[layer + "mlp.up_proj.weight"], store, "up_proj"),
    )
    x = ops.add(residual, _linear(gated, w[layer + "mlp.down_proj.weight"], store, "down_proj"))
    out = ops.result(_rms(x, w["norm.weight"], shape.eps, store, "norm"))
    out.output(0).set_names({"last_hidden_state"})
    return ov.Model([out], sinks, [hidden, embeds, mask_in, positions, beam], "mtp_model")


# --- checks and the graft ---------------------------------------------------------------------


def _read_config(path: Path, what: str, fix: str) -> dict[str, Any]:
    from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_object

    try:
        return read_json_object(path, kind=FileKind(what, fix))
    except FileNotFoundError as exc:
        raise GraftError(f"{what} has no config.json ({path.parent}).", fix) from exc
    except UserFacingError as exc:
        raise GraftError(exc.message, exc.fix) from exc


def trunk_shape(model_dir: Path) -> tuple[HeadShape, str | None]:
    """The head shape the trunk in `model_dir` needs, and its weights' dominant precision."""
    from qwen_mtp_desktop.core.models.ir import IrError, read_ir

    fix = "Choose an OpenVINO export of a Qwen3.5 model (a folder with openvino_*.xml files)."
    if not (model_dir / "openvino_language_model.xml").is_file():
        raise GraftError(
            f"{model_dir} is not an OpenVINO Qwen3.5 export.", fix, code="GRAFT_NOT_A_MODEL"
        )
    shape = HeadShape.from_config(
        _read_config(model_dir / "config.json", "The model folder", fix), "The model"
    )
    try:
        language = read_ir(model_dir / "openvino_language_model.xml")
    except IrError as exc:
        raise GraftError(f"The model's IR cannot be read ({exc}).", fix) from exc
    widths = {port.dims()[-1] for port in language.inputs if port.name == "inputs_embeds"}
    if widths - {None, shape.hidden}:
        raise GraftError(
            f"The model's config says hidden size {shape.hidden}, its IR takes {widths}.",
            "The folder mixes files of two models: download or export it again.",
        )
    return shape, language.dominant_precision


def auto_format(trunk_precision: str | None) -> str:
    if trunk_precision and trunk_precision.startswith(("INT", "NF", "MXFP", "FP8")):
        return "int8"
    return "fp16"


def graft(
    model_dir: Path,
    source: TensorSource,
    *,
    weight_format: str = "auto",
    replace: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> GraftResult:
    """Read the head from `source`, check it fits `model_dir`'s trunk, write it there."""
    started = time.monotonic()
    model_dir = Path(model_dir)
    if weight_format not in WEIGHT_FORMATS:
        raise GraftError(
            f"Unknown weight format {weight_format!r}.",
            f"Choose one of {', '.join(WEIGHT_FORMATS)}.",
        )
    xml = model_dir / f"{MTP_STEM}.xml"
    if xml.exists() and not replace:
        raise GraftError(
            f"{model_dir} already has an MTP head ({xml.name}).",
            "Pass --replace to build a new one (the old files are kept beside it).",
            code="GRAFT_EXISTS",
        )
    trunk, precision = trunk_shape(model_dir)
    _remove_stale_grafts(model_dir)  # a killed graft's half-written files
    fmt = auto_format(precision) if weight_format == "auto" else weight_format
    notify = progress or (lambda _stage, _done, _total: None)

    notify("locating", 0, 0)
    source_config = _source_config(source)
    head = HeadShape.from_config(source_config, "The checkpoint")
    differences = head.differences(trunk)
    if differences:
        raise GraftError(
            f"The checkpoint does not match the model: {'; '.join(differences[:4])}.",
            "Choose the checkpoint this model was converted from (same size and version).",
            code="GRAFT_MISMATCH",
        )
    layout = locate(source, PREFIX)
    expected = head.tensors()
    if not layout.entries:
        raise GraftError(
            f"{source.label} has no MTP head (no mtp.* tensors).",
            "Choose an original Qwen3.5 checkpoint: conversions (GGUF, MLX, many OpenVINO "
            "exports) drop the head.",
            code="GRAFT_NO_HEAD",
        )
    extra = sorted(set(layout.entries) - set(expected))
    missing = sorted(set(expected) - set(layout.entries))
    if missing or extra:
        detail = f"missing {missing[0]}" if missing else f"unexpected {extra[0]}"
        raise GraftError(
            f"The checkpoint's MTP head is not a Qwen3.5 head of this size ({detail}).",
            "Choose the checkpoint this model was converted from.",
            code="GRAFT_MISMATCH",
        )
    for name, want in expected.items():
        got = layout.entries[name].shape
        if got != want:
            raise GraftError(
                f"{name} has shape {list(got)}; a head for this model needs {list(want)}.",
                "Choose the checkpoint this model was converted from (same size).",
                code="GRAFT_MISMATCH",
            )
    weights = read_tensors(source, layout.entries, lambda d, t: notify("reading", d, t))
    _check_finite(weights)
    notify("building", 0, 0)
    model = build_head(weights, head, fmt)
    del weights
    notify("writing", 0, 0)
    head_bytes = _write_atomically(model, model_dir, replace)
    counter = getattr(source, "counter", None)
    result = GraftResult(
        weight_format=fmt,
        source=source.label,
        commit=getattr(source, "commit", None),
        bytes_read=getattr(counter, "bytes", 0),
        requests=getattr(counter, "requests", 0),
        seconds=time.monotonic() - started,
        head_bytes=head_bytes,
    )
    _write_record(model_dir, result)
    return result


def _source_config(source: TensorSource) -> dict[str, Any]:
    from qwen_mtp_desktop.core.files.safe_files import SMALL_JSON_BYTES, parse_json_text

    fix = "Choose the original Qwen3.5 checkpoint (it has a config.json)."
    if not source.exists("config.json"):
        raise GraftError(f"{source.label} has no config.json.", fix, code="GRAFT_NO_HEAD")
    size = source.size("config.json")
    if size > SMALL_JSON_BYTES:
        raise GraftError(f"The config.json of {source.label} is implausibly large.", fix)
    try:
        raw = parse_json_text(source.read("config.json", 0, size).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise GraftError(f"The config.json of {source.label} is not valid JSON.", fix) from exc
    if not isinstance(raw, dict):
        raise GraftError(f"The config.json of {source.label} is not a JSON object.", fix)
    return raw


def _check_finite(weights: Mapping[str, npt.NDArray[np.float32]]) -> None:
    import numpy as np

    for name, values in weights.items():
        if not np.isfinite(values).all():
            raise GraftError(
                f"{name} holds NaN or infinite values.",
                "The checkpoint is damaged: download it again.",
                code="GRAFT_MISMATCH",
            )


def _write_atomically(model: Any, model_dir: Path, replace: bool) -> int:
    """Save to a temporary folder in `model_dir`, then rename .bin and .xml into place (the
    .xml last: the head counts as present only once it is whole). A replaced head is kept."""
    import openvino as ov

    try:
        staging = Path(tempfile.mkdtemp(prefix=".mtp-graft-", dir=model_dir))
    except OSError as exc:
        raise GraftError(
            f"Cannot write in {model_dir} ({exc.strerror or exc}).",
            "Make the model folder writable, or copy it somewhere writable first.",
            code="GRAFT_READ_ONLY",
        ) from exc
    try:
        ov.save_model(model, str(staging / f"{MTP_STEM}.xml"), compress_to_fp16=False)
        # Read back once: an in-memory graph and its saved form must both load (the CPU
        # plugin compiles the saved form; this catches a write the disk cut short).
        ov.Core().read_model(str(staging / f"{MTP_STEM}.xml"))
        target = model_dir / MTP_STEM
        if replace and target.with_suffix(".xml").exists():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for suffix in (".xml", ".bin"):
                old = target.with_suffix(suffix)
                if old.exists():
                    old.replace(model_dir / f"{MTP_STEM}.replaced-{stamp}{suffix}")
        (staging / f"{MTP_STEM}.bin").replace(target.with_suffix(".bin"))
        (staging / f"{MTP_STEM}.xml").replace(target.with_suffix(".xml"))
        return target.with_suffix(".bin").stat().st_size
    except OSError as exc:
        raise GraftError(
            f"Writing the head into {model_dir} failed ({exc.strerror or exc}).",
            "Free some disk space (or make the folder writable) and try again.",
            code="GRAFT_WRITE_FAILED",
        ) from exc
    finally:
        for leftover in staging.glob("*"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        with contextlib.suppress(OSError):
            staging.rmdir()


def _write_record(model_dir: Path, result: GraftResult) -> None:
    from qwen_mtp_desktop.core.files.fileio import atomic_write_text

    record = {
        "source": result.source,
        "commit": result.commit,
        "weight_format": result.weight_format,
        "bytes_read": result.bytes_read,
        "seconds": round(result.seconds, 3),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    with contextlib.suppress(OSError):  # the head works without its record
        atomic_write_text(model_dir / GRAFT_RECORD, json.dumps(record, indent=2) + "\n")
    _update_manifest(model_dir, record)


def _update_manifest(model_dir: Path, record: dict[str, Any]) -> None:
    """An export manifest that lists the head's files gets the new head's checksums, so
    `--verify` does not report the graft as damage; the manifest's other fields stay."""
    from qwen_mtp_desktop.core.files.fileio import atomic_write_text
    from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_object
    from qwen_mtp_desktop.core.models.export.manifest import sha256_file
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME

    path = model_dir / MANIFEST_NAME
    try:
        manifest = read_json_object(path, kind=FileKind(MANIFEST_NAME, ""))
    except (OSError, UserFacingError):
        return  # none, or one the inspector already reports as damaged: leave it be
    files = manifest.get("files")
    if not isinstance(files, dict):
        return
    for suffix in (".xml", ".bin"):
        name = f"{MTP_STEM}{suffix}"
        files[name] = sha256_file(model_dir / name)
    manifest["mtp_graft"] = record
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps(manifest, indent=2) + "\n")


#: A staging folder this old was left by a graft that was killed (a graft takes seconds).
STALE_AFTER_S = 600


def stale_grafts(model_dir: Path, older_than: float = 0.0) -> list[Path]:
    """Staging folders grafts left behind in `model_dir` (older than `older_than` seconds)."""
    now = time.time()
    found = []
    for folder in Path(model_dir).glob(".mtp-graft-*"):
        with contextlib.suppress(OSError):
            if folder.is_dir() and now - folder.stat().st_mtime >= older_than:
                found.append(folder)
    return sorted(found)


def _remove_stale_grafts(model_dir: Path) -> None:
    import shutil

    for folder in stale_grafts(model_dir, STALE_AFTER_S):
        shutil.rmtree(folder, ignore_errors=True)
