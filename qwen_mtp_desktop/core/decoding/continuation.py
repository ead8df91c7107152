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

Long calls can be stopped part-way (`CallCancelledError`): a cold prefill of 7,000 tokens is
one call of 50 s on the 0.8B geometry here, and Stop or a client that left must not wait for
it. The CPU plugin stops a cancelled call between graph nodes: usually within 0.1 s, at most
2 s in benchmarks/stop_latency.py's runs. A call on the continuation graph writes nothing back
until it has finished, so stopping it keeps the conversation as it was; a call on the stateful
request leaves its caches undefined, so only one that has little to lose there (fewer than
`MIN_KEPT_TOKENS` kept) is made stoppable: the conversation is dropped and a re-prefill of it
is cheap.

The second graph is a clone of the same in-memory model, but the CPU plugin prepares its
weights again on its first call: about as much memory again as the model's weights (+1.0 GB
for the 0.8B INT4 model). So it is compiled on the first call that needs it (a user who never
continues a long chat never pays for it), and only where the computer's memory has room for
it (`core.system.state_budget.continuation_fits`, decided by the engine). The target's Gated
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
#: Calls of at least this many tokens can be stopped part-way; shorter ones (decoding steps,
#: tens of milliseconds) run to their end, synchronously, which costs nothing extra.
MIN_STOPPABLE_TOKENS = 64
#: How often a stoppable call looks at its cancel flag, in milliseconds.
CANCEL_POLL_MS = 50


class CallCancelledError(Exception):
    """A model call was stopped part-way by cancellation. `consistent`: the caches and states
    it would have changed are as they were before it (else they are undefined: reset them)."""

    def __init__(self, *, consistent: bool) -> None:
        super().__init__("the model call was cancelled")
        self.consistent = consistent


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

    def release_memory(self) -> None:
        """Give back the intermediate buffers its calls grew (core.decoding.prefill_memory)."""
        with self._lock:
            if self._compiled is not None:
                self._compiled.release_memory()

    def run(
        self,
        inputs: dict[str, Any],
        kv: KvSlots,
        recurrent_binding: Callable[[Any], dict[Any, Any]],
        cancelled: Callable[[], bool] | None = None,
    ) -> Any:
        """Run one call with `inputs` (the stateful graph's inputs but the attention mask)
        after the cache entries of `kv` (KvSlots.call_slots: hidden ones masked or left out),
        the recurrent state tensors bound by `recurrent_binding(compiled graph)`; write the
        resulting caches back into `kv`'s request; return this graph's request (outputs).
        When `cancelled()` turns true: CallCancelledError, `kv` and the recurrent state as they
        were."""
        import numpy as np

        self._ensure_compiled()
        request = self._request
        compiled = self._compiled
        began = time.perf_counter()
        count = int(inputs["inputs_embeds"].shape[1])
        slots, mask, live_only = kv.call_slots(count)
        saved = dict(zip(kv.names(), slots, strict=True))
        del slots
        feed = dict(inputs)
        feed["attention_mask"] = mask
        for index, name in enumerate(self._cache_names):
            feed[f"{KV_IN}{index}"] = saved[name]
        del saved
        binding = recurrent_binding(compiled)
        if binding:
            request.set_tensors(binding)
        copied = time.perf_counter()
        # Inputs shared, not copied (the request keeps `feed`'s arrays alive until its next
        # call). Stopped part-way, the call leaves `kv` and the recurrent state as they were:
        # it wrote only into this graph's outputs and the buffers no one reads yet.
        run_call(request, feed, cancelled, stateful=False, share_inputs=True)
        inferred = time.perf_counter()
        produced: dict[str, npt.NDArray[np.float32]] = {
            name: np.asarray(request.get_tensor(f"{KV_OUT}{index}").data)
            for index, name in enumerate(self._cache_names)
        }
        kv.replace(produced, live_only=live_only)
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
    cancelled: Callable[[], bool] | None = None,
) -> Any:
    """Run one call of a stateful graph (its `request`, its caches `kv`) with `inputs` (all but
    the attention mask) after the cache entries (hidden ones masked, or left out on the
    continuation graph): on `continuation` when it pays for this call's tokens, else on
    `request`. Returns the request that holds the outputs. A long call stops part-way when
    `cancelled()` turns true (CallCancelledError; the module docstring says which calls and
    what they leave)."""

    count = int(inputs["inputs_embeds"].shape[1])
    if cancelled is not None and count < MIN_STOPPABLE_TOKENS:
        cancelled = None
    if continuation is not None and continuation.worth_it(count, kv.live):
        return continuation.run(inputs, kv, recurrent_binding or _no_binding, cancelled)
    if kv.live >= MIN_KEPT_TOKENS:
        cancelled = None  # stopping would drop a conversation that is costly to prefill again
    inputs["attention_mask"] = kv.mask(count)
    run_call(request, inputs, cancelled)
    return request


def run_call(
    request: Any,
    inputs: dict[str, Any],
    cancelled: Callable[[], bool] | None,
    *,
    stateful: bool = True,
    share_inputs: bool = False,
) -> None:
    """One call of `request`. When `cancelled()` is true before it starts or turns true while
    it runs: CallCancelledError, consistent unless the call had started on a `stateful`
    request (its caches are then undefined; a stateless graph's outputs are never read).
    Outputs are read through get_tensor: without share_outputs the Python API copies every
    output into new numpy arrays (the recurrent states' 36 ports: 6 ms of a 30 ms step on
    Qwen3.5-0.8B)."""
    if cancelled is None:
        request.infer(inputs, share_inputs=share_inputs, share_outputs=True)
        return
    if cancelled():
        raise CallCancelledError(consistent=True)
    # Run asynchronously and look at the flag meanwhile; the caller's thread waits either way.
    request.start_async(inputs, share_inputs=share_inputs)
    while not request.wait_for(CANCEL_POLL_MS):
        if cancelled():
            request.cancel()
            break
    try:
        request.wait()
    except RuntimeError:
        if cancelled():  # "Infer Request was canceled"
            raise CallCancelledError(consistent=not stateful) from None
        raise


def _no_binding(_compiled: Any) -> dict[Any, Any]:
    return {}
