"""Log-probabilities of the tokens an answer is made of (the API's `logprobs`).

Which distribution: the model's over the whole vocabulary after what changes the model's
preferences (repetition, frequency and presence penalties; a logit bias; a grammar's mask;
temperature, when sampling), before what only truncates the candidates (top-k, top-p,
min-p). This is OpenAI's "after temperature" and vLLM's `processed_logprobs`; greedy decoding
reports the distribution at temperature 1 (temperature 0 would give every token but one
-inf, which JSON cannot carry), as vLLM and OpenAI do. Tokens a grammar forbids have no
log-probability and never appear among the alternatives.

The decoder takes each emitted token's row from the same target call that chose it (the
verification call under MTP), so MTP reports what plain decoding reports, within the numerics
of one call that processes several positions at once (tests/integration/test_logprobs.py).
numpy only; no OpenVINO.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy only where a row is scored: the window imports this module's types
    import numpy as np
    import numpy.typing as npt

#: Alternatives per token at most (OpenAI's limit for top_logprobs).
MAX_TOP_LOGPROBS = 20


@dataclass(frozen=True)
class Candidate:
    """One token and its log-probability; `token_bytes` filled by the engine (the decoder
    knows ids only)."""

    token_id: int
    logprob: float
    token_bytes: bytes = b""


@dataclass(frozen=True)
class TokenLogprob:
    """An emitted token with its log-probability and the `top` most likely alternatives
    (most likely first; the token itself among them when it is one of them)."""

    chosen: Candidate
    top: tuple[Candidate, ...] = ()

    def with_bytes(self, token_bytes: Callable[[int], bytes]) -> TokenLogprob:
        return TokenLogprob(
            replace(self.chosen, token_bytes=token_bytes(self.chosen.token_id)),
            tuple(replace(c, token_bytes=token_bytes(c.token_id)) for c in self.top),
        )


def token_logprob(row: npt.NDArray[np.floating], token: int, top: int) -> TokenLogprob:
    """`token`'s log-probability in the processed logits `row` (penalised, masked and divided
    by the temperature: module docstring) and the `top` best alternatives. float64 from the
    row on, so the figures do not depend on the row's precision beyond its own rounding."""
    import numpy as np

    if not 0 <= top <= MAX_TOP_LOGPROBS:
        raise ValueError(f"top must be 0 to {MAX_TOP_LOGPROBS}, not {top}")
    values = np.asarray(row, dtype=np.float64)
    finite = np.isfinite(values)
    best = float(values[finite].max()) if finite.any() else 0.0
    with np.errstate(under="ignore"):
        log_total = best + float(np.log(np.exp(values[finite] - best).sum()))
    chosen = Candidate(token, float(values[token]) - log_total)
    if top == 0:
        return TokenLogprob(chosen)
    count = min(top, int(finite.sum()))
    candidates = np.argpartition(-np.where(finite, values, -np.inf), count - 1)[:count]
    # Most likely first, lower id first on ties (deterministic, as the samplers rank).
    order = np.lexsort((candidates, -values[candidates]))
    ranked = candidates[order]
    return TokenLogprob(
        chosen,
        tuple(Candidate(int(i), float(values[i]) - log_total) for i in ranked),
    )
