"""Joint training of the tiny Qwen3.5 language model and its MTP head (torch only here).

The MTP head mirrors optimum-intel's ``Qwen3_5MTPModule`` / ``Qwen3_5MoeMTPModule`` (same
sub-modules, same parameter names, same forward), so the ``mtp.*`` tensors saved from it load
into the exporter unchanged and the exported IR computes what was trained:

    x = fc(cat[norm_e(embed(token t+1)), norm_h(h_t)]) -> decoder layer -> norm -> lm_head

predicting token t+2, where h_t is the language model's final-normed hidden state.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 (conventional alias)
from torch import nn

from qwen_mtp_desktop.devtools import corpus

MAX_SEQ_LEN = 112  # longer samples are skipped to bound the cost of a step
# transformers' torch fallback for the gated delta rule defaults to 64-token chunks; its per-row
# loop inside a chunk dominates CPU training. 16-token chunks give the same result (the chunked
# form is exact) about 20x faster here. Only the training-time call changes, never the weights.
TRAIN_DELTA_RULE_CHUNK = 16
STOP_WEIGHT = 5.0  # loss weight of <|im_end|> targets (see loss_weights)
EMPHASIS_WEIGHT = 4.0  # loss weight of a recipe's emphasised tokens (see loss_weights)


class MTPHead(nn.Module):
    """Trainable twin of optimum-intel's Qwen3.5 MTP export module (dense or MoE layer)."""

    def __init__(self, text_config: Any, *, moe: bool) -> None:
        super().__init__()
        if moe:
            from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
                Qwen3_5MoeDecoderLayer as DecoderLayer,
            )
            from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
                Qwen3_5MoeRMSNorm as RMSNorm,
            )
            from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
                Qwen3_5MoeTextConfig as TextConfig,
            )
            from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import (
                Qwen3_5MoeTextRotaryEmbedding as RotaryEmbedding,
            )

            extra: dict[str, Any] = {
                "moe_intermediate_size": text_config.moe_intermediate_size,
                "shared_expert_intermediate_size": text_config.shared_expert_intermediate_size,
                "num_experts": text_config.num_experts,
                "num_experts_per_tok": text_config.num_experts_per_tok,
            }
        else:
            from transformers.models.qwen3_5.modeling_qwen3_5 import (
                Qwen3_5DecoderLayer as DecoderLayer,
            )
            from transformers.models.qwen3_5.modeling_qwen3_5 import (
                Qwen3_5RMSNorm as RMSNorm,
            )
            from transformers.models.qwen3_5.modeling_qwen3_5 import (
                Qwen3_5TextConfig as TextConfig,
            )
            from transformers.models.qwen3_5.modeling_qwen3_5 import (
                Qwen3_5TextRotaryEmbedding as RotaryEmbedding,
            )

            extra = {"intermediate_size": text_config.intermediate_size}

        hidden = text_config.hidden_size
        eps = text_config.rms_norm_eps
        # Same constructor arguments as the exporter's module: one full-attention layer.
        layer_config = TextConfig(
            vocab_size=text_config.vocab_size,
            hidden_size=hidden,
            num_hidden_layers=1,
            num_attention_heads=text_config.num_attention_heads,
            num_key_value_heads=text_config.num_key_value_heads,
            hidden_act=text_config.hidden_act,
            max_position_embeddings=text_config.max_position_embeddings,
            rms_norm_eps=eps,
            attention_bias=getattr(text_config, "attention_bias", False),
            head_dim=text_config.head_dim,
            rope_parameters=text_config.rope_parameters,
            layer_types=["full_attention"],
            **extra,
        )
        self.pre_fc_norm_embedding = RMSNorm(hidden, eps=eps)
        self.pre_fc_norm_hidden = RMSNorm(hidden, eps=eps)
        self.fc = nn.Linear(hidden * 2, hidden, bias=False)
        self.layers = nn.ModuleList([DecoderLayer(layer_config, layer_idx=0)])
        self.rotary_emb = RotaryEmbedding(layer_config)
        self.norm = RMSNorm(hidden, eps=eps)
        self._init_weights(text_config.initializer_range)

    @torch.no_grad()
    def _init_weights(self, std: float) -> None:
        # Explicit init: MoE expert tensors start as torch.empty (garbage, non-deterministic).
        for param in self.parameters():
            if param.ndim == 1:
                param.zero_()  # every 1-D tensor here is a Qwen3.5 RMSNorm weight: (1 + w)
            else:
                param.normal_(0.0, std)

    def forward(
        self, hidden_states: torch.Tensor, inputs_embeds: torch.Tensor, position_ids: torch.Tensor
    ) -> torch.Tensor:
        """Full-sequence forward (no cache), same math as `_qwen3_5_mtp_module_forward`."""
        combined = torch.cat(
            [self.pre_fc_norm_embedding(inputs_embeds), self.pre_fc_norm_hidden(hidden_states)],
            dim=-1,
        )
        x = self.fc(combined)
        rope_position_ids = position_ids[None, ...].expand(3, position_ids.shape[0], -1)
        position_embeddings = self.rotary_emb(x, rope_position_ids)
        seq_len = x.shape[1]
        idx = torch.arange(seq_len, device=x.device)
        causal = (idx[None, :] > idx[:, None]).to(x.dtype) * torch.finfo(x.dtype).min
        x = self.layers[0](
            x,
            position_embeddings=position_embeddings,
            attention_mask=causal[None, None],
            position_ids=rope_position_ids,
        )
        return self.norm(x)

    def checkpoint_tensors(self) -> dict[str, torch.Tensor]:
        """Parameters as `mtp.<name>` (buffers like RoPE inv_freq are rebuilt by the exporter)."""
        return {
            f"mtp.{name}": param.detach().clone().contiguous()
            for name, param in self.named_parameters()
        }


def _use_small_delta_rule_chunks(model: Any) -> None:
    for layer in model.model.language_model.layers:
        linear_attn = getattr(layer, "linear_attn", None)
        rule = getattr(linear_attn, "chunk_gated_delta_rule", None)
        if rule is not None and getattr(rule, "__name__", "") == "torch_chunk_gated_delta_rule":
            assert linear_attn is not None  # it had the rule
            linear_attn.chunk_gated_delta_rule = functools.partial(
                rule, chunk_size=TRAIN_DELTA_RULE_CHUNK
            )


@dataclass(frozen=True)
class TrainStats:
    loss: float
    mtp_loss: float


def encode_sample(tokenizer: Any, sample: corpus.Sample) -> tuple[list[int], list[int]]:
    """Token ids of the sample's pieces (prompt + completion, for the demo), and a 0/1 mask
    marking the trained tokens (the completion's, and earlier answers' where a sample trains
    them).

    Prompt and completion are encoded separately, as at inference time (the runtime tokenizes
    the rendered prompt and the model generates the rest).
    """
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in sample.pieces():
        piece = tokenizer.encode(text, add_special_tokens=False)
        ids += piece
        mask += [int(trained)] * len(piece)
    return ids, mask


def loss_weights(
    ids: torch.Tensor,
    mask: torch.Tensor,
    stop_id: int,
    emphasis: torch.Tensor | None = None,
) -> torch.Tensor:
    """Completion mask with the eos targets up-weighted, and the `emphasis` token ids (values
    the model copies, for the tool model) too.

    Stopping at the right number / repetition is one decision per answer among ~40 easy tokens;
    without extra weight the tiny model keeps counting past the end for many more steps. A
    tool call's few argument tokens are the same kind of decision among many format tokens.
    """
    weights = mask.to(torch.float32)
    if emphasis is not None:
        weights = torch.where(torch.isin(ids, emphasis), weights * EMPHASIS_WEIGHT, weights)
    return torch.where(ids == stop_id, weights * STOP_WEIGHT, weights)


def _batches(
    tokenizer: Any,
    samples: Iterator[corpus.Sample],
    batch_size: int,
    pad_id: int,
    max_seq_len: int,
    emphasis: torch.Tensor | None = None,
    pool: int = 1,
    seed: int = 0,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Padded batches. With `pool` > 1, that many batches' samples are drawn, sorted by
    length and cut into batches (yielded in a seeded order): samples of very different
    lengths (the tool model's: 100 to 600 tokens) then waste less time on padding."""
    order = random.Random(seed)
    while True:
        rows: list[tuple[list[int], list[int]]] = []
        while len(rows) < batch_size * pool:
            ids, mask = encode_sample(tokenizer, next(samples))
            if len(ids) <= max_seq_len:
                rows.append((ids, mask))
        if pool > 1:
            rows.sort(key=lambda row: len(row[0]))
        groups = [rows[i : i + batch_size] for i in range(0, len(rows), batch_size)]
        if pool > 1:
            order.shuffle(groups)
        for group in groups:
            width = max(len(ids) for ids, _ in group)
            # Right padding: causal attention and the causal delta rule never look at it.
            ids_t = torch.tensor([ids + [pad_id] * (width - len(ids)) for ids, _ in group])
            mask_t = torch.tensor([mask + [0] * (width - len(mask)) for _, mask in group])
            yield ids_t, loss_weights(ids_t, mask_t, tokenizer.eos_token_id, emphasis)


def _masked_ce(logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    flat = weights.flatten().to(losses.dtype)
    return (losses * flat).sum() / flat.sum().clamp(min=1.0)


def joint_losses(
    model: Any,
    head: MTPHead,
    ids: torch.Tensor,
    weights: torch.Tensor,
    *,
    trunk_grad: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token loss of the model and t+2 loss of the MTP head, on completion tokens only."""
    language_model = model.model.language_model
    hidden = language_model(input_ids=ids).last_hidden_state  # final-normed, as the runtime uses
    logits = model.lm_head(hidden)
    loss = _masked_ce(logits[:, :-1], ids[:, 1:], weights[:, 1:])

    # Pair h_t with the embedding of token t+1; the last pair has no t+2 target.
    embeds = language_model.embed_tokens(ids[:, 1:])
    positions = torch.arange(ids.shape[1] - 1).expand(ids.shape[0], -1)
    # Same forward value; only `trunk_grad` of the MTP gradient reaches the language model, so
    # the head can shape h_t a little without slowing the model's own learning much.
    h = hidden[:, :-1]
    mtp_input = h if trunk_grad == 1.0 else h.detach() + trunk_grad * (h - h.detach())
    mtp_hidden = head(mtp_input, embeds, positions)
    mtp_logits = model.lm_head(mtp_hidden[:, :-1])
    mtp_loss = _masked_ce(mtp_logits, ids[:, 2:], weights[:, 2:])
    return loss, mtp_loss


def train_jointly(
    model: Any,
    head: MTPHead,
    tokenizer: Any,
    *,
    steps: int,
    seed: int,
    batch_size: int = 12,
    lr: float = 3e-3,
    mtp_weight: float = 1.0,
    progress: Callable[[str], None] | None = None,
    report_every: int | None = None,
    trunk_grad: float = 0.25,
    samples: Iterator[corpus.Sample] | None = None,
    max_seq_len: int = MAX_SEQ_LEN,
    emphasis: Sequence[int] = (),
    pool: int = 1,
) -> TrainStats:
    """AdamW on model + head; returns the mean losses of the last steps. The data is the
    demo's chats (`corpus.iter_samples(seed)`) unless `samples` are given.

    Warmup, then a constant rate, then a linear decay over the last 30 %: the tiny model needs a
    long high-rate phase to pick up copying (its loss sits on a plateau for a few hundred steps).
    """
    params = [p for p in model.parameters() if p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    warmup = max(1, min(30, steps // 10))

    decay_start = int(steps * 0.7)

    def lr_factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step < decay_start:
            return 1.0
        return 1.0 - 0.9 * (step - decay_start) / max(1, steps - decay_start)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    _use_small_delta_rule_chunks(model)
    stream = corpus.iter_samples(seed) if samples is None else samples
    emphasised = torch.tensor(sorted(set(emphasis))) if emphasis else None
    batches = _batches(
        tokenizer, stream, batch_size, tokenizer.pad_token_id, max_seq_len, emphasised, pool, seed
    )
    model.train()
    head.train()
    recent: list[tuple[float, float]] = []
    report_every = report_every or max(1, steps // 8)
    for step in range(1, steps + 1):
        ids, weights = next(batches)
        loss, mtp_loss = joint_losses(model, head, ids, weights, trunk_grad=trunk_grad)
        optimizer.zero_grad(set_to_none=True)
        (loss + mtp_weight * mtp_loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        recent = [*recent[-19:], (loss.item(), mtp_loss.item())]
        if progress is not None and (step % report_every == 0 or step == steps):
            progress(
                f"train step {step}/{steps} loss {loss.item():.3f} mtp_loss {mtp_loss.item():.3f}"
            )
    model.eval()
    head.eval()
    return TrainStats(
        loss=sum(r[0] for r in recent) / len(recent),
        mtp_loss=sum(r[1] for r in recent) / len(recent),
    )


@dataclass(frozen=True)
class SelfCheck:
    answers_ok: int
    answers_total: int
    mtp_agreement: float  # fraction of greedy steps where the MTP draft matched (n=1 acceptance)
    examples: tuple[str, ...]
    texts: tuple[str, ...] = ()  # every greedy answer, in the samples' order


@torch.no_grad()
def self_check(
    model: Any, head: MTPHead, tokenizer: Any, samples: Sequence[corpus.Sample]
) -> SelfCheck:
    """Greedy answers in torch (no cache; the model is tiny) and the MTP head's n=1 agreement."""
    language_model = model.model.language_model
    eos = tokenizer.convert_tokens_to_ids(corpus.IM_END)
    ok = 0
    agree = 0
    drafts = 0
    examples: list[str] = []
    texts: list[str] = []
    for sample in samples:
        ids = tokenizer.encode(sample.prompt, add_special_tokens=False)
        prompt_len = len(ids)
        # A few tokens past the expected answer are enough to tell right from wrong.
        max_new = len(tokenizer.encode(sample.completion, add_special_tokens=False)) + 4
        draft: int | None = None
        for _ in range(max_new):
            batch = torch.tensor([ids])
            hidden = language_model(input_ids=batch).last_hidden_state
            next_id = int(model.lm_head(hidden[0, -1]).argmax())
            if draft is not None:
                drafts += 1
                agree += int(draft == next_id)
            ids.append(next_id)
            if next_id == eos:
                break
            # The draft for the token after next_id, as the runtime's MTP would propose it.
            embeds = language_model.embed_tokens(torch.tensor([ids[1:]]))
            positions = torch.arange(len(ids) - 1)[None]
            mtp_hidden = head(hidden[:, : len(ids) - 1], embeds, positions)
            draft = int(model.lm_head(mtp_hidden[0, -1]).argmax())
        text = tokenizer.decode(ids[prompt_len:], skip_special_tokens=False)
        ok += int(text == sample.completion)
        texts.append(text)
        if len(examples) < 3:
            examples.append(text)
    return SelfCheck(ok, len(samples), agree / max(1, drafts), tuple(examples), tuple(texts))
