"""Model geometry and the memory a model needs: weights, KV cache, linear-attention state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psutil

from qwen_mtp_desktop.core.models.folders.report import (
    Diagnostic,
    Geometry,
    KvPrecision,
    MemoryEstimate,
    MemoryTerm,
    Verdict,
)
from qwen_mtp_desktop.core.models.ir import (
    IrInfo,
    PortInfo,
)
from qwen_mtp_desktop.core.units import format_bytes

DEFAULT_CONTEXT_LENGTH = 4096


#: Above this share of available RAM a model is "tight": it loads, but the system may swap.
TIGHT_FRACTION = 0.70


#: Bits per KV-cache element. OpenVINO 2026's CPU plugin defaults to u8 (KV_CACHE_PRECISION);
#: GPU keeps f16.
KV_BITS: dict[str, int] = {"u8": 8, "u4": 4, "f16": 16, "bf16": 16, "f32": 32}


#: Extra bytes per token and head for a quantized KV cache: the CPU plugin stores an f32 scale
#: and an f32 zero point per group, and the default group is the whole head
#: (intel_cpu transformation pipeline, ConvertPagedAttnInputs shape callback).
KV_QUANT_PARAM_BYTES: dict[str, int] = {"u8": 8, "u4": 8}


#: Gated DeltaNet recurrent and convolution states are kept in f32 (the IR's state variables).
LINEAR_STATE_BYTES = 4


def _n(value: int) -> str:
    return f"{value:,}"


def estimate_memory(
    weight_bytes: Mapping[str, int],
    geometry: Geometry | None,
    *,
    context_length: int = DEFAULT_CONTEXT_LENGTH,
    kv_precision: KvPrecision = "u8",
    include_mtp: bool = True,
    image_extra_bytes: int = 0,
    available_bytes: int | None = None,
) -> MemoryEstimate:
    """RAM for one chat of `context_length` tokens: weights + KV cache + linear-attention state.

    `weight_bytes` maps component keys to the bytes the runtime loads (their .bin sizes).
    KV cache per full-attention layer = 2 (K and V) × kv_heads × head_dim × tokens × element
    size; a quantized cache (u8/u4) adds an f32 scale and zero point per token and head. Each
    Gated DeltaNet layer keeps a recurrent state (value heads × key dim × value dim) and a conv
    state (conv channels × kernel), both f32, whatever the context length. The MTP head adds
    one layer of KV cache.
    """
    if kv_precision not in KV_BITS:
        raise ValueError(f"unknown KV cache precision {kv_precision!r}")
    if context_length <= 0:
        raise ValueError("context_length must be positive")
    bits = KV_BITS[kv_precision]
    terms: list[MemoryTerm] = []
    notes: list[str] = []

    weights_total = sum(weight_bytes.values())
    listing = " + ".join(f"{key} {_n(size)} B" for key, size in weight_bytes.items())
    terms.append(
        MemoryTerm(
            "weights",
            "Weights (files the chat runtime loads)",
            weights_total,
            f"{listing or '0 B'} = {_n(weights_total)} B",
        )
    )

    def kv_terms(key: str, label: str, layers: int, geo: Geometry) -> None:
        heads, dim, ctx = geo.kv_heads, geo.head_dim, context_length
        size = 2 * layers * heads * dim * ctx * bits // 8
        terms.append(
            MemoryTerm(
                key,
                label,
                size,
                f"2 × {layers} layers × {heads} KV heads × {dim} head dim × {_n(ctx)} tokens "
                f"× {bits // 8 if bits >= 8 else bits / 8} B ({kv_precision}) = {_n(size)} B",
            )
        )
        extra = KV_QUANT_PARAM_BYTES.get(kv_precision, 0)
        if extra:
            params = 2 * layers * heads * ctx * extra
            terms.append(
                MemoryTerm(
                    f"{key}_quant_params",
                    f"{label}: scales and zero points",
                    params,
                    f"2 × {layers} layers × {heads} KV heads × {_n(ctx)} tokens × {extra} B "
                    f"(f32 scale + zero point per token and head) = {_n(params)} B",
                )
            )

    if geometry is None:
        notes.append(
            "The model's shape is unknown (no usable config.json), so the KV cache is not "
            "included: the estimate covers weights only."
        )
    else:
        geo = geometry
        if geo.full_attention_layers:
            kv_terms("kv_cache", "KV cache (full-attention layers)", geo.full_attention_layers, geo)
        if geo.linear_attention_layers:
            n = geo.linear_attention_layers
            state = n * geo.linear_num_value_heads * geo.linear_key_head_dim
            state = state * geo.linear_value_head_dim * LINEAR_STATE_BYTES
            terms.append(
                MemoryTerm(
                    "linear_state",
                    "Gated DeltaNet recurrent state (independent of context length)",
                    state,
                    f"{n} layers × {geo.linear_num_value_heads} value heads × "
                    f"{geo.linear_key_head_dim} key dim × {geo.linear_value_head_dim} value dim "
                    f"× {LINEAR_STATE_BYTES} B (f32) = {_n(state)} B",
                )
            )
            conv = n * geo.linear_conv_dim * geo.linear_conv_kernel * LINEAR_STATE_BYTES
            terms.append(
                MemoryTerm(
                    "linear_conv_state",
                    "Gated DeltaNet convolution state",
                    conv,
                    f"{n} layers × {geo.linear_conv_dim} channels (2 × "
                    f"{geo.linear_num_key_heads} × {geo.linear_key_head_dim} + "
                    f"{geo.linear_num_value_heads} × {geo.linear_value_head_dim}) × "
                    f"{geo.linear_conv_kernel} kernel × {LINEAR_STATE_BYTES} B (f32) = "
                    f"{_n(conv)} B",
                )
            )
        if include_mtp and geo.mtp_layers:
            kv_terms("mtp_kv_cache", "MTP head KV cache", geo.mtp_layers, geo)
    total = sum(t.bytes for t in terms)
    if image_extra_bytes:
        notes.append(
            f"The vision encoder ({_n(image_extra_bytes)} B of weights, plus activations that "
            "grow with image size) is loaded only when a chat includes an image; it is not in "
            "the total."
        )
    notes.append(
        "The runtime adds working memory on top (activations, compiled kernels, the Python "
        "process): allow a few hundred MB more."
    )
    fraction: float | None = None
    verdict: Verdict = "unknown"
    if available_bytes is not None and available_bytes > 0:
        fraction = total / available_bytes
        if fraction < TIGHT_FRACTION:
            verdict = "fits"
        elif fraction <= 1.0:
            verdict = "tight"
        else:
            verdict = "does_not_fit"
    return MemoryEstimate(
        context_length=context_length,
        kv_precision=kv_precision,
        terms=terms,
        total_bytes=total,
        image_extra_bytes=image_extra_bytes,
        available_bytes=available_bytes,
        fraction=fraction,
        verdict=verdict,
        notes=notes,
    )


def default_kv_precision(device: str) -> KvPrecision:
    """The KV-cache precision OpenVINO 2026 picks by default: u8 on CPU, f16 on GPU and NPU.

    AUTO and multi-device strings get f16, the larger of the two, so the estimate errs high.
    """
    return "u8" if device.strip().upper() == "CPU" else "f16"


def positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


#: Bounds no real model's shape comes near (Qwen3.5's largest: 60 layers, 512 experts, a
#: 248,320-token vocabulary). A config beyond them describes no model; computing with it
#: (per-layer loops, products) could run for ever, so its shape is treated as unknown.
_SHAPE_LIMITS = {
    "num_hidden_layers": 100_000,
    "mtp_num_hidden_layers": 100_000,
    "full_attention_interval": 100_000,
    "num_attention_heads": 1 << 16,
    "num_key_value_heads": 1 << 16,
    "linear_num_key_heads": 1 << 16,
    "linear_num_value_heads": 1 << 16,
    "linear_conv_kernel_dim": 1 << 16,
    "head_dim": 1 << 20,
    "linear_key_head_dim": 1 << 20,
    "linear_value_head_dim": 1 << 20,
    "hidden_size": 1 << 24,
    "num_experts": 1 << 20,
    "vocab_size": 1 << 28,
}


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def implausible_shape(config: Mapping[str, Any]) -> str | None:
    """ "name = value" for the first shape field of config.json no real model has, else None."""
    text = _text_config(config)
    for key, limit in _SHAPE_LIMITS.items():
        value = text.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            shown = f"{value:,}" if value < 10**15 else f"about 10^{len(str(value)) - 1}"
            return f"{key} = {shown}"
    return None


def geometry_from_config(config: Mapping[str, Any]) -> Geometry | None:
    """The text model's shape from config.json (a VLM's text_config, or the config itself);
    None when it is missing or no real model's (implausible_shape)."""
    if implausible_shape(config) is not None:
        return None
    text = _text_config(config)
    layers = positive_int(text.get("num_hidden_layers"))
    heads = positive_int(text.get("num_attention_heads"))
    if layers is None or heads is None:
        return None
    kv_heads = positive_int(text.get("num_key_value_heads")) or heads
    hidden = positive_int(text.get("hidden_size"))
    head_dim = positive_int(text.get("head_dim")) or (hidden // heads if hidden else None)
    if head_dim is None:
        return None
    layer_types = text.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        full = sum(1 for t in layer_types if t == "full_attention")
        linear = sum(1 for t in layer_types if t == "linear_attention")
    else:
        model_type = str(text.get("model_type", ""))
        interval = positive_int(text.get("full_attention_interval"))
        if interval is None and model_type.startswith("qwen3_5"):
            interval = 4  # Qwen3.5's default: three linear-attention layers, then one full
        if interval is not None:
            full = layers // interval  # layers interval, 2 x interval, ... are full
            linear = layers - full
        else:
            full, linear = layers, 0
    experts = positive_int(text.get("num_experts"))
    return Geometry(
        layers=layers,
        full_attention_layers=full,
        linear_attention_layers=linear,
        kv_heads=kv_heads,
        head_dim=head_dim,
        linear_num_key_heads=positive_int(text.get("linear_num_key_heads")) or 0,
        linear_num_value_heads=positive_int(text.get("linear_num_value_heads")) or 0,
        linear_key_head_dim=positive_int(text.get("linear_key_head_dim")) or 0,
        linear_value_head_dim=positive_int(text.get("linear_value_head_dim")) or 0,
        linear_conv_kernel=positive_int(text.get("linear_conv_kernel_dim")) or 0,
        mtp_layers=positive_int(text.get("mtp_num_hidden_layers")) or 0,
        hidden_size=hidden,
        vocab_size=positive_int(text.get("vocab_size")),
        num_experts=experts,
        source="config.json",
    )


def geometry_from_ir(language_model: IrInfo, mtp: IrInfo | None) -> Geometry | None:
    """The shape read from the state variables of a stateful export (when config.json is gone).

    optimum-intel names them cache_params.past.{key,value,conv,ssm}.N with shapes
    [batch, kv heads, tokens, head dim], [batch, conv channels, kernel] and
    [batch, value heads, key dim, value dim].
    """

    def dims(port: PortInfo) -> list[int | None]:
        try:
            return port.dims()
        except ValueError:
            return []

    keys = [dims(s) for s in language_model.states if ".key." in s.name]
    ssm = [dims(s) for s in language_model.states if ".ssm." in s.name]
    conv = [dims(s) for s in language_model.states if ".conv." in s.name]
    if not keys or len(keys[0]) != 4 or keys[0][1] is None or keys[0][3] is None:
        return None
    kv_heads, head_dim = keys[0][1], keys[0][3]
    value_heads = key_dim = value_dim = channels = kernel = 0
    if ssm and len(ssm[0]) == 4 and None not in ssm[0][1:]:
        value_heads, key_dim, value_dim = (int(d or 0) for d in ssm[0][1:])
    if conv and len(conv[0]) == 3 and None not in conv[0][1:]:
        channels, kernel = (int(d or 0) for d in conv[0][1:])
    # conv channels = 2 * key heads * key dim + value heads * value dim
    key_heads = (channels - value_heads * value_dim) // (2 * key_dim) if key_dim else 0
    mtp_layers = 0
    if mtp is not None:
        mtp_layers = len([s for s in mtp.states if ".key" in s.name])
    return Geometry(
        layers=len(keys) + len(ssm),
        full_attention_layers=len(keys),
        linear_attention_layers=len(ssm),
        kv_heads=kv_heads,
        head_dim=head_dim,
        linear_num_key_heads=max(key_heads, 0),
        linear_num_value_heads=value_heads,
        linear_key_head_dim=key_dim,
        linear_value_head_dim=value_dim,
        linear_conv_kernel=kernel,
        mtp_layers=mtp_layers,
        source="ir",
    )


def available_memory() -> tuple[int | None, int | None]:
    """(available, total) RAM in bytes, or (None, None) if the system will not say."""
    try:
        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)
    except Exception:  # psutil can fail in odd containers; the estimate then says "unknown"
        return None, None


def memory_diagnostics(memory: MemoryEstimate, total_ram: int | None) -> list[Diagnostic]:
    need = format_bytes(memory.total_bytes)
    if total_ram is not None and memory.total_bytes > total_ram:
        return [
            Diagnostic(
                "TOO_LARGE_FOR_MEMORY",
                "error",
                f"The model needs about {need} at {memory.context_length:,} tokens of context, "
                f"more than this computer's {format_bytes(total_ram)} of RAM.",
                "Use a smaller model or a stronger compression (INT4), or shorten the context.",
            )
        ]
    if memory.verdict == "does_not_fit" and memory.available_bytes is not None:
        return [
            Diagnostic(
                "TOO_LARGE_FOR_MEMORY",
                "warning",
                f"The model needs about {need} but only "
                f"{format_bytes(memory.available_bytes)} of RAM is free now.",
                "Close other applications, shorten the context, or use a smaller model.",
            )
        ]
    if memory.verdict == "tight" and memory.fraction is not None:
        return [
            Diagnostic(
                "MEMORY_TIGHT",
                "info",
                f"The model needs about {need}, {memory.fraction:.0%} of the free RAM: it "
                "should load, but the computer may slow down.",
                "Close other applications for the best speed.",
            )
        ]
    return []
