"""An independent reference of the Qwen3.5 MTP draft chain, computed from a checkpoint's weights.

It exists to check the app's decoder (core.decoding.decoder) draft for draft (issue 26 item 6):
two other stacks lost 30-50 % of acceptance at depth >= 2 by feeding the MTP layer the wrong
hidden state while nothing else failed (ik_llama.cpp #1815, LightLLM #1402), because the target
verifies every draft and output stays right. Only a draft-level comparison sees such a fault.

What is computed (torch, float32, no cache shortcuts the decoder takes):

- the target's hidden states by the real transformers Qwen3.5 classes; by default the
  final-normed one (the lm_head's input), which the MTP head was trained on;
- the MTP head's forward written here from the checkpoint's `mtp.*` safetensors tensors (not
  optimum-intel's module): x = fc(cat[norm_e(embed(x_{p+1})), norm_h(h_p)]) -> one gated
  full-attention decoder layer (q/k RMS norms, partial RoPE, sigmoid output gate, GQA, SwiGLU
  MLP) -> norm -> the shared lm_head, predicting x_{p+2} at position p;
- the chain: depth 1 reads the target's h_{n-2} at position n-2 (n tokens of context), depth
  j >= 2 runs at position n-3+j on the previous depth's MTP output and the embedding of the
  previous draft, attending to the MTP's own entries of every earlier position.

Which MTP output the chain feeds on is the question the issue asks: `chain_hidden="post_norm"`
(the output after the MTP's final norm, the very tensor the lm_head scores; the analogue of the
target's final-normed hidden state) or `"pre_norm"` (the un-normalised residual stream, the
ik_llama.cpp #1815 bug). vLLM (qwen3_5_mtp.py returns `self.norm(...)`; its proposer recycles
that return value for MTP methods), SGLang, LightLLM after #1402, ik_llama.cpp after #1815 and
optimum-intel's export (`last_hidden_state = self.norm(x)`) all chain on the post-norm one.
`target_hidden="pre_norm"` reproduces LightLLM's bug (the target's raw hidden at depth 1).

Drafts come two ways per depth: the full-vocabulary argmax, and the argmax over a draft
vocabulary (the app's draft head scores only the lowest token ids plus the stop ids); the chain
continues with the draft-vocabulary one (what the decoder feeds), or with given tokens (`follow`),
so each depth can be compared on the decoder's own previous drafts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

HiddenRule = Literal["post_norm", "pre_norm"]
HIDDEN_RULES: tuple[HiddenRule, ...] = ("post_norm", "pre_norm")
MTP_PREFIX = "mtp."


class MtpReferenceError(Exception):
    """The checkpoint cannot be used for the reference; the message says why."""


def draft_vocabulary(vocab_size: int, size: int | None, special_ids: Sequence[int] = ()) -> Any:
    """The draft head's vocabulary as the app defines it: the `size` lowest token ids plus the
    special (stop) ids, sorted; every id when `size` is None."""
    if size is None or size >= vocab_size:
        return np.arange(vocab_size, dtype=np.int64)
    extra = [i for i in special_ids if 0 <= i < vocab_size]
    return np.unique(np.concatenate([np.arange(size), np.asarray(extra, dtype=np.int64)]))


@dataclass(frozen=True)
class DraftStep:
    """One depth of a chain: the reference's drafts and its logits over the full vocabulary."""

    depth: int  # 1-based
    position: int  # the MTP position (rotary and cache index) this depth ran at
    full_argmax: int
    draft_argmax: int  # argmax over the draft vocabulary
    fed_token: int  # the token whose embedding the next depth reads (draft_argmax or `follow`)
    logits: npt.NDArray[np.float32]
    draft_runner_up: float  # second-best logit within the draft vocabulary
    row_bounds: npt.NDArray[np.float32]  # per token: max |lm_head row| / 254 (shared array)
    hidden_l1: float  # ||MTP output||_1 at this depth

    def margin(self, token: int) -> float:
        """How far `token`'s logit is below the draft-vocabulary winner (0 when it is it)."""
        return float(self.logits[self.draft_argmax] - self.logits[token])

    @property
    def top_margin(self) -> float:
        """Winner minus runner-up within the draft vocabulary: small means a near-tie."""
        return float(self.logits[self.draft_argmax]) - self.draft_runner_up

    def int8_slack(self, token: int) -> float:
        """The most that storing the lm_head rows as INT8 with one scale per row (the app's
        draft head) can shrink the winner's lead over `token`: |error| <= scale / 2 per weight,
        scale = max |row| / 127, so a logit moves by at most max |row| / 254 * ||hidden||_1."""
        bounds = self.row_bounds[self.draft_argmax] + self.row_bounds[token]
        return float(bounds * self.hidden_l1)


@dataclass(frozen=True)
class DraftChain:
    context_len: int  # tokens of context; the drafts propose tokens context_len, +1, ...
    steps: tuple[DraftStep, ...]

    @property
    def drafts(self) -> list[int]:
        """The draft-vocabulary argmax at every depth (compare with the app's decoder)."""
        return [s.draft_argmax for s in self.steps]

    @property
    def full_drafts(self) -> list[int]:
        return [s.full_argmax for s in self.steps]


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # Qwen3.5's RMSNorm scales by (1 + weight) (a zeroed weight is the identity scale).
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + weight)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class MtpReference:
    """The MTP chain of one dense Qwen3.5 checkpoint (folder with config.json, safetensors)."""

    def __init__(
        self,
        checkpoint: Path,
        *,
        draft_vocab: int | None = None,
        special_ids: Sequence[int] = (),
        embedding_scale: float = 1.0,
    ) -> None:
        from transformers import AutoConfig, Qwen3_5ForConditionalGeneration
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a weight-loading bar per load drowns the report
        if not (checkpoint / "config.json").is_file():
            raise MtpReferenceError(f"{checkpoint} has no config.json (not a checkpoint folder)")
        config = AutoConfig.from_pretrained(checkpoint)
        if config.model_type != "qwen3_5":
            raise MtpReferenceError(
                f"{checkpoint} is a {config.model_type!r} checkpoint; the reference covers "
                "dense Qwen3.5 (model_type 'qwen3_5')"
            )
        text = config.text_config
        if getattr(text, "mtp_num_hidden_layers", 0) != 1:
            raise MtpReferenceError(f"{checkpoint} has no single-layer MTP head")
        self.mtp = _load_mtp_tensors(checkpoint)  # before the (large) model: fail early
        self.config = text
        self.eps = float(text.rms_norm_eps)
        self.heads = int(text.num_attention_heads)
        self.kv_heads = int(text.num_key_value_heads)
        self.head_dim = int(text.head_dim)
        rope = text.rope_parameters
        rotary = int(self.head_dim * rope.get("partial_rotary_factor", 1.0))
        exponents = torch.arange(0, rotary, 2, dtype=torch.int64).float() / rotary
        self.inv_freq = 1.0 / (float(rope["rope_theta"]) ** exponents)
        # Text positions are equal on M-RoPE's three axes, so interleaving them is plain RoPE.
        self.embedding_scale = float(embedding_scale)
        self.model = Qwen3_5ForConditionalGeneration.from_pretrained(
            checkpoint, dtype=torch.float32
        ).eval()
        self.language_model = self.model.model.language_model
        self.embed = self.model.get_input_embeddings().weight.detach()
        self.lm_head = self.model.get_output_embeddings().weight.detach()
        self.vocab_size = int(self.lm_head.shape[0])
        self._row_bounds = (self.lm_head.abs().amax(dim=1) / 254.0).numpy()
        self.draft_ids = draft_vocabulary(self.vocab_size, draft_vocab, special_ids)
        self._outside_draft = torch.ones(self.vocab_size, dtype=torch.bool)
        self._outside_draft[torch.from_numpy(self.draft_ids)] = False

    # --- the target --------------------------------------------------------------------------

    @torch.no_grad()
    def target(self, token_ids: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """(final-normed hidden [L, H], pre-norm hidden [L, H], greedy next token per position)."""
        captured: list[torch.Tensor] = []
        norm = self.language_model.norm
        hook = norm.register_forward_hook(lambda _m, args, _out: captured.append(args[0]))
        try:
            embeds = self._embeddings(token_ids)[None]
            post = self.language_model(inputs_embeds=embeds, use_cache=False).last_hidden_state[0]
        finally:
            hook.remove()
        greedy: list[int] = []
        for start in range(0, post.shape[0], 64):  # 64 rows of a 248k vocabulary at a time
            greedy += (post[start : start + 64] @ self.lm_head.T).argmax(-1).tolist()
        return post, captured[0][0], greedy

    def _embeddings(self, token_ids: Sequence[int]) -> torch.Tensor:
        ids = torch.as_tensor(list(token_ids), dtype=torch.int64)
        return self.embed[ids] * self.embedding_scale

    # --- the MTP head ------------------------------------------------------------------------

    def _weight(self, name: str) -> torch.Tensor:
        return self.mtp[name]

    def _mtp(
        self,
        hidden: torch.Tensor,
        token_ids: Sequence[int],
        positions: torch.Tensor,
        past: tuple[torch.Tensor, torch.Tensor] | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The MTP head on T rows: (pre-norm output, post-norm output, keys, values); keys and
        values [kv_heads, past + T, head_dim] include `past`, and row t attends to every past
        entry and to rows <= t."""
        w, eps = self._weight, self.eps
        embeds = _rms(self._embeddings(token_ids), w("pre_fc_norm_embedding.weight"), eps)
        normed = _rms(hidden, w("pre_fc_norm_hidden.weight"), eps)
        x = torch.cat([embeds, normed], dim=-1) @ w("fc.weight").T
        count, d = x.shape[0], self.head_dim

        residual = x
        a = _rms(x, w("layers.0.input_layernorm.weight"), eps)
        q_and_gate = (a @ w("layers.0.self_attn.q_proj.weight").T).view(count, self.heads, 2 * d)
        q, gate = q_and_gate[..., :d], q_and_gate[..., d:].reshape(count, self.heads * d)
        k = (a @ w("layers.0.self_attn.k_proj.weight").T).view(count, self.kv_heads, d)
        v = (a @ w("layers.0.self_attn.v_proj.weight").T).view(count, self.kv_heads, d)
        q = _rms(q, w("layers.0.self_attn.q_norm.weight"), eps)
        k = _rms(k, w("layers.0.self_attn.k_norm.weight"), eps)
        q, k = self._rope(q, positions), self._rope(k, positions)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [heads, T, d]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=1), torch.cat([past[1], v], dim=1)
        group = self.heads // self.kv_heads
        scores = q @ k.repeat_interleave(group, dim=0).transpose(1, 2) * d**-0.5
        earlier = k.shape[1] - count
        rows = torch.arange(count)[:, None] + earlier
        scores = scores.masked_fill(torch.arange(k.shape[1])[None, :] > rows, float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ v.repeat_interleave(group, dim=0)
        attended = attended.transpose(0, 1).reshape(count, self.heads * d) * torch.sigmoid(gate)
        x = residual + attended @ w("layers.0.self_attn.o_proj.weight").T

        residual = x
        b = _rms(x, w("layers.0.post_attention_layernorm.weight"), eps)
        gated = torch.nn.functional.silu(b @ w("layers.0.mlp.gate_proj.weight").T)
        x = residual + (gated * (b @ w("layers.0.mlp.up_proj.weight").T)) @ (
            w("layers.0.mlp.down_proj.weight").T
        )
        return x, _rms(x, w("norm.weight"), eps), k, v

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotary embedding on the first `rotary` dims of every head (partial RoPE)."""
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)[:, None, :]  # [T, 1, rotary]
        rotary = emb.shape[-1]
        turned, kept = x[..., :rotary], x[..., rotary:]
        turned = turned * emb.cos() + _rotate_half(turned) * emb.sin()
        return torch.cat([turned, kept], dim=-1)

    # --- chains ------------------------------------------------------------------------------

    @torch.no_grad()
    def prepare(
        self, token_ids: Sequence[int], *, target_hidden: HiddenRule = "post_norm"
    ) -> PreparedSequence:
        """Everything a chain at any context length <= len(token_ids) reuses: the target's
        hidden states and the MTP head's entries for positions 0..L-2 (causal, so a prefix's
        entries are the full sequence's)."""
        if len(token_ids) < 2:
            raise MtpReferenceError("a chain needs at least 2 tokens of context")
        if target_hidden not in HIDDEN_RULES:
            raise MtpReferenceError(f"target_hidden must be one of {HIDDEN_RULES}")
        post, pre, greedy = self.target(token_ids)
        hidden = post if target_hidden == "post_norm" else pre
        positions = torch.arange(len(token_ids) - 1)
        out_pre, out_post, k, v = self._mtp(hidden[:-1], token_ids[1:], positions, None)
        return PreparedSequence(self, list(token_ids), greedy, out_pre, out_post, k, v)

    def chain(
        self,
        token_ids: Sequence[int],
        k: int,
        *,
        chain_hidden: HiddenRule = "post_norm",
        target_hidden: HiddenRule = "post_norm",
        follow: Sequence[int] | Literal["draft", "full"] = "draft",
    ) -> DraftChain:
        """k greedy drafts after `token_ids` (they propose tokens len(token_ids), +1, ...)."""
        prepared: PreparedSequence = self.prepare(token_ids, target_hidden=target_hidden)
        chain: DraftChain = prepared.chain_at(
            len(token_ids), k, chain_hidden=chain_hidden, follow=follow
        )
        return chain

    def _step(self, depth: int, position: int, post: torch.Tensor, follow: Any) -> DraftStep:
        logits = post @ self.lm_head.T
        full = int(logits.argmax())
        in_draft = logits.masked_fill(self._outside_draft, float("-inf"))
        best2 = torch.topk(in_draft, min(2, len(self.draft_ids)))
        draft = int(best2.indices[0])
        runner_up = float(best2.values[-1]) if len(self.draft_ids) > 1 else float("-inf")
        if isinstance(follow, str):
            fed = full if follow == "full" else draft
        else:
            fed = int(follow[depth - 1]) if depth - 1 < len(follow) else draft
        l1 = float(post.abs().sum())
        return DraftStep(
            depth, position, full, draft, fed, logits.numpy(), runner_up, self._row_bounds, l1
        )


class PreparedSequence:
    """One token sequence run through the target and the MTP head once (MtpReference.prepare)."""

    def __init__(
        self,
        reference: MtpReference,
        token_ids: list[int],
        greedy: list[int],
        out_pre: torch.Tensor,
        out_post: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> None:
        self.reference = reference
        self.token_ids = token_ids
        #: The target's greedy next token after each prefix: greedy[p] follows token_ids[:p+1].
        self.greedy = greedy
        self._out = {"pre_norm": out_pre, "post_norm": out_post}
        self._keys, self._values = keys, values

    @torch.no_grad()
    def chain_at(
        self,
        context_len: int,
        k: int,
        *,
        chain_hidden: HiddenRule = "post_norm",
        follow: Sequence[int] | Literal["draft", "full"] = "draft",
    ) -> DraftChain:
        """k drafts after the first `context_len` tokens. Depth j >= 2 reads depth j-1's MTP
        output (`chain_hidden`) and the embedding of depth j-1's fed token: its
        draft-vocabulary argmax, its full argmax (`follow="full"`) or follow[j-2] (the
        decoder's own drafts, so every depth is compared on the same input)."""
        ref = self.reference
        if not 2 <= context_len <= len(self.token_ids):
            raise MtpReferenceError(f"context_len must be 2..{len(self.token_ids)}")
        if k < 1:
            raise MtpReferenceError("k must be >= 1")
        if chain_hidden not in HIDDEN_RULES:
            raise MtpReferenceError(f"chain_hidden must be one of {HIDDEN_RULES}")
        last = context_len - 2  # the MTP position that drafts token `context_len`
        steps = [ref._step(1, last, self._out["post_norm"][last], follow)]
        hidden = self._out[chain_hidden][last : last + 1]
        past = (self._keys[:, : last + 1], self._values[:, : last + 1])
        for depth in range(2, k + 1):
            position = last + depth - 1
            fed = steps[-1].fed_token
            pre, post, keys, values = ref._mtp(hidden, [fed], torch.tensor([position]), past)
            past = (keys, values)
            steps.append(ref._step(depth, position, post[0], follow))
            hidden = post if chain_hidden == "post_norm" else pre
        return DraftChain(context_len, tuple(steps))


def _load_mtp_tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The `mtp.*` tensors (prefix removed) as float32, from model.safetensors or the shards an
    index names. transformers drops them on load, so they are read here directly."""
    from safetensors import safe_open

    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        weight_map: dict[str, str] = json.loads(index.read_text())["weight_map"]
        shards = sorted({f for k, f in weight_map.items() if k.startswith(MTP_PREFIX)})
    else:
        shards = ["model.safetensors"]
    tensors: dict[str, torch.Tensor] = {}
    for shard in shards:
        with safe_open(str(checkpoint / shard), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                if key.startswith(MTP_PREFIX):
                    tensors[key[len(MTP_PREFIX) :]] = handle.get_tensor(key).float()
    if "fc.weight" not in tensors or "norm.weight" not in tensors:
        raise MtpReferenceError(f"{checkpoint} has no mtp.* weights (fc, norm, layers.0.*)")
    return tensors
