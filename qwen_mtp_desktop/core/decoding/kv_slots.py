"""The attention KV caches of one OpenVINO infer request, kept without copies.

OpenVINO keeps a stateful model's KV caches as internal variables that every call extends on
axis 2. Trimming one means reading the whole cache out and writing it back: on the CPU the
cache is stored as u8, so that is a dequantize-copy-requantize of every entry, measured at
100-150 ms at 2,000-6,000 tokens on Qwen3.5-0.8B (a decode step there costs 60-140 ms). The
app's decoder would pay it after every rejected draft and at every turn that reuses part of a
conversation.

So entries are never removed one step at a time: a slot whose entry is no longer wanted
(rejected drafts, the tokens a rejected verification re-processes, an answer being
regenerated) is hidden by the `attention_mask` input, which the exported attention honours
for past entries (tested: logits equal to a clean cache up to float rounding, and far off
without the mask). Live slots keep increasing positions, so position p is the p-th live slot.
When hidden slots pile up (more than a quarter of the cache, and at least a few hundred),
`compact()` copies the live entries once, so attention never pays much for the holes. A long
call on the continuation graph reads the caches out anyway, so there the hidden entries are left
out of its inputs at a lower share (`call_slots`): the call then neither attends to them nor
returns them, and its outputs replace the caches compacted.

Restored entries (a conversation coming back from the state cache) are written into the
request only when a call on the request needs them: a long follow-up after the restore runs on
the continuation graph, which takes them as inputs, so writing them in and reading them out
again would be two copies of the whole cache for nothing. A restore to an earlier position than
the saved arrays hold hides the entries after it like any other slot: cutting them off would be
a copy of every entry before it (a slice along the token axis is not contiguous, and OpenVINO
copies such an input whole).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Compact when at least this many slots are hidden ...
COMPACT_MIN_HIDDEN = 256
#: ... and they are at least this share of the cache.
COMPACT_HIDDEN_SHARE = 0.25
#: A continuation call leaves hidden entries out of the caches it reads from this many ...
CALL_COMPACT_MIN_HIDDEN = COMPACT_MIN_HIDDEN
#: ... and this share on: leaving them out costs one gather of the live entries, keeping them
#: costs the call's attention to them, their copy in its outputs, and every later call's
#: attention until a compaction.
CALL_COMPACT_SHARE = 0.125


class KvSlots:
    """Slot bookkeeping for one infer request's growing (attention) states. Not thread-safe."""

    def __init__(self, request: Any) -> None:
        import numpy as np

        self._request = request
        self._mask: npt.NDArray[np.int64] = np.zeros(1024, dtype=np.int64)
        #: Slots in the cache (live or hidden).
        self.size = 0
        #: Live slots: the positions the cache holds, 0 .. live - 1.
        self.live = 0
        #: Entries copied by compactions and restores since the last reset (benchmarks).
        self.copies = 0
        #: Times the caches were read out of the request (each a copy of every entry: saves,
        #: the continuation graph's inputs, compactions), since the object was made.
        self.reads = 0
        #: Restored entries not yet written into the request (one array per state, the
        #: request's slots 0 .. size - 1), or None when the request holds the caches.
        self._pending: list[npt.NDArray[Any]] | None = None
        #: Each cache's (heads, head size, dtype), read while the caches are empty: reading
        #: a state copies the whole cache (0.7-0.9 s for 7,000 tokens on this VM), so
        #: checking a restore against the state itself would copy the live conversation's.
        self._layouts = [_layout(state.state) for state in request.query_state()]

    @property
    def hidden(self) -> int:
        return self.size - self.live

    def reset(self) -> None:
        """Empty caches (the request's states are reset too)."""
        self._request.reset_state()
        self.size = self.live = 0
        self._pending = None

    def mask(self, new: int) -> npt.NDArray[np.int64]:
        """The attention mask for a call on the request that appends `new` entries:
        [1, size + new]. Restored entries are written into the request first."""
        self._write_pending()
        return self.call_mask(new)

    def call_mask(self, new: int) -> npt.NDArray[np.int64]:
        """The attention mask for a call that appends `new` entries after every slot (hidden
        ones masked), on this request or on a graph fed `slots()`: [1, size + new]."""
        self._reserve(self.size + new)
        self._mask[self.size : self.size + new] = 1
        return self._mask[None, : self.size + new]

    def appended(self, count: int, *, keep: bool) -> None:
        """A call appended `count` entries: live (keep) or hidden at once (a verification whose
        drafts were rejected: its tokens are processed again by the next call)."""
        self._reserve(self.size + count)
        self._mask[self.size : self.size + count] = 1 if keep else 0
        self.size += count
        if keep:
            self.live += count

    def keep_positions(self, count: int) -> None:
        """Hide every live entry from position `count` on."""
        import numpy as np

        if count >= self.live:
            return
        live_slots = np.flatnonzero(self._mask[: self.size])
        self._mask[live_slots[count:]] = 0
        self.live = count

    def compact_if_worth_it(self) -> bool:
        if self.hidden >= COMPACT_MIN_HIDDEN and self.hidden >= COMPACT_HIDDEN_SHARE * self.size:
            self.compact()
            return True
        return False

    def compact(self) -> None:
        """Copy the live entries into a cache without holes."""
        import numpy as np
        import openvino as ov

        if self.hidden == 0:
            return
        live_slots = np.flatnonzero(self._mask[: self.size])
        if self._pending is not None:  # restored entries: compacted before they go in
            self._pending = [np.ascontiguousarray(a[:, :, live_slots]) for a in self._pending]
        else:
            self.reads += 1
            for state in self._request.query_state():
                data = state.state.data
                state.state = ov.Tensor(np.ascontiguousarray(data[:, :, live_slots]))
        self.copies += self.live
        self.size = self.live
        self._mask[: self.size] = 1

    def save(self) -> list[npt.NDArray[Any]]:
        """The live entries, one array per state ([batch, heads, live, dim]), owned by no
        request: read-only by convention (restored entries not yet written in are returned
        as they are, shared with the state cache that holds them)."""
        import numpy as np

        live_slots = np.flatnonzero(self._mask[: self.size])
        every = len(live_slots) == self.size
        # Reading a state makes a new tensor (the plugin's cache is converted into it), so
        # when every slot is live that tensor's array is the copy already.
        saved = [a if every else np.ascontiguousarray(a[:, :, live_slots]) for a in self.slots()]
        if self._pending is None or not every:  # restored arrays are returned as they are
            self.copies += self.live
        return saved

    def call_slots(self, new: int) -> tuple[list[npt.NDArray[Any]], npt.NDArray[np.int64], bool]:
        """A continuation call's cache inputs and attention mask for a call appending `new`
        entries, and whether the inputs hold the live entries only (pass it to `replace`).
        Restored entries go in as they are, hidden ones masked (leaving those out would be a
        copy of every entry); entries read out of the request leave the hidden ones out when
        there are enough of them (CALL_COMPACT_SHARE): the read is a copy already."""
        import numpy as np

        if (
            self._pending is not None
            or self.hidden < CALL_COMPACT_MIN_HIDDEN
            or self.hidden < CALL_COMPACT_SHARE * self.size
        ):
            return self.slots(), self.call_mask(new), False
        live_slots = np.flatnonzero(self._mask[: self.size])
        arrays = [np.take(array, live_slots, axis=2) for array in self.slots()]
        self.copies += self.live
        return arrays, np.ones((1, self.live + new), dtype=np.int64), True

    def slots(self) -> list[npt.NDArray[Any]]:
        """Every slot's entries, live and hidden (`call_mask` says which), one array per state
        ([batch, heads, size, dim]): restored entries as they are, else read out of the
        request (a copy: reading a state makes a new tensor)."""
        if self._pending is not None:
            return list(self._pending)
        self.reads += 1
        return [state.state.data for state in self._request.query_state()]

    def names(self) -> list[str]:
        """The caches' variable ids, in the order `save()` returns them."""
        return [state.name for state in self._request.query_state()]

    def replace(self, arrays: Mapping[str, npt.NDArray[Any]], *, live_only: bool = False) -> None:
        """Set every cache (by variable id) to `arrays`: this request's `size` slots (those
        `slots()` gave; only the live ones with `live_only`, as `call_slots` said) followed by
        a call's new entries, which `appended()` then counts (the continuation graph returns
        past + new entries at once)."""
        import numpy as np
        import openvino as ov

        for state in self._request.query_state():
            # Setting a state copies the tensor into the plugin's cache: no copy needed here.
            state.state = ov.Tensor(np.ascontiguousarray(arrays[state.name]), shared_memory=True)
        self._pending = None
        if live_only:
            self.size = self.live
            self._mask[: self.size] = 1

    def restore(self, arrays: Sequence[npt.NDArray[Any]], count: int) -> None:
        """Load the first `count` positions of saved entries (`save()`'s arrays; the entries
        after them are hidden slots); ValueError when they do not fit this request's states
        (another model)."""

        if len(self._layouts) != len(arrays):
            raise ValueError(f"{len(arrays)} saved caches for {len(self._layouts)} states")
        # Slots the saved arrays hold (every array is checked against it below).
        length = int(arrays[0].shape[2]) if arrays and arrays[0].ndim == 4 else count
        for (heads, size, dtype), array in zip(self._layouts, arrays, strict=True):
            fits = (
                array.ndim == 4
                and array.shape[0] == 1
                and (array.shape[1], array.shape[3]) == (heads, size)
                and array.shape[2] == length >= count
                and array.dtype == dtype
            )
            if not fits:
                raise ValueError(
                    f"a saved cache {array.shape} {array.dtype} does not fit "
                    f"[1, {heads}, tokens, {size}] {dtype}"
                )
        self._pending = list(arrays)
        # Grow the mask before `size` changes: `_reserve` keeps the first `size` entries of
        # the old mask, and a restore longer than the mask would overrun it (a ValueError,
        # and the kept conversation discarded as "does not fit": a cold prefill).
        self._reserve(length)
        self.size, self.live = length, count
        self._mask[:count] = 1
        self._mask[count:length] = 0

    def _write_pending(self) -> None:
        """Write restored entries into the request (see the module docstring)."""
        import numpy as np
        import openvino as ov

        if self._pending is None:
            return
        for state, array in zip(self._request.query_state(), self._pending, strict=True):
            state.state = ov.Tensor(np.ascontiguousarray(array), shared_memory=True)
        self.copies += self.size
        self._pending = None

    def _reserve(self, size: int) -> None:
        import numpy as np

        if size > len(self._mask):
            grown = np.zeros(max(size, 2 * len(self._mask)), dtype=np.int64)
            grown[: self.size] = self._mask[: self.size]
            self._mask = grown


def _layout(tensor: Any) -> tuple[int, int, Any]:
    """(heads, head size, dtype) of a cache's tensor [batch (0 when empty), heads, tokens,
    head size]."""
    shape = tensor.shape
    return int(shape[1]), int(shape[3]), tensor.data.dtype
