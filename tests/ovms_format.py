"""OpenVINO Model Server's documented file formats, written down for the tests of
`qwen_mtp_desktop.core.models.ovms` (no OVMS schema or MediaPipe proto package is installable
here, so the generated files are checked against these tables instead).

Sources (openvinotoolkit/model_server, commit 7e4df0c7a, 2026-08-21):
- LLM_OPTIONS: src/llm/llm_calculator.proto, message LLMCalculatorOptions (every field, its
  proto type; enum values of PipelineType and ChatTemplateMode).
- The graph's streams, side packets and handler: demos/common/export_models/export_model.py
  (text_generation_graph_template) and src/test/llm/lm_cb_speculative.pbtxt.
- config.json keys: docs/mediapipe.md (model_config_list / mediapipe_config_list tables) and
  export_model.py add_servable_to_config.
- Text format lexis (strings, escapes, comments): protocol buffers text format, which MediaPipe
  uses to read graph.pbtxt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

LLM_OPTIONS_TYPE = "type.googleapis.com/mediapipe.LLMCalculatorOptions"

#: field -> proto type, or the tuple of enum value names.
LLM_OPTIONS: dict[str, str | tuple[str, ...]] = {
    "models_path": "string",  # required
    "max_num_batched_tokens": "uint64",
    "cache_size": "uint64",
    "max_num_seqs": "uint64",
    "dynamic_split_fuse": "bool",
    "device": "string",
    "plugin_config": "string",
    "best_of_limit": "uint32",
    "max_tokens_limit": "uint32",
    "enable_prefix_caching": "bool",
    "draft_models_path": "string",
    "draft_device": "string",
    "draft_max_num_batched_tokens": "uint64",
    "draft_cache_size": "uint64",
    "draft_block_size": "uint64",
    "draft_max_num_seqs": "uint64",
    "draft_dynamic_split_fuse": "bool",
    "draft_eagle3_mode": "bool",
    "pipeline_type": ("LM", "VLM", "LM_CB", "VLM_CB", "OMNI", "AUTO"),
    "tool_parser": "string",
    "reasoning_parser": "string",
    "enable_tool_guided_generation": "bool",
    "cache_interval_multiplier": "uint64",
    "chat_template_mode": ("MINJA", "JINJA"),
}
LLM_REQUIRED = ("models_path",)
#: Draft scheduler options OVMS refuses without draft_models_path (servable_initializer.cpp).
DRAFT_ONLY = (
    "draft_device",
    "draft_max_num_batched_tokens",
    "draft_cache_size",
    "draft_block_size",
    "draft_max_num_seqs",
    "draft_dynamic_split_fuse",
)

#: What export_model.py's graph template puts around the LLM node.
GRAPH_STREAMS = {
    "input_stream": ["HTTP_REQUEST_PAYLOAD:input"],
    "output_stream": ["HTTP_RESPONSE_PAYLOAD:output"],
}
NODE_FIELDS = {
    "calculator": ["HttpLLMCalculator"],
    "input_stream": ["LOOPBACK:loopback", "HTTP_REQUEST_PAYLOAD:input"],
    "input_side_packet": ["LLM_NODE_RESOURCES:llm", "LLM_NODE_EXECUTION_CONTEXTS:llm_ctx"],
    "output_stream": ["LOOPBACK:loopback", "HTTP_RESPONSE_PAYLOAD:output"],
}

#: docs/mediapipe.md: keys of one model_config_list / mediapipe_config_list entry.
CONFIG_ENTRY_KEYS = {"name", "base_path", "graph_path", "subconfig"}


class FormatError(AssertionError):
    pass


# --- a strict protobuf text-format reader ------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>-?\d+(?:\.\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}\[\]:,/<>;])
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}  # fmt: skip


def unescape(literal: str) -> str:
    """The value of a text-format string literal (quotes included)."""
    body = literal[1:-1]
    data = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            data.extend(ch.encode("utf-8"))
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert digits is not None
            data.append(int(digits.group(), 8))
            i += 1 + len(digits.group())
        elif nxt == "x":
            digits = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2 :])
            if digits is None:
                raise FormatError(f"bad \\x escape in {literal!r}")
            data.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif nxt in _ESCAPES:
            data.extend(_ESCAPES[nxt].encode())
            i += 2
        else:
            raise FormatError(f"unknown escape \\{nxt} in {literal!r}")
    return data.decode("utf-8")


@dataclass
class Message:
    fields: list[tuple[str, Any]] = field(default_factory=list)

    def all(self, key: str) -> list[Any]:
        return [value for name, value in self.fields if name == key]

    def one(self, key: str) -> Any:
        values = self.all(key)
        if len(values) != 1:
            raise FormatError(f"expected one {key!r}, found {len(values)}")
        return values[0]


@dataclass(frozen=True)
class Scalar:
    kind: str  # "string" | "number" | "ident"
    text: str

    @property
    def value(self) -> Any:
        return unescape(self.text) if self.kind == "string" else self.text


def tokenize(text: str) -> list[tuple[str, str]]:
    tokens = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise FormatError(f"unexpected text at {pos}: {text[pos : pos + 20]!r}")
        kind = match.lastgroup or ""
        if kind not in ("space", "comment"):
            tokens.append((kind, match.group()))
        pos = match.end()
    return tokens


def parse(text: str) -> Message:
    """Parse text format into nested Messages; raises FormatError on anything malformed."""
    tokens = tokenize(text)
    message, end = _parse_fields(tokens, 0, closing=None)
    if end != len(tokens):
        raise FormatError("text after the last field")
    return message


def _parse_fields(
    tokens: list[tuple[str, str]], i: int, closing: str | None
) -> tuple[Message, int]:
    message = Message()
    while i < len(tokens):
        kind, text = tokens[i]
        if closing is not None and text == closing:
            return message, i + 1
        if text == "[":  # an extension or Any type URL: [a.b / c.D]
            end = next(j for j in range(i, len(tokens)) if tokens[j][1] == "]")
            name = "[" + "".join(t for _, t in tokens[i + 1 : end]) + "]"
            i = end + 1
        elif kind == "ident":
            name = text
            i += 1
        else:
            raise FormatError(f"expected a field name, got {text!r}")
        if tokens[i][1] == ":":
            i += 1
        kind, text = tokens[i]
        if text in ("{", "<"):
            value, i = _parse_fields(tokens, i + 1, "}" if text == "{" else ">")
        elif kind in ("string", "number", "ident"):
            value = Scalar(kind, text)
            i += 1
            # Adjacent string literals concatenate.
            while kind == "string" and i < len(tokens) and tokens[i][0] == "string":
                value = Scalar("string", '"' + _escape(value.value + unescape(tokens[i][1])) + '"')
                i += 1
        else:
            raise FormatError(f"expected a value for {name!r}, got {text!r}")
        message.fields.append((name, value))
        if i < len(tokens) and tokens[i][1] in (",", ";"):
            i += 1
    if closing is not None:
        raise FormatError(f"missing {closing!r}")
    return message, i


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# --- checks --------------------------------------------------------------------------------------


def check_scalar(name: str, value: Any, expected: str | tuple[str, ...]) -> Any:
    if not isinstance(value, Scalar):
        raise FormatError(f"{name} must be a scalar")
    if isinstance(expected, tuple):
        if value.kind != "ident" or value.text not in expected:
            raise FormatError(f"{name}: {value.text!r} is not one of {expected}")
        return value.text
    if expected == "string":
        if value.kind != "string":
            raise FormatError(f"{name} must be a quoted string, got {value.text!r}")
        return value.value
    if expected == "bool":
        if value.kind != "ident" or value.text not in ("true", "false"):
            raise FormatError(f"{name} must be true or false, got {value.text!r}")
        return value.text == "true"
    if expected in ("uint64", "uint32"):
        if value.kind != "number" or not value.text.isdigit():
            raise FormatError(f"{name} must be an unsigned integer, got {value.text!r}")
        number = int(value.text)
        if number >= 2 ** (64 if expected == "uint64" else 32):
            raise FormatError(f"{name} is out of range")
        return number
    raise AssertionError(expected)


def check_graph(text: str) -> dict[str, Any]:
    """Check graph.pbtxt against OVMS's documented LLM graph; return the LLM options."""
    graph = parse(text)
    for key, values in GRAPH_STREAMS.items():
        got = [check_scalar(key, v, "string") for v in graph.all(key)]
        if got != values:
            raise FormatError(f"graph {key}: {got} != {values}")
    node = graph.one("node")
    if not isinstance(node, Message):
        raise FormatError("node must be a message")
    for key, values in NODE_FIELDS.items():
        got = [check_scalar(key, v, "string") for v in node.all(key)]
        if sorted(got) != sorted(values):
            raise FormatError(f"node {key}: {got} != {values}")
    info = node.one("input_stream_info")
    if check_scalar("tag_index", info.one("tag_index"), "string") != "LOOPBACK:0":
        raise FormatError("input_stream_info.tag_index must be LOOPBACK:0")
    if check_scalar("back_edge", info.one("back_edge"), "bool") is not True:
        raise FormatError("input_stream_info.back_edge must be true")
    handler = node.one("input_stream_handler")
    if handler.one("input_stream_handler").value != "SyncSetInputStreamHandler":
        raise FormatError("the LLM node needs the SyncSetInputStreamHandler")
    sync = handler.one("options").one("[mediapipe.SyncSetInputStreamHandlerOptions.ext]")
    if sync.one("sync_set").one("tag_index").value != "LOOPBACK:0":
        raise FormatError("sync_set must hold LOOPBACK:0")
    options_any = node.one("node_options")
    (type_url, options), *rest = options_any.fields
    if rest or type_url.replace(" ", "") != f"[{LLM_OPTIONS_TYPE}]":
        raise FormatError(f"node_options must hold only {LLM_OPTIONS_TYPE}, got {type_url}")
    values: dict[str, Any] = {}
    for name, value in options.fields:
        if name not in LLM_OPTIONS:
            raise FormatError(f"LLMCalculatorOptions has no field {name!r}")
        if name in values:
            raise FormatError(f"{name} is set twice")
        values[name] = check_scalar(name, value, LLM_OPTIONS[name])
    for name in LLM_REQUIRED:
        if name not in values:
            raise FormatError(f"{name} is required")
    if "draft_models_path" not in values and any(k in values for k in DRAFT_ONLY):
        raise FormatError("draft options without draft_models_path are refused by OVMS")
    return values


def check_config(data: Any) -> list[dict[str, str]]:
    """Check config.json's shape (docs/mediapipe.md); return the servable entries."""
    if not isinstance(data, dict) or set(data) - {"model_config_list", "mediapipe_config_list"}:
        raise FormatError(f"config.json keys: {sorted(data) if isinstance(data, dict) else data}")
    entries = []
    for item in data.get("model_config_list", []):
        if set(item) != {"config"}:
            raise FormatError("each model_config_list item is {'config': {...}}")
        entries.append(item["config"])
    entries.extend(data.get("mediapipe_config_list", []))
    for entry in entries:
        if not isinstance(entry, dict) or "name" not in entry or set(entry) - CONFIG_ENTRY_KEYS:
            raise FormatError(f"bad config entry {entry!r}")
        if not all(isinstance(v, str) for v in entry.values()):
            raise FormatError(f"config entry values are strings: {entry!r}")
    return entries
