"""Checkpoints in the shapes the hub has them, made from the demo checkpoint without torch:
sharded with a `model.safetensors.index.json`, in BF16 as real Qwen3.5 releases are, or with
parts taken away; and raw safetensors writing for hostile variants."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from qwen_mtp_desktop.core.files.paths import demo_checkpoint_dir


def read_tensors(path: Path) -> dict[str, tuple[str, list[int], bytes]]:
    """{name: (dtype, shape, raw bytes)} of a safetensors file, in file order."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    data = raw[8 + length :]
    out = {}
    for name, entry in sorted(
        ((k, v) for k, v in header.items() if k != "__metadata__"),
        key=lambda item: item[1]["data_offsets"][0],
    ):
        start, end = entry["data_offsets"]
        out[name] = (entry["dtype"], entry["shape"], data[start:end])
    return out


def header_bytes(header: Mapping[str, object]) -> bytes:
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_safetensors(path: Path, tensors: Mapping[str, tuple[str, list[int], bytes]]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(blob)],
        }
        offset += len(blob)
    path.write_bytes(header_bytes(header) + b"".join(blob for _, _, blob in tensors.values()))


def to_bf16(dtype: str, blob: bytes) -> tuple[str, bytes]:
    """Round-to-nearest-even F32 -> BF16, as torch does."""
    if dtype != "F32":
        return dtype, blob
    bits = np.frombuffer(blob, dtype=np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return "BF16", rounded.astype(np.uint16).tobytes()


def sharded_checkpoint(
    target: Path,
    *,
    shards: int = 3,
    bf16: bool = False,
    source: Path | None = None,
    drop: tuple[str, ...] = (),
) -> Path:
    """A copy of the demo checkpoint split into `shards` files with an index. The MTP head is
    split over the last two shards (so a graft reads two headers), everything else fills the
    first ones; tensors whose names start with a prefix in `drop` are left out."""
    source = source or demo_checkpoint_dir()
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.suffix != ".safetensors" and item.is_file():
            shutil.copy2(item, target / item.name)
    tensors = read_tensors(source / "model.safetensors")
    tensors = {k: v for k, v in tensors.items() if not k.startswith(drop)}
    if bf16:
        converted = {}
        for key, (dtype, shape, blob) in tensors.items():
            new_dtype, new_blob = to_bf16(dtype, blob)
            converted[key] = (new_dtype, shape, new_blob)
        tensors = converted
    trunk = [k for k in tensors if not k.startswith("mtp.")]
    head = [k for k in tensors if k.startswith("mtp.")]
    names = [f"model-{i + 1:05d}-of-{shards:05d}.safetensors" for i in range(shards)]
    plan: dict[str, list[str]] = {name: [] for name in names}
    for i, key in enumerate(trunk):
        plan[names[i % max(1, shards - 1)]].append(key)
    half = len(head) // 2
    plan[names[-2 if shards > 1 else 0]].extend(head[:half])
    plan[names[-1]].extend(head[half:])
    weight_map = {}
    for name, keys in plan.items():
        write_safetensors(target / name, {k: tensors[k] for k in keys})
        weight_map.update({k: name for k in keys})
    total = sum(len(b) for _, _, b in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (target / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return target


def head_bytes(folder: Path) -> int:
    """Bytes of the `mtp.*` tensors in a checkpoint folder (what a graft must read)."""
    total = 0
    for path in folder.glob("*.safetensors"):
        total += sum(len(b) for k, (_, _, b) in read_tensors(path).items() if k.startswith("mtp."))
    return total


def checkpoint_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))
