"""The export's own stateful language model, called as a decoding loop calls it: the floor a
decoder's step is measured against (step_overhead.py, plain_parity.py). No explicit state
ports, no logits positions: the graph openvino-genai runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


def embedding_request(core: Any, model_dir: Path, device: str) -> Any:
    """An infer request of the export's embedding lookup, on one thread on the CPU, as the
    app's decoder runs it."""
    return core.compile_model(
        core.read_model(model_dir / "openvino_text_embeddings_model.xml"),
        device,
        {"INFERENCE_NUM_THREADS": 1} if device == "CPU" else {},
    ).create_infer_request()


class DirectTarget:
    """The export's stateful language model and one infer request of it."""

    def __init__(self, core: Any, model_dir: Path, device: str, embed: Any) -> None:
        model = core.read_model(model_dir / "openvino_language_model.xml")
        shape = model.input("position_ids").get_partial_shape()
        self._rows = shape[0].get_length() if len(shape) == 3 else None
        self._request = core.compile_model(model, device).create_infer_request()
        self._embed = embed
        self._past = 0

    def call(self, ids: list[int]) -> float:
        """Seconds of one call on `ids` after what the cache holds (embedding excluded)."""
        count = len(ids)
        self._embed.infer({0: np.asarray([ids], dtype=np.int64)}, share_outputs=True)
        embeds = np.array(self._embed.get_output_tensor(0).data)
        positions = np.arange(self._past, self._past + count, dtype=np.int64)[None, :]
        if self._rows is not None:
            positions = np.broadcast_to(positions[None], (self._rows, 1, count)).copy()
        feed = {
            "inputs_embeds": embeds,
            "attention_mask": np.ones((1, self._past + count), dtype=np.int64),
            "position_ids": positions,
            "beam_idx": np.zeros(1, dtype=np.int32),
        }
        began = time.perf_counter()
        self._request.infer(feed, share_outputs=True)
        elapsed = time.perf_counter() - began
        self._past += count
        return elapsed

    def restart(self, prompt: list[int]) -> None:
        """An empty cache, then `prompt` read."""
        self._request.reset_state()
        self._past = 0
        self.call(prompt)

    def greedy(self, prompt: list[int], tokens: int) -> Iterator[int]:
        """Greedy decoding from an empty cache: each of `tokens` tokens as it is chosen (the
        prompt's call gives the first)."""
        self._request.reset_state()
        self._past = 0
        feed = prompt
        for _ in range(tokens):
            self.call(feed)
            feed = [int(np.argmax(self._request.get_tensor("logits").data[0][-1]))]
            yield feed[0]
