"""When the fast follow-up graph (core.decoding.continuation) is built and when a call takes
it: the memory rule, the per-call threshold, and the weight-file sizing on odd model folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.continuation import (
    KEPT_PER_NEW_TOKEN,
    MIN_KEPT_TOKENS,
    MIN_NEW_TOKENS,
    ContinuationGraph,
)
from qwen_mtp_desktop.core.engine.model_files import weight_file_bytes
from qwen_mtp_desktop.core.system.state_budget import CONTINUATION_MEMORY_FACTOR, continuation_fits

GB = 1000**3


def graph() -> ContinuationGraph:
    def never(_model: object) -> object:
        raise AssertionError("deciding must not compile anything")

    return ContinuationGraph(object(), ("k",), never)


@given(new=st.integers(0, 100_000), kept=st.integers(0, 1_000_000))
def test_a_call_takes_the_graph_only_when_it_pays(new: int, kept: int) -> None:
    takes = graph().worth_it(new, kept)
    assert takes == (
        kept >= MIN_KEPT_TOKENS and new >= max(MIN_NEW_TOKENS, kept // KEPT_PER_NEW_TOKEN)
    )
    if takes:
        assert new >= MIN_NEW_TOKENS and kept >= MIN_KEPT_TOKENS


def test_the_measured_cases() -> None:
    """benchmarks/continuation_prefill.py: faster at 2,000 kept + 32 new and 6,000 + 128/512;
    slower at 6,000 + 32 (the copies), and pointless for a first prefill or a decoding step."""
    g = graph()
    assert g.worth_it(32, 2000) and g.worth_it(128, 6000) and g.worth_it(512, 6000)
    assert not g.worth_it(32, 6000)
    assert not g.worth_it(5000, 0) and not g.worth_it(1, 8000) and not g.worth_it(4, 8000)


@given(weights=st.integers(0, 10**12), total=st.integers(0, 10**13))
def test_the_graph_is_built_only_where_memory_has_room(weights: int, total: int) -> None:
    assert continuation_fits(weights, total) == (total >= CONTINUATION_MEMORY_FACTOR * weights)


def test_examples_of_the_memory_rule() -> None:
    assert continuation_fits(1 * GB, 24 * GB)  # the 0.8B model here
    assert not continuation_fits(5 * GB, 16 * GB)  # a 9B INT4 model on a 16 GB laptop


def test_weight_files_are_sized_without_trusting_the_folder(tmp_path: Path) -> None:
    (tmp_path / "openvino_language_model.bin").write_bytes(b"x" * 1000)
    assert weight_file_bytes(tmp_path) == 1000
    (tmp_path / "openvino_mtp_model.bin").write_bytes(b"x" * 24)
    assert weight_file_bytes(tmp_path) == 1024
    assert weight_file_bytes(tmp_path / "missing") == 0  # nothing to hold, nothing built


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_an_unreadable_weight_file_counts_as_too_large(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "openvino_mtp_model.bin")  # stat works on a FIFO: size 0, no hang
    assert weight_file_bytes(tmp_path) == 0
    looped = tmp_path / "loop"
    looped.mkdir()
    (looped / "openvino_language_model.bin").symlink_to(looped / "openvino_language_model.bin")
    assert not continuation_fits(weight_file_bytes(looped), 10**15)
