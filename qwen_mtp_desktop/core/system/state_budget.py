"""The memory budget for conversation states the engine keeps between turns
(core.decoding.state_cache): its default from this computer's memory, and the user's setting
(Settings › Conversation memory, in MB; None: automatic) as the engine's load option."""

from __future__ import annotations

MB = 1000**2
#: The automatic budget: an eighth of this computer's memory, within these bounds.
AUTO_SHARE = 8
AUTO_MIN_BYTES = 256 * MB
AUTO_MAX_BYTES = 8 * 1000 * MB
#: The most the setting accepts (1 TB): more is a typing slip or damage, not a budget.
MAX_SETTING_MB = 1_000_000


def memory_total() -> int | None:
    """This computer's memory in bytes (None if it cannot be read)."""
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # psutil missing or the platform refusing: no default to show
        return None


def automatic_bytes(total: int | None = None) -> int:
    """The budget when the user set none: an eighth of `total` (this computer's memory by
    default), at least 256 MB and at most 8 GB (Qwen3.5-0.8B keeps about 25 kB per token of
    attention cache at f32 plus 10 MB per recurrent-state snapshot)."""
    if total is None:
        total = memory_total()
    if total is None:
        return AUTO_MIN_BYTES
    return max(AUTO_MIN_BYTES, min(total // AUTO_SHARE, AUTO_MAX_BYTES))


#: The continuation graph (core.decoding.continuation) is built when this computer's memory
#: is at least this many times the model's weight files: it prepares a second copy of the
#: weights on first use, beside the first copy, the conversation states and the activations.
CONTINUATION_MEMORY_FACTOR = 4


def continuation_fits(weight_bytes: int, total: int | None = None) -> bool:
    """Whether the fast follow-up graph may be built for a model with `weight_bytes` of weight
    files (False when this computer's memory is unknown: the cautious side)."""
    if total is None:
        total = memory_total()
    return total is not None and total >= CONTINUATION_MEMORY_FACTOR * weight_bytes


def setting_mb(value: object) -> int | None:
    """A stored setting's value if it is one (whole MB, 0 to MAX_SETTING_MB), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_SETTING_MB else None


def load_option(setting: int | None) -> int | None:
    """`LoadOptions.state_cache_bytes` for the setting: None (automatic) stays None, so the
    engine process sizes it from its own computer's memory; 0 keeps nothing."""
    return None if setting is None else setting * MB


def describe_automatic(total: int | None = None) -> str:
    """ "Automatic: 2.05 GB, 1/8 of this computer's memory" (or which bound applies)."""
    from qwen_mtp_desktop.core.units import format_bytes

    if total is None:
        total = memory_total()
    budget = automatic_bytes(total)
    if total is None:
        return f"Automatic: {format_bytes(budget)} (this computer's memory is unknown)"
    if budget == AUTO_MAX_BYTES and total // AUTO_SHARE > AUTO_MAX_BYTES:
        return f"Automatic: {format_bytes(budget)} (the most it takes by itself)"
    if budget == AUTO_MIN_BYTES and total // AUTO_SHARE < AUTO_MIN_BYTES:
        return f"Automatic: {format_bytes(budget)} (the least it takes)"
    return f"Automatic: {format_bytes(budget)}, 1/{AUTO_SHARE} of this computer's memory"
