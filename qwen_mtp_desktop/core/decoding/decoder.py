"""The app's own exact MTP speculative decoder for Qwen3.5 exports (greedy, text turns).

Why not openvino-genai's MTP: in 2026.4 it runs MTP only on its continuous-batching backend
(PagedAttention), which is slower per step than the stateful SDPA path that plain decoding can
use, and every draft pays a full 248k-row vocabulary projection. Measured on Qwen3.5-0.8B INT4,
its MTP reached about 1.04x the fastest plain decoding at 100 % acceptance (issue 14). This
decoder runs the exported IRs directly with OpenVINO (graph changes in core.decoding.graphs):

- the target is stateful with SDPA attention, like the fastest plain path; a step verifies the
  k drafts in one call of k + 1 (or a few more) tokens and projects only those positions;
- Gated DeltaNet states are explicit, double-buffered inputs/outputs: when every draft is
  accepted the output buffers become the next inputs; when one is rejected the next call reads
  the old buffers again and re-processes the confirmed tokens of this step together with its
  own drafts (re-processing a few tokens costs a few percent of a step on CPU; a separate
  rollback call would cost a whole step). Attention KV caches are trimmed back;
- the draft head projects onto a draft vocabulary (the lowest token ids: byte-level BPE assigns
  ids in merge order, so they are the most frequent tokens) with the argmax in the graph.

Output equals plain greedy decoding token for token: every emitted token is the target's own
argmax over the full vocabulary given the exact prefix (tests compare with plain decoding under
exact numerics). openvino-genai stays in charge of tokenizing, detokenizing and vision: turns
with images go to its pipeline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.graphs import (
    DRAFT_INDEX,
    HIDDEN,
    LOGITS,
    LOGITS_POSITIONS,
    STATE_IN,
    STATE_OUT,
    GraphError,
    lm_head_rows,
    transform_draft,
    transform_target,
)
from qwen_mtp_desktop.core.errors import native_error_line

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

LANGUAGE_MODEL = "openvino_language_model"
MTP_MODEL = "openvino_mtp_model"
EMBEDDINGS_MODEL = "openvino_text_embeddings_model"
#: Draft vocabulary size: the draft projection should cost little next to a target step.
#: 32,768 rows of INT8 cost about a tenth of the 248k-row projection (benchmarks/README).
DEFAULT_DRAFT_VOCAB = 32_768
#: Confirmed tokens the target may re-process in one verification call; past this (after
#: many rejections in a row) a separate call brings its state up to date.
MAX_PENDING = 4


class DecoderUnavailableError(Exception):
    """The fast decoder cannot run this model; the message says why (shown to the user)."""


@dataclass
class StepTiming:
    """Seconds spent per part of the decoding loop (benchmarks read them)."""

    target_s: float = 0.0
    draft_s: float = 0.0
    rollback_s: float = 0.0
    target_calls: int = 0
    draft_calls: int = 0
    rollbacks: int = 0
    reprocessed_tokens: int = 0
    #: Target tokens outside the draft vocabulary (the draft head could not propose them).
    out_of_draft_vocab: int = 0
    steps: list[float] = field(default_factory=list)


class _Buffers:
    """Two sets of Gated DeltaNet state tensors: one the next call reads, one it writes. The
    two bindings are built once and set with one call each (rebinding 72 tensors one by one
    cost about 1 ms per step, a few percent of a full-size step)."""

    def __init__(self, request: Any, compiled: Any, ports: Sequence[Any]) -> None:
        import openvino as ov

        self._request = request
        inputs = [compiled.input(STATE_IN + p.name) for p in ports]
        outputs = [compiled.output(STATE_OUT + p.name) for p in ports]
        # bf16 has no numpy type: OpenVINO owns the memory; zeroing goes through a byte view.
        self._tensors = [[ov.Tensor(p.element_type, list(p.shape)) for p in ports] for _ in "ab"]
        self._bindings = [
            {
                **dict(zip(inputs, self._tensors[read], strict=True)),
                **dict(zip(outputs, self._tensors[1 - read], strict=True)),
            }
            for read in (0, 1)
        ]
        self._read = 0
        self._bind()

    def _bind(self) -> None:
        if self._bindings[self._read]:
            self._request.set_tensors(self._bindings[self._read])

    def commit(self) -> None:
        """The last call's outputs become the next call's inputs."""
        self._read = 1 - self._read
        self._bind()

    def reset(self) -> None:
        import numpy as np

        for tensor in self._tensors[self._read]:
            np.asarray(tensor.data).view(np.uint8).fill(0)


def _trim_kv(request: Any, keep: int) -> None:
    """Drop attention KV entries past `keep` tokens (only KV states stay internal)."""
    import numpy as np
    import openvino as ov

    for state in request.query_state():
        tensor = state.state
        if tensor.shape[2] > keep:
            data = np.ascontiguousarray(tensor.data[:, :, :keep])
            state.state = ov.Tensor(data)


class AppDecoder:
    """Loads a model's target, draft and embedding IRs for exact greedy MTP decoding.

    Not thread-safe: one thread calls `generate()` at a time (the engine's worker)."""

    def __init__(
        self,
        model_dir: Path,
        device: str = "CPU",
        properties: dict[str, Any] | None = None,
        *,
        draft_vocab: int = DEFAULT_DRAFT_VOCAB,
        special_ids: Sequence[int] = (),
    ) -> None:
        import numpy as np
        import openvino as ov

        properties = dict(properties or {})
        core = ov.Core()
        for name in (LANGUAGE_MODEL, MTP_MODEL, EMBEDDINGS_MODEL):
            if not (model_dir / f"{name}.xml").is_file():
                raise DecoderUnavailableError(f"the model has no {name}.xml")
        try:
            compute_type = _inference_precision(core, device, properties)
            target_model = core.read_model(model_dir / f"{LANGUAGE_MODEL}.xml")
            graph = transform_target(target_model, compute_type)
            vocab = graph.vocab_size
            size = min(draft_vocab, vocab)
            ids = np.unique(
                np.concatenate(
                    [np.arange(size), np.asarray([i for i in special_ids if 0 <= i < vocab])]
                ).astype(np.int64)
            )
            rows = lm_head_rows(core, target_model, ids)
            draft_model = core.read_model(model_dir / f"{MTP_MODEL}.xml")
            transform_draft(draft_model, rows, compute_type)
            del rows
            self._target = core.compile_model(target_model, device, properties)
            self._draft = core.compile_model(draft_model, device, properties)
            # A lookup of a few rows: on one thread it runs in the caller, without waking the
            # device's thread pool (5-8 ms per call on a loaded 2-core machine otherwise).
            embed_properties = dict(properties)
            if device == "CPU":
                embed_properties["INFERENCE_NUM_THREADS"] = 1
            self._embed = core.compile_model(
                core.read_model(model_dir / f"{EMBEDDINGS_MODEL}.xml"), device, embed_properties
            )
        except GraphError as exc:
            raise DecoderUnavailableError(f"the model's IR is not as expected: {exc}") from exc
        except RuntimeError as exc:
            raise DecoderUnavailableError(
                f"OpenVINO could not prepare it: {native_error_line(exc)}"
            ) from exc
        self._hidden_type = compute_type
        self.hidden_size = graph.hidden_size
        self.vocab_size = vocab
        self.draft_vocab_size = len(ids)
        self._draft_ids: npt.NDArray[np.int64] = ids
        self._in_draft_vocab = np.zeros(vocab, dtype=bool)
        self._in_draft_vocab[ids] = True
        self._target_request = self._target.create_infer_request()
        self._draft_request = self._draft.create_infer_request()
        self._embed_request = self._embed.create_infer_request()
        self._buffers = _Buffers(self._target_request, self._target, graph.states)
        self.timing = StepTiming()
        #: Observation hook (tests, benchmarks/mtp_chain_check.py): when a list, every step
        #: that drafts appends (context length, drafts) before verifying them; the drafts
        #: propose the tokens at indices context length, +1, ... of prompt + answer. The
        #: caller owns and clears it; None (the default) costs one test per step.
        self.draft_log: list[tuple[int, tuple[int, ...]]] | None = None

    # --- model calls -------------------------------------------------------------------------

    def _embeddings(self, token_ids: Sequence[int]) -> npt.NDArray[np.float32]:
        import numpy as np

        self._embed_request.infer({0: np.asarray([token_ids], dtype=np.int64)})
        return np.array(self._embed_request.get_output_tensor(0).data)

    def _run_target(
        self, token_ids: Sequence[int], start: int, logits_from: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
        """Process `token_ids` at positions start.. (the KV cache holds `start` tokens); return
        the hidden states of every position and the argmax at positions logits_from.. ."""
        import numpy as np

        count = len(token_ids)
        embeds = self._embeddings(token_ids)
        positions = np.arange(start, start + count, dtype=np.int64)
        request = self._target_request
        began = time.perf_counter()
        request.infer(
            {
                "inputs_embeds": embeds,
                "attention_mask": np.ones((1, start + count), dtype=np.int64),
                "position_ids": np.broadcast_to(positions, (4, 1, count)).copy(),
                "beam_idx": np.zeros(1, dtype=np.int32),
                LOGITS_POSITIONS: np.arange(logits_from, count, dtype=np.int64),
            }
        )
        self.timing.target_s += time.perf_counter() - began
        self.timing.target_calls += 1
        logits = request.get_tensor(LOGITS).data
        hidden = request.get_tensor(HIDDEN).data
        return hidden[0], logits[0].argmax(axis=-1)

    def _run_draft(
        self, hidden: npt.NDArray[np.float32], embeds: npt.NDArray[np.float32], start: int
    ) -> tuple[int, npt.NDArray[np.float32]]:
        """One MTP call over len(hidden) positions from `start`; the draft token after the last
        position and the MTP's own last hidden state (the next chained step's input)."""
        import numpy as np

        count = hidden.shape[0]
        request = self._draft_request
        began = time.perf_counter()
        request.infer(
            {
                "hidden_states": self._hidden_tensor(hidden[None]),
                "inputs_embeds": embeds,
                "attention_mask": np.ones((1, start + count), dtype=np.int64),
                "position_ids": np.arange(start, start + count, dtype=np.int64)[None],
                "beam_idx": np.zeros(1, dtype=np.int32),
            }
        )
        self.timing.draft_s += time.perf_counter() - began
        self.timing.draft_calls += 1
        index = int(request.get_tensor(DRAFT_INDEX).data.reshape(-1)[0])
        own_hidden = np.array(request.get_tensor(HIDDEN).data[0, -1:])
        return int(self._draft_ids[index]), own_hidden

    def _hidden_tensor(self, array: npt.NDArray[Any]) -> Any:
        """Hidden states (as the target's output holds them) as an MTP input tensor. OpenVINO
        shows bf16 data to numpy as 16-bit values of another type: pass the bits on."""
        import numpy as np
        import openvino as ov

        if self._hidden_type == ov.Type.bf16:
            bits = np.ascontiguousarray(array).view(np.uint16)
            return ov.Tensor(bits, list(bits.shape), ov.Type.bf16)
        return np.ascontiguousarray(array)

    def _reset(self) -> None:
        self._target_request.reset_state()
        self._draft_request.reset_state()
        self._buffers.reset()
        self.timing = StepTiming()

    # --- decoding ------------------------------------------------------------------------------

    def generate(
        self,
        prompt_ids: Sequence[int],
        *,
        max_new_tokens: int,
        depth: int | Callable[[], int],
        stop_ids: frozenset[int] | set[int],
        cancelled: Callable[[], bool] = lambda: False,
        ignore_eos: bool = False,
    ) -> Generator[tuple[int, ...], None, None]:
        """Yield the tokens of each decoding step until a stop id (included), max_new_tokens
        or cancellation. A step proposes min(depth, tokens left - 1) drafts and yields the
        accepted ones plus the target's own token, the rule core.decoding's statistics assume.

        `depth` 0 decodes plain. A callable is asked before every step (Auto's within-turn
        fall back); once it returns 0 the rest of the turn decodes plain (switching costs
        nothing here: no re-prefill, no second model)."""
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        wanted: Callable[[], int] = depth if callable(depth) else (lambda: depth)
        if max_new_tokens < 1 or (isinstance(depth, int) and depth < 0):
            raise ValueError("max_new_tokens must be >= 1 and depth >= 0")
        stops = frozenset() if ignore_eos else frozenset(stop_ids)
        self._reset()
        tokens = list(prompt_ids)
        prompt_len = len(tokens)
        hidden, argmax = self._run_target(tokens, 0, prompt_len - 1)
        self._buffers.commit()
        processed = prompt_len  # tokens the target's state (KV and DeltaNet) holds
        first = int(argmax[-1])
        tokens.append(first)
        yield (first,)
        produced = 1
        if first in stops or produced >= max_new_tokens:
            return
        want = wanted()  # asked once after every step, the prefill's included
        drafting = want > 0
        draft_from = 0  # the MTP's KV cache holds positions < draft_from
        draft, mtp_hidden = 0, None
        if drafting:
            draft, mtp_hidden = self._catch_up_draft(tokens, hidden, draft_from)
            draft_from = len(tokens) - 1
        while not cancelled():
            step_began = time.perf_counter()
            if len(tokens) - processed > MAX_PENDING:
                # Many rejections in a row: bring the target's state up to all but the last
                # confirmed token in a call of its own, so verification calls stay short.
                self._run_target(tokens[processed:-1], processed, len(tokens) - processed - 2)
                self._buffers.commit()
                processed = len(tokens) - 1
            pending = tokens[processed:]
            k = min(want, max_new_tokens - produced - 1) if drafting else 0
            drafts = self._chain(draft, mtp_hidden, k, draft_from) if k > 0 else []
            if self.draft_log is not None and drafts:
                self.draft_log.append((len(tokens), tuple(drafts)))
            hidden, argmax = self._run_target(pending + drafts, processed, len(pending) - 1)
            self.timing.reprocessed_tokens += len(pending) - 1
            accepted = 0
            while accepted < k and drafts[accepted] == int(argmax[accepted]):
                accepted += 1
            new = [*drafts[:accepted], int(argmax[accepted])]
            if accepted < k and not self._in_draft_vocab[new[-1]]:
                self.timing.out_of_draft_vocab += 1
            if accepted == k:
                self._buffers.commit()
                processed += len(pending) + k
            else:
                began = time.perf_counter()
                _trim_kv(self._target_request, processed)
                self.timing.rollback_s += time.perf_counter() - began
                self.timing.rollbacks += 1
            for index, token in enumerate(new):
                if token in stops:
                    new = new[: index + 1]
                    break
            new = new[: max_new_tokens - produced]
            tokens.extend(new)
            produced += len(new)
            self.timing.steps.append(time.perf_counter() - step_began)
            yield tuple(new)
            if new[-1] in stops or produced >= max_new_tokens:
                return
            want = wanted() if drafting else 0
            drafting = want > 0
            if drafting:
                # The MTP's chained entries (k > 1) were computed from its own hidden states:
                # drop them and feed the target's, for every position confirmed this step.
                if k > 1:
                    _trim_kv(self._draft_request, draft_from)
                valid = hidden[len(pending) - 1 : len(pending) + accepted]
                draft, mtp_hidden = self._catch_up_draft(tokens, valid, draft_from)
                draft_from = len(tokens) - 1

    def _catch_up_draft(
        self, tokens: list[int], hidden: npt.NDArray[np.float32], start: int
    ) -> tuple[int, npt.NDArray[np.float32]]:
        """Feed the MTP head the target's hidden states for positions start.. with the
        embeddings of the tokens that follow them; return the first draft of the next step."""
        count = hidden.shape[0]
        embeds = self._embeddings(tokens[start + 1 : start + 1 + count])
        return self._run_draft(hidden, embeds, start)

    def _chain(self, first: int | None, mtp_hidden: Any, k: int, draft_from: int) -> list[int]:
        """k drafts: the first from the catch-up call, the rest from the MTP head fed its own
        hidden state and the previous draft (positions past draft_from, trimmed later)."""
        assert first is not None
        drafts = [first]
        hidden = mtp_hidden
        for index in range(1, k):
            embeds = self._embeddings([drafts[-1]])
            token, hidden = self._run_draft(hidden, embeds, draft_from + index - 1)
            drafts.append(token)
        return drafts


def _inference_precision(core: Any, device: str, properties: dict[str, Any]) -> Any:
    """The element type the device computes in with these properties (bf16, f16 or f32)."""
    import openvino as ov

    hint = properties.get("INFERENCE_PRECISION_HINT")
    if hint is None:
        try:
            hint = core.get_property(device, "INFERENCE_PRECISION_HINT")
        except RuntimeError:
            return ov.Type.f32
    if isinstance(hint, ov.Type):
        return hint
    names = {"f32": ov.Type.f32, "bf16": ov.Type.bf16, "f16": ov.Type.f16}
    return names.get(str(hint).lower(), ov.Type.f32)
