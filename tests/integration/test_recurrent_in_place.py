"""Calls that are kept whatever they return (prefills, plain steps) update the Gated DeltaNet
states in place (core.decoding.target.RecurrentBuffers): bit for bit what the two-buffer
binding gives, no rebinding of the ports while decoding plain, and a call updated in place
can never be rolled back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS

pytestmark = pytest.mark.model

#: A prefill, a few single-token steps, a short multi-token call, more steps.
CALLS = [list(range(300, 341)), [500], [501], [502], list(range(600, 607)), [503], [504]]


def run_calls(decoder: AppDecoder, *, in_place: bool) -> tuple[list[Any], list[Any]]:
    """Every call's logits and the recurrent state after it, from a reset state."""
    target = decoder.target
    target.reset()
    logits, states = [], []
    position = 0
    for ids in CALLS:
        out = target.run(ids, position, 0, in_place=in_place)
        logits.append(np.array(out.logits()))
        target.settle(len(ids), keep=True)
        states.append(target.recurrent.copy_out())
        position += len(ids)
    return logits, states


@pytest.mark.parametrize("numerics", ["exact", "default"])
def test_in_place_updates_equal_the_two_buffer_ones_bit_for_bit(
    demo_model: Path, numerics: str
) -> None:
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS if numerics == "exact" else {})
    separate = run_calls(decoder, in_place=False)
    in_place = run_calls(decoder, in_place=True)
    again = run_calls(decoder, in_place=False)
    for logits, states in (in_place, again):
        for call, (expected, got) in enumerate(zip(separate[0], logits, strict=True)):
            assert np.array_equal(expected, got), f"logits differ after call {call}"
        for call, (expected, got) in enumerate(zip(separate[1], states, strict=True)):
            assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True)), call
    assert any(np.any(a) for a in separate[1][-1])  # the states are not all zero


def test_plain_decoding_never_rebinds_and_mtp_still_rolls_back(demo_model: Path) -> None:
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS, cache_budget=0)
    prompt = list(range(300, 340))
    recurrent = decoder.target.recurrent

    def answer(method: DecodingMethod) -> list[int]:
        steps = decoder.decode(prompt, method=method, max_new_tokens=30, stop_ids=set())
        return [t for step in steps for t in step.tokens]

    plain = answer(DecodingMethod.plain())
    before = recurrent.rebinds
    assert answer(DecodingMethod.plain()) == plain
    assert recurrent.rebinds - before <= 1  # at most once, if the last call was a verification
    before = recurrent.rebinds
    assert answer(DecodingMethod.mtp(3)) == plain
    assert recurrent.rebinds - before > 5  # verifications read one set and write the other
    assert answer(DecodingMethod.plain()) == plain


def test_a_call_updated_in_place_cannot_be_rolled_back(demo_model: Path) -> None:
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    target = decoder.target
    target.reset()
    target.run([300, 301, 302], 0, 2, in_place=True)
    with pytest.raises(RuntimeError, match="cannot be rolled back"):
        target.settle(3, keep=False)
