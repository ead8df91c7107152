"""core.models.ir: reading real OpenVINO IRs built here with the openvino API and with nncf."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset6 as opset6
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openvino import opset13 as ops

from qwen_mtp_desktop.core.models.ir import (
    IrMissingError,
    IrParseError,
    IrUnreadableError,
    format_shares,
    precision_shares,
    read_ir,
)

RNG = np.random.default_rng(0)


# --- builders (test_model_folders uses them too) ----------------------------------------------


def save(model: ov.Model, xml_path: Path, *, fp16: bool = False) -> Path:
    xml_path.parent.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, str(xml_path), compress_to_fp16=fp16)
    return xml_path


def float_linear(x: ov.Output, out_f: int, in_f: int, name: str) -> ov.Node:
    weight = ops.constant(RNG.standard_normal((out_f, in_f)).astype(np.float32), name=name)
    return ops.matmul(x, weight, False, True)


def compressed_linear(
    x: ov.Output,
    out_f: int,
    in_f: int,
    *,
    storage: str = "u4",
    group: int | None = None,
    zero_point: bool = True,
    name: str = "w",
) -> ov.Node:
    """A MatMul whose weight goes through nncf's decompression subgraph, built by hand.

    Const(storage) -> Convert(f16) -> [Subtract(Convert(zero point))] -> Multiply(scale)
    -> [Reshape to 2-D when grouped] -> Convert(f32) -> MatMul, as nncf writes it.
    """
    ov_type = {"u4": ov.Type.u4, "i4": ov.Type.i4, "u8": ov.Type.u8, "i8": ov.Type.i8}[storage]
    shape = [out_f, in_f // group, group] if group else [out_f, in_f]
    scale_shape = [out_f, in_f // group, 1] if group else [out_f, 1]
    count = int(np.prod(shape))
    high = 16 if storage in ("u4", "i4") else 256
    values = RNG.integers(0, high, count) - (high // 2 if storage.startswith("i") else 0)
    const = ov.op.Constant(ov_type, ov.Shape(shape), [int(v) for v in values])
    const.set_friendly_name(name)
    weight = ops.convert(const, "f16")
    if zero_point:
        zp_count = int(np.prod(scale_shape))
        zp = ov.op.Constant(ov_type, ov.Shape(scale_shape), [high // 2] * zp_count)
        weight = ops.subtract(weight, ops.convert(zp, "f16"))
    scale = ops.constant(np.full(scale_shape, 0.01, np.float16), name=f"{name}/scale")
    weight = ops.multiply(weight, scale)
    if group:
        weight = ops.reshape(weight, ops.constant(np.array([out_f, in_f], np.int64)), False)
    return ops.matmul(x, ops.convert(weight, "f32"), False, True)


def mlp_model(
    *, storage: str | None = None, group: int | None = None, zero_point: bool = True
) -> ov.Model:
    """x[1,64] -> 128 -> 64 -> 32: 8,192 + 8,192 + 2,048 weight parameters."""
    x = ops.parameter([1, 64], np.float32, name="x")
    node: ov.Node = x
    for index, (out_f, in_f) in enumerate(((128, 64), (64, 128), (32, 64))):
        if storage is None:
            node = float_linear(node, out_f, in_f, f"w{index}")
        else:
            node = compressed_linear(
                node,
                out_f,
                in_f,
                storage=storage,
                group=group,
                zero_point=zero_point,
                name=f"w{index}",
            )
    return ov.Model([node], [x], "mlp")


def stateful_model(
    keys: int = 1, ssm: int = 3, *, kv_heads: int = 2, head_dim: int = 32
) -> ov.Model:
    """A model with optimum-intel-style state variables (and one small weight)."""
    x = ops.parameter([1, 8], np.float32, name="inputs_embeds")
    sinks = []
    specs = [(f"key.{i}", [-1, kv_heads, -1, head_dim]) for i in range(keys)]
    specs += [(f"value.{i}", [-1, kv_heads, -1, head_dim]) for i in range(keys)]
    specs += [(f"ssm.{i}", [-1, 4, 16, 16]) for i in range(ssm)]
    specs += [(f"conv.{i}", [-1, 128, 4]) for i in range(ssm)]
    for suffix, shape in specs:
        variable = f"cache_params.past.{suffix}cache_params.present.{suffix}"
        init = ops.constant(np.zeros([1 if d < 0 else d for d in shape], np.float32))
        value = opset6.read_value(init, variable, ov.Type.f32, ov.PartialShape(shape))
        sinks.append(opset6.assign(value, variable))
    out = float_linear(x, 8, 8, "w")
    return ov.Model([ops.result(out)], sinks, [x], "stateful")


# --- precision ---------------------------------------------------------------------------------


def test_fp32_and_fp16_weights(tmp_path: Path) -> None:
    f32 = read_ir(save(mlp_model(), tmp_path / "f32.xml"))
    f16 = read_ir(save(mlp_model(), tmp_path / "f16.xml", fp16=True))
    assert f32.precision_summary == "FP32 (100 %)"
    assert f16.precision_summary == "FP16 (100 %)"
    assert f32.weight_parameters == f16.weight_parameters == 8192 + 8192 + 2048
    assert f32.const_bytes_by_type == {"f32": 18432 * 4}
    assert f16.const_bytes_by_type == {"f16": 18432 * 2}
    assert f32.bin_bytes == f32.referenced_bytes == 18432 * 4
    assert f32.ok and not f32.issues
    assert [w.name for w in f32.weights] == ["w0", "w1", "w2"]


@pytest.mark.parametrize(
    ("storage", "group", "zero_point", "label"),
    [
        ("u4", 16, True, "INT4 asym g16"),
        ("i4", 32, False, "INT4 sym g32"),
        ("u8", None, True, "INT8 asym"),
        ("i8", None, False, "INT8 sym"),
    ],
)
def test_hand_built_decompression_subgraphs(
    tmp_path: Path, storage: str, group: int | None, zero_point: bool, label: str
) -> None:
    info = read_ir(
        save(mlp_model(storage=storage, group=group, zero_point=zero_point), tmp_path / "m.xml")
    )
    assert info.precision_summary == f"{label} (100 %)"
    assert info.weight_parameters == 18432
    assert {w.group_size for w in info.weights} == {group}
    assert all(w.symmetric is (not zero_point) for w in info.weights)
    assert info.dominant_precision == label.split()[0]
    # Storage bytes: 4-bit packs two values per byte.
    bits = 4 if "4" in storage else 8
    assert info.const_bytes_by_type[storage] >= 18432 * bits // 8
    assert not info.issues


def test_mixed_precision_percentages_by_parameter_count(tmp_path: Path) -> None:
    x = ops.parameter([1, 64], np.float32, name="x")
    a = compressed_linear(x, 128, 64, storage="u4", group=64, name="big")  # 8,192 params
    b = compressed_linear(a, 64, 128, storage="u4", group=64, name="big2")  # 8,192
    c = compressed_linear(b, 32, 64, storage="i8", zero_point=False, name="small")  # 2,048
    d = float_linear(c, 2, 32, "tiny")  # 64
    info = read_ir(save(ov.Model([d], [x], "mixed"), tmp_path / "mixed.xml"))
    shares = {s.label: s for s in info.precision_shares}
    assert shares["INT4 asym g64"].parameters == 16384
    assert shares["INT8 sym"].parameters == 2048
    assert shares["FP32"].parameters == 64
    total = 16384 + 2048 + 64
    assert shares["INT4 asym g64"].percent == pytest.approx(100 * 16384 / total)
    assert info.precision_summary == "INT4 asym g64 (89 %), INT8 sym (11 %), FP32 (<1 %)"


def test_format_shares_empty_and_rounding() -> None:
    assert format_shares([]) == ""
    assert precision_shares([]) == []


def test_gather_and_convolution_weights(tmp_path: Path) -> None:
    ids = ops.parameter([1, 8], np.int64, name="input_ids")
    table = ops.constant(RNG.standard_normal((100, 16)).astype(np.float32), name="embed")
    embeds = ops.gather(table, ids, ops.constant(np.int64(0)))
    image = ops.parameter([1, 3, 8, 8], np.float32, name="pixels")
    kernel = ops.constant(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), name="kernel")
    conv = ops.convolution(image, kernel, [1, 1], [0, 0], [0, 0], [1, 1])
    # A Gather over a shape (integer data) is not a weight.
    shape_pick = ops.gather(ops.shape_of(embeds), ops.constant(np.int64(1)), ops.constant(0))
    model = ov.Model([embeds, conv, shape_pick], [ids, image], "embed")
    info = read_ir(save(model, tmp_path / "embed.xml", fp16=True))
    # compress_to_fp16 renames each constant "<name>_compressed".
    consumers = sorted(
        (w.consumer, w.name.removesuffix("_compressed"), w.parameters) for w in info.weights
    )
    assert consumers == [("Convolution", "kernel", 108), ("Gather", "embed", 1600)]
    assert info.precision_summary == "FP16 (100 %)"


# --- nncf's own output -------------------------------------------------------------------------

_NNCF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, openvino as ov, nncf
    from openvino import opset13 as ops

    out = sys.argv[1]
    rng = np.random.default_rng(1)

    def mlp():
        x = ops.parameter([1, 128], np.float32, name="x")
        node = x
        for i, (o, n) in enumerate(((256, 128), (128, 256), (64, 128))):
            w = ops.constant(rng.standard_normal((o, n)).astype(np.float32), name=f"w{i}")
            node = ops.matmul(node, w, False, True)
        return ov.Model([node], [x], "mlp")

    def embed():
        ids = ops.parameter([1, 8], np.int64, name="input_ids")
        table = ops.constant(rng.standard_normal((512, 64)).astype(np.float32), name="embed")
        hidden = ops.gather(table, ids, ops.constant(np.int64(0)))
        w = ops.constant(rng.standard_normal((32, 64)).astype(np.float32), name="proj")
        return ov.Model([ops.matmul(hidden, w, False, True)], [ids], "embed")

    M = nncf.CompressWeightsMode
    variants = {
        "int4_asym_g32": (mlp, dict(mode=M.INT4_ASYM, group_size=32, ratio=1.0)),
        "int4_sym_g64_all": (mlp, dict(mode=M.INT4_SYM, group_size=64, all_layers=True)),
        "int8_sym": (mlp, dict(mode=M.INT8_SYM)),
        "int8_asym": (mlp, dict(mode=M.INT8_ASYM)),
        "embed_int8_sym": (embed, dict(mode=M.INT8_SYM)),
    }
    for name, (build, kwargs) in variants.items():
        ov.save_model(nncf.compress_weights(build(), **kwargs), f"{out}/{name}.xml")
    print(json.dumps(sorted(variants)))
    """
)


@pytest.fixture(scope="module")
def nncf_irs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """IRs compressed by the real nncf, in a subprocess so torch stays out of the test process."""
    pytest.importorskip("nncf")
    out = tmp_path_factory.mktemp("nncf")
    result = subprocess.run(
        [sys.executable, "-c", _NNCF_SCRIPT, str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("name", "summary", "mode"),
    [
        # ratio 1.0 still keeps the last layer in the INT8 asym backup (nncf's default rule).
        ("int4_asym_g32", "INT4 asym g32 (89 %), INT8 asym (11 %)", "int4_asym"),
        ("int4_sym_g64_all", "INT4 sym g64 (100 %)", "int4_sym"),
        ("int8_sym", "INT8 sym (100 %)", "int8_sym"),
        ("int8_asym", "INT8 asym (100 %)", "int8_asym"),
        ("embed_int8_sym", "INT8 sym (100 %)", "int8_sym"),
    ],
)
def test_nncf_compressed_irs(nncf_irs: Path, name: str, summary: str, mode: str) -> None:
    info = read_ir(nncf_irs / f"{name}.xml")
    assert info.precision_summary == summary
    assert info.ok and not info.issues
    assert info.rt_value("nncf", "weight_compression", "mode") == mode
    if name == "embed_int8_sym":
        assert {w.consumer for w in info.weights} == {"Gather", "MatMul"}


# --- rt_info, inputs, states ---------------------------------------------------------------


def test_rt_info_nested_values_and_inputs(tmp_path: Path) -> None:
    model = mlp_model()
    model.set_rt_info("2.2.0", ["optimum", "optimum_intel_version"])
    model.set_rt_info("{% for m in messages %}<|im_start|>{% endfor %}", "chat_template")
    model.set_rt_info("8.0", ["runtime_options", "ACTIVATIONS_SCALE_FACTOR"])
    info = read_ir(save(model, tmp_path / "rt.xml"))
    assert info.rt_value("optimum", "optimum_intel_version") == "2.2.0"
    assert info.rt_value("chat_template") == "{% for m in messages %}<|im_start|>{% endfor %}"
    assert info.rt_value("runtime_options", "ACTIVATIONS_SCALE_FACTOR") == "8.0"
    assert info.rt_value("OpenVINO Runtime", "nope") is None
    assert (info.rt_value("OpenVINO Runtime") or "").startswith(ov.get_version()[:6])
    assert [(p.name, p.element_type, p.shape) for p in info.inputs] == [("x", "f32", "1,64")]
    json.dumps(info.to_json_dict(include_consts=True))


def test_state_variables_are_listed(tmp_path: Path) -> None:
    info = read_ir(save(stateful_model(keys=1, ssm=3), tmp_path / "lm.xml"))
    names = [s.name for s in info.states]
    assert len(names) == 2 + 6
    key = next(s for s in info.states if ".key.0" in s.name)
    assert key.element_type == "f32"
    assert key.dims() == [None, 2, None, 32]


def test_weights_inside_loop_bodies_are_found(tmp_path: Path) -> None:
    body_x = ops.parameter([1, 16], np.float32, name="body_x")
    body_out = float_linear(body_x, 16, 16, "loop_weight")
    cond = ops.constant(np.array(True))
    body = ov.Model([cond, body_out], [body_x], "body")
    x = ops.parameter([1, 16], np.float32, name="x")
    loop = ops.loop(ops.constant(np.int64(3)), ops.constant(np.array(True)))
    loop.set_function(body)
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(body_x, x.output(0), body_out.output(0))
    out = loop.get_iter_value(body_out.output(0), -1)
    top = float_linear(out, 4, 16, "top_weight")
    info = read_ir(save(ov.Model([top], [x], "looped"), tmp_path / "loop.xml", fp16=True))
    assert sorted(w.name.removesuffix("_compressed") for w in info.weights) == [
        "loop_weight",
        "top_weight",
    ]
    assert info.precision_summary == "FP16 (100 %)"
    assert info.ok
    assert info.op_counts["Loop"] == 1


# --- integrity -----------------------------------------------------------------------------


def test_missing_bin_is_incomplete(tmp_path: Path) -> None:
    xml = save(mlp_model(), tmp_path / "m.xml")
    xml.with_suffix(".bin").unlink()
    info = read_ir(xml)
    assert info.bin_bytes is None
    assert [i.code for i in info.issues] == ["IR_INCOMPLETE"]
    assert not info.ok
    assert info.precision_summary == "FP32 (100 %)"  # the XML alone still says this


def test_truncated_bin_is_corrupt(tmp_path: Path) -> None:
    xml = save(mlp_model(), tmp_path / "m.xml")
    bin_path = xml.with_suffix(".bin")
    data = bin_path.read_bytes()
    bin_path.write_bytes(data[: len(data) // 2])
    info = read_ir(xml)
    assert [i.code for i in info.issues] == ["IR_CORRUPT"]
    assert "truncated" in info.issues[0].message
    assert not info.ok


def test_bin_with_unreferenced_bytes_is_suspicious(tmp_path: Path) -> None:
    xml = save(mlp_model(), tmp_path / "m.xml")
    with xml.with_suffix(".bin").open("ab") as handle:
        handle.write(b"\0" * 100)
    info = read_ir(xml)
    assert [(i.code, i.severity) for i in info.issues] == [("IR_SUSPICIOUS", "warning")]
    assert info.ok


def test_declared_size_must_match_shape(tmp_path: Path) -> None:
    xml = save(mlp_model(), tmp_path / "m.xml")
    text = xml.read_text()
    assert 'size="32768"' in text
    xml.write_text(text.replace('size="32768"', 'size="32767"', 1))
    info = read_ir(xml)
    assert "IR_CORRUPT" in [i.code for i in info.issues]


def test_dangling_edges_and_malformed_constants_are_corrupt(tmp_path: Path) -> None:
    xml = save(mlp_model(), tmp_path / "m.xml")
    text = xml.read_text()
    assert 'element_type="f32" shape="128, 64"' in text
    text = text.replace('shape="128, 64"', 'shape="?, 64"', 1)
    text = text.replace('from-layer="0"', 'from-layer="999"', 1)
    xml.write_text(text)
    info = read_ir(xml)
    messages = [i.message for i in info.issues if i.code == "IR_CORRUPT"]
    assert any("malformed" in m and "'w0'" in m for m in messages)
    assert any("1 edge(s)" in m for m in messages)
    assert not info.ok


def test_missing_xml(tmp_path: Path) -> None:
    with pytest.raises(IrMissingError):
        read_ir(tmp_path / "nothing.xml")


def test_directory_in_place_of_xml(tmp_path: Path) -> None:
    (tmp_path / "dir.xml").mkdir()
    with pytest.raises(IrUnreadableError):
        read_ir(tmp_path / "dir.xml")


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\x00\x01garbage",
        b"<net><layers><layer id='0'",  # truncated
        b"<html><body>not a model</body></html>",
        b'<?xml version="1.0"?>\n<!DOCTYPE net [<!ENTITY a "aaaa">]><net>&a;</net>',
        b'<!DOCTYPE net SYSTEM "file:///etc/passwd"><net/>',
    ],
)
def test_bad_xml_raises_parse_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.xml"
    path.write_bytes(content)
    with pytest.raises(IrParseError):
        read_ir(path)


def test_billion_laughs_is_rejected_quickly(tmp_path: Path) -> None:
    entities = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    path = tmp_path / "lol.xml"
    path.write_text(f'<!DOCTYPE net [<!ENTITY l0 "lol">{entities}]><net>&l9;</net>')
    with pytest.raises(IrParseError, match="DOCTYPE"):
        read_ir(path)


def test_non_ascii_and_spaces_in_path(tmp_path: Path) -> None:
    folder = tmp_path / "модель с пробелами 模型"
    info = read_ir(save(mlp_model(), folder / "openvino_language_model.xml"))
    assert info.xml_path.parent == folder
    assert info.ok


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=3000))
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.xml"
    path.write_bytes(data)
    with contextlib.suppress(IrParseError):
        read_ir(path)


@pytest.fixture(scope="module")
def real_xml(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("real")
    model = mlp_model(storage="u4", group=16)
    model.set_rt_info("x", ["nncf", "weight_compression", "mode"])
    return save(model, folder / "m.xml").read_bytes()


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=0, max_value=20000), flip=st.integers(0, 255))
def test_damaged_real_xml_never_crashes(
    tmp_path: Path, real_xml: bytes, cut: int, flip: int
) -> None:
    data = bytearray(real_xml[: min(cut, len(real_xml))] or real_xml)
    if data and cut % 3 == 0:
        data[cut % len(data)] = flip
    path = tmp_path / "damaged.xml"
    path.write_bytes(bytes(data))
    try:
        info = read_ir(path, tmp_path / "absent.bin")
    except IrParseError:
        return
    assert isinstance(info.precision_summary, str)
