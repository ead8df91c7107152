"""The offline model builder is deterministic: same arguments, same bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_mtp_desktop.devtools.tiny_model import PROVENANCE_FILE, build_checkpoint, read_provenance

pytestmark = pytest.mark.export  # trains real checkpoints with torch


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_trained_builds_are_byte_identical(tmp_path: Path) -> None:
    first = build_checkpoint(tmp_path / "a", train_steps=12, seed=5)
    second = build_checkpoint(tmp_path / "b", train_steps=12, seed=5)
    a, b = _files(first.path), _files(second.path)
    assert "model.safetensors" in a and "tokenizer.json" in a and PROVENANCE_FILE in a
    assert a.keys() == b.keys()
    assert [name for name in a if a[name] != b[name]] == []
    record = read_provenance(first.path)
    assert record is not None
    assert (record["seed"], record["train_steps"], record["kind"]) == (5, 12, "qwen3_5")

    # A different seed really changes the weights (the comparison above can fail).
    other = build_checkpoint(tmp_path / "c", train_steps=12, seed=6)
    assert _files(other.path)["model.safetensors"] != a["model.safetensors"]
