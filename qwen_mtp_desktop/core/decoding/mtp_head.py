"""The MTP head as the app's decoder drafts with it: the MTP IR with a draft-vocabulary lm_head
(core.decoding.graphs), one infer request and its attention cache.

The head pairs the target's final hidden state at position t with the embedding of token t + 1
and predicts token t + 2. `catch_up()` feeds it every confirmed position it has not seen (its
cache entries stay); `chain()` continues from its own last hidden state with a draft as the next
token, for depths > 1: those entries are provisional and hidden again (attention mask, no copy)
before the next catch-up, since the next drafts must come from the target's hidden states.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.continuation import (
    CallCancelledError,
    ContinuationGraph,
    infer_after_kept,
)
from qwen_mtp_desktop.core.decoding.graphs import DRAFT_INDEX, DRAFT_LOGITS, HIDDEN
from qwen_mtp_desktop.core.decoding.kv_slots import KvSlots
from qwen_mtp_desktop.core.decoding.prefill_memory import RELEASE_AFTER_TOKENS
from qwen_mtp_desktop.core.decoding.target import StepTiming, Target

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class DraftOutput:
    """One head call: the most likely draft (a token id), the logits over the draft vocabulary
    (a view the next call overwrites) and the head's own last hidden state (a copy)."""

    token: int
    logits: npt.NDArray[np.float32]
    own_hidden: npt.NDArray[Any]


class MtpHead:
    def __init__(
        self,
        compiled: Any,
        draft_ids: npt.NDArray[np.int64],
        target: Target,
        timing: StepTiming,
        continuation: ContinuationGraph | None = None,
    ) -> None:
        self.compiled = compiled
        self.request = compiled.create_infer_request()
        #: Long catch-ups after a long kept cache run there (core.decoding.continuation).
        self.continuation = continuation
        self.kv = KvSlots(self.request)
        self.draft_ids = draft_ids
        self._target = target
        self.timing = timing
        #: Positions whose entries the head's cache holds for good (0 .. positions - 1).
        self.positions = 0
        #: Tokens of the longest call since the buffers were last given back.
        self.longest_call = 0

    def reset(self) -> None:
        self.kv.reset()
        self.positions = 0

    def keep(self, positions: int) -> None:
        """Forget everything from `positions` on (provisional chain entries included)."""
        self.positions = min(self.positions, positions)
        self.kv.keep_positions(self.positions)

    def catch_up(
        self,
        hidden: npt.NDArray[Any],
        next_tokens: list[int],
        cancelled: Callable[[], bool] | None = None,
    ) -> DraftOutput:
        """Feed positions `positions` .. `positions + len(next_tokens) - 1`: their target hidden
        states (rows of `hidden`) and the tokens that followed them; the output is the draft for
        the token after the last one. A long catch-up stops part-way when `cancelled()` turns
        true: CallCancelledError, the head consistent (reset if its cache was left undefined: it
        catches up from the start next time)."""
        self.kv.keep_positions(self.positions)  # the last step's provisional chain entries
        try:
            out = self._call(hidden, next_tokens, self.positions, cancelled)
        except CallCancelledError as stopped:
            if not stopped.consistent:
                self.reset()
            raise CallCancelledError(consistent=True) from None
        self.kv.appended(len(next_tokens), keep=True)
        self.positions += len(next_tokens)
        return out

    def release_buffers(self) -> None:
        """Give back the intermediate buffers a long catch-up grew (its continuation graph's
        too, when compiled; core.decoding.prefill_memory); the outputs of earlier calls must
        not be read afterwards."""
        if self.longest_call >= RELEASE_AFTER_TOKENS:
            self.compiled.release_memory()
            if self.continuation is not None:
                self.continuation.release_memory()
        self.longest_call = 0

    def chain(self, previous: DraftOutput, token: int, position: int) -> DraftOutput:
        """The draft after `token` (itself a draft, at `position`), from the head's own hidden
        state. Its cache entry is provisional (hidden at the next catch-up)."""
        out = self._call(previous.own_hidden, [token], position)
        self.kv.appended(1, keep=True)
        return out

    def _call(
        self,
        hidden: npt.NDArray[Any],
        tokens: list[int],
        start: int,
        cancelled: Callable[[], bool] | None = None,
    ) -> DraftOutput:
        import numpy as np

        count = len(tokens)
        self.longest_call = max(self.longest_call, count)
        inputs = {
            "hidden_states": self._hidden_tensor(hidden),
            "inputs_embeds": self._target.embeddings(tokens),
            "position_ids": np.arange(start, start + count, dtype=np.int64)[None],
            "beam_idx": np.zeros(1, dtype=np.int32),
        }
        began = time.perf_counter()
        # A long catch-up after a long follow-up runs on the continuation graph.
        request = infer_after_kept(
            self.request, self.kv, inputs, self.continuation, cancelled=cancelled
        )
        self.timing.draft_s += time.perf_counter() - began
        self.timing.draft_calls += 1
        index = int(request.get_tensor(DRAFT_INDEX).data.reshape(-1)[0])
        logits = request.get_tensor(DRAFT_LOGITS).data.reshape(-1)
        own_hidden = np.array(request.get_tensor(HIDDEN).data[0, -1:])
        return DraftOutput(int(self.draft_ids[index]), logits, own_hidden)

    def _hidden_tensor(self, rows: npt.NDArray[Any]) -> Any:
        """Hidden states (as the target's output holds them) as the head's input. OpenVINO shows
        bf16 data to numpy as 16-bit values of another type: pass the bits on."""
        import numpy as np
        import openvino as ov

        array = np.ascontiguousarray(rows[None] if rows.ndim == 2 else rows)
        if self._target.hidden_type == ov.Type.bf16:
            bits = array.view(np.uint16)
            return ov.Tensor(bits, list(bits.shape), ov.Type.bf16)
        return array
