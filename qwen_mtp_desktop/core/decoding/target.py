"""The target model as the app's decoder runs it: the language model IR changed in memory
(core.decoding.graphs), one infer request, and the state that request holds.

- Gated DeltaNet states are explicit inputs/outputs in two sets of buffers: a call that may
  be rolled back (drafts to verify) reads one set and writes the other; `commit()` makes its
  outputs the next call's inputs, and a call whose drafts were rejected is simply not
  committed (the next call reads the old set again and re-processes the confirmed tokens with
  its own drafts). No copies per step. A call that is kept whatever it returns (a plain step,
  a prefill) updates the set it reads in place, so plain decoding never rebinds the ports
  (module `RecurrentBuffers`).
- Attention caches stay inside the request; `kv` (core.decoding.kv_slots) hides the entries
  of uncommitted calls with the attention mask instead of copying the caches.
- `snapshot()` / `restore()` copy the recurrent state out and back (the state cache keeps
  them between turns).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.continuation import ContinuationGraph, infer_after_kept
from qwen_mtp_desktop.core.decoding.graphs import (
    HIDDEN,
    LOGITS,
    LOGITS_POSITIONS,
    STATE_IN,
    STATE_OUT,
    StatePort,
)
from qwen_mtp_desktop.core.decoding.kv_slots import KvSlots

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass
class StepTiming:
    """Seconds spent per part of the decoding loop (benchmarks read them)."""

    target_s: float = 0.0
    draft_s: float = 0.0
    target_calls: int = 0
    draft_calls: int = 0
    #: Verifications whose drafts were not all accepted (their cache entries are hidden).
    rollbacks: int = 0
    reprocessed_tokens: int = 0
    #: Target tokens outside the draft vocabulary (the draft head could not propose them).
    out_of_draft_vocab: int = 0
    steps: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class TargetOutput:
    """One target call: the hidden state of every position processed and, for the positions
    asked for, the argmax (greedy) and the logits (sampling; read only when needed)."""

    hidden: npt.NDArray[Any]
    request: Any

    @property
    def argmax(self) -> npt.NDArray[np.int64]:
        """Each projected position's most likely token (the first on a tie). In numpy on the
        logits the graph outputs anyway: an in-graph TopK over 248k entries cost 1.2 ms of a
        30 ms step on Qwen3.5-0.8B, numpy's argmax a tenth of that."""
        import numpy as np

        rows = self.request.get_tensor(LOGITS).data[0]
        best: npt.NDArray[np.int64] = np.argmax(rows, axis=-1)
        return best

    def logits(self) -> npt.NDArray[np.float32]:
        import numpy as np

        rows: npt.NDArray[np.float32] = np.array(self.request.get_tensor(LOGITS).data[0])
        return rows


class RecurrentBuffers:
    """Two sets of Gated DeltaNet state tensors, bound to the request's state ports.

    A call that may be rolled back reads one set and writes the other (`prepare(in_place=
    False)`), so the old state survives it. A call that is kept whatever it returns reads and
    writes the same set (`prepare(in_place=True)`): the CPU plugin's GatedDeltaNet kernel
    copies each state column into a scratch buffer, updates it there and only then writes it
    back, and the convolution state's new value is a slice of a concatenation, so the output
    never overwrites input not yet read (tested bit for bit against two sets). The binding
    changes only when the kind of call does: rebinding the 72 ports costs about 1 ms per step
    on Qwen3.5-0.8B (3 % of a plain step, most of it in the plugin's next call, not in the
    `set_tensors` call itself), which plain decoding now never pays. Each binding is built
    once and set with one call (one port at a time cost about 1 ms more)."""

    def __init__(self, request: Any, compiled: Any, ports: Sequence[StatePort]) -> None:
        import openvino as ov

        self._request = request
        self.ports = tuple(ports)
        # bf16 has no numpy type: OpenVINO owns the memory; copies go through byte views.
        self._tensors = [[ov.Tensor(p.element_type, list(p.shape)) for p in ports] for _ in "ab"]
        self._bindings = {
            (read, write): self._binding(compiled, read, write)
            for read in (0, 1)
            for write in (0, 1)
        }
        #: The set holding the current state (the next call reads it).
        self._read = 0
        #: The (read, write) sets bound to the request now; None before the first call.
        self._bound: tuple[int, int] | None = None
        #: Whether the last call on the request wrote the set it read.
        self._last_in_place = False
        #: Times the request's ports were rebound (tests and benchmarks read it).
        self.rebinds = 0

    def _binding(self, compiled: Any, read: int, write: int) -> dict[Any, Any]:
        """`compiled`'s state ports bound to read set `read` and write set `write`."""
        return {
            **{
                compiled.input(STATE_IN + p.name): t
                for p, t in zip(self.ports, self._tensors[read], strict=True)
            },
            **{
                compiled.output(STATE_OUT + p.name): t
                for p, t in zip(self.ports, self._tensors[write], strict=True)
            },
        }

    def prepare(self, *, in_place: bool) -> None:
        """Bind the request's ports for its next call: reading the current set and writing
        it (`in_place`: the call will be kept) or the other one."""
        wanted = (self._read, self._read if in_place else 1 - self._read)
        if wanted != self._bound and self._bindings[wanted]:
            self._request.set_tensors(self._bindings[wanted])
            self.rebinds += 1
        self._bound = wanted
        self._last_in_place = in_place

    def commit(self) -> None:
        """The last call's outputs become the next call's inputs."""
        if not self._last_in_place:
            self._read = 1 - self._read
        self._last_in_place = False

    def roll_back(self) -> None:
        """The last call does not count: the next call reads the state it read."""
        if self._last_in_place:
            raise RuntimeError("a call that updated the state in place cannot be rolled back")

    def binding_for(self, compiled: Any) -> dict[Any, Any]:
        """The same tensors bound to another graph with these state ports (the continuation
        graph): it reads the current set and writes the other, so a stopped call leaves the
        state as it was; `commit()` then takes its outputs."""
        self._last_in_place = False
        return self._binding(compiled, self._read, 1 - self._read)

    def _views(self) -> list[npt.NDArray[Any]]:
        import numpy as np

        return [np.asarray(t.data).view(np.uint8) for t in self._tensors[self._read]]

    def reset(self) -> None:
        for view in self._views():
            view.fill(0)

    def copy_out(self) -> tuple[npt.NDArray[Any], ...]:
        import numpy as np

        return tuple(np.array(v) for v in self._views())

    def copy_in(self, arrays: Sequence[npt.NDArray[Any]]) -> None:
        """Load a copy taken by `copy_out`; ValueError when it does not fit these states."""
        views = self._views()
        if len(arrays) != len(views) or any(
            a.shape != v.shape or a.dtype != v.dtype for a, v in zip(arrays, views, strict=True)
        ):
            raise ValueError("a recurrent-state snapshot does not fit this model's states")
        for view, array in zip(views, arrays, strict=True):
            view[...] = array


class Target:
    """The compiled target, its request, and the state in it (module docstring)."""

    def __init__(
        self,
        compiled: Any,
        states: Sequence[StatePort],
        embed: Any,
        hidden_type: Any,
        continuation: ContinuationGraph | None = None,
    ) -> None:
        self.compiled = compiled
        #: Long calls after a long kept cache run there (core.decoding.continuation).
        self.continuation = continuation
        self.request = compiled.create_infer_request()
        self.recurrent = RecurrentBuffers(self.request, compiled, states)
        self.kv = KvSlots(self.request)
        self._embed = embed
        self._embed_request = embed.create_infer_request()
        self.hidden_type = hidden_type
        self.timing = StepTiming()

    def embeddings(self, token_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        import numpy as np

        self._embed_request.infer({0: np.asarray([token_ids], dtype=np.int64)}, share_outputs=True)
        return np.array(self._embed_request.get_output_tensor(0).data)

    def reset(self) -> None:
        self.kv.reset()
        self.recurrent.reset()

    def run(
        self,
        token_ids: Sequence[int],
        start: int,
        rows_from: int,
        cancelled: Callable[[], bool] | None = None,
        *,
        in_place: bool = False,
    ) -> TargetOutput:
        """Process `token_ids` at positions start.. (the caches hold `start` live positions)
        and project positions rows_from.. of this call; then `settle()` says whether the call
        counts. `in_place`: the caller will keep the call whatever it returns (no drafts to
        verify), so the recurrent state is updated where it is (RecurrentBuffers). The
        output's arrays are views that the next call overwrites. A long call stops part-way
        when `cancelled()` turns true (continuation.CallCancelledError)."""
        import numpy as np

        count = len(token_ids)
        self.recurrent.prepare(in_place=in_place)
        embeds = self.embeddings(token_ids)
        positions = np.arange(start, start + count, dtype=np.int64)
        inputs = {
            "inputs_embeds": embeds,
            "position_ids": np.broadcast_to(positions, (4, 1, count)).copy(),
            "beam_idx": np.zeros(1, dtype=np.int32),
            LOGITS_POSITIONS: np.arange(rows_from, count, dtype=np.int64),
        }
        began = time.perf_counter()
        request = infer_after_kept(
            self.request,
            self.kv,
            inputs,
            self.continuation,
            recurrent_binding=self.recurrent.binding_for,
            cancelled=cancelled,
        )
        self.timing.target_s += time.perf_counter() - began
        self.timing.target_calls += 1
        hidden = request.get_tensor(HIDDEN).data[0]
        return TargetOutput(hidden, request)

    def settle(self, count: int, *, keep: bool) -> None:
        """The last call's `count` tokens stay (its recurrent state becomes the current one and
        its cache entries live) or are dropped (entries hidden, the old state kept)."""
        self.kv.appended(count, keep=keep)
        if keep:
            self.recurrent.commit()
        else:
            self.recurrent.roll_back()
            self.timing.rollbacks += 1
