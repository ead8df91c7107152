"""The memory a long prompt's prefill needs: checked before the first model call, so a prompt
this computer cannot hold is refused with the figures instead of ending in an out-of-memory
kill; and the MTP head's buffers given back after its long catch-up.

The CPU plugin sizes a call's intermediate tensors to the call (dynamic shapes): a shared
buffer grows to the largest call made and stays until `CompiledModel.release_memory()`
(`reset_state()` frees none). What a prefill needs thus grows with the tokens of its longest
call. Measured by benchmarks/long_prefill.py on the Qwen3.5-0.8B geometry (hidden size 1,024,
INT4, the MTP head catching up on the prompt too), one-call prefills: 288 MB above the loaded
model at 1,024 prompt tokens, 1,190 MB at 4,096 (about 290 kB a token), nearly all of it
intermediate tensors (the kept attention cache and hidden states are about 10 kB a token). The
activations scale with the model's width, so the estimate is per token and per unit of hidden
size, with a fifth to spare.

Only the MTP head (attention, no recurrent layer) gives its buffers back. Releasing the
target's, which did free them (1,190 -> 468 MB resident after a 4,096-token prompt, and a lower
peak), breaks OpenVINO 2026.4's Gated DeltaNet node on the MoE test model: a later call fails
with "data != nullptr ... cpu_memory.cpp:236" (tests/integration/test_adaptive_prefill.py, the
moe case; the dense models ran fine).
"""

from __future__ import annotations

from collections.abc import Callable

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.units import format_bytes

MB = 1000**2
#: Bytes a prompt token needs while its call runs, per unit of the model's hidden size
#: (290 kB a token at hidden size 1,024, measured; a fifth more).
BYTES_PER_TOKEN_PER_HIDDEN = 350
#: What the check leaves free for the rest of the computer (the window, the OS's caches).
HEADROOM_BYTES = 512 * MB
#: After an MTP head call of at least this many tokens its buffers are given back:
#: shorter calls keep theirs, as re-allocating them at every step would cost time for little.
RELEASE_AFTER_TOKENS = 1024


class PrefillMemoryError(UserFacingError):
    """A prompt whose prefill would need more memory than this computer has free."""

    code = "NOT_ENOUGH_MEMORY"


def available_memory() -> int | None:
    """Bytes this computer can give a process now without swapping (None: cannot be read)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # psutil missing or the platform refusing: no check rather than a refusal
        return None


def prefill_bytes(call_tokens: int, hidden_size: int) -> int:
    """Memory the longest call of a prefill needs beyond the loaded model (module docstring)."""
    return max(call_tokens, 0) * max(hidden_size, 1) * BYTES_PER_TOKEN_PER_HIDDEN


def check_prefill_fits(
    call_tokens: int,
    hidden_size: int,
    *,
    new_tokens: int,
    available: Callable[[], int | None] = available_memory,
) -> None:
    """Raise PrefillMemoryError when a prefill whose longest call is `call_tokens` (of
    `new_tokens` to read) would leave less than HEADROOM_BYTES free. Calls already sized
    that large cost nothing new, but the check cannot see them, so it asks for the whole."""
    free = available()
    if free is None:
        return
    needed = prefill_bytes(call_tokens, hidden_size)
    if needed + HEADROOM_BYTES <= free:
        return
    raise PrefillMemoryError(
        f"Reading this conversation's {new_tokens:,} new tokens needs about "
        f"{format_bytes(needed)} of memory, and this computer has {format_bytes(free)} free "
        f"(keeping {format_bytes(HEADROOM_BYTES)} for everything else).",
        "Close other programs, or start a new chat or shorten the messages.",
    )
