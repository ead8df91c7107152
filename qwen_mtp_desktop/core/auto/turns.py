"""Auto's policy applied to a chat's turns: made from a benchmark's verdict, its decision turned
into the turn's settings (with the within-turn fall back for MTP), and what a message keeps of
it. The policy itself, which knows nothing of settings or stored stats, is core.auto.policy."""

from __future__ import annotations

from dataclasses import replace

from qwen_mtp_desktop.core.auto.policy import MAX_DEPTH, AdaptivePolicy, Decision
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import GenerationSettings


def policy_from_recommendation(
    start: DecodingMethod | None,
    *,
    speedup: float | None = None,
    acceptance: float | None = None,
    max_depth: int = MAX_DEPTH,
) -> AdaptivePolicy:
    """A policy starting from a benchmark's verdict (plain decoding or an MTP depth; None:
    never benchmarked, start at MTP n=1 and measure)."""
    if start is None:
        return AdaptivePolicy(max_depth=max_depth)
    return AdaptivePolicy(
        start=start,
        start_speedup=speedup,
        start_acceptance=acceptance,
        benchmarked=True,
        max_depth=max(max_depth, start.drafts or 1),
    )


def turn_settings(
    decision: Decision,
    settings: GenerationSettings,
    policy: AdaptivePolicy,
    *,
    plain_load_s: float = 0.0,
) -> GenerationSettings:
    """`settings` for the turn `decision` chose, with the settings' own sampling (penalties):
    an MTP turn gets the policy's within-turn fall back (`plain_load_s`: what loading the plain
    pipeline would cost now, 0 when it is loaded)."""
    method = decision.method.with_sampling(settings.method.sampling).with_constraint(
        settings.method.constraint  # a lazy tool-call grammar (tool_choice auto) stays
    )
    if not method.uses_mtp_head:
        return replace(settings, method=method, within_turn=None)
    check = policy.for_sampling(method.sampling).within_turn_check(
        method.drafts, settings.max_new_tokens, plain_load_s=plain_load_s
    )
    return replace(settings, method=method, within_turn=check)


def auto_summary(decision: Decision, stats: GenerationStats) -> dict[str, object]:
    """What a message's stored stats keep about Auto: its choice, why, and a mid-turn switch."""
    record: dict[str, object] = {
        "choice": decision.label,
        "method": decision.method.to_record(),
        "reason": decision.reason,
        "probe": decision.probe,
        "summary": decision.summary(),
    }
    if stats.switched_to_plain_at is not None:
        tokens = sum(stats.chunk_sizes[: stats.switched_to_plain_at])
        record["switched_to_plain_after_tokens"] = tokens
    return record
