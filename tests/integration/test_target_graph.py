"""The target graph the app's decoder compiles (core.decoding.graphs.transform_target), as the
CPU plugin schedules it: what a long prefill holds in memory depends on the order its nodes run
(issue 41, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_mtp_desktop.core.decoding.graphs import LOGITS, STATE_OUT, transform_target

pytestmark = pytest.mark.model


def test_each_state_output_runs_inside_its_layer_not_after_the_network(demo_model: Path) -> None:
    """A Gated DeltaNet convolution state's new value is a slice of [state, the layer's new
    tokens]; scheduled after the vocabulary projection it kept every layer's concatenation
    alive to the end of the call (half of a long prefill's memory). The plugin schedules by
    walking back from the results in order, so the state outputs must come first."""
    import openvino as ov

    core = ov.Core()
    graph = transform_target(core.read_model(demo_model / "openvino_language_model.xml"))
    runtime = core.compile_model(graph.model, "CPU").get_runtime_model()
    executed = {
        op.get_friendly_name(): int(op.get_rt_info()["execOrder"].astype(str))
        for op in runtime.get_ordered_ops()
        if "execOrder" in op.get_rt_info()
    }

    def order_of(name_prefix: str) -> list[int]:
        found = [
            executed[result.get_friendly_name()]
            for result in graph.model.get_results()
            if any(n.startswith(name_prefix) for n in result.output(0).get_names())
        ]
        assert found, name_prefix
        return found

    states = order_of(STATE_OUT)
    assert len(states) == len(graph.states) > 0
    (logits,) = order_of(LOGITS)
    # Each state's slice runs before the last layers do, spread over the network.
    assert max(states) < logits, (states, logits)
    assert min(states) < logits / 4, (states, logits)
