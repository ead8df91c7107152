"""Long calls that continue a kept conversation, run on a second graph of the model (the
target, or the MTP head catching up on them) whose attention caches are plain inputs and
outputs (core.decoding.graphs.make_kv_explicit).

The stateful target runs such a call on the CPU plugin's single-token attention kernel, so a
follow-up's new tokens cost more the longer the kept conversation is (measured on the 0.8B
geometry: 500 new tokens after 6,000 kept ones 3-4x a cold 500-token prefill;
benchmarks/continuation_prefill.py). Here the cache entries are copied out of the
stateful request (or taken as they are from the state cache after a restore), the call runs
with them as inputs on the blocked kernel a cold prefill uses, and the returned caches (kept
entries + the call's) are written back: at most two copies of the cache against a
per-new-token saving that grows with the cache. Short calls (decoding steps, verifications)
stay on the stateful request, where no copy is made at all.

The second graph is a clone of the same in-memory model, but the CPU plugin prepares its
weights again on its first call: about as much memory again as the model's weights (+1.0 GB
for the 0.8B INT4 model). So it is compiled on the first call that needs it (a user who never
continues a long chat never pays for it), and only where the computer's memory has room for
it (`core.state_budget.continuation_fits`, decided by the engine). The target's Gated
DeltaNet states go through the same double buffers as the stateful request's
(`target.RecurrentBuffers.binding_for`): commit and rollback work unchanged. The MTP head has
attention only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.graphs import KV_IN, KV_OUT

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from qwen_mtp_desktop.core.decoding.kv_slots import KvSlots

log = logging.getLogger(__name__)

#: A call takes the continuation graph when it appends at least this many tokens ...
MIN_NEW_TOKENS = 32
#: ... and at least one per this many kept ones (the two copies grow with the kept cache) ...
KEPT_PER_NEW_TOKEN = 64
#: ... to at least this many kept ones. From benchmarks/continuation_prefill.py on the 0.8B
#: geometry: after 2,000 kept tokens 32 new ones were 1.25x faster this way; after 6,000,
#: 32 were 2x slower (the copies) and 128 1.2x faster, 512 2.1x.
MIN_KEPT_TOKENS = 512


class ContinuationGraph:
    """The explicit-cache target graph, compiled on first use; one infer request."""

    def __init__(
        self, model: Any, cache_names: Sequence[str], compile_model: Callable[[Any], Any]
    ) -> None:
        self._model: Any = model
        self._cache_names = tuple(cache_names)
        self._compile_model = compile_model
        self._compiled: Any = None
        self._request: Any = None
        self._lock = threading.Lock()
        #: Seconds the compilation took (None until it ran), calls made, and seconds spent
        #: copying caches out and back and in the graph itself (benchmarks).
        self.compile_s: float | None = None
        self.calls = 0
        self.copy_s = 0.0
        self.infer_s = 0.0
        #: The thresholds (tests lower them to send every continuing call here).
        self.min_new_tokens = MIN_NEW_TOKENS
        self.min_kept_tokens = MIN_KEPT_TOKENS

    def worth_it(self, new_tokens: int, kept_tokens: int) -> bool:
        return (
            kept_tokens > 0
            and kept_tokens >= self.min_kept_tokens
            and new_tokens >= max(self.min_new_tokens, kept_tokens // KEPT_PER_NEW_TOKEN)
        )

    def _ensure_compiled(self) -> None:
        with self._lock:
            if self._compiled is not None:
                return
            began = time.perf_counter()
            self._compiled = self._compile_model(self._model)
            self._request = self._compiled.create_infer_request()
            self._model = None  # the compiled graph holds what it needs
            self.compile_s = time.perf_counter() - began
            log.info("continuation graph compiled in %.1f s", self.compile_s)

    def run(
        self,
        inputs: dict[str, Any],
        kv: KvSlots,
        recurrent_binding: Callable[[Any], dict[Any, Any]],
    ) -> Any:
        """Run one call with `inputs` (the stateful graph's inputs, its attention mask covering
        every slot of `kv` plus this call's entries) after the cache entries of `kv`, the
        recurrent state tensors bound by `recurrent_binding(compiled graph)`; write the
        resulting caches back into `kv`'s request; return this graph's request (outputs)."""
        import numpy as np

        self._ensure_compiled()
        request = self._request
        compiled = self._compiled
        began = time.perf_counter()
        # Every slot, hidden ones too (the mask hides them): taking only the live ones would
        # be a second copy of the cache.
        saved = dict(zip(kv.names(), kv.slots(), strict=True))
        feed = dict(inputs)
        for index, name in enumerate(self._cache_names):
            feed[f"{KV_IN}{index}"] = saved[name]
        del saved
        binding = recurrent_binding(compiled)
        if binding:
            request.set_tensors(binding)
        copied = time.perf_counter()
        # Inputs shared, not copied (the request keeps `feed`'s arrays alive until its next
        # call); outputs are read by get_tensor.
        request.infer(feed, share_inputs=True, share_outputs=True)
        inferred = time.perf_counter()
        produced: dict[str, npt.NDArray[np.float32]] = {
            name: np.asarray(request.get_tensor(f"{KV_OUT}{index}").data)
            for index, name in enumerate(self._cache_names)
        }
        kv.replace(produced)
        self.calls += 1
        self.infer_s += inferred - copied
        self.copy_s += (copied - began) + (time.perf_counter() - inferred)
        return request


def infer_after_kept(
    request: Any,
    kv: KvSlots,
    inputs: dict[str, Any],
    continuation: ContinuationGraph | None,
    *,
    recurrent_binding: Callable[[Any], dict[Any, Any]] | None = None,
) -> Any:
    """Run one call of a stateful graph (its `request`, its caches `kv`) with `inputs` (all but
    the attention mask) after the cache entries (hidden ones masked): on `continuation` when
    it pays for this call's tokens, else on `request`. Returns the request that holds the
    outputs."""

    count = int(inputs["inputs_embeds"].shape[1])
    if continuation is not None and continuation.worth_it(count, kv.live):
        inputs["attention_mask"] = kv.call_mask(count)
        return continuation.run(inputs, kv, recurrent_binding or _no_binding)
    inputs["attention_mask"] = kv.mask(count)
    # Without share_outputs the Python API copies every output into new numpy arrays: the
    # recurrent states' 36 ports cost 6 ms of a 30 ms step on Qwen3.5-0.8B (10 MB per call).
    # The decoder reads outputs through get_tensor and never keeps what infer() returns.
    request.infer(inputs, share_outputs=True)
    return request


def _no_binding(_compiled: Any) -> dict[Any, Any]:
    return {}
