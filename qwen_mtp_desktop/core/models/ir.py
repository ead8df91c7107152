"""Read an OpenVINO IR (.xml + .bin) without compiling it: constants, weight precision, rt_info.

The .xml is streamed through expat (never built into a tree), so a multi-megabyte language model
costs little memory, and the .bin is only stat'ed, never read. The parser is defused: a DOCTYPE,
an entity declaration or an external reference aborts the read, since a real IR has none.

Weight precision follows nncf's decompression subgraphs back from each MatMul / Gather /
Convolution input: ``Const -> Convert -> (Subtract zero point) -> Multiply scale [-> Reshape]``.
An integer constant with a scale is a compressed weight (zero point = asymmetric, none =
symmetric; a Reshape after the scale means grouped, and the group size is the constant's
reduced axis); a floating constant (optionally through Convert) is a plain FP16/FP32/BF16 weight.

Fatal problems (no .xml, unreadable, not XML, not an IR) raise an `IrError` subclass; problems the
reader can still describe (missing or truncated .bin, constants outside it) land in
`IrInfo.issues` so a caller can show them next to what was readable.
"""

from __future__ import annotations

import math
import xml.parsers.expat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from qwen_mtp_desktop.core.files.safe_files import (
    FileKind,
    NotRegularFileError,
    UnsafeFileError,
    open_regular_file,
)

#: Bits per element of OpenVINO element types (IR spelling). Unknown types are not size-checked.
ELEMENT_BITS: dict[str, int] = {
    "f64": 64,
    "f32": 32,
    "f16": 16,
    "bf16": 16,
    "f8e4m3": 8,
    "f8e5m2": 8,
    "f8e8m0": 8,
    "f4e2m1": 4,
    "nf4": 4,
    "i64": 64,
    "u64": 64,
    "i32": 32,
    "u32": 32,
    "i16": 16,
    "u16": 16,
    "i8": 8,
    "u8": 8,
    "i4": 4,
    "u4": 4,
    "u3": 3,
    "u2": 2,
    "u1": 1,
    "boolean": 8,
}
FLOAT_TYPES = frozenset({"f64", "f32", "f16", "bf16"})
#: Storage types that only make sense as a compressed weight when a scale follows them.
QUANTIZED_NAMES: dict[str, str] = {
    "u4": "INT4",
    "i4": "INT4",
    "u8": "INT8",
    "i8": "INT8",
    "nf4": "NF4",
    "f4e2m1": "MXFP4",
    "f8e4m3": "FP8 E4M3",
    "f8e5m2": "FP8 E5M2",
    "u2": "INT2",
    "u3": "INT3",
}
#: Op type -> input indices that may carry a weight.
WEIGHT_CONSUMERS: dict[str, tuple[int, ...]] = {
    "MatMul": (0, 1),
    "Gather": (0,),
    "Convolution": (1,),
    "GroupConvolution": (1,),
    "ConvolutionBackpropData": (1,),
}
#: Ops a weight passes through unchanged (for precision purposes) on its way to the consumer.
_PASS_THROUGH = frozenset({"Convert", "Reshape", "Transpose", "Squeeze", "Unsqueeze"})
_READ_CHUNK = 1 << 20

RtValue: TypeAlias = str | dict[str, "RtValue"] | None
RtInfo: TypeAlias = dict[str, RtValue]
IssueCode = Literal["IR_INCOMPLETE", "IR_CORRUPT", "IR_SUSPICIOUS"]


class IrError(Exception):
    """The IR could not be read at all; `path` is the .xml."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path} {message}")
        self.path = path
        #: What is wrong, phrased to follow the file's name ("is not well-formed XML (...)").
        self.reason = message


class IrMissingError(IrError):
    """The .xml does not exist."""


class IrUnreadableError(IrError):
    """The .xml exists but cannot be opened (permissions, I/O error, a folder in its place)."""


class IrParseError(IrError):
    """The .xml is not well-formed XML, is forbidden XML (DOCTYPE, entities) or is not an IR."""


@dataclass(frozen=True)
class ConstInfo:
    layer_id: str
    name: str
    element_type: str
    shape: tuple[int, ...]
    offset: int
    size: int

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def end(self) -> int:
        return self.offset + self.size

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "element_type": self.element_type,
            "shape": list(self.shape),
            "offset": self.offset,
            "size": self.size,
        }


@dataclass(frozen=True)
class PortInfo:
    """A model input (Parameter) or state variable (ReadValue); shape as written, '?' = dynamic."""

    name: str
    element_type: str
    shape: str

    def dims(self) -> list[int | None]:
        out: list[int | None] = []
        for part in self.shape.split(","):
            part = part.strip()
            if part:
                out.append(int(part) if part.isdigit() else None)
        return out

    def to_json_dict(self) -> dict[str, Any]:
        return {"name": self.name, "element_type": self.element_type, "shape": self.shape}


@dataclass(frozen=True)
class WeightInfo:
    """One weight tensor as stored, and the precision it is computed from."""

    name: str
    consumer: str
    element_type: str
    shape: tuple[int, ...]
    #: "INT4", "INT8", "FP16", "FP32", ...
    precision: str
    #: True = symmetric, False = asymmetric (zero point), None = not quantized.
    symmetric: bool | None
    #: Elements per scale along the reduced axis when grouped, else None (per channel / plain).
    group_size: int | None

    @property
    def parameters(self) -> int:
        return math.prod(self.shape)

    @property
    def label(self) -> str:
        parts = [self.precision]
        if self.symmetric is not None:
            parts.append("sym" if self.symmetric else "asym")
        if self.group_size is not None:
            parts.append(f"g{self.group_size}")
        return " ".join(parts)


@dataclass(frozen=True)
class PrecisionShare:
    label: str
    parameters: int
    tensors: int
    percent: float

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "parameters": self.parameters,
            "tensors": self.tensors,
            "percent": self.percent,
        }


@dataclass(frozen=True)
class IrIssue:
    code: IssueCode
    severity: Literal["error", "warning"]
    message: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


def precision_shares(weights: Iterable[WeightInfo]) -> list[PrecisionShare]:
    """Weights grouped by label, largest parameter count first (ties by label, for stability)."""
    params: dict[str, int] = {}
    tensors: dict[str, int] = {}
    for weight in weights:
        params[weight.label] = params.get(weight.label, 0) + weight.parameters
        tensors[weight.label] = tensors.get(weight.label, 0) + 1
    total = sum(params.values())
    return [
        PrecisionShare(label, count, tensors[label], 100.0 * count / total if total else 0.0)
        for label, count in sorted(params.items(), key=lambda item: (-item[1], item[0]))
    ]


def format_shares(shares: Iterable[PrecisionShare]) -> str:
    """'INT4 asym g64 (92 %), INT8 sym (8 %)'; '' when there are no weights."""
    parts = []
    for share in shares:
        pct = round(share.percent)
        shown = "<1" if pct == 0 and share.parameters else str(pct)
        parts.append(f"{share.label} ({shown} %)")
    return ", ".join(parts)


@dataclass
class IrInfo:
    """What one IR holds. `issues` empty means the .xml and .bin are consistent."""

    xml_path: Path
    bin_path: Path
    model_name: str
    ir_version: str
    xml_bytes: int
    #: None when the .bin is missing or unreadable (see `issues`).
    bin_bytes: int | None
    layer_count: int
    op_counts: dict[str, int]
    consts: list[ConstInfo]
    inputs: list[PortInfo]
    states: list[PortInfo]
    weights: list[WeightInfo]
    rt_info: RtInfo
    issues: list[IrIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(issue.severity == "error" for issue in self.issues)

    @property
    def referenced_bytes(self) -> int:
        """How long the .bin must be: the furthest end of any constant."""
        return max((c.end for c in self.consts), default=0)

    @property
    def const_bytes_by_type(self) -> dict[str, int]:
        """Bytes of constant data per element type; shared data (same offset) counted once."""
        seen: set[tuple[int, int]] = set()
        totals: dict[str, int] = {}
        for const in self.consts:
            key = (const.offset, const.size)
            if key in seen:
                continue
            seen.add(key)
            totals[const.element_type] = totals.get(const.element_type, 0) + const.size
        return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))

    @property
    def weight_parameters(self) -> int:
        return sum(w.parameters for w in self.weights)

    @property
    def precision_shares(self) -> list[PrecisionShare]:
        return precision_shares(self.weights)

    @property
    def precision_summary(self) -> str:
        return format_shares(self.precision_shares)

    @property
    def dominant_precision(self) -> str | None:
        """The precision ("INT4", "FP16", ...) holding the most weight parameters."""
        totals: dict[str, int] = {}
        for weight in self.weights:
            totals[weight.precision] = totals.get(weight.precision, 0) + weight.parameters
        if not totals:
            return None
        return max(sorted(totals), key=lambda name: totals[name])

    def rt_value(self, *path: str) -> str | None:
        """A leaf of rt_info by path, e.g. rt_value("optimum", "optimum_intel_version")."""
        node: RtValue = self.rt_info
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node if isinstance(node, str) else None

    def to_json_dict(self, *, include_consts: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "xml_path": str(self.xml_path),
            "bin_path": str(self.bin_path),
            "model_name": self.model_name,
            "ir_version": self.ir_version,
            "xml_bytes": self.xml_bytes,
            "bin_bytes": self.bin_bytes,
            "referenced_bytes": self.referenced_bytes,
            "layer_count": self.layer_count,
            "const_count": len(self.consts),
            "const_bytes_by_type": self.const_bytes_by_type,
            "weight_parameters": self.weight_parameters,
            "precision": self.precision_summary,
            "precision_shares": [share.to_json_dict() for share in self.precision_shares],
            "inputs": [port.to_json_dict() for port in self.inputs],
            "states": [port.to_json_dict() for port in self.states],
            "rt_info": self.rt_info,
            "issues": [issue.to_json_dict() for issue in self.issues],
        }
        if include_consts:
            data["consts"] = [const.to_json_dict() for const in self.consts]
        return data


# --- parsing ---------------------------------------------------------------------------------


class _Layer:
    __slots__ = ("data", "id", "inputs", "name", "out_ports", "out_rank", "type")

    def __init__(self, layer_id: str, name: str, op_type: str) -> None:
        self.id = layer_id
        self.name = name
        self.type = op_type
        self.data: dict[str, str] = {}
        #: input port ids in declaration order (edges name ports, consumers care about order)
        self.inputs: list[str] = []
        self.out_ports = 0
        #: rank of the first output (a Reshape that lowers the rank after a scale = groups)
        self.out_rank = 0


class _Scope:
    """One graph: the top-level net or a Loop/TensorIterator/If body."""

    __slots__ = ("edges", "layers", "owner_depth")

    def __init__(self, owner_depth: int) -> None:
        self.owner_depth = owner_depth
        self.layers: dict[str, _Layer] = {}
        self.edges: list[tuple[str, str, str]] = []  # (from layer, to layer, to port)


class _ForbiddenXmlError(Exception):
    pass


def _forbid(*_args: object) -> int:
    raise _ForbiddenXmlError(
        "uses DOCTYPE, entity declarations or external references, which are not allowed"
    )


def _parse_shape(text: str) -> tuple[int, ...]:
    text = text.strip()
    if not text:
        return ()
    return tuple(int(part) for part in text.split(","))


class _Reader:
    def __init__(self, xml_path: Path) -> None:
        self.xml_path = xml_path
        self.stack: list[str] = []
        self.root_seen = False
        self.model_name = ""
        self.ir_version = ""
        self.scopes: list[_Scope] = []
        self.layer_stack: list[_Layer] = []
        self.layer_count = 0
        self.op_counts: dict[str, int] = {}
        self.consts: list[ConstInfo] = []
        self.inputs: list[PortInfo] = []
        self.states: list[PortInfo] = []
        self.weights: list[WeightInfo] = []
        self.issues: list[IrIssue] = []
        self.rt_info: RtInfo = {}
        self.rt_stack: list[tuple[RtInfo, str, bool]] = []  # (node, key in parent, had value)
        self.rt_depth: int | None = None
        #: damage counted while parsing, reported once each (a broken file can have thousands)
        self.malformed_consts: list[str] = []
        self.dangling_edges = 0

    # expat callbacks
    def start(self, tag: str, attrs: dict[str, str]) -> None:
        parent = self.stack[-1] if self.stack else None
        depth = len(self.stack)
        self.stack.append(tag)
        if depth == 0:
            if tag != "net":
                raise IrParseError(
                    self.xml_path, f"is not an OpenVINO IR (its root element is <{tag}>, not <net>)"
                )
            self.root_seen = True
            self.model_name = attrs.get("name", "")
            self.ir_version = attrs.get("version", "")
            return
        if self.rt_depth is not None:
            self._rt_start(tag, attrs)
            return
        if tag == "rt_info" and depth == 1:
            self.rt_depth = depth
            return
        if tag == "layers":
            self.scopes.append(_Scope(owner_depth=depth - 1))
        elif tag == "layer" and parent == "layers" and self.scopes:
            layer = _Layer(attrs.get("id", ""), attrs.get("name", ""), attrs.get("type", ""))
            self.scopes[-1].layers[layer.id] = layer
            self.layer_stack.append(layer)
            self.layer_count += 1
            self.op_counts[layer.type] = self.op_counts.get(layer.type, 0) + 1
        elif tag == "data" and parent == "layer" and self.layer_stack:
            self.layer_stack[-1].data = dict(attrs)
        elif tag == "port" and parent == "input" and self.layer_stack:
            if len(self.stack) >= 3 and self.stack[-3] == "layer":
                self.layer_stack[-1].inputs.append(attrs.get("id", ""))
        elif tag == "port" and parent == "output" and self.layer_stack:
            if len(self.stack) >= 3 and self.stack[-3] == "layer":
                self.layer_stack[-1].out_ports += 1
        elif tag == "dim" and parent == "port" and self.layer_stack and len(self.stack) >= 4:
            layer = self.layer_stack[-1]
            if self.stack[-3] == "output" and self.stack[-4] == "layer" and layer.out_ports == 1:
                layer.out_rank += 1
        elif tag == "edge" and parent == "edges" and self.scopes:
            self.scopes[-1].edges.append(
                (attrs.get("from-layer", ""), attrs.get("to-layer", ""), attrs.get("to-port", ""))
            )

    def end(self, tag: str) -> None:
        self.stack.pop()
        depth = len(self.stack)
        if self.rt_depth is not None:
            if depth == self.rt_depth:
                self.rt_depth = None
            else:
                self._rt_end()
            return
        if tag == "layer" and self.layer_stack and depth >= 1 and self.stack[-1] == "layers":
            self._finish_layer(self.layer_stack.pop())
        if self.scopes and depth == self.scopes[-1].owner_depth:
            self._finish_scope(self.scopes.pop())

    # rt_info: <info name="K" value="V"/> or <K value="V"/>, nested elements become dicts
    def _rt_start(self, tag: str, attrs: dict[str, str]) -> None:
        parent: RtInfo = self.rt_stack[-1][0] if self.rt_stack else self.rt_info
        key = attrs["name"] if tag == "info" and "name" in attrs else tag
        node: RtInfo = {}
        parent[key] = attrs.get("value", node)
        self.rt_stack.append((node, key, "value" in attrs))

    def _rt_end(self) -> None:
        node, key, had_value = self.rt_stack.pop()
        parent = self.rt_stack[-1][0] if self.rt_stack else self.rt_info
        if not had_value and not node:
            parent[key] = None  # an empty element: the option exists but is unset

    def _finish_layer(self, layer: _Layer) -> None:
        data = layer.data
        if layer.type == "Const":
            try:
                const = ConstInfo(
                    layer_id=layer.id,
                    name=layer.name,
                    element_type=data.get("element_type", ""),
                    shape=_parse_shape(data.get("shape", "")),
                    offset=int(data.get("offset", "0")),
                    size=int(data.get("size", "0")),
                )
            except ValueError:
                self.malformed_consts.append(layer.name)
                return
            self.consts.append(const)
        elif layer.type == "Parameter" and len(self.scopes) == 1:
            self.inputs.append(
                PortInfo(layer.name, data.get("element_type", ""), data.get("shape", ""))
            )
        elif layer.type == "ReadValue" and len(self.scopes) == 1 and "variable_id" in data:
            self.states.append(
                PortInfo(
                    data["variable_id"],
                    data.get("variable_type", ""),
                    data.get("variable_shape", ""),
                )
            )

    def _finish_scope(self, scope: _Scope) -> None:
        weights, dangling = _find_weights(scope)
        self.weights.extend(weights)
        self.dangling_edges += dangling

    def damage(self) -> list[IrIssue]:
        out = []
        if self.malformed_consts:
            out.append(
                IrIssue(
                    "IR_CORRUPT",
                    "error",
                    f"{len(self.malformed_consts)} constant(s) have malformed shape, offset or "
                    f"size (first: {self.malformed_consts[0]!r})",
                )
            )
        if self.dangling_edges:
            out.append(
                IrIssue(
                    "IR_CORRUPT",
                    "error",
                    f"{self.dangling_edges} edge(s) connect layers that do not exist",
                )
            )
        return out


@dataclass
class _Trace:
    const: _Layer
    scale: _Layer | None = None
    zero_point: bool = False
    reshaped_after_scale: bool = False


def _find_weights(scope: _Scope) -> tuple[list[WeightInfo], int]:
    """The weights of one graph, and how many of its edges point at missing layers."""
    sources: dict[tuple[str, str], str] = {}
    dangling = 0
    for src, dst, port in scope.edges:
        if src not in scope.layers or dst not in scope.layers:
            dangling += 1
            continue
        sources[(dst, port)] = src

    def source(layer: _Layer, index: int) -> _Layer | None:
        if index >= len(layer.inputs):
            return None
        src = sources.get((layer.id, layer.inputs[index]))
        return scope.layers.get(src) if src is not None else None

    def resolve(layer: _Layer | None, depth: int = 0) -> _Trace | None:
        if layer is None or depth > 16:
            return None
        if layer.type == "Const":
            return _Trace(layer)
        if layer.type in _PASS_THROUGH:
            inner = resolve(source(layer, 0), depth + 1)
            if (
                inner is not None
                and layer.type == "Reshape"
                and inner.scale is not None
                and 0 < layer.out_rank < _rank(inner.const)
            ):
                inner.reshaped_after_scale = True
            return inner
        if layer.type == "Subtract":
            data = resolve(source(layer, 0), depth + 1)
            point = resolve(source(layer, 1), depth + 1)
            if data is None or point is None or data.scale is not None:
                return None
            data.zero_point = True
            return data
        if layer.type == "Multiply":
            left = resolve(source(layer, 0), depth + 1)
            right = resolve(source(layer, 1), depth + 1)
            if left is None or right is None:
                return None
            # The weight is the side that is quantized or simply larger; the other is the scale.
            left_first = _weight_rank(left) >= _weight_rank(right)
            data, scale = (left, right) if left_first else (right, left)
            if data.scale is not None or scale.zero_point:
                return None
            data.scale = scale.const
            return data
        return None

    found: dict[str, WeightInfo] = {}
    for layer in scope.layers.values():
        for index in WEIGHT_CONSUMERS.get(layer.type, ()):
            trace = resolve(source(layer, index))
            if trace is None or trace.const.id in found:
                continue
            weight = _classify(trace, layer.type)
            if weight is not None:
                found[trace.const.id] = weight
    return list(found.values()), dangling


def _rank(const: _Layer) -> int:
    return len(const.data.get("shape", "").split(",")) if const.data.get("shape", "").strip() else 0


def _weight_rank(trace: _Trace) -> tuple[int, int]:
    storage = trace.const.data.get("element_type", "")
    try:
        elements = math.prod(_parse_shape(trace.const.data.get("shape", "")))
    except ValueError:
        elements = 0
    return (1 if storage in QUANTIZED_NAMES or trace.zero_point else 0, elements)


def _classify(trace: _Trace, consumer: str) -> WeightInfo | None:
    const = trace.const
    storage = const.data.get("element_type", "")
    try:
        shape = _parse_shape(const.data.get("shape", ""))
    except ValueError:
        return None
    if trace.scale is None or storage in FLOAT_TYPES:
        # A float constant times another constant is still a float weight, not a compressed one.
        if storage not in FLOAT_TYPES:
            return None  # an index table or shape constant, not a weight
        precision = "BF16" if storage == "bf16" else storage.upper().replace("F", "FP", 1)
        return WeightInfo(const.name, consumer, storage, shape, precision, None, None)
    precision = QUANTIZED_NAMES.get(storage, storage.upper())
    group_size = None
    if trace.reshaped_after_scale:
        try:
            scale_shape = _parse_shape(trace.scale.data.get("shape", ""))
        except ValueError:
            scale_shape = ()
        group_size = _group_size(shape, scale_shape)
    return WeightInfo(
        const.name, consumer, storage, shape, precision, not trace.zero_point, group_size
    )


def _group_size(weight: tuple[int, ...], scale: tuple[int, ...]) -> int | None:
    """The reduced axis's length: the last axis where the scale is 1 and the weight is not."""
    if len(weight) != len(scale) or len(weight) < 2:
        return None
    for axis in range(len(weight) - 1, -1, -1):
        if scale[axis] == 1 and weight[axis] > 1:
            return weight[axis]
    return None


def _check_bin(reader: _Reader, bin_path: Path) -> int | None:
    try:
        bin_bytes: int | None = bin_path.stat().st_size
        if not bin_path.is_file():
            raise IsADirectoryError(str(bin_path))
    except FileNotFoundError:
        bin_bytes = None
        if any(c.size > 0 for c in reader.consts):
            reader.issues.append(
                IrIssue(
                    "IR_INCOMPLETE",
                    "error",
                    f"{bin_path.name} is missing: the weights of {reader.xml_path.name} are gone",
                )
            )
        return bin_bytes
    except OSError as exc:
        reader.issues.append(
            IrIssue("IR_INCOMPLETE", "error", f"{bin_path.name} cannot be read ({exc})")
        )
        return None
    assert bin_bytes is not None
    outside = [c for c in reader.consts if c.offset < 0 or c.size < 0 or c.end > bin_bytes]
    if outside:
        first = max(outside, key=lambda c: c.end)
        reader.issues.append(
            IrIssue(
                "IR_CORRUPT",
                "error",
                # In words: the sizes say enough; the tensor names would say nothing to a user.
                f"{bin_path.name} is {bin_bytes:,} bytes but {reader.xml_path.name} needs "
                f"{first.end:,}: the file is truncated (a copy or download stopped part way) "
                "or belongs to another export",
            )
        )
    referenced = max((c.end for c in reader.consts), default=0)
    if not outside and bin_bytes > referenced:
        reader.issues.append(
            IrIssue(
                "IR_SUSPICIOUS",
                "warning",
                f"{bin_path.name} has {bin_bytes - referenced:,} bytes no constant uses "
                f"({bin_bytes:,} on disk, {referenced:,} referenced); it may belong to another "
                "export",
            )
        )
    mismatched = []
    for const in reader.consts:
        bits = ELEMENT_BITS.get(const.element_type)
        if bits is None:
            continue  # strings and unknown types carry their own layout
        expected = (const.elements * bits + 7) // 8
        if const.size != expected:
            mismatched.append(const)
    if mismatched:
        first_bad = mismatched[0]
        reader.issues.append(
            IrIssue(
                "IR_CORRUPT",
                "error",
                f"{len(mismatched)} constant(s) declare a size that does not match their shape "
                f"(e.g. {first_bad.name!r}: {first_bad.element_type} {list(first_bad.shape)} in "
                f"{first_bad.size} bytes)",
            )
        )
    return bin_bytes


def _expat_reason(exc: xml.parsers.expat.ExpatError) -> str:
    """'invalid token at line 3, column 7': expat's own wording says "not well-formed" too."""
    reason = xml.parsers.expat.ErrorString(exc.code) if exc.code else str(exc)
    reason = reason.removeprefix("not well-formed").strip().strip("()") or "syntax error"
    return f"{reason} at line {exc.lineno}, column {exc.offset}"


def read_ir(xml_path: Path, bin_path: Path | None = None) -> IrInfo:
    """Parse `xml_path` (and stat its .bin) into an `IrInfo`; raise `IrError` if unreadable."""
    xml_path = Path(xml_path)
    bin_path = Path(bin_path) if bin_path is not None else xml_path.with_suffix(".bin")
    reader = _Reader(xml_path)
    parser = xml.parsers.expat.ParserCreate()
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.StartDoctypeDeclHandler = _forbid
    parser.EntityDeclHandler = _forbid
    parser.UnparsedEntityDeclHandler = _forbid
    parser.ExternalEntityRefHandler = _forbid
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    try:
        xml_bytes = xml_path.stat().st_size
        # Regular files only, opened without blocking: a FIFO or a device in a model folder
        # would otherwise block the open or stream forever (issue 29).
        with open_regular_file(xml_path, kind=FileKind(xml_path.name, "")) as handle:
            while chunk := handle.read(_READ_CHUNK):
                parser.Parse(chunk, False)
            parser.Parse(b"", True)
    except FileNotFoundError as exc:
        raise IrMissingError(xml_path, "does not exist") from exc
    except NotRegularFileError as exc:
        raise IrUnreadableError(xml_path, f"is {exc.what}, not a regular file") from exc
    except UnsafeFileError as exc:
        raise IrUnreadableError(xml_path, f"cannot be opened ({exc.message})") from exc
    except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
        raise IrUnreadableError(xml_path, f"cannot be opened ({exc.strerror or exc})") from exc
    except OSError as exc:
        raise IrUnreadableError(xml_path, f"cannot be read ({exc.strerror or exc})") from exc
    except xml.parsers.expat.ExpatError as exc:
        raise IrParseError(xml_path, f"is not well-formed XML ({_expat_reason(exc)})") from exc
    except _ForbiddenXmlError as exc:
        raise IrParseError(xml_path, str(exc)) from exc
    except RecursionError as exc:
        raise IrParseError(xml_path, "is nested too deeply to be an OpenVINO IR") from exc
    if not reader.root_seen:
        raise IrParseError(xml_path, "is empty (no XML element)")
    reader.issues.extend(reader.damage())
    bin_bytes = _check_bin(reader, bin_path)
    return IrInfo(
        xml_path=xml_path,
        bin_path=bin_path,
        model_name=reader.model_name,
        ir_version=reader.ir_version,
        xml_bytes=xml_bytes,
        bin_bytes=bin_bytes,
        layer_count=reader.layer_count,
        op_counts=dict(sorted(reader.op_counts.items())),
        consts=reader.consts,
        inputs=reader.inputs,
        states=reader.states,
        weights=reader.weights,
        rt_info=reader.rt_info,
        issues=reader.issues,
    )
