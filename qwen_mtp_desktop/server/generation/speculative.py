"""A response's speculative-decoding statistics in the two shapes other servers' clients read,
from the same counters as the `mtp` object (server.generation.turns.mtp_stats):

- vLLM's per-request `metrics.speculative_decoding` (vLLM PR 48915, `--per-request-spec-decode-
  metrics summary`): `mean_acceptance_length` (1 + accepted drafts per drafting step),
  `draft_acceptance_rate`, `acceptance_histogram` (index j: steps that accepted exactly j
  drafts), `num_spec_steps`, `num_accepted_draft_tokens`, `num_draft_tokens`,
  `num_spec_tokens`; plus `num_accepted_tokens_per_pos` (vLLM's Prometheus counter per draft
  position);
- llama.cpp server's `timings`: `cache_n`, `prompt_n`, `prompt_ms`, `prompt_per_token_ms`,
  `prompt_per_second`, `predicted_n`, `predicted_ms`, `predicted_per_token_ms`,
  `predicted_per_second`, `draft_n`, `draft_n_accepted`.

Per-step counts come from the decoder's own record (GenerationStats.acceptance_histogram); a
step whose tokens a stop string held back is counted with the step that released them.
"""

from __future__ import annotations

from typing import Any

from qwen_mtp_desktop.core.decoding.stats import GenerationStats


def vllm_metrics(stats: GenerationStats) -> dict[str, Any]:
    """The response's `metrics` object (vLLM's shape)."""
    histogram = list(stats.acceptance_histogram)
    k = max(len(histogram) - 1, 0)
    steps = sum(histogram)
    drafted, accepted = stats.drafted_tokens, stats.accepted_tokens
    return {
        "speculative_decoding": {
            "mean_acceptance_length": 1 + accepted / steps if steps else 1.0,
            "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
            "acceptance_histogram": histogram,
            "num_spec_steps": steps,
            "num_accepted_draft_tokens": accepted,
            "num_draft_tokens": drafted,
            "num_spec_tokens": 0 if stats.method.is_plain else stats.method.drafts,
            "num_accepted_tokens_per_pos": [sum(histogram[i + 1 :]) for i in range(k)],
        }
    }


def llama_timings(stats: GenerationStats) -> dict[str, Any]:
    """The response's `timings` object (llama.cpp server's shape): the prompt part is the
    time to the first token (prefill of the tokens not kept from an earlier request), the
    predicted part the time after it (all answer tokens counted, as llama.cpp's
    `predicted_n` equals `completion_tokens`)."""
    prompt_n = max(stats.prompt_tokens - stats.reused_tokens, 0)
    prompt_ms = stats.ttft_s * 1000
    predicted_n = stats.generated_tokens
    predicted_ms = max(stats.total_s - stats.ttft_s, 0.0) * 1000
    return {
        "cache_n": stats.reused_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / prompt_n, 3) if prompt_n else 0.0,
        "prompt_per_second": round(prompt_n / stats.ttft_s, 2) if stats.ttft_s > 0 else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(predicted_ms / predicted_n, 3) if predicted_n else 0.0,
        "predicted_per_second": round(predicted_n * 1000 / predicted_ms, 2)
        if predicted_ms > 0
        else 0.0,
        "draft_n": stats.drafted_tokens,
        "draft_n_accepted": stats.accepted_tokens,
    }


def speculative_fields(stats: GenerationStats) -> dict[str, Any]:
    """`metrics` and `timings`, to sit beside `mtp` wherever a response carries it."""
    return {"metrics": vllm_metrics(stats), "timings": llama_timings(stats)}
